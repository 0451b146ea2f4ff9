"""Bayes-factor selection (Daume III 2004) against l1 grafting and SGC, with
accuracy (and chunk F1) against the number of selected features, on PP
attachment (Ratnaparkhi et al. 1994) and CoNLL-2000 chunking.

Data (``--datasets``, both by default; the rows of a dataset not run stay
in ``--output``):

* ``pp``: ../shared/data/ppattach, ``training`` to train, ``devset`` for
  every choice, ``test`` to report.
* ``conll``: CoNLL-2000 chunking (22 labels, the 17 templates, predicate
  cutoff 2): the first 90% of the training sentences to train, the last
  10% for every choice (chunk F1), ``test.txt`` to report. 22 labels make
  every pass about 10x a PP pass, so each run is capped at
  ``--conll-max-seconds`` (``train.max_seconds``: it ends after the first
  round past the cap; the row's ``stopped`` says so).

Everything runs in-process (LocalBackend, 2 blocks) on the events the Spark
``prepare`` job writes.

Runs, per dataset:

* bayes-factor, correct (Laplace) sign and printed sign, S in {1, 10, 100}
  features per round, the default prior (sigma^2 = W): no threshold, no
  choice on held-out data. Capped at a number of rounds per S (and OptMAP
  at ``--optmap-max-iter`` iterations per round); each row says whether it
  stopped by itself (``stopped_by_rule``). On PP also the correct sign with
  sigma^2 = 1 (the maxent convention), S = 100; on both the correct sign,
  S = 100, with the beta-binomial and the empirical-Bayes model priors
  (``train.bf_model_prior``), each also at every sigma^2 of
  ``--prior-variances`` (CoNLL: ``--conll-prior-variances``), the devset
  choosing among those runs and the default (a prior variance is
  regularization, not a threshold; the plot shows the chosen run).
* l1 grafting (n_best 10 on PP, 100 on CoNLL): gamma1 chosen by the dev
  metric (accuracy; chunk F1) from a grid.
* SGC: one run up to a number of stages; the number of features
  (equivalently, the gain threshold reached there) chosen by the dev
  metric along the run.

Every run records, per round, active features, dev and test accuracy (and
chunk F1), passes and seconds (``curve``); the plot (one panel per dataset)
shows the test score against features, a filled star where a Bayes-factor
run stopped by itself, a cross where a cap ended it.

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.bayes_factor

writes benchmarks/results/bayes_factor.json and bayes_factor.png.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass

from benchmarks.common import (
    RESULTS,
    SHARED_DATA,
    command_line,
    prepare_splits,
    print_table,
    shared_corpus,
    target,
    write_result,
)

log = logging.getLogger("bayes_factor")

ROW_KEYS = [
    "method",
    "variant",
    "dataset",
    "features",
    "accuracy",
    "f1",
    "dev_accuracy",
    "dev_f1",
    "stopped_by_rule",
    "passes",
    "wall_s",
]
#: Reported for PP attachment (Ratnaparkhi et al. 1994: maxent ~81.6%; always N).
PP_REFERENCE = {"maxent_reported": "about 81-82%", "always_N": 0.5896}


def prepare_pp(work: str, data_dir: str, reuse: bool) -> dict[str, str]:
    dirs = {name: os.path.join(work, name) for name in ("train", "devset", "test")}
    if reuse and all(os.path.exists(os.path.join(d, "dataset.json")) for d in dirs.values()):
        return dirs
    from sparkmaxent.backends.session import spark_session

    spark = spark_session("local[2]", "bayes-factor-prepare", {"spark.driver.memory": "4g"})
    try:
        sources = {"train": "training", "devset": "devset", "test": "test"}
        inputs = {
            name: [shared_corpus("ppattach", src, data_dir=data_dir)]
            for name, src in sources.items()
        }
        prepare_splits(spark, inputs, dirs, "ppattach", train_only={"partitions": 2})
    finally:
        spark.stop()
    return dirs


class Scorer:
    """Accuracy (and chunk F1 on chunking data) of weights on one held-out
    or test split."""

    def __init__(self, backend=None, chunk_dir: str | None = None):
        self.backend, self.chunk_dir = backend, chunk_dir

    def __call__(self, weights) -> tuple[float, float | None]:
        if self.chunk_dir is None:
            from sparkmaxent.selection.base import evaluate_backend

            return evaluate_backend(self.backend, weights, None).accuracy, None
        from sparkmaxent.evaluate import evaluate_dataset

        scores = evaluate_dataset(self.chunk_dir, weights.sparse(), self.backend.space, chunks=True)
        return scores["accuracy"], scores["chunks"]["f1"]


@dataclass
class Dataset:
    """One dataset's runs: train on ``train``, choose on ``dev`` by
    ``metric`` (of the Scorer's (accuracy, f1)), report on ``test``."""

    name: str
    train: object
    dev: Scorer
    test: Scorer
    metric: str  # "accuracy" or "f1"
    graft_gammas: list[float]
    graft_n_best: int
    sgc_max_features: int
    bf_rounds: dict[int, int]  # S -> round cap
    unit_rounds: int  # round cap of the sigma^2 = 1 run (0: not run)
    prior_variances: list[float]  # sigma^2 grid of the model-prior runs, chosen on dev
    max_seconds: float  # cap of every run (0: none)


class Curve:
    """An on_round hook: dev and test scores of the weights after each round."""

    def __init__(self, ds: Dataset):
        self.ds, self.points = ds, []

    def __call__(self, state) -> None:
        w = state.weights
        dev_acc, dev_f1 = self.ds.dev(w)
        acc, f1 = self.ds.test(w)
        self.points.append(
            {
                "round": state.round,
                "features": int(w.nnz),
                "dev_accuracy": dev_acc,
                "dev_f1": dev_f1,
                "test_accuracy": acc,
                "test_f1": f1,
                "passes": state.passes,
                "elapsed_s": state.elapsed_s,
            }
        )


def dev_score(ds: Dataset, point: dict) -> float:
    return point["dev_" + ds.metric]


def run(ds: Dataset, method: str, variant: str, cfg_kw: dict, out_dir: str) -> tuple[dict, object]:
    from sparkmaxent.config import train_config
    from sparkmaxent.train import train

    # the former defaults (uniform model prior, sigma^2 = W) unless a row sets
    # them, as in the committed results
    cfg_kw = {"model_prior": "uniform", "prior_variance": 0.0, **cfg_kw}
    cfg_kw = {**cfg_kw, "max_seconds": ds.max_seconds}
    cfg = train_config(method=method, backend="local", plots=False, **cfg_kw)
    curve = Curve(ds)
    t0 = time.perf_counter()
    res = train(ds.train, cfg, output_dir=out_dir, on_round=curve)
    wall = time.perf_counter() - t0
    rep = res.report
    acc, f1 = ds.test(res.weights)
    dev_acc, dev_f1 = ds.dev(res.weights)
    row = {
        "method": method,
        "variant": variant,
        "dataset": ds.name,
        "features": int(res.weights.nnz),
        "accuracy": acc,
        "f1": f1,
        "dev_accuracy": dev_acc,
        "dev_f1": dev_f1,
        "stopped_by_rule": None,
        "passes": rep["passes"],
        "wall_s": round(wall, 1),
        "config": cfg_kw,
        "stopped": rep.get("stopped"),
        "command": command_line(),
        "curve": curve.points,
    }
    if method == "bayes-factor":
        row.update(
            stopped_by_rule=rep["stopped_by_rule"],
            rounds=rep["rounds_run"],
            optmap_solvers=dict(
                Counter(r["optmap_solver"] for r in rep["rounds"] if "optmap_solver" in r)
            ),
            prior_variance=rep["prior_variance"],
            proposals_scored=rep["proposals_scored"],
            last_round={
                k: rep["rounds"][-1].get(k)
                for k in (
                    "proposals",
                    "positive_proposals",
                    "beta_0",
                    "beta",
                    "misclassified_events",
                )
            }
            if rep["rounds"]
            else None,
        )
    log.info("%s", {k: v for k, v in row.items() if k != "curve"})
    return row, res


def dataset_runs(args, ds: Dataset, save) -> tuple[list[dict], dict]:
    """l1 grafting and SGC with their settings chosen on dev, then the
    Bayes-factor runs (nothing chosen); ``save(rows, choices)`` after each."""
    out = lambda name: os.path.join(args.work, "runs", ds.name, name)  # noqa: E731
    rows, choices = [], {}

    # l1 grafting: gamma1 by the dev metric; ties to fewer features
    graft = []
    for gamma in ds.graft_gammas:
        row, _ = run(
            ds,
            "grafting",
            f"gamma1={gamma:g}, n={ds.graft_n_best}",
            {"l1": gamma, "n_best": ds.graft_n_best},
            out(f"grafting-{gamma:g}"),
        )
        graft.append(row)
    best = max(graft, key=lambda r: (r["dev_" + ds.metric], -r["features"]))
    for r in graft:
        r["chosen_on_devset"] = r is best
    choices["grafting_gamma1"] = best["config"]["l1"]
    rows += graft
    save(rows, choices)

    # SGC: the stage count (gain threshold) by the dev metric along one run
    row, res = run(
        ds,
        "sgc",
        f"up to {ds.sgc_max_features} features",
        {"max_features": ds.sgc_max_features, "gain_threshold": 0.0},
        out("sgc"),
    )
    from sparkmaxent.methods.round_details import IfsStage

    pick = max(row["curve"], key=lambda p: (dev_score(ds, p), -p["features"]))
    gain = res.report.rounds[pick["round"] - 1].detail_as(IfsStage).best.gain
    choices.update(sgc_features=pick["features"], sgc_gain_threshold=gain)
    rows.append(
        {
            **row,
            "variant": f"chosen on devset: {pick['features']} features (gain threshold {gain:.3g})",
            "features": pick["features"],
            "accuracy": pick["test_accuracy"],
            "f1": pick["test_f1"],
            "dev_accuracy": pick["dev_accuracy"],
            "dev_f1": pick["dev_f1"],
            "passes": pick["passes"],
            "wall_s": pick["elapsed_s"],
            "chosen_on_devset": True,
        }
    )
    save(rows, choices)

    # Bayes factor: no threshold, nothing chosen on dev; the longest run last
    top = max(ds.bf_rounds)
    plan = [(sign, S) for sign in ("laplace", "printed") for S in ds.bf_rounds]
    plan.sort(key=lambda p: (p == ("laplace", top), p[0] == "laplace"))
    for sign, S in plan:
        if (sign, S) == ("laplace", top) and ds.unit_rounds:
            # first sigma^2 = 1 (the maxent convention)
            row, _ = run(
                ds,
                "bayes-factor",
                f"laplace sign, S={S}, sigma^2=1",
                {
                    "max_rounds": ds.unit_rounds,
                    "max_iter": args.optmap_max_iter,
                    "per_round": S,
                    "prior_variance": 1.0,
                },
                out(f"bf-laplace-{S}-s2-1"),
            )
            rows.append(row)
            save(rows, choices)
        row, _ = run(
            ds,
            "bayes-factor",
            f"{sign} sign, S={S}",
            {
                "max_rounds": ds.bf_rounds[S],
                "max_iter": args.optmap_max_iter,
                "sign": sign,
                "per_round": S,
            },
            out(f"bf-{sign}-{S}"),
        )
        rows.append(row)
        save(rows, choices)
    # the multiplicity corrections (methods/bayes.py, "Model prior"): no parameter either;
    # then each at the sigma^2 grid, the devset choosing among those runs and the default
    # (a prior variance is regularization, not a threshold)
    for prior in ("beta-binomial", "empirical-bayes"):
        kw = {
            "max_rounds": ds.bf_rounds[top],
            "max_iter": args.optmap_max_iter,
            "per_round": top,
            "model_prior": prior,
        }
        grid = []
        for s2 in [0.0] + ds.prior_variances:
            label, tag = (f", sigma^2={s2:g}", f"-s2-{s2:g}") if s2 else ("", "")
            row, _ = run(
                ds,
                "bayes-factor",
                f"laplace sign, S={top}, {prior} model prior{label}",
                {**kw, "prior_variance": s2},
                out(f"bf-laplace-{top}-{prior}{tag}"),
            )
            grid.append(row)
            rows.append(row)
            save(rows, choices)
        if len(grid) > 1:
            best = max(grid, key=lambda r: (r["dev_" + ds.metric], -r["features"]))
            for r in grid:
                r["chosen_on_devset"] = r is best
            choices[f"bf_{prior}_sigma2"] = best["prior_variance"]
            save(rows, choices)
    return rows, choices


def pp_dataset(args) -> Dataset:
    from sparkmaxent.backends.factory import make_backend

    dirs = prepare_pp(os.path.join(args.work, "pp"), args.data, args.reuse)
    return Dataset(
        "ppattach",
        make_backend("local", dirs["train"], bias=True, partitions=2),
        Scorer(make_backend("local", dirs["devset"], bias=True)),
        Scorer(make_backend("local", dirs["test"], bias=True)),
        "accuracy",
        args.graft_gammas,
        10,
        args.sgc_max_features,
        dict(zip(args.bf_s, args.bf_rounds)),
        args.bf_unit_rounds,
        args.prior_variances,
        0.0,
    )


def conll_dataset(args) -> Dataset:
    """CoNLL-2000 chunking (22 labels, 17 templates, cutoff 2): train on the
    first 90% of the training sentences, choose on the last 10%, report on
    test (every method on the same split)."""
    from benchmarks.sgc_vs_ifs import local_backend, prepare_all

    work = os.path.join(args.work, "conll")
    dirs = prepare_all(work, args.reuse, 0.1, {"mode": "chunk"})
    # test in the predicate vocabulary of the part trained on ("test" has the whole file's)
    test = os.path.join(work, "test-fit")
    if not (args.reuse and os.path.exists(os.path.join(test, "dataset.json"))):
        from sparkmaxent.backends.session import spark_session
        from sparkmaxent.data.prepare import prepare

        spark = spark_session("local[2]", "bayes-factor-prepare", {"spark.driver.memory": "4g"})
        try:
            prepare(
                spark,
                [shared_corpus("conll2000", "test.txt", data_dir=args.data)],
                test,
                "conll",
                options={"mode": "chunk"},
                merge_duplicates=False,
                vocabulary=dirs["fit"],
                overwrite=True,
            )
        finally:
            spark.stop()
    train = local_backend(dirs["fit"])
    return Dataset(
        "conll2000-chunking",
        train,
        Scorer(train, dirs["dev"]),
        Scorer(train, test),
        "f1",
        args.conll_graft_gammas,
        100,
        args.conll_sgc_max_features,
        dict(zip(args.bf_s, args.conll_bf_rounds)),
        0,
        args.conll_prior_variances,
        args.conll_max_seconds,
    )


def plot(rows: list[dict], path: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = [d for d in DATASETS.values() if any(r["dataset"] == d for r in rows)]
    fig = Figure(figsize=(9 * len(names), 5.5))
    FigureCanvasAgg(fig)
    for i, name in enumerate(names):
        ax = fig.add_subplot(1, len(names), i + 1)
        chunking = name != "ppattach"
        key = "test_f1" if chunking else "test_accuracy"
        for row in (r for r in rows if r["dataset"] == name):
            pts = row["curve"]
            # grafting shows every gamma1 as a point; other runs only when chosen
            if not pts or (row["method"] != "grafting" and row.get("chosen_on_devset") is False):
                continue
            x = [p["features"] for p in pts]
            y = [p[key] for p in pts]
            label = f"{row['method']} {row['variant']}"
            if row["method"] == "grafting":
                label += " (chosen)" if row.get("chosen_on_devset") else ""
                ax.plot(x[-1:], y[-1:], "o" if row.get("chosen_on_devset") else ".", label=label)
                continue
            (line,) = ax.plot(x, y, linewidth=1, label=label)
            if row["method"] == "bayes-factor":
                ax.plot(
                    x[-1],
                    y[-1],
                    "*" if row["stopped_by_rule"] else "x",
                    color=line.get_color(),
                    markersize=12 if row["stopped_by_rule"] else 8,
                )
            else:
                ax.plot(
                    row["features"],
                    row["f1" if chunking else "accuracy"],
                    "s",
                    color=line.get_color(),
                )
        if not chunking:
            ax.axhline(PP_REFERENCE["always_N"], color="grey", linestyle=":", label="always N")
        ax.set_xscale("log")
        ax.set_xlabel("selected features (non-zero weights)")
        ax.set_ylabel("test chunk F1" if chunking else "test accuracy")
        ax.set_title(
            f"{name}: Bayes factor (* stopped by itself, x capped) vs grafting, SGC", fontsize=9
        )
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


DATASETS = {"pp": "ppattach", "conll": "conll2000-chunking"}


def targets(rows: list[dict]) -> dict:
    """Issue 7's target per dataset: the Bayes factor with the correct
    (Laplace) sign and no tuned threshold within 1 point of the better of
    grafting and SGC chosen on the devset, with no more features than
    either (chunk F1 where there is one, else accuracy)."""
    out = {}
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        ds = [r for r in rows if r["dataset"] == dataset]

        def score(r: dict) -> float:
            return 100 * (r["f1"] if r.get("f1") is not None else r["accuracy"])

        chosen = [r for r in ds if r["method"] in ("grafting", "sgc") and r.get("chosen_on_devset")]
        ours = [
            r
            for r in ds
            if r["method"] == "bayes-factor"
            and r["variant"].startswith("laplace sign")
            and "sigma^2" not in r["variant"]
        ]
        if not chosen or not ours:
            continue
        best = max(chosen, key=score)
        cap = min(r["features"] for r in chosen)
        within = [r for r in ours if r["features"] <= cap]
        top = max(within, key=score) if within else max(ours, key=score)
        value = (
            f"{score(top):.2f} with {top['features']} features ({top['variant']}) against "
            f"{best['method']}'s {score(best):.2f}; at most {cap} features allowed"
        )
        met = bool(within) and score(top) >= score(best) - 1
        goal = (
            f"{dataset}: Bayes factor (correct sign, no tuned threshold) within 1 point of the "
            "better of grafting and SGC with no more features than either"
        )
        out[dataset] = target(goal, value, met)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=SHARED_DATA, help="the shared corpora folder")
    ap.add_argument(
        "--work",
        default="/tmp/sparkmaxent-bench/bayes_factor",
        help="scratch folder for prepared data and run checkpoints (not committed)",
    )
    ap.add_argument("--reuse", action="store_true", help="reuse the prepared data in --work")
    ap.add_argument("--output", default=os.path.join(RESULTS, "bayes_factor.json"))
    ap.add_argument(
        "--datasets",
        nargs="+",
        choices=sorted(DATASETS),
        default=["pp", "conll"],
        help="datasets to run; the rows of the others stay in --output",
    )
    ap.add_argument("--graft-gammas", type=float, nargs="+", default=[3e-3, 1e-3, 3e-4, 1e-4])
    ap.add_argument("--sgc-max-features", type=int, default=2000)
    ap.add_argument("--bf-s", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument(
        "--bf-rounds",
        type=int,
        nargs="+",
        default=[200, 100, 100],
        help="PP: round cap of each --bf-s",
    )
    ap.add_argument(
        "--bf-unit-rounds", type=int, default=30, help="PP: round cap of the sigma^2 = 1 run"
    )
    ap.add_argument(
        "--prior-variances",
        type=float,
        nargs="*",
        default=[0.3, 1.0, 3.0, 10.0, 100.0],
        help="PP: sigma^2 values of the runs with each model prior besides the "
        "default W; the devset marks one of them chosen",
    )
    ap.add_argument("--optmap-max-iter", type=int, default=300)
    ap.add_argument("--conll-graft-gammas", type=float, nargs="+", default=[1e-4, 3e-5])
    ap.add_argument("--conll-sgc-max-features", type=int, default=2000)
    ap.add_argument(
        "--conll-bf-rounds",
        type=int,
        nargs="+",
        default=[200, 100, 100],
        help="CoNLL: round cap of each --bf-s",
    )
    ap.add_argument(
        "--conll-prior-variances",
        type=float,
        nargs="*",
        default=[1.0],
        help="CoNLL: as --prior-variances (each run takes --conll-max-seconds)",
    )
    ap.add_argument(
        "--conll-max-seconds",
        type=float,
        default=300.0,
        help="CoNLL: train.max_seconds of every run (0: none); 22 labels make each run long",
    )
    args = ap.parse_args(argv)
    for key, name in (("pp", "bf_rounds"), ("conll", "conll_bf_rounds")):
        if key in args.datasets and len(getattr(args, name)) != len(args.bf_s):
            ap.error(
                f"expected one --{name.replace('_', '-')} per --bf-s ({len(args.bf_s)}), "
                f"got {getattr(args, name)}"
            )
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    previous = {"rows": []}
    if os.path.exists(args.output):  # the page's rows of the datasets not run now stay
        with open(args.output) as f:
            previous = json.load(f)
    run_names = {DATASETS[d] for d in args.datasets}
    kept = [r for r in previous["rows"] if r["dataset"] not in run_names]
    rows: list[dict] = []

    def save(ds_rows: list[dict], ds_choices: dict) -> None:
        logging.getLogger("bayes_factor").info("chosen on the devset: %s", ds_choices)
        page = kept + rows + ds_rows
        write_result(args.output, page, targets(page))

    for key in ("pp", "conll"):
        if key in args.datasets:
            ds = pp_dataset(args) if key == "pp" else conll_dataset(args)
            ds_rows, ds_choices = dataset_runs(args, ds, save)
            rows += ds_rows
    all_rows = kept + rows
    plot(all_rows, os.path.splitext(args.output)[0] + ".png")
    print_table(all_rows, ROW_KEYS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
