"""Bayes-factor selection (Daume III 2004) against l1 grafting and SGC on PP
attachment (Ratnaparkhi et al. 1994), with accuracy against the number of
selected features.

Data: ../shared/data/ppattach, ``training`` to train, ``devset`` for every
choice, ``test`` to report. Everything runs in-process (LocalBackend, 2
blocks) on the events the Spark ``prepare`` job writes.

Runs:

* bayes-factor, correct (Laplace) sign and printed sign, S in {1, 10, 100}
  features per round, the default prior (sigma^2 = W): no threshold, no
  choice on held-out data. Capped at ``--bf-rounds`` rounds per S (and
  OptMAP at ``--optmap-max-iter`` L-BFGS iterations per round); each row
  says whether it stopped by itself (``stopped_by_rule``). Also the
  correct sign with sigma^2 = 1 (the maxent convention), S = 100.
* l1 grafting (n_best 10): gamma1 chosen by devset accuracy from a grid.
* SGC: one run up to ``--sgc-max-features`` stages; the number of features
  (equivalently, the gain threshold reached there) chosen by devset
  accuracy along the run.

Every run records, per round, active features, devset and test accuracy,
passes and seconds (``curve``); the plot shows test accuracy against
features, a filled star where a Bayes-factor run stopped by itself, a cross
where a cap ended it.

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.bayes_factor

writes benchmarks/results/bayes_factor.json and bayes_factor.png.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

from benchmarks.common import (RESULTS, SHARED_DATA, command_line, print_table,  # noqa: E402
                               shared_corpus, write_result)

log = logging.getLogger("bayes_factor")

ROW_KEYS = ["method", "variant", "dataset", "features", "accuracy", "dev_accuracy",
            "stopped_by_rule", "passes", "wall_s"]
#: Reported for PP attachment (Ratnaparkhi et al. 1994: maxent ~81.6%; always N).
PP_REFERENCE = {"maxent_reported": "about 81-82%", "always_N": 0.5896}


def prepare_pp(work: str, data_dir: str, reuse: bool) -> dict[str, str]:
    dirs = {name: os.path.join(work, name) for name in ("train", "devset", "test")}
    if reuse and all(os.path.exists(os.path.join(d, "dataset.json")) for d in dirs.values()):
        return dirs
    from sparkmaxent.backends.session import spark_session
    from sparkmaxent.data.prepare import prepare

    spark = spark_session("local[2]", "bayes-factor-prepare", {"spark.driver.memory": "4g"})
    try:
        prepare(spark, [shared_corpus("ppattach", "training", data_dir=data_dir)], dirs["train"],
                "ppattach", partitions=2, overwrite=True)
        for name in ("devset", "test"):
            prepare(spark, [shared_corpus("ppattach", name, data_dir=data_dir)], dirs[name],
                    "ppattach", merge_duplicates=False, vocabulary=dirs["train"], overwrite=True)
    finally:
        spark.stop()
    return dirs


class Curve:
    """An on_round hook: devset and test accuracy of the weights after each round."""

    def __init__(self, dev, test):
        self.dev, self.test, self.points = dev, test, []

    def __call__(self, state) -> None:
        from sparkmaxent.train import evaluate

        w = state.weights
        self.points.append({"round": state.round, "features": int(w.nnz),
                            "dev_accuracy": evaluate(self.dev, w, None).accuracy,
                            "test_accuracy": evaluate(self.test, w, None).accuracy,
                            "passes": state.passes, "elapsed_s": state.elapsed_s})


def run(method: str, variant: str, cfg_kw: dict, backends: dict, out_dir: str) -> tuple[dict, object]:
    from sparkmaxent.config import TrainConfig
    from sparkmaxent.train import evaluate, train

    cfg = TrainConfig(method=method, backend="local", plots=False, **cfg_kw)
    curve = Curve(backends["devset"], backends["test"])
    t0 = time.perf_counter()
    res = train(backends["train"], cfg, output_dir=out_dir, on_round=curve)
    wall = time.perf_counter() - t0
    rep = res.report
    row = {"method": method, "variant": variant, "dataset": "ppattach",
           "features": int(res.weights.nnz),
           "accuracy": evaluate(backends["test"], res.weights, None).accuracy, "f1": None,
           "dev_accuracy": evaluate(backends["devset"], res.weights, None).accuracy,
           "stopped_by_rule": None, "passes": rep["passes"], "wall_s": round(wall, 1),
           "config": cfg_kw, "stopped": rep.get("stopped"), "command": command_line(),
           "curve": curve.points}
    if method == "bayes-factor":
        row.update(stopped_by_rule=rep["stopped_by_rule"], rounds=rep["rounds_run"],
                   prior_variance=rep["prior_variance"],
                   proposals_scored=rep["proposals_scored"],
                   last_round={k: rep["rounds"][-1].get(k) for k in
                               ("proposals", "positive_proposals", "beta_0", "beta",
                                "misclassified_events")} if rep["rounds"] else None)
    log.info("%s", {k: v for k, v in row.items() if k != "curve"})
    return row, res


def pp_runs(args, dirs: dict) -> tuple[list[dict], dict]:
    from sparkmaxent.backends.factory import make_backend

    backends = {"train": make_backend("local", dirs["train"], bias=True, partitions=2),
                "devset": make_backend("local", dirs["devset"], bias=True),
                "test": make_backend("local", dirs["test"], bias=True)}
    out = lambda name: os.path.join(args.work, "runs", name)  # noqa: E731
    rows, choices = [], {}

    def save():
        write_result(args.output, rows, pp_reference=PP_REFERENCE, choices=choices,
                     settings=vars(args), conll="not run (see README: time budget)")

    # l1 grafting: gamma1 by devset accuracy
    graft = []
    for gamma in args.graft_gammas:
        row, _ = run("grafting", f"gamma1={gamma:g}", {"l1": gamma, "n_best": 10},
                     backends, out(f"grafting-{gamma:g}"))
        graft.append(row)
    best = max(graft, key=lambda r: (r["dev_accuracy"], -r["features"]))
    for r in graft:
        r["chosen_on_devset"] = r is best
    choices["grafting_gamma1"] = best["config"]["l1"]
    rows += graft
    save()

    # SGC: the stage count (gain threshold) by devset accuracy along one run
    row, res = run("sgc", f"up to {args.sgc_max_features} features",
                   {"max_features": args.sgc_max_features, "gain_threshold": 0.0},
                   backends, out("sgc"))
    curve = row["curve"]
    pick = max(curve, key=lambda p: (p["dev_accuracy"], -p["features"]))
    gains = [r["gain"] for r in res.report["rounds"]]
    choices["sgc_features"] = pick["features"]
    choices["sgc_gain_threshold"] = gains[pick["round"] - 1]
    rows.append({**row, "variant": f"chosen on devset: {pick['features']} features "
                                   f"(gain threshold {gains[pick['round'] - 1]:.3g})",
                 "features": pick["features"], "accuracy": pick["test_accuracy"],
                 "dev_accuracy": pick["dev_accuracy"], "passes": pick["passes"],
                 "wall_s": pick["elapsed_s"], "chosen_on_devset": True})
    save()

    # Bayes factor: no threshold, nothing chosen on devset; the longest run last
    rounds = dict(zip(args.bf_s, args.bf_rounds))
    top = max(args.bf_s)
    plan = [(sign, S) for sign in ("laplace", "printed") for S in args.bf_s]
    plan.sort(key=lambda p: (p == ("laplace", top), p[0] == "laplace"))
    for sign, S in plan:
        if (sign, S) == ("laplace", top):  # first sigma^2 = 1 (the maxent convention)
            row, _ = run("bayes-factor", f"laplace sign, S={S}, sigma^2=1",
                         {"max_rounds": args.bf_unit_rounds, "max_iter": args.optmap_max_iter,
                          "bf_per_round": S, "prior_variance": 1.0},
                         backends, out(f"bf-laplace-{S}-s2-1"))
            rows.append(row)
            save()
        row, _ = run("bayes-factor", f"{sign} sign, S={S}",
                     {"max_rounds": rounds[S], "max_iter": args.optmap_max_iter,
                      "bf_sign": sign, "bf_per_round": S},
                     backends, out(f"bf-{sign}-{S}"))
        rows.append(row)
        save()
    return rows, choices


def plot(rows: list[dict], path: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 5.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for row in rows:
        pts = row["curve"]
        if not pts or (row["method"] == "sgc" and not row.get("chosen_on_devset")):
            continue
        x = [p["features"] for p in pts]
        y = [p["test_accuracy"] for p in pts]
        label = f"{row['method']} {row['variant']}"
        if row["method"] == "grafting":
            label += " (chosen)" if row.get("chosen_on_devset") else ""
            ax.plot(x[-1:], y[-1:], "o" if row.get("chosen_on_devset") else ".", label=label)
            continue
        line, = ax.plot(x, y, linewidth=1, label=label)
        if row["method"] == "bayes-factor":
            ax.plot(x[-1], y[-1], "*" if row["stopped_by_rule"] else "x", color=line.get_color(),
                    markersize=12 if row["stopped_by_rule"] else 8)
        else:
            ax.plot(row["features"], row["accuracy"], "s", color=line.get_color())
    ax.axhline(PP_REFERENCE["always_N"], color="grey", linestyle=":", label="always N")
    ax.set_xscale("log")
    ax.set_xlabel("selected features (non-zero weights)")
    ax.set_ylabel("test accuracy")
    ax.set_title("PP attachment: Bayes factor (* stopped by itself, x capped) vs grafting, SGC")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=SHARED_DATA, help="the shared corpora folder")
    ap.add_argument("--work", default="/tmp/sparkmaxent-bench/bayes_factor",
                    help="scratch folder for prepared data and run checkpoints (not committed)")
    ap.add_argument("--reuse", action="store_true", help="reuse the prepared data in --work")
    ap.add_argument("--output", default=os.path.join(RESULTS, "bayes_factor.json"))
    ap.add_argument("--graft-gammas", type=float, nargs="+",
                    default=[3e-3, 1e-3, 3e-4, 1e-4])
    ap.add_argument("--sgc-max-features", type=int, default=2000)
    ap.add_argument("--bf-s", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument("--bf-rounds", type=int, nargs="+", default=[200, 100, 100],
                    help="round cap of each --bf-s")
    ap.add_argument("--bf-unit-rounds", type=int, default=30,
                    help="round cap of the sigma^2 = 1 run")
    ap.add_argument("--optmap-max-iter", type=int, default=300)
    args = ap.parse_args(argv)
    if len(args.bf_rounds) != len(args.bf_s):
        ap.error(f"expected one --bf-rounds per --bf-s ({len(args.bf_s)}), got {args.bf_rounds}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    dirs = prepare_pp(os.path.join(args.work, "pp"), args.data, args.reuse)
    rows, _ = pp_runs(args, dirs)
    plot(rows, os.path.splitext(args.output)[0] + ".png")
    print_table(rows, ROW_KEYS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
