"""Per-pass and whole-fit wall time of the three ways to run sparkmaxent on
Spark (issue 20):

    classic-rdd    classic local session, RDD backend (backends/spark.py)
    classic-frame  classic local session, DataFrame backend (backends/frame.py)
    connect-frame  Spark Connect client of a server over the same local
                   master (started here from pyspark's sbin/), DataFrame backend

Each system runs in its own child process (a Connect client marks its whole
process as remote) over the same prepared dataset with the same partitions.
A child caches the blocks, then times, taking turns, ``--repeats`` passes of

    gradient   LossGradTask with the gradient over all P*K features (the
               grafting gradient test's pass)
    active     LossGradTask over ``--active`` features (an inner optimizer pass)
    trivial    (with --profile) CountTask: a pass's fixed cost

and reports their medians; then a whole grafting fit (its wall time and
passes, and the objective, which must agree across systems). With
``--score`` a child also times scoring given Vectors (:func:`score_figures`):
the default ``transform`` (MLlib's model; under Connect written once and
loaded on the server) and the SQL scorer against MLlib's own
``LogisticRegressionModel.transform`` in the same session. The children
run one after another, ``--rounds`` times in turn; a row per system and
task holds the median over rounds. With ``--profile`` the DataFrame-backend
children also break a trivial pass down (:func:`profile`). The load average (other processes share
the machine's cores) is recorded before and after each child.

Usage::

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.connect \\
        --events 50000 --predicates 5000 --labels 5 --partitions 2 --cores 2
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks.common import (
    RESULTS,
    ROOT,
    command_line,
    merge_pages,
    replace_rows,
    target,
    timed_interleaved,
    write_result,
)

SYSTEMS = ("classic-rdd", "classic-frame", "connect-frame")
logger = logging.getLogger("connect")


def synthetic(n_events: int, n_predicates: int, nnz: float, n_labels: int, seed: int = 0):
    """Binary indicator predicates (as in NLP data), labels from a planted
    sparse model so the loss is not flat."""
    import scipy.sparse as sp

    from sparkmaxent.kernels import MulticlassBlock

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


def make_dataset(directory: str, args) -> None:
    from sparkmaxent.data.load import write_events
    from sparkmaxent.data.schema import DatasetInfo
    from sparkmaxent.kernels import MULTICLASS

    block = synthetic(args.events, args.predicates, args.nnz, args.labels)
    info = DatasetInfo(MULTICLASS, args.predicates, [f"L{k}" for k in range(args.labels)])
    write_events(block, directory, info, n_files=args.partitions)


def _timed_count(large: bool):
    """The mapInArrow function of a trivial pass (``CountTask``) over the
    DataFrame backend's cached blocks, as ``frame._apply_task`` runs it,
    also returning when it started and ended and its seconds unpickling."""
    import pickle

    import pyarrow as pa

    from sparkmaxent.kernels.stats import CountTask

    def apply(batches):
        start, unpickle, out = time.time(), 0.0, None
        for batch in batches:
            for data in batch.column(0).to_pylist():
                t0 = time.perf_counter()
                block = pickle.loads(data)
                unpickle += time.perf_counter() - t0
                count = CountTask()(block)
                out = count if out is None else out.merge(count)
        data = pickle.dumps((out, start, time.time(), unpickle))
        arrow_type = pa.large_binary() if large else pa.binary()
        yield pa.RecordBatch.from_arrays([pa.array([data], type=arrow_type)], names=["result"])

    return apply


def profile(backend, repeats: int) -> dict:
    """Where a trivial DataFrame-backend pass spends its time (medians over
    ``repeats``): building the plan on the client, until the first Python
    worker starts the pass's function (the query's analysis, planning and
    task launch on the server), the function itself (reading the cached
    blocks' Arrow batches, unpickling them, the task), and after the last
    one ends (result collection)."""
    import pickle

    parts: dict[str, list[float]] = {}
    for i in range(repeats + 1):
        t0 = time.time()
        frame = backend.cached().mapInArrow(_timed_count(backend.large), "result binary")
        t1 = time.time()
        results = [pickle.loads(row[0]) for row in frame.collect()]
        t2 = time.time()
        if i == 0:
            continue  # warm-up
        figures = {
            "plan_s": t1 - t0,
            "before_worker_s": min(r[1] for r in results) - t1,
            "worker_s": max(r[2] - r[1] for r in results),
            "unpickle_s": sum(r[3] for r in results),
            "after_worker_s": t2 - max(r[2] for r in results),
        }
        for key, value in figures.items():
            parts.setdefault(key, []).append(value)
    return {f"profile_{k}": statistics.median(v) for k, v in parts.items()}


def vector_rows(spark, args, copies: int):
    """(id, label, features) of :func:`synthetic`'s events as pyspark
    Vectors of size ``--predicates`` (their ``ml_attr`` metadata says so, as
    CountVectorizer's): the training rows, and the same rows unioned
    ``copies`` times for scoring, both cached and counted."""
    from functools import reduce

    from pyspark.ml.linalg import SparseVector

    block = synthetic(args.events, args.predicates, args.nnz, args.labels, seed=2)
    X = block.X.tocsr()
    rows = [
        (i, float(block.y[i]), SparseVector(X.shape[1], X.indices[a:b], X.data[a:b]))
        for i, (a, b) in enumerate(zip(X.indptr[:-1], X.indptr[1:]))
    ]
    df = spark.createDataFrame(rows, ["id", "label", "features"])
    df = df.withMetadata("features", {"ml_attr": {"num_attrs": X.shape[1]}}).repartition(
        args.partitions
    )
    train = df.cache()
    train.count()
    scored = reduce(lambda a, b: a.unionAll(b), [train] * copies).cache()
    scored.count()
    return train, scored


def score_figures(spark, args) -> dict:
    """Scoring throughput given Vectors in this session: the default
    ``transform`` (MLlib's model: under Connect written under checkpointDir
    and loaded on the server, ml/mllib_stored.py), the SQL scorer, and
    MLlib's own ``LogisticRegressionModel.transform`` (fitted here,
    ``--score-mllib-iter`` iterations; the same Vectors), each materialized
    with the ``noop`` writer, taking turns ``--repeats`` times (best kept);
    and how long the default's first transform took (writing and loading
    MLlib's model)."""
    from pyspark.ml.classification import LogisticRegression

    from sparkmaxent.ml import MaxEntClassifier

    train, scored = vector_rows(spark, args, args.score_copies)
    n = scored.count()
    ours = MaxEntClassifier(method="grafting", l1=args.l1, nBest=args.n_best).fit(train)
    checkpoints = tempfile.mkdtemp(prefix="bench-connect-mllib-")
    ours.setCheckpointDir(checkpoints)
    t0 = time.perf_counter()
    ours.transform(scored)  # builds (and keeps) MLlib's model
    first = time.perf_counter() - t0
    shutil.rmtree(checkpoints)  # left empty: the model's files are removed once loaded
    sql = ours.copy()
    sql.scoring = "sql"
    lr = LogisticRegression(maxIter=args.score_mllib_iter, regParam=args.l1, elasticNetParam=1.0)
    lr = lr.fit(train)

    def noop(df):
        return lambda: df.write.format("noop").mode("overwrite").save()

    fns = {
        "score_default": noop(ours.transform(scored)),
        "score_sql": noop(sql.transform(scored)),
        "score_mllib": noop(lr.transform(scored)),
    }
    out = {f"{k}_s": min(v) for k, v in timed_interleaved(fns, args.repeats).items()}
    out.update(score_rows=n, score_first_transform_s=first)
    return out


def child(system: str, remote: str, directory: str, args) -> dict:
    """One system's figures (run in a child process)."""
    from sparkmaxent.backends.frame import FrameBackend
    from sparkmaxent.backends.session import spark_session
    from sparkmaxent.backends.spark import SparkBackend
    from sparkmaxent.config import train_config
    from sparkmaxent.data.schema import DatasetInfo
    from sparkmaxent.kernels import LossGradTask, Weights
    from sparkmaxent.train import train

    conf = {"spark.ui.enabled": "false", "spark.driver.memory": "2g"}
    spark = spark_session(f"local[{args.cores}]", f"bench-{system}", conf, remote or None)
    info = DatasetInfo.load(directory)
    space = info.space(True)
    rng = np.random.default_rng(1)
    ids = np.sort(rng.choice(space.n_features, size=args.active, replace=False))
    weights = Weights(ids, rng.normal(scale=0.1, size=args.active))
    tasks = {
        "gradient": LossGradTask(space, weights, None, None),
        "active": LossGradTask(space, weights, None, ids),
    }
    cls = SparkBackend if system == "classic-rdd" else FrameBackend

    def backend():
        return cls(spark, directory, info, bias=True, partitions=args.partitions)

    out: dict = {"load_before": round(os.getloadavg()[0], 2)}
    if args.score_only:
        out.update(score_figures(spark, args), load_after=round(os.getloadavg()[0], 2))
        spark.stop()
        return out
    t0 = time.perf_counter()
    b = backend()
    out["cache_s"] = time.perf_counter() - t0
    fns = {key: (lambda task=task: b.run(task)) for key, task in tasks.items()}
    if args.profile:
        from sparkmaxent.kernels.stats import CountTask

        fns["trivial"] = lambda: b.run(CountTask())
    for key, times in timed_interleaved(fns, args.repeats).items():
        out[f"{key}_pass_s"] = statistics.median(times)
    if args.profile and system != "classic-rdd":
        out.update(profile(b, args.repeats))
    b.close()
    if args.score:
        out.update(score_figures(spark, args))
    cfg = train_config(method="grafting", l1=args.l1, n_best=args.n_best, plots=False)
    with backend() as fit_backend:
        t0 = time.perf_counter()
        result = train(fit_backend, cfg)
        out["fit_s"] = time.perf_counter() - t0
        out["fit_passes"] = fit_backend.passes
    out["objective"] = result.report.objective
    out["features"] = int(result.weights.nnz)
    out["load_after"] = round(os.getloadavg()[0], 2)
    spark.stop()
    return out


def run_child(system: str, remote: str, directory: str, argv: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": ROOT, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SPARK_REMOTE", None)
    cmd = [sys.executable, "-m", "benchmarks.connect", *argv, "--child", system]
    cmd += ["--dataset", directory, "--remote", remote]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{system} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rows_of(figures: dict[str, list[dict]]) -> list[dict]:
    """Rows (system, task, wall_s, passes, per_pass_s): medians over rounds."""
    rows = []
    for system, runs in figures.items():

        def med(key: str, runs=runs) -> float:
            return statistics.median(r[key] for r in runs)

        for task in ("gradient", "active", "trivial"):
            if f"{task}_pass_s" not in runs[0]:
                continue
            wall = med(f"{task}_pass_s")
            rows.append(
                {
                    "system": system,
                    "task": f"{task} pass",
                    "wall_s": round(wall, 4),
                    "passes": 1,
                    "per_pass_s": round(wall, 4),
                }
            )
        for task, label in SCORE_TASKS.items():
            if f"{task}_s" in runs[0]:
                wall, n = med(f"{task}_s"), runs[0]["score_rows"]
                r = {"system": system, "task": label, "wall_s": round(wall, 3), "passes": None}
                r.update(rows=n, rows_per_s=round(n / wall, 1))
                if task == "score_default":
                    r["first_transform_s"] = round(med("score_first_transform_s"), 3)
                r["load"] = [runs[0]["load_before"], runs[-1]["load_after"]]
                rows.append(r)
        if "fit_s" not in runs[0]:  # --score-only
            continue
        fit, passes = med("fit_s"), int(med("fit_passes"))
        rows.append(
            {
                "system": system,
                "task": "grafting fit",
                "wall_s": round(fit, 3),
                "passes": passes,
                "per_pass_s": round(fit / passes, 4),
                "objective": runs[0]["objective"],
                "features": runs[0]["features"],
                "cache_s": round(med("cache_s"), 3),
            }
        )
    return rows


#: the scoring tasks (``--score``): child figure -> row task
SCORE_TASKS = {
    "score_default": "transform given Vectors (default)",
    "score_sql": "SQL transform given Vectors",
    "score_mllib": "MLlib LogisticRegressionModel.transform",
}


def ratios(rows: list[dict]) -> dict:
    """connect-frame / classic-rdd and classic-frame / classic-rdd per task."""
    by = {(r["system"], r["task"]): r["per_pass_s"] for r in rows if "per_pass_s" in r}
    out = {}
    for system in ("classic-frame", "connect-frame"):
        for task in ("gradient pass", "active pass", "trivial pass", "grafting fit"):
            if (system, task) in by and ("classic-rdd", task) in by:
                key = f"{system}/classic-rdd {task} per pass"
                out[key] = round(by[(system, task)] / by[("classic-rdd", task)], 3)
    return out


def targets(ratio: dict) -> dict:
    """Spark Connect within 1.5x of a classic session per pass, by task."""
    out = {}
    for task in ("gradient pass", "active pass", "grafting fit"):
        key = f"connect-frame/classic-rdd {task} per pass"
        if key in ratio:
            goal = f"Spark Connect within 1.5x of classic per pass ({task})"
            out[task.replace(" ", "_")] = target(goal, f"{ratio[key]}x", ratio[key] <= 1.5)
    return out


def score_targets(rows: list[dict]) -> dict:
    """Under Spark Connect, transform given Vectors (the default) at least
    MLlib's ``LogisticRegressionModel.transform`` throughput there."""
    by = {(r["system"], r["task"]): r for r in rows}
    ours = by.get(("connect-frame", SCORE_TASKS["score_default"]))
    mllib = by.get(("connect-frame", SCORE_TASKS["score_mllib"]))
    if not (ours and mllib):
        return {}
    x = ours["rows_per_s"] / mllib["rows_per_s"]
    goal = (
        "Spark Connect: transform given Vectors (default) throughput >= MLlib's "
        "LogisticRegressionModel.transform under Connect"
    )
    return {"connect_transform_vectors": target(goal, f"{x:.2f}x", x >= 1)}


def page_targets(rows: list[dict]) -> dict:
    """Every target of a page's rows: Connect per pass, and scoring."""
    return {**targets(ratios(rows)), **score_targets(rows)}


def merged_rows(earlier: list[dict], rows: list[dict]) -> list[dict]:
    """``earlier``'s rows that ``rows`` do not measure again (same system
    and task), then ``rows``: what ``--merge`` puts on the page."""
    return replace_rows(earlier, rows, lambda r: (r["system"], r["task"]))


def parse(argv: list[str] | None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--predicates", type=int, default=5_000)
    ap.add_argument("--nnz", type=float, default=12.0)
    ap.add_argument("--labels", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--active", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--l1", type=float, default=1e-3)
    ap.add_argument("--n-best", type=int, default=20)
    ap.add_argument("--cores", type=int, default=2, help="local[N] of both kinds of session")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also time a trivial pass (CountTask) and break a DataFrame-backend one down",
    )
    ap.add_argument(
        "--score",
        action="store_true",
        help="also time scoring given Vectors: transform (default, SQL) against MLlib's",
    )
    ap.add_argument(
        "--score-only", action="store_true", help="time scoring only (no passes, no fit)"
    )
    ap.add_argument(
        "--merge",
        nargs="+",
        default=[],
        metavar="PAGE",
        help="measure nothing: put these pages' rows into --out (same system and task replaced)",
    )
    ap.add_argument("--score-copies", type=int, default=10, help="--score: rows unioned K times")
    ap.add_argument("--score-mllib-iter", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(RESULTS, "connect.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--dataset", help=argparse.SUPPRESS)
    ap.add_argument("--remote", default="", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.merge:
        merge_pages(args.out, args.merge, merged_rows, page_targets, "connect")
        return 0
    if args.child:
        remote = args.remote if args.child.startswith("connect") else ""
        print(json.dumps(child(args.child, remote, args.dataset, args)))
        return 0
    from tests.e2e.connect import connect_server

    systems = args.systems.split(",")
    tmp = tempfile.mkdtemp(prefix="bench-connect-")
    figures: dict[str, list[dict]] = {s: [] for s in systems}
    try:
        make_dataset(os.path.join(tmp, "data"), args)
        with connect_server(cores=args.cores, memory="2g", timeout=900) as srv:
            for r in range(args.rounds):
                for system in systems:
                    figures[system].append(run_child(system, srv.url, tmp + "/data", argv))
                    logger.info("round %d %s: %s", r, system, figures[system][-1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = rows_of(figures)
    for r in rows:
        r["command"] = command_line()
    write_result(args.out, rows, page_targets(rows))
    print(json.dumps({"rows": rows, "ratios": ratios(rows)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
