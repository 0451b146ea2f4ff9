"""Cost of one pass of the Spark backend against a trivial job over the same
cached partitions, for two ways of caching the events.

    (a) blocks: an RDD of pickled kernel blocks, persisted (SparkBackend);
        each pass maps the broadcast task over the blocks and treeReduces.
    (b) frame:  the events DataFrame cached; each pass is a mapInArrow that
        rebuilds the block from the partition's Arrow batches, runs the task
        and returns the pickled result, merged on the driver.

For each design it times, per pass (median of ``--repeats``):

    bare     the cheapest job over the cached partitions (a: rdd.count(),
             b: a mapInArrow counting rows), no broadcast
    trivial  backend.run(CountTask()): broadcast, ship data to Python, tiny result
    active   LossGradTask over ``--active`` weights, gradient over them
             (an inner optimizer pass)
    full     LossGradTask with the gradient over all P*K features (the
             grafting gradient test)
    tiny     a job over two cached one-element partitions: Spark's floor

The functions take turns (``--repeats`` rounds), so that load from other
processes falls on all alike. Also reported: the in-process kernel time of
``active`` and ``full`` on the same data (all blocks in turn, one core).

Usage::

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.pass_overhead \\
        --events 200000 --predicates 100000 --nnz 17 --labels 22 --partitions 2
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pickle
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from benchmarks.common import timed_interleaved
from sparkmaxent.backends import merge_all
from sparkmaxent.backends.session import spark_session
from sparkmaxent.backends.spark import (
    SparkBackend,
    _Portable,
    job_group,
    partition_blocks,
    read_events_frame,
)
from sparkmaxent.data.load import read_blocks, write_events
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.kernels import MULTICLASS, LossGradTask, MulticlassBlock, Weights
from sparkmaxent.kernels.stats import CountTask

logger = logging.getLogger("pass_overhead")


def synthetic(
    n_events: int, n_predicates: int, nnz: float, n_labels: int, seed: int = 0
) -> MulticlassBlock:
    """Binary indicator predicates (as in NLP data), labels from a planted
    sparse model so the loss is not flat."""
    rng = np.random.default_rng(seed)
    X = sp.random(
        n_events,
        n_predicates,
        density=nnz / n_predicates,
        format="csr",
        random_state=rng,
        data_rvs=np.ones,
    )
    W = sp.random(
        n_predicates,
        n_labels,
        density=0.01,
        random_state=rng,
        data_rvs=lambda k: rng.normal(scale=2.0, size=k),
    ).toarray()
    S = X @ W + rng.gumbel(size=(n_events, n_labels))
    return MulticlassBlock(X=X, y=S.argmax(axis=1), c=np.ones(n_events), n_labels=n_labels)


class FrameBackend:
    """Design (b): the events DataFrame cached; blocks rebuilt every pass."""

    def __init__(self, spark, dataset_dir: str, info: DatasetInfo, partitions: int | None):
        self.sc = spark.sparkContext
        self.info = info
        self.space = info.space(False)
        self.passes = 0
        frame = read_events_frame(spark, dataset_dir, info)
        if partitions is not None:
            frame = frame.repartition(partitions)
        self.frame = frame.persist()
        self.n_events = self.frame.count()

    def run(self, task):
        self.passes += 1
        bc = self.sc.broadcast(_Portable(task))
        info = self.info

        def apply(batches):
            results = [bc.value(b) for b in partition_blocks(list(batches), info)]
            if results:
                data = pickle.dumps(merge_all(results), protocol=pickle.HIGHEST_PROTOCOL)
                yield pa.RecordBatch.from_arrays(
                    [pa.array([data], type=pa.binary())], names=["result"]
                )

        try:
            with job_group(self.sc, "frame-backend", "pass"):
                rows = self.frame.mapInArrow(apply, "result binary").collect()
        finally:
            bc.destroy()
        return merge_all([pickle.loads(r[0]) for r in rows])

    def bare(self) -> int:
        def count(batches):
            yield pa.RecordBatch.from_arrays(
                [pa.array([sum(b.num_rows for b in batches)])], names=["n"]
            )

        return sum(r[0] for r in self.frame.mapInArrow(count, "n long").collect())

    def close(self) -> None:
        self.frame.unpersist()


def timed(fn, repeats: int) -> tuple[float, list[float]]:
    fn()  # warm-up: first Python worker start, JIT, ...
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--predicates", type=int, default=100_000)
    ap.add_argument("--nnz", type=float, default=17.0)
    ap.add_argument("--labels", type=int, default=22)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--active", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--designs", default="blocks,frame")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    block = synthetic(args.events, args.predicates, args.nnz, args.labels)
    info0 = DatasetInfo(MULTICLASS, args.predicates, [f"L{k}" for k in range(args.labels)])
    tmp = tempfile.mkdtemp(prefix="pass_overhead-")
    info = write_events(block, tmp, info0, n_files=max(args.partitions, 1))
    space = info.space(False)
    rng = np.random.default_rng(1)
    ids = np.sort(rng.choice(space.n_features, size=args.active, replace=False))
    weights = Weights(ids, rng.normal(scale=0.1, size=args.active))
    tasks = {
        "trivial": CountTask(),
        "active": LossGradTask(space, weights, None, ids),
        "full": LossGradTask(space, weights, None, None),
    }
    report: dict = {"args": vars(args), "nnz_per_event": block.X.nnz / block.n_events}

    blocks = read_blocks(tmp, info, n_blocks=args.partitions)
    for key in ("active", "full"):
        med, _ = timed(lambda key=key: merge_all([tasks[key](b) for b in blocks]), args.repeats)
        report[f"local_{key}_s"] = med

    spark = spark_session(args.master, "pass_overhead", {"spark.driver.memory": "6g"})
    # the floor of any job: two cached one-element partitions
    tiny = spark.sparkContext.parallelize([0, 1], 2).cache()
    tiny.count()
    for design in args.designs.split(","):
        t0 = time.perf_counter()
        if design == "blocks":
            backend = SparkBackend(spark, tmp, info, partitions=args.partitions, name="bench")
            bare = backend.rdd.count
        elif design == "frame":
            backend = FrameBackend(spark, tmp, info, args.partitions)
            bare = backend.bare
        else:
            raise ValueError(f"expected designs among blocks,frame; got {design!r}")
        figures = {"construct_s": time.perf_counter() - t0, "load_before": os.getloadavg()[0]}
        fns = {"tiny": tiny.count, "bare": bare}
        fns.update(
            {
                key: (lambda task=task, backend=backend: backend.run(task))
                for key, task in tasks.items()
            }
        )
        for key, times in timed_interleaved(fns, args.repeats).items():
            figures[f"{key}_s"] = statistics.median(times)
            figures[f"{key}_all_s"] = times
        figures["load_after"] = os.getloadavg()[0]  # other processes share the cores
        figures["ratio_active_to_trivial"] = figures["active_s"] / figures["trivial_s"]
        figures["ratio_active_to_bare"] = figures["active_s"] / figures["bare_s"]
        figures["ratio_full_to_trivial"] = figures["full_s"] / figures["trivial_s"]
        backend.close()
        report[design] = figures
        logger.info(
            "%s: %s",
            design,
            {k: round(v, 3) for k, v in figures.items() if not isinstance(v, list)},
        )
    spark.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    text = json.dumps(report, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
