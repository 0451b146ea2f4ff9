"""l1 n-best grafting against Spark MLlib's l1 LogisticRegression on CoNLL-2000.

Both run in one Spark session on the same prepared events: MLlib's
multinomial LogisticRegression (OWL-QN; elasticNetParam=1,
standardization=False, fitIntercept=True, regParam=gamma) and sparkmaxent's
grafting on the Spark backend at the same gamma for each n_best. Per run:
wall time, data passes (Spark jobs for MLlib, counted with the same job-group
counter), the objective C(w) = L(w) + gamma ||w||_1 evaluated by our kernels
on each model's weights, non-zero weights and test token accuracy. The
target of issue 3: the best n reaches an objective <= MLlib's + 1e-6 in at
most 1/3 of MLlib's time and 1/5 of its passes.

    python benchmarks/grafting_vs_mllib.py                       # full grid (long)
    python benchmarks/grafting_vs_mllib.py --gammas 1e-4 --n-best 100 1000 --mllib-iter 200

Writes benchmarks/results/grafting_vs_mllib.json and, per gamma, a PNG of
objective against passes and against seconds (grafting: one point per round).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

from benchmarks.common import RESULTS, print_table, shared_corpus, write_result  # noqa: E402

log = logging.getLogger("grafting_vs_mllib")


def prepared(spark, work: str, reuse: bool) -> tuple[str, str]:
    from sparkmaxent.data.prepare import prepare

    train_dir, test_dir = os.path.join(work, "train"), os.path.join(work, "test")
    if not (reuse and os.path.exists(os.path.join(train_dir, "dataset.json"))):
        prepare(spark, [shared_corpus("conll2000", "train.txt")], train_dir, "conll", cutoff=2,
                overwrite=True)
        prepare(spark, [shared_corpus("conll2000", "test.txt")], test_dir, "conll",
                merge_duplicates=False, vocabulary=train_dir, overwrite=True)
    return train_dir, test_dir


def mllib_frame(spark, dataset_dir: str, n_features: int):
    """The prepared events as MLlib's (label, weight, features) rows."""
    from pyspark.ml.linalg import SparseVector

    from sparkmaxent.backends.spark import read_events_frame
    from sparkmaxent.data.schema import DatasetInfo

    info = DatasetInfo.load(dataset_dir)
    # an RDD map, not a UDF: Arrow-backed UDFs cannot return vector UDTs
    rows = (read_events_frame(spark, dataset_dir, info).select("label", "weight", "indices", "values")
            .rdd.map(lambda r: (float(r[0]), float(r[1]), SparseVector(n_features, r[2], r[3]))))
    return rows.toDF(["label", "weight", "features"])


def objective_of(backend, theta: np.ndarray, gamma: float) -> float:
    from sparkmaxent.optim import Objective

    space = backend.space
    value = Objective(backend, None)(theta)[0]
    return value + gamma * float(np.abs(theta[: space.n_features]).sum())


def test_accuracy(spark, weights, space, test_dir: str) -> float:
    from sparkmaxent.backends.factory import make_backend
    from sparkmaxent.train import evaluate

    backend = make_backend("local", test_dir, bias=True)
    try:
        return evaluate(backend, weights, None).accuracy
    finally:
        backend.close()


def run_mllib(spark, train_dir, test_dir, backend, gamma, max_iter) -> dict:
    from pyspark.ml.classification import LogisticRegression

    from sparkmaxent.backends.spark import count_jobs
    from sparkmaxent.kernels import Weights

    space = backend.space
    frame = mllib_frame(spark, train_dir, space.n_predicates).cache()
    frame.count()
    lr = LogisticRegression(family="multinomial", regParam=gamma, elasticNetParam=1.0,
                            standardization=False, fitIntercept=True, weightCol="weight",
                            maxIter=max_iter, tol=1e-9)
    t0 = time.perf_counter()
    model, jobs = count_jobs(spark, lambda: lr.fit(frame))
    wall = time.perf_counter() - t0
    frame.unpersist()
    W = model.coefficientMatrix.toArray()  # (K, P)
    theta = np.concatenate([W.T.ravel(), model.interceptVector.toArray()])
    weights = Weights.from_dense(space, theta)
    return {"system": "mllib", "gamma": gamma, "n_best": None, "wall_s": round(wall, 1),
            "passes": jobs, "iterations": model.summary.totalIterations,
            "objective": objective_of(backend, theta, gamma), "nonzero": int(np.count_nonzero(W)),
            "test_accuracy": test_accuracy(spark, weights, space, test_dir)}


def run_grafting(spark, train_dir, test_dir, backend, gamma, n_best, out_dir) -> dict:
    from sparkmaxent.config import TrainConfig
    from sparkmaxent.train import train

    cfg = TrainConfig(method="grafting", l1=gamma, n_best=n_best, backend="spark")
    t0 = time.perf_counter()
    res = train(backend, cfg, output_dir=out_dir)
    wall = time.perf_counter() - t0
    rep = res.report
    return {"system": "grafting", "gamma": gamma, "n_best": n_best, "wall_s": round(wall, 1),
            "passes": rep["passes"], "rounds": rep["rounds_run"], "objective": rep["objective"],
            "nonzero": rep["nonzero_weights"], "kkt_passed": rep["kkt"]["passed"],
            "test_accuracy": test_accuracy(spark, res.weights, backend.space, test_dir),
            "trace": [{k: r[k] for k in ("round", "active", "objective", "passes", "elapsed_s")}
                      for r in rep["rounds"]]}


def plot(rows: list[dict], gamma: float, path: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4))
    FigureCanvasAgg(fig)
    axes = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for row in rows:
        if row["gamma"] != gamma:
            continue
        if row["system"] == "mllib":
            for ax, x in zip(axes, (row["passes"], row["wall_s"])):
                ax.axhline(row["objective"], color="k", linestyle="--", label="MLlib (final)")
                ax.plot([x], [row["objective"]], "ks")
        else:
            trace = row["trace"]
            for ax, key in zip(axes, ("passes", "elapsed_s")):
                ax.plot([r[key] for r in trace], [r["objective"] for r in trace], marker=".",
                        label=f"grafting n={row['n_best']}")
    for ax, label in zip(axes, ("data passes", "seconds")):
        ax.set_xlabel(label)
        ax.set_ylabel("objective C(w)")
        ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"CoNLL-2000 chunking, gamma = {gamma:g}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gammas", type=float, nargs="+", default=[1e-4, 1e-5])
    parser.add_argument("--n-best", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument("--mllib-iter", type=int, default=1000)
    parser.add_argument("--skip-mllib", action="store_true")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--work", default="/tmp/sparkmaxent-grafting-bench")
    parser.add_argument("--reuse", action="store_true", help="reuse prepared data in --work")
    parser.add_argument("--output", default=os.path.join(RESULTS, "grafting_vs_mllib.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from sparkmaxent.backends.session import spark_session
    from sparkmaxent.backends.spark import SparkBackend

    spark = spark_session("local[2]", "grafting-vs-mllib", {"spark.driver.memory": "8g"})
    train_dir, test_dir = prepared(spark, args.work, args.reuse)
    rows: list[dict] = []
    with SparkBackend(spark, train_dir, bias=True, partitions=args.partitions,
                      name="grafting-bench") as backend:
        for gamma in args.gammas:
            if not args.skip_mllib:
                rows.append(run_mllib(spark, train_dir, test_dir, backend, gamma, args.mllib_iter))
                log.info("%s", rows[-1])
            for n in args.n_best:
                out = os.path.join(args.work, f"graft-{gamma:g}-{n}")
                rows.append(run_grafting(spark, train_dir, test_dir, backend, gamma, n, out))
                log.info("%s", {k: v for k, v in rows[-1].items() if k != "trace"})
            write_result(args.output, rows, partitions=args.partitions)
            plot(rows, gamma, os.path.splitext(args.output)[0] + f"_{gamma:g}.png")
    print_table([{k: v for k, v in r.items() if k != "trace"} for r in rows],
                ["system", "gamma", "n_best", "wall_s", "passes", "objective", "nonzero",
                 "test_accuracy"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
