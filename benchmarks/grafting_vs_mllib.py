"""l1 n-best grafting against Spark MLlib's l1 LogisticRegression on CoNLL-2000.

Both run in one Spark session on the same prepared events: MLlib's
multinomial LogisticRegression (OWL-QN; elasticNetParam=1,
standardization=False, fitIntercept=True, regParam=gamma) and sparkmaxent's
grafting on the Spark backend at the same gamma for each n_best. Per run:
wall time, data passes (Spark jobs for MLlib, counted with the same job-group
counter), the objective C(w) = L(w) + gamma ||w||_1 evaluated by our kernels
on each model's weights, non-zero weights and test token accuracy. The
target of issue 3: the best n reaches an objective <= MLlib's + 1e-6 in at
most 1/3 of MLlib's time and 1/5 of its passes (``targets``: the first round
at that objective, from the run's trace; also when each n ends certified).

    python -m benchmarks.grafting_vs_mllib                       # full grid (long)
    python -m benchmarks.grafting_vs_mllib --n-best 1000 100 10 1 --max-seconds 420 --reuse
    python -m benchmarks.grafting_vs_mllib --gammas 1e-4 --n-best 100 1000 --mllib-iter 200
    python -m benchmarks.grafting_vs_mllib --gammas 1e-6 --n-best 1000 --mllib-iter 100000 \
        --mllib-seconds 3600 --mllib-last --max-seconds 1200 --output $WORK/gvm6.json
    python -m benchmarks.grafting_vs_mllib --merge $WORK/gvm6.json   # onto the page

Issue 37 asks MLlib to run to its own rule or for at most an hour: its fit
has no time limit, so ``--mllib-seconds`` cancels its Spark jobs at the cap
and the row says so (``stopped`` 'time cap', no weights hence no objective;
its wall time a lower bound of MLlib's, against which a certified ratio is
an upper bound). A run of one gamma1 writes a page of its own and
``--merge`` puts its rows on the shared page in place of the same
measurements (``row_key``), the other rows kept, every row naming the run
that measured it, the targets recomputed over all of them.

Writes benchmarks/results/grafting_vs_mllib.json (rows: system, gamma, n,
objective, kkt_violation, token_accuracy, chunk_f1, nonzero_weights, passes,
wall_s; extra key ``targets``: per gamma, the best n against MLlib) and, per
gamma, a PNG of objective against passes and against seconds (grafting: one
point per round). ``kkt_violation`` is the certificate's largest violation
(problem/kkt.kkt_certificate) over all candidate features, computed by our
kernels for MLlib's weights too.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
import uuid

import numpy as np

from benchmarks.common import (
    SHARED_DATA,
    command_line,
    commit,
    load_average,
    merge_arguments,
    placeless,
    print_table,
    replace_rows,
    shared_corpus,
    start,
    target,
    work_arguments,
    write_result,
)
from sparkmaxent.problem import Certificate
from sparkmaxent.selection.stops import StopReason

log = logging.getLogger("grafting_vs_mllib")
#: why a fit with a certificate stopped: no candidate passes the gradient test
CERTIFIED = StopReason.NO_CANDIDATE_PASSES.value


def prepared(spark, work: str, reuse: bool, data_dir: str = SHARED_DATA) -> tuple[str, str]:
    """CoNLL-2000 train and test prepared into ``work`` (conll templates,
    cutoff 2; test with the training dictionary)."""
    from sparkmaxent.data.prepare import prepare

    train_dir, test_dir = os.path.join(work, "train"), os.path.join(work, "test")
    if not (reuse and os.path.exists(os.path.join(train_dir, "dataset.json"))):
        prepare(
            spark,
            [shared_corpus("conll2000", "train.txt", data_dir=data_dir)],
            train_dir,
            "conll",
            cutoff=2,
            overwrite=True,
        )
        prepare(
            spark,
            [shared_corpus("conll2000", "test.txt", data_dir=data_dir)],
            test_dir,
            "conll",
            merge_duplicates=False,
            vocabulary=train_dir,
            overwrite=True,
        )
    return train_dir, test_dir


def mllib_frame(spark, dataset_dir: str, n_features: int):
    """The prepared events as MLlib's (label, weight, features) rows."""
    from pyspark.ml.linalg import SparseVector

    from sparkmaxent.backends.spark import read_events_frame
    from sparkmaxent.data.schema import DatasetInfo

    info = DatasetInfo.load(dataset_dir)
    # an RDD map, not a UDF: Arrow-backed UDFs cannot return vector UDTs
    rows = (
        read_events_frame(spark, dataset_dir, info)
        .select("label", "weight", "indices", "values")
        .rdd.map(lambda r: (float(r[0]), float(r[1]), SparseVector(n_features, r[2], r[3])))
    )
    return rows.toDF(["label", "weight", "features"])


def objective_and_kkt(backend, weights, gamma: float) -> tuple[float, Certificate]:
    """C(w) = L(w) + gamma ||w||_1 and the KKT certificate over all candidates
    (one full-gradient pass of our kernels)."""
    from sparkmaxent.problem import Objective, kkt_certificate

    ids = weights.active_ids()
    obj = Objective(backend, ids)
    theta = np.concatenate([weights.values, weights.bias])
    ev = obj.at(theta, full_gradient=True, hessian=False)
    lg = ev.lossgrad
    cert = kkt_certificate(ev.full_grad, weights, lg.grad_bias / lg.weight, gamma, 1e-6)
    return ev.value + gamma * float(np.abs(weights.values).sum()), cert


def test_scores(weights, space, test_dir: str) -> dict:
    from sparkmaxent.evaluate import evaluate_dataset

    r = evaluate_dataset(test_dir, weights, space, chunks=True)
    return {"token_accuracy": r["accuracy"], "chunk_f1": r["chunks"]["f1"]}


def capped(spark, fn, seconds: float):
    """``(fn(), False)``, or ``(None, True)`` when ``fn``'s Spark jobs were
    still running after ``seconds`` (0: no cap) and were cancelled: MLlib's
    fit has no time limit of its own, so a run "for at most an hour" stops
    it from outside. The jobs are found by a tag of their own; the cancel is
    repeated until ``fn`` returns, as the cap may fall between two jobs."""
    if not seconds:
        return fn(), False
    sc = spark.sparkContext
    tag = f"sparkmaxent-cap-{uuid.uuid4().hex[:12]}"
    done, fired = threading.Event(), threading.Event()

    def watch() -> None:
        if done.wait(seconds):
            return
        fired.set()
        while not done.is_set():
            sc.cancelJobsWithTag(tag)
            done.wait(0.5)

    sc.addJobTag(tag)
    watcher = threading.Thread(target=watch, name="mllib-cap", daemon=True)
    watcher.start()
    try:
        return fn(), False
    except Exception:
        if fired.is_set():
            log.info("cancelled after the %g s cap", seconds)
            return None, True
        raise
    finally:
        done.set()
        watcher.join()
        sc.removeJobTag(tag)


def run_mllib(spark, train_dir, test_dir, backend, gamma, max_iter, max_seconds=0.0) -> dict:
    """MLlib's l1 fit at ``gamma``, to its own rule (tol 1e-6) or ``max_iter``
    iterations or, with ``max_seconds``, cancelled at that cap: then the row
    has no weights to score (objective None, ``stopped`` 'time cap') and its
    wall time is a lower bound of MLlib's."""
    from pyspark.ml.classification import LogisticRegression

    from benchmarks.instrumentation import count_jobs
    from sparkmaxent.kernels import Weights

    space = backend.space
    frame = mllib_frame(spark, train_dir, space.n_predicates).cache()
    frame.count()
    lr = LogisticRegression(
        family="multinomial",
        regParam=gamma,
        elasticNetParam=1.0,
        standardization=False,
        fitIntercept=True,
        weightCol="weight",
        maxIter=max_iter,
        tol=1e-6,
    )
    t0 = time.perf_counter()
    (model, cut), jobs = count_jobs(
        spark, lambda: capped(spark, lambda: lr.fit(frame), max_seconds)
    )
    wall = time.perf_counter() - t0
    frame.unpersist()
    if cut:
        return {
            "system": "mllib",
            "gamma": gamma,
            "n": None,
            "objective": None,
            "passes": jobs,
            "wall_s": round(wall, 1),
            "stopped": "time cap",
            "max_seconds": max_seconds,
        }
    W = model.coefficientMatrix.toArray()  # (K, P)
    theta = np.concatenate([W.T.ravel(), model.interceptVector.toArray()])
    weights = Weights.from_dense(space, theta).sparse()
    objective, cert = objective_and_kkt(backend, weights, gamma)
    return {
        "system": "mllib",
        "gamma": gamma,
        "n": None,
        "objective": objective,
        "kkt_violation": cert.violation,
        **test_scores(weights, space, test_dir),
        "nonzero_weights": int(np.count_nonzero(W)),
        "passes": jobs,
        "wall_s": round(wall, 1),
        "iterations": model.summary.totalIterations,
        # MLlib bounded by --mllib-iter stopped short of its own rule (tol)
        "stopped": "maxIter" if model.summary.totalIterations >= max_iter else "tol",
        "kkt": cert.to_json(),
    }


def run_grafting(
    spark,
    train_dir,
    test_dir,
    backend,
    gamma,
    n_best,
    out_dir,
    solver,
    max_rounds,
    max_seconds,
    progress=None,
    **settings,
) -> dict:
    """One grafting run; ``progress(row)`` gets a partial row after every
    round, so that a long run stopped midway leaves what it measured;
    ``settings``: further ``train_config`` keys (e.g. ``dense_test_max``)."""
    from sparkmaxent.config import train_config
    from sparkmaxent.train import train

    cfg = train_config(
        method="grafting",
        l1=gamma,
        n_best=n_best,
        backend="spark",
        solver=solver,
        max_rounds=max_rounds,
        max_seconds=max_seconds,
        plots=False,
        **settings,
    )
    t0 = time.perf_counter()

    def on_round(state) -> None:
        if progress is not None:
            last = state.trace[-1]
            progress(
                {
                    "system": "sparkmaxent grafting",
                    "gamma": gamma,
                    "n": n_best,
                    "objective": last.objective,
                    "nonzero_weights": last.active,
                    "passes": state.passes,
                    "wall_s": round(time.perf_counter() - t0, 1),
                    "solver": solver,
                    "finished": False,
                    "rounds": state.round,
                }
            )

    res = train(backend, cfg, output_dir=out_dir, on_round=on_round)
    wall = time.perf_counter() - t0
    rep = res.report
    return {
        "system": "sparkmaxent grafting",
        "gamma": gamma,
        "n": n_best,
        "objective": rep["objective"],
        "kkt_violation": rep["kkt"]["violation"],
        **(test_scores(res.weights, backend.space, test_dir) if test_dir else {}),
        "nonzero_weights": rep["nonzero_weights"],
        "passes": rep["passes"],
        "wall_s": round(wall, 1),
        "rounds": rep["rounds_run"],
        "solver": solver,
        "stopped": rep.get("stopped"),
        "stop_reason": rep.get("stop_reason"),
        "kkt_passed": rep["kkt"]["passed"],
        "trace": [
            {k: r[k] for k in ("round", "active", "objective", "passes", "elapsed_s")}
            for r in rep["rounds"]
        ],
    }


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
            if row["objective"] is None:  # cancelled at its cap
                continue
            for ax, x in zip(axes, (row["passes"], row["wall_s"])):
                ax.axhline(row["objective"], color="k", linestyle="--", label="MLlib (final)")
                ax.plot([x], [row["objective"]], "ks")
        else:
            trace = row["trace"]
            for ax, key in zip(axes, ("passes", "elapsed_s")):
                ax.plot(
                    [r[key] for r in trace],
                    [r["objective"] for r in trace],
                    marker=".",
                    label=f"grafting n={row['n']}",
                )
    for ax, label in zip(axes, ("data passes", "seconds")):
        ax.set_xlabel(label)
        ax.set_ylabel("objective C(w)")
        ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"CoNLL-2000 chunking, gamma = {gamma:g}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def reached(row: dict, objective: float) -> dict | None:
    """The first round of a grafting row whose objective is <= ``objective``
    (its passes and seconds from the run's start), or None."""
    for r in row.get("trace", []):
        if r["objective"] <= objective:
            return r
    return None


def reach(rows: list[dict]) -> dict:
    """Per gamma, the best n against MLlib's whole fit: the first round of
    each n at MLlib's objective + 1e-6 (from its trace) is measured against
    issue 3's target, at most 1/3 of MLlib's time and 1/5 of its passes.
    The best n is the fastest of those that meet both halves, or when none
    does, the fastest to reach the objective at all. Also the n whose
    certified end (no candidate passes the test) comes first."""
    out = {}
    for mllib in (r for r in rows if r["system"] == "mllib"):
        gamma = mllib["gamma"]
        ours = [r for r in rows if r["system"] != "mllib" and r["gamma"] == gamma]
        hits = []
        if mllib["objective"] is not None:  # None: cancelled at its time cap
            hits = [(r, reached(r, mllib["objective"] + 1e-6)) for r in ours]
            hits = [(r, h) for r, h in hits if h is not None]
        entry = {
            "mllib_objective": mllib["objective"],
            "mllib_wall_s": mllib["wall_s"],
            "mllib_passes": mllib["passes"],
            "mllib_capped": mllib.get("stopped") == "time cap",
            "n_reaching_mllib_objective": [r["n"] for r, _ in hits],
        }
        if hits:

            def meets(at, mllib=mllib):
                return bool(
                    at["elapsed_s"] <= mllib["wall_s"] / 3 and at["passes"] <= mllib["passes"] / 5
                )

            best, at = min(hits, key=lambda rh: (not meets(rh[1]), rh[1]["elapsed_s"]))
            entry.update(
                best_n=best["n"],
                reached_in_round=at["round"],
                reached_wall_s=at["elapsed_s"],
                reached_passes=at["passes"],
                wall_ratio=at["elapsed_s"] / mllib["wall_s"],
                passes_ratio=at["passes"] / mllib["passes"],
                met=meets(at),
                reached={
                    r["n"]: {
                        "round": h["round"],
                        "wall_s": h["elapsed_s"],
                        "passes": h["passes"],
                        "meets": meets(h),
                    }
                    for r, h in hits
                },
            )
        else:
            entry["met"] = False
        certified = [r for r in ours if r.get("kkt_passed") and r.get("stop_reason") == CERTIFIED]
        if ours and not certified:  # the longest uncertified run: a lower bound
            longest = max(ours, key=lambda r: r["wall_s"])
            entry.update(uncertified_wall_s=longest["wall_s"], uncertified_n=longest["n"])
        if certified:
            first = min(certified, key=lambda r: r["wall_s"])
            entry.update(
                first_certified_n=first["n"],
                certified_wall_s=first["wall_s"],
                certified_passes=first["passes"],
            )
        out[f"{gamma:g}"] = entry
    return out


def wall_share(gamma: str) -> int:
    """MLlib's time over grafting's the wall target asks for: 5 (issue 22),
    10 at gamma1 <= 1e-5 (issue 37)."""
    return 10 if float(gamma) <= 1e-5 else 5


def targets(rows: list[dict]) -> dict:
    """Issue 22's targets per gamma1 (from ``reach``): MLlib's objective in
    at most 1/5 of its wall time and 1/5 of its passes; issue 37's at gamma1
    <= 1e-5: MLlib's objective in 1/10 of its time (``wall_share``), certified
    in 1/5."""
    out = {}
    for gamma, e in reach(rows).items():
        if "wall_ratio" not in e:
            value = "MLlib's objective not reached"
            if e["mllib_capped"]:
                value = f"MLlib cancelled at its {e['mllib_wall_s']:.1f} s cap: objective unknown"
            goal = WALL_GOAL.format(gamma=gamma, share=wall_share(gamma))
            out[f"wall_{gamma}"] = target(goal, value, False)
            out[f"passes_{gamma}"] = target(PASSES_GOAL.format(gamma=gamma), value, False)
            continue
        certified = (
            f"; certified after {e['certified_wall_s']} s" if "certified_wall_s" in e else ""
        )
        wall = f"{e['wall_ratio']:.3f} ({e['reached_wall_s']:.1f} s against "
        wall += f"{e['mllib_wall_s']:.1f} s{certified})"
        passes = (
            f"{e['passes_ratio']:.3f} ({e['reached_passes']} passes against {e['mllib_passes']})"
        )
        share = wall_share(gamma)
        out[f"wall_{gamma}"] = target(
            WALL_GOAL.format(gamma=gamma, share=share), wall, e["wall_ratio"] <= 1 / share
        )
        out[f"passes_{gamma}"] = target(
            PASSES_GOAL.format(gamma=gamma), passes, e["passes_ratio"] <= 0.2
        )
    for gamma, e in reach(rows).items():
        if float(gamma) > 1e-5:
            continue
        mllib = f"{e['mllib_wall_s']:.1f} s"
        if e["mllib_capped"]:  # MLlib's time is at least its cap: the ratio at most this
            mllib = f"MLlib cancelled at its cap, {mllib}"
        if "certified_wall_s" not in e:
            value = "not certified in this run"
            if "uncertified_wall_s" in e:
                ratio = e["uncertified_wall_s"] / e["mllib_wall_s"]
                value += f": not before {ratio:.3f} ({e['uncertified_wall_s']:.1f} s against "
                value += f"{mllib})"
            out[f"certified_{gamma}"] = target(CERTIFIED_GOAL.format(gamma=gamma), value, False)
            continue
        ratio = e["certified_wall_s"] / e["mllib_wall_s"]
        value = f"{ratio:.3f} ({e['certified_wall_s']:.1f} s against {mllib})"
        out[f"certified_{gamma}"] = target(CERTIFIED_GOAL.format(gamma=gamma), value, ratio <= 0.2)
    return out


WALL_GOAL = (
    "grafting reaches MLlib's l1 objective at gamma1 {gamma} in <= 1/{share} of MLlib's wall time"
)
PASSES_GOAL = "grafting reaches MLlib's l1 objective at gamma1 {gamma} in <= 1/5 of MLlib's passes"
CERTIFIED_GOAL = "grafting ends certified at gamma1 {gamma} in <= 1/5 of MLlib's wall time"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gammas", type=float, nargs="+", default=[1e-4, 1e-5])
    parser.add_argument("--n-best", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument("--mllib-iter", type=int, default=500)
    parser.add_argument(
        "--mllib-seconds",
        type=float,
        default=0,
        help="cancel MLlib's fit after this many seconds (0: none); its row then says "
        "stopped 'time cap', with no objective",
    )
    parser.add_argument("--skip-mllib", action="store_true")
    parser.add_argument(
        "--mllib-last",
        action="store_true",
        help="run grafting first at each gamma1 (a run cut short keeps grafting's rows)",
    )
    parser.add_argument(
        "--keep-other-gammas",
        action="store_true",
        help="keep the rows of the current page at the other gamma1, each naming its run",
    )
    parser.add_argument("--solver", default="auto", help="grafting's round solver (train.solver)")
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=0,
        help="cap on grafting rounds (0: until certified); n = 1 needs about "
        "one round per non-zero weight",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=0,
        help="time cap of each grafting run (train.max_seconds; 0: none): n = 1 "
        "and 10 need hundreds of rounds",
    )
    parser.add_argument("--partitions", type=int, default=2)
    work_arguments(parser, "/tmp/sparkmaxent-grafting-bench", "grafting_vs_mllib.json")
    merge_arguments(parser)
    args = start(parser, argv)
    if args.merge:
        merge(args.output, args.merge)
        return 0

    from sparkmaxent.backends.session import spark_session
    from sparkmaxent.backends.spark import SparkBackend

    spark = spark_session("local[2]", "grafting-vs-mllib", {"spark.driver.memory": "8g"})
    train_dir, test_dir = prepared(spark, args.work, args.reuse)
    rows: list[dict] = kept_rows(args.output, args.gammas) if args.keep_other_gammas else []
    with SparkBackend(
        spark, train_dir, bias=True, partitions=args.partitions, name="grafting-bench"
    ) as backend:
        for gamma in args.gammas:
            run_gamma(args, spark, train_dir, test_dir, backend, gamma, rows)
    print_table(
        [{k: v for k, v in r.items() if k not in ("trace", "kkt")} for r in rows],
        [
            "system",
            "gamma",
            "n",
            "objective",
            "kkt_violation",
            "token_accuracy",
            "chunk_f1",
            "nonzero_weights",
            "passes",
            "wall_s",
        ],
    )
    print("targets", reach(rows))
    return 0


def row_key(row: dict) -> tuple:
    """What makes two rows one measurement: the system, gamma1, n and the
    round solver (MLlib's rows have neither n nor solver)."""
    return row["system"], f"{row['gamma']:g}", row.get("n"), row.get("solver")


#: what a row takes from its page when it does not name its run itself
RUN_KEYS = ("command", "commit", "date", "load")


def named_rows(path: str) -> list[dict]:
    """The rows of the page at ``path`` ([] without one), each naming the
    run that measured it: its own ``command``, ``commit``, ``date`` and
    ``load`` or else the page's (pages written before rows carried them)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        page = json.load(f)
    run = {k: page[k] for k in RUN_KEYS if k in page}
    return [
        placeless({**run, **r}) if "command" in run or "command" in r else r for r in page["rows"]
    ]


def merge(output: str, pages: list[str]) -> dict:
    """``--merge``: measure nothing; put the rows of ``pages`` (each run of
    its own, e.g. one gamma1) on the page ``output`` in place of its rows of
    the same measurement (``row_key``), keep its other rows, each naming the
    run that measured it, and recompute the targets over all of them."""
    rows = named_rows(output)
    for page in pages:
        rows = replace_rows(rows, named_rows(page), row_key)
    return write_result(output, rows, targets(rows), benchmark="grafting_vs_mllib")


def kept_rows(path: str, gammas: list[float]) -> list[dict]:
    """The rows of the page at ``path`` at gamma1 other than ``gammas``, each
    naming the run that measured it (``measured_by``, ``measured_commit``)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        page = json.load(f)
    kept = [r for r in page["rows"] if not any(np.isclose(r["gamma"], g) for g in gammas)]
    for row in kept:
        row.setdefault("measured_by", page["command"])
        row.setdefault("measured_commit", page["commit"])
    return kept


def run_gamma(args, spark, train_dir, test_dir, backend, gamma: float, rows: list[dict]) -> None:
    """MLlib and grafting at each n at one gamma1 (MLlib last with
    ``--mllib-last``), appended to ``rows``; the page rewritten after each."""

    def named(row: dict) -> dict:  # a row merged onto another page names its run
        return {**row, "command": command_line(), "commit": commit(), "load": load_average()}

    def mllib() -> None:
        if not args.skip_mllib:
            row = run_mllib(
                spark, train_dir, test_dir, backend, gamma, args.mllib_iter, args.mllib_seconds
            )
            rows.append(named(row))
            log.info("%s", rows[-1])
            write_result(args.output, rows, targets(rows))

    if not args.mllib_last:
        mllib()
    for n in args.n_best:
        out = os.path.join(args.work, f"graft-{gamma:g}-{n}")
        done = list(rows)

        def progress(partial, done=done):
            write_result(args.output, done + [named(partial)], targets(done))

        rows.append(
            named(
                run_grafting(
                    spark,
                    train_dir,
                    test_dir,
                    backend,
                    gamma,
                    n,
                    out,
                    args.solver,
                    args.max_rounds,
                    args.max_seconds,
                    progress,
                )  # fmt: skip
            )
        )
        log.info("%s", {k: v for k, v in rows[-1].items() if k != "trace"})
        write_result(args.output, rows, targets(rows))
    if args.mllib_last:
        mllib()
    plot(rows, gamma, os.path.splitext(args.output)[0] + f"_{gamma:g}.png")


if __name__ == "__main__":
    sys.exit(main())
