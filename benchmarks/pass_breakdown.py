"""Where the time of a pass goes (issue 22): the driver's side against the
executors', for the passes of ``benchmarks/pass_overhead.py`` on the same
data and weights (CoNLL-2000, 200k events x 22 labels, 2,000 active features).

Each pass runs twice per round, taking turns with the others: as the backend
runs it (``wall``), and as an instrumented copy (the same broadcast task over
the same cached blocks) whose worker function stamps the wall clock as it
starts, once it holds the broadcast task, once the kernel returns and once it
has pickled the result (it returns the pickle's bytes), while the driver
stamps the broadcast, the collected results, their unpickling and the merge.
All stamps are ``time.time()`` on one machine, so one clock. Parts (seconds,
median over rounds; worker parts of the slowest block):

    broadcast  driver: pickle and register the task's broadcast
    launch     broadcast done -> first task's function starts: job submission,
               task launch, the cached block read and unpickled in the worker
    value      worker: the broadcast task read and unpickled (once a pass)
    kernel     worker: the task on its block
    pickle     worker: its result pickled
    return     last result pickled -> driver holds all: worker JVM, block
               manager, driver JVM, socket to the driver's Python
    unpickle   driver: the results unpickled
    merge      driver: the results merged
    destroy    driver: the broadcast destroyed

In-process (one core, min of ``--kernel-repeats``): a block's unpickling (what
``launch`` pays per block), and the block-wise test's stages (partial, split
and pickled pieces, pieces unpickled and merged, summaries, their merge),
whose Spark pass shuffles and so does not fit the stamps above.

    python -m benchmarks.pass_breakdown --work /var/tmp/kernels/po --reuse
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import time

import numpy as np

from benchmarks.common import (
    SHARED_DATA,
    print_table,
    start,
    timed_interleaved,
    work_arguments,
    write_result,
)
from benchmarks.pass_overhead import starting_weights, tasks

PARTS = (
    "broadcast",
    "launch",
    "value",
    "kernel",
    "pickle",
    "return",
    "unpickle",
    "merge",
    "destroy",
)


def _stamped(bc):
    """The worker function of an instrumented pass over broadcast ``bc``."""

    def run(block):
        t_start = time.time()
        task = bc.value  # the task itself (_Portable unpickles to it)
        t_value = time.time()
        result = task(block)
        t_kernel = time.time()
        data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        return t_start, t_value, t_kernel, time.time(), data

    return run


def instrumented(backend, task) -> dict:
    """One instrumented pass of ``task``: its parts in seconds (PARTS) and
    the pickled result's bytes per block."""
    from sparkmaxent.backends import merge_all
    from sparkmaxent.backends.spark import _Portable

    t0 = time.time()
    bc = backend.sc.broadcast(_Portable(task))
    t1 = time.time()
    out = backend.rdd.map(_stamped(bc)).collect()
    t2 = time.time()
    results = [pickle.loads(o[4]) for o in out]
    t3 = time.time()
    merge_all(results)
    t4 = time.time()
    bc.destroy()
    t5 = time.time()
    return {
        "broadcast": t1 - t0,
        "launch": min(o[0] for o in out) - t1,
        "value": max(o[1] - o[0] for o in out),
        "kernel": max(o[2] - o[1] for o in out),
        "pickle": max(o[3] - o[2] for o in out),
        "return": t2 - max(o[3] for o in out),
        "unpickle": t3 - t2,
        "merge": t4 - t3,
        "destroy": t5 - t4,
        "total": t5 - t0,
        "result_mb": max(len(o[4]) for o in out) / 1e6,
    }


def blockwise_stages(blocks: list, task, weight: float) -> dict:
    """The block-wise test's stages in-process, seconds: ``partial`` of every
    block, ``split`` into pickled pieces, pieces unpickled and merged per
    key (``merge``), ``summarize`` per key and the summaries' merge."""
    from sparkmaxent.backends import merge_all

    t0 = time.perf_counter()
    partials = [task.partial(b) for b in blocks]
    t1 = time.perf_counter()
    pieces = [
        (k, pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL))
        for p in partials
        for k, v in task.split(p)
    ]
    t2 = time.perf_counter()
    by_key: dict = {}
    for k, data in pieces:
        v = pickle.loads(data)
        by_key[k] = v if k not in by_key else by_key[k].merge(v)
    t3 = time.perf_counter()
    summaries = [task.summarize(k, v, weight) for k, v in by_key.items()]
    t4 = time.perf_counter()
    merge_all(summaries)
    t5 = time.perf_counter()
    return {
        "partial": t1 - t0,
        "split": t2 - t1,
        "merge": t3 - t2,
        "summarize": t4 - t3,
        "merge_summaries": t5 - t4,
        "pieces_mb": sum(len(d) for _, d in pieces) / 1e6,
    }


def _min_of(fn, repeats: int) -> dict:
    """Per key, the least of ``repeats`` calls of ``fn`` (a dict of figures)."""
    runs = [fn() for _ in range(repeats)]
    return {k: round(min(r[k] for r in runs), 4) for k in runs[0]}


def measure(spark, train_dir: str, args) -> tuple[list[dict], dict]:
    from sparkmaxent.backends.spark import SparkBackend
    from sparkmaxent.data.load import read_blocks
    from sparkmaxent.kernels.keyed import Keyed

    with SparkBackend(
        spark, train_dir, bias=True, partitions=args.partitions, name="pass-breakdown"
    ) as backend:
        weights = starting_weights(backend, args.active)
        # the target's gamma1 (1e-5) for gradient_test; no fetch pass timed here
        passes = tasks(backend, weights, args.block_size, [1e-5], np.zeros(0, dtype=np.int64))
        chosen = [k for k in args.passes if k != "blockwise_test"]
        fns = {}
        stamps: dict[str, list[dict]] = {k: [] for k in chosen}
        for key in chosen:
            fns[key] = lambda task=passes[key]: backend.run(task)
            fns[key + "*"] = lambda key=key: stamps[key].append(instrumented(backend, passes[key]))
        if "blockwise_test" in args.passes:
            fns["blockwise_test"] = lambda: backend.run(Keyed(passes["blockwise_test"]))
        load_before = os.getloadavg()[0]
        times = timed_interleaved(fns, args.repeats)
        load_after = os.getloadavg()[0]
        weight = backend.weight
    rows = []
    for key in chosen:
        runs = stamps[key][1:]  # the first is the warm-up
        row = {"pass": key, "wall_s": round(statistics.median(times[key]), 4)}
        for part in (*PARTS, "total", "result_mb"):
            row[part] = round(statistics.median(r[part] for r in runs), 4)
        rows.append(row)
    blocks = read_blocks(train_dir, None, n_blocks=args.partitions)
    block_bytes = [pickle.dumps(b, protocol=pickle.HIGHEST_PROTOCOL) for b in blocks]
    facts = {
        "partitions": args.partitions,
        "active": len(weights.ids),
        "load_before": load_before,
        "load_after": load_after,
        "block_unpickle_s": _min_of(
            lambda: {"s": max(_seconds(pickle.loads, d) for d in block_bytes)},
            args.kernel_repeats,
        )["s"],
        "block_mb": round(max(len(d) for d in block_bytes) / 1e6, 2),
    }
    if "blockwise_test" in args.passes:
        task = passes["blockwise_test"]
        facts["blockwise_wall_s"] = round(statistics.median(times["blockwise_test"]), 4)
        facts["blockwise_stages_s"] = _min_of(
            lambda: blockwise_stages(blocks, task, weight), args.kernel_repeats
        )
    return rows, facts


def _seconds(fn, *a) -> float:
    t0 = time.perf_counter()
    fn(*a)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    from benchmarks.grafting_vs_mllib import prepared
    from sparkmaxent.backends.session import spark_session

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=SHARED_DATA, help="the shared corpora folder")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--active", type=int, default=2000, help="active features")
    ap.add_argument("--block-size", type=int, default=1_000_000, help="blockwise_test")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--kernel-repeats", type=int, default=3)
    ap.add_argument(
        "--passes",
        nargs="*",
        default=["trivial", "active", "gradient_test", "blockwise_test"],
        help="of trivial, active, gradient_test, blockwise_test, curvature",
    )
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--conf", nargs="*", default=[], help="extra Spark settings KEY=VALUE")
    work_arguments(ap, "/tmp/sparkmaxent-pass-overhead", "pass_breakdown.json")
    args = start(ap, argv)
    conf = {"spark.driver.memory": "4g", **dict(c.split("=", 1) for c in args.conf)}
    spark = spark_session(args.master, "pass-breakdown", conf)
    try:
        train_dir, _ = prepared(spark, args.work, args.reuse, args.data)
        rows, facts = measure(spark, train_dir, args)
    finally:
        spark.stop()
    print_table(rows, ["pass", "wall_s", *PARTS, "total", "result_mb"])
    print({k: v for k, v in facts.items()})
    print(facts)
    write_result(args.output, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
