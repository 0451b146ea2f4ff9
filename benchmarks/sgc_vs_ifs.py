"""Selective Gain Computation against incremental feature selection on
CoNLL-2000 Base-NP chunking (Zhou et al. 2003, Figures 3, 4 and 5).

One run, in-process (LocalBackend, 2 blocks: the gain kernels are the ones
the Spark backend runs; the figures compared here are gain evaluations,
passes and the ratio of wall times, which the backend does not change):

* **Speed** (Figures 3 and 4): gain evaluations, passes and wall time per
  stage for IFS (``--ifs-stages``, it is slow), SGC and SGC with look-ahead
  500, and their ratios over the stages both ran. Targets of issue 4: SGC
  >= 100x fewer gain evaluations per stage than IFS, >= 20x less wall time.
* **Quality** (Figure 5, the Base-NP result): chunk precision / recall / F1
  on test at 100 .. 5,000 selected features for IFS (as far as it ran), SGC,
  SGC with look-ahead, the n most frequent features (count cutoff), and l2
  over all features. ``f1`` is the model as selected (only each new weight
  was fitted, the paper's model); ``refit_f1`` re-fits the same features
  with l2 (``train.reestimate_every``'s final re-estimation). gamma2 of the
  l2 fits is chosen by chunk F1 on the last 10% of the training sentences,
  never on test. Target: F1 >= 92.5 with at most 1,160 features.

    python -m benchmarks.sgc_vs_ifs                       # the full run (long)
    python -m benchmarks.sgc_vs_ifs --ifs-stages 5 --max-features 200 --lookahead-max-features 200

Writes benchmarks/results/sgc_vs_ifs.json (rows: method, features,
precision, recall, f1, cumulative gain_evaluations / passes / wall_s; extra
keys speed, stages, agreement, heldout), sgc_vs_ifs_f1.png (F1 against
features) and sgc_vs_ifs_gains.png (gain evaluations per stage).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import numpy as np

from benchmarks.common import (
    print_table,
    shared_corpus,
    start,
    target,
    work_arguments,
    write_result,
)

log = logging.getLogger("sgc_vs_ifs")

CHECKPOINTS = (100, 200, 500, 1000, 1160, 2000, 3000, 5000)
L2_GRID = (1e-5, 3e-6, 1e-6)
# l2 fits of few features converge slowly to 1e-7; 1e-5 moves F1 by < 0.01
REFIT_GTOL = 1e-5
ROW_KEYS = [
    "method",
    "features",
    "precision",
    "recall",
    "f1",
    "refit_f1",
    "gain_evaluations",
    "passes",
    "wall_s",
]
BASENP = {"mode": "basenp"}


def prepare_all(
    work: str,
    reuse: bool,
    dev_fraction: float,
    options: dict = BASENP,
    sources: tuple[str, str] | None = None,
) -> dict:
    """Train/test (Base-NP unless ``options`` say otherwise) and a fit/dev
    split of train, prepared once by Spark; ``sources``: the (train, test)
    CoNLL files, by default the shared CoNLL-2000 corpus."""
    from benchmarks.conll2000_baselines import split_sentences
    from sparkmaxent.backends.session import spark_session
    from sparkmaxent.data.prepare import prepare

    dirs = {k: os.path.join(work, k) for k in ("train", "test", "fit", "dev")}
    if reuse and all(os.path.exists(os.path.join(d, "dataset.json")) for d in dirs.values()):
        return dirs
    train_txt, test_txt = sources or (
        shared_corpus("conll2000", "train.txt"),
        shared_corpus("conll2000", "test.txt"),
    )
    fit_txt, dev_txt = os.path.join(work, "fit.txt"), os.path.join(work, "dev.txt")
    os.makedirs(work, exist_ok=True)
    split_sentences(train_txt, fit_txt, dev_txt, dev_fraction)
    spark = spark_session("local[2]", "sgc-vs-ifs-prepare", {"spark.driver.memory": "4g"})
    try:
        for train_in, test_in, train_out, test_out in (
            (train_txt, test_txt, dirs["train"], dirs["test"]),
            (fit_txt, dev_txt, dirs["fit"], dirs["dev"]),
        ):
            prepare(
                spark, [train_in], train_out, "conll", options=options, cutoff=2, overwrite=True
            )
            prepare(
                spark,
                [test_in],
                test_out,
                "conll",
                options=options,
                merge_duplicates=False,
                vocabulary=train_out,
                overwrite=True,
            )
    finally:
        spark.stop()
    return dirs


def local_backend(dataset_dir: str):
    from sparkmaxent.backends import LocalBackend
    from sparkmaxent.data.load import read_blocks
    from sparkmaxent.data.schema import DatasetInfo

    info = DatasetInfo.load(dataset_dir)
    return LocalBackend(read_blocks(dataset_dir, info, n_blocks=2), info.space(bias=True), info)


def chunk_scores(test_dir: str, weights, space) -> dict:
    from sparkmaxent.evaluate import evaluate_dataset

    c = evaluate_dataset(test_dir, weights, space, chunks=True)["chunks"]
    return {"precision": 100 * c["precision"], "recall": 100 * c["recall"], "f1": 100 * c["f1"]}


def fit_l2(backend, ids, gamma2: float, start=None, gtol: float = 1e-7):
    """l2 fit over ``ids`` (None: all features), as the l2 method does."""
    from sparkmaxent.config import train_config
    from sparkmaxent.methods.baselines import fit_smooth
    from sparkmaxent.selection.base import TrainingContext

    ctx = TrainingContext(backend, train_config(method="l2", l2=gamma2, gtol=gtol))
    return fit_smooth(ctx, ids, gamma2, start=start)


def choose_l2(dirs: dict) -> tuple[float, dict]:
    """gamma2 by chunk F1 on the held-out sentences (ties: the stronger)."""
    fit = local_backend(dirs["fit"])
    scores = {}
    for gamma2 in L2_GRID:
        res = fit_l2(fit, None, gamma2, gtol=1e-5)  # a choice, not the reported fit
        scores[gamma2] = chunk_scores(dirs["dev"], res.weights, fit.space)["f1"]
        log.info("held-out: l2 %g -> chunk F1 %.2f", gamma2, scores[gamma2])
    best = max(sorted(L2_GRID, reverse=True), key=lambda g: scores[g])
    return best, {str(g): f for g, f in scores.items()}


def run_selection(
    backend,
    method: str,
    max_features: int,
    sgc_batch: int,
    lookahead: int,
    test_dir: str,
    gamma2: float,
    reestimate_every: int = 0,
) -> tuple[list[dict], dict]:
    """One selection run; rows at each checkpoint, and the stage trace.
    With ``reestimate_every`` = r all selected weights are re-fitted (l2,
    gamma2) every r stages, and the rows are labelled ``<method>-reestimate-r``."""
    from sparkmaxent.config import train_config
    from sparkmaxent.kernels import Weights
    from sparkmaxent.methods.round_details import IfsStage
    from sparkmaxent.train import train

    snaps: dict[int, dict] = {}
    evaluations = [0]

    def on_round(state) -> None:
        evaluations[0] += state.trace[-1].detail_as(IfsStage).gain_evaluations
        n = len(state.weights.values)
        if n in CHECKPOINTS:
            snaps[n] = {
                "weights": state.weights,
                "gain_evaluations": evaluations[0],
                "passes": state.passes,
                "wall_s": state.elapsed_s,
            }

    cfg = train_config(
        method=method,
        max_features=max_features,
        batch=sgc_batch,
        lookahead=lookahead,
        gain_threshold=0.0,
        plots=False,
        reestimate_every=reestimate_every,
        l2=gamma2,
        gtol=REFIT_GTOL,
        gain_prior_variance=0.0,  # Zhou et al.'s plain gains, as in the committed results
    )
    label = f"{method}-reestimate-{reestimate_every}" if reestimate_every else method
    t0 = time.perf_counter()
    res = train(backend, cfg, on_round=on_round)
    log.info("%s: %d stages in %.0f s", method, res.report.fit["stages"], time.perf_counter() - t0)
    rows = []
    for n, snap in sorted(snaps.items()):
        w: Weights = snap["weights"]
        refit = fit_l2(backend, w.active_ids(), gamma2, start=w, gtol=REFIT_GTOL)
        rows.append(
            {
                "method": label,
                "features": n,
                **chunk_scores(test_dir, w, backend.space),
                "refit_f1": chunk_scores(test_dir, refit.weights, backend.space)["f1"],
                "gain_evaluations": snap["gain_evaluations"],
                "passes": snap["passes"],
                "wall_s": round(snap["wall_s"], 2),
            }
        )
        log.info("%s", rows[-1])
    stages = [(r, r.detail_as(IfsStage)) for r in res.report.rounds]
    trace = [
        {
            "stage": r.round,
            "feature": s.best.feature,
            "feature_name": s.best.feature_name,
            "gain": s.best.gain,
            "gain_evaluations": s.gain_evaluations,
            "passes": s.stage_passes,
            "elapsed_s": r.elapsed_s,
        }
        for r, s in stages
    ]
    return rows, {
        "trace": trace,
        "stopped": res.report.stop.message if res.report.stop else None,
        "candidates": res.report.fit["candidates"],
    }


def cutoff_rows(backend, test_dir: str, gamma2: float, largest: int) -> list[dict]:
    """The n most frequent features (ties: lower id), fitted with l2."""
    from sparkmaxent.kernels.stats import FeatureCountTask

    counts = backend.run(FeatureCountTask()).counts
    order = np.argsort(-counts, kind="stable")
    rows = []
    for n in (c for c in CHECKPOINTS if c <= largest):
        ids = np.sort(order[:n])
        res = fit_l2(backend, ids, gamma2, gtol=REFIT_GTOL)
        rows.append(
            {
                "method": "cutoff",
                "features": n,
                "min_count": int(counts[order[n - 1]]),
                **chunk_scores(test_dir, res.weights, backend.space),
                "passes": res.report["evaluations"],
            }
        )
        log.info("%s", rows[-1])
    return rows


def speed_summary(stages: dict) -> dict:
    """Per-method means and the IFS / SGC ratios over the stages both ran."""
    out = {}
    for method, s in stages.items():
        t = s["trace"]
        out[method] = {
            "stages": len(t),
            "mean_gain_evaluations_per_stage": float(np.mean([r["gain_evaluations"] for r in t]))
            if t
            else 0.0,
            "mean_passes_per_stage": float(np.mean([r["passes"] for r in t])) if t else 0.0,
            "wall_s": t[-1]["elapsed_s"] if t else 0.0,
        }
    if "ifs" in stages:
        ifs = stages["ifs"]["trace"]
        for method in ("sgc", "sgc-lookahead"):
            if method not in stages or not ifs:
                continue
            other = stages[method]["trace"]
            n = min(len(ifs), len(other))
            ev = np.mean([r["gain_evaluations"] for r in ifs[:n]]) / np.mean(
                [r["gain_evaluations"] for r in other[:n]]
            )
            out[f"ifs_over_{method}"] = {
                "common_stages": n,
                "gain_evaluations_ratio": float(ev),
                "wall_time_ratio": float(ifs[n - 1]["elapsed_s"] / other[n - 1]["elapsed_s"]),
                "targets": {"gain_evaluations_ratio": 100, "wall_time_ratio": 20},
            }
    return out


def agreement(stages: dict) -> dict:
    from sparkmaxent.methods.ifs import compare_selections

    out = {}
    if "ifs" not in stages:
        return out
    for method in ("sgc", "sgc-lookahead"):
        if method in stages:
            d = compare_selections(stages["ifs"]["trace"], stages[method]["trace"])
            out[method] = {
                "agree_for_stages": d.agree,
                "first_difference_stage": d.stage,
                "ties": d.ties,
                "features": d.features,
                "gains": d.gains,
            }
    return out


def plot(rows: list[dict], stages: dict, base: str) -> None:
    """Figure 5's shape (F1 against features) and Figure 3's (gain
    evaluations per stage)."""
    fig, ax = _figure()
    styles = {"ifs": "o-", "sgc": "s-", "sgc-lookahead": "^--", "cutoff": "x:"}
    methods = dict.fromkeys(r["method"] for r in rows if r["method"] != "l2-all")
    for method in methods:
        style = styles.get(method, "d-.")
        pts = [(r["features"], r["f1"]) for r in rows if r["method"] == method]
        if pts:
            ax.plot(*zip(*pts), style, label=method)
        refit = [
            (r["features"], r["refit_f1"])
            for r in rows
            if r["method"] == method and r.get("refit_f1") is not None
        ]
        if refit and method == "sgc":
            ax.plot(*zip(*refit), "s:", color="gray", label="sgc, refitted with l2")
    for r in rows:
        if r["method"] == "l2-all":
            ax.axhline(
                r["f1"], color="k", linestyle="--", label=f"l2, all {r['features']:,} features"
            )
    ax.plot(
        [1160],
        [2 * 92.75 * 93.25 / (92.75 + 93.25)],
        "r*",
        markersize=12,
        label="Zhou et al. 2003, SGC (1,160)",
    )
    ax.axhline(92.5, color="r", linewidth=0.5, label="target 92.5")
    ax.set_xscale("log")
    _finish(fig, ax, "selected features", "Base-NP chunk F1 (test, %)", base + "_f1.png")

    fig, ax = _figure()
    for method, s in stages.items():
        t = s["trace"]
        ax.plot(
            [r["stage"] for r in t],
            [max(r["gain_evaluations"], 0.5) for r in t],
            ".",
            markersize=3,
            label=method,
        )
    ax.set_yscale("log")
    _finish(
        fig, ax, "stage (selected features)", "gain evaluations in the stage", base + "_gains.png"
    )


def _figure():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5))
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _finish(fig, ax, xlabel: str, ylabel: str, path: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def targets(rows: list[dict]) -> dict:
    """Zhou et al.'s Base-NP figure as a target: SGC's chunk F1 >= 92.5
    with at most 1,160 features."""
    sgc = [r for r in rows if r["method"].startswith("sgc") and r["features"] <= 1160]
    if not sgc:
        return {}
    best = max(sgc, key=lambda r: r["f1"])
    goal = "SGC chunk F1 >= 92.5 on CoNLL-2000 Base-NP with at most 1,160 features"
    value = f"{best['f1']:.2f} at best ({best['method']}, {best['features']} features)"
    return {"f1": target(goal, value, best["f1"] >= 92.5)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ifs-stages", type=int, default=100)
    parser.add_argument("--max-features", type=int, default=5000, help="SGC's last stage")
    parser.add_argument("--lookahead-max-features", type=int, default=5000)
    parser.add_argument("--sgc-batch", type=int, default=32)
    parser.add_argument("--lookahead", type=int, default=500)
    parser.add_argument("--dev-fraction", type=float, default=0.1)
    parser.add_argument(
        "--reestimate-every",
        type=int,
        default=0,
        help="also run SGC re-fitting all selected weights every r stages",
    )
    parser.add_argument("--reestimate-max-features", type=int, default=1160)
    parser.add_argument(
        "--skip-baselines",
        action="store_true",
        help="no l2-all and cutoff rows (e.g. a second process for one method)",
    )
    parser.add_argument(
        "--l2",
        type=float,
        help=f"gamma2 of the l2 fits (default: chosen on the held-out sentences among {L2_GRID})",
    )
    work_arguments(parser, "/tmp/sparkmaxent-sgc-bench", "sgc_vs_ifs.json")
    args = start(parser, argv)

    t_start = time.perf_counter()
    dirs = prepare_all(args.work, args.reuse, args.dev_fraction)
    gamma2, heldout = (args.l2, "given") if args.l2 else choose_l2(dirs)
    log.info("chosen on held-out: l2 gamma2 = %g", gamma2)
    backend = local_backend(dirs["train"])
    rows: list[dict] = []
    stages: dict[str, dict] = {}
    extra = {
        "heldout": {
            "gamma2": gamma2,
            "chunk_f1_by_gamma2": heldout,
            "dev_fraction": args.dev_fraction,
        },
        "data": "CoNLL-2000 Base-NP (NP chunks only), 17 templates, cutoff 2",
        "candidate_features": backend.space.n_features,
        "backend": "local (in-process, 2 blocks)",
        "settings": {
            "ifs_stages": args.ifs_stages,
            "sgc_batch": args.sgc_batch,
            "lookahead": args.lookahead,
            "max_features": args.max_features,
            "lookahead_max_features": args.lookahead_max_features,
        },
    }

    def save() -> None:
        extra.update(
            speed=speed_summary(stages),
            agreement=agreement(stages),
            stages=stages,
            total_wall_s=round(time.perf_counter() - t_start, 1),
        )
        write_result(args.output, rows, targets(rows))
        plot(rows, stages, os.path.splitext(args.output)[0])

    if not args.skip_baselines:
        t0 = time.perf_counter()
        full = fit_l2(backend, None, gamma2)
        rows.append(
            {
                "method": "l2-all",
                "features": int(np.count_nonzero(full.weights.values)),
                **chunk_scores(dirs["test"], full.weights, backend.space),
                "passes": full.report["evaluations"],
                "wall_s": round(time.perf_counter() - t0, 1),
            }
        )
        rows += cutoff_rows(backend, dirs["test"], gamma2, args.max_features)
        save()
    for method, max_features in (
        ("ifs", args.ifs_stages),
        ("sgc", args.max_features),
        ("sgc-lookahead", args.lookahead_max_features),
    ):
        if max_features <= 0:
            continue
        method_rows, stages[method] = run_selection(
            backend, method, max_features, args.sgc_batch, args.lookahead, dirs["test"], gamma2
        )
        rows += method_rows
        save()
    if args.reestimate_every and args.reestimate_max_features:
        method_rows, trace = run_selection(
            backend,
            "sgc",
            args.reestimate_max_features,
            args.sgc_batch,
            args.lookahead,
            dirs["test"],
            gamma2,
            args.reestimate_every,
        )
        rows += method_rows
        stages[method_rows[0]["method"] if method_rows else "sgc-reestimate"] = trace
        save()
    print_table(rows, ROW_KEYS)
    for key, value in extra["speed"].items():
        print(key, value)
    print("agreement", extra["agreement"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
