"""Riezler & Vasserman (2004), Tables 2 and 3 and Figure 2, in shape, on
CoNLL-2000 chunking (the PARC 700 data is not available; issue 3).

**Table 2** (``rows``): one row per method, each fitted on the whole training
file and scored on test:

=========  ===============================================================
row        sparkmaxent configuration
=========  ===============================================================
mle        ``method = "mle"``
std        ``method = "mle"``, ``standardize = true`` (standardized features)
l0         ``method = "cutoff"``: features counted >= k, MLE over those
l2         ``method = "l2"`` (Gaussian prior, gamma2)
grafting   ``method = "grafting"``: l1 n-best grafting (gamma1, n = --n-best)
mle-ifs    ``method = "mle-ifs"``: gradient-test grafting, threshold t, no prior
l2-ifs     ``method = "l2-ifs"``: the same with an l2 prior (gamma2, t)
=========  ===============================================================

with chunk F1 and token accuracy on test, compression (share of the
candidate features left out: 1 - non-zero weights / candidates), optimizer
iterations (for the grafting family summed over the rounds' solver runs),
data passes and wall time.

**Table 3 / Figure 2** (``n_best_rows``, ``riezler_tables_n.png``): l1
grafting at the chosen gamma1 with n-best n in --n-values (1, 10, 100,
1000): chunk F1, iterations, passes, time. n = 1 needs about one round per
non-zero weight: drop it from --n-values or cap it with --n1-max-rounds (the
row then says ``converged: false`` and why it stopped).

**Choices on held-out data, never on test.** The last --dev-fraction of the
training sentences is held out (``conll2000_baselines.split_sentences``); on
the rest ("fit") each candidate setting is trained (in-process, looser
tolerance --select-gtol and cap --select-max-iter: a choice, not a reported
fit) and scored by chunk F1 on the held-out part ("dev"). Grids (defaults):

* l2: gamma2 in --l2-grid (1e-5, 3e-6, 1e-6; as conll2000_baselines);
* l0: cutoff k in --cutoff-grid (2, 3, 5, 7);
* grafting: gamma1 in --l1-grid (1e-4, 3e-5, 1e-5), at n = --n-best;
* mle-ifs: threshold t in --threshold-grid (1e-3, 3e-4, 1e-4), n = --n-best;
* l2-ifs: t in --threshold-grid and gamma2 in --l2-ifs-grid (default: the
  gamma2 chosen for l2).

Ties go to the stronger regularization (larger gamma, cutoff or threshold;
for l2-ifs the threshold first): :func:`choose`. The dev scores are cached in
``<work>/riezler_heldout.json``, so an interrupted choice resumes.

Results are written after every fit (``--output``), with the held-out
choices as extra key ``heldout``. ``--resume`` keeps the rows already there
whose configuration is the same (and those of methods not run this time),
and continues grafting-family fits from their per-round checkpoints in
``<work>/runs``: a long run can be interrupted, or run in parts
(``--methods mle,std,l0,l2 --n-values ''`` first, then the rest).

Cost: the grafting family dominates. Measured in-process on the full data
(2.2M candidates, loaded machine): a loss+gradient pass over all features
about 0.4 s of CPU, over an active set about 0.2 s; L-BFGS-B rounds at the
default tolerances take a few hundred passes each (README, Grafting), and
n = 10 needs ten times the rounds of n = 100. --select-max-seconds and
--max-seconds cap each grafting-family fit (train.max_seconds: it ends
after the first round past the cap); a capped fit is scored where it
stopped and says so (``capped_at`` in the held-out cache, ``converged:
false`` and ``stopped`` in a row). Usage::

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.riezler_tables      # full (long)
    # quick look: few methods, one-point grids, a corpus subset, output in /tmp
    ... -m benchmarks.riezler_tables --max-sentences 400 --work /tmp/rz --output /tmp/rz.json \\
        --methods l2,grafting --l2-grid 3e-6 --l1-grid 1e-4 --n-values 10,100
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import sys
import time
from collections import Counter

from benchmarks.common import print_table, shared_corpus, start, work_arguments, write_result
from benchmarks.sgc_vs_ifs import local_backend, prepare_all
from sparkmaxent.selection.stops import StopReason, reason_of_message

log = logging.getLogger("riezler_tables")

METHODS = ("mle", "std", "l0", "l2", "grafting", "mle-ifs", "l2-ifs")
#: TrainConfig keys chosen on held-out data per method, strongest-first: on
#: a tie in dev F1 the larger value of the first key wins, then the next.
CHOSEN_KEYS = {
    "l0": ("cutoff",),
    "l2": ("l2",),
    "grafting": ("l1",),
    "mle-ifs": ("grad_threshold",),
    "l2-ifs": ("grad_threshold", "l2"),
}
#: sparkmaxent's method and fixed settings of each row.
ROW_CONFIG = {
    "mle": {"method": "mle"},
    "std": {"method": "mle", "standardize": True},
    "l0": {"method": "cutoff", "l2": 0.0},
    "l2": {"method": "l2"},
    "grafting": {"method": "grafting"},
    "mle-ifs": {"method": "mle-ifs"},
    "l2-ifs": {"method": "l2-ifs"},
}
#: methods that run to an iteration cap rather than to convergence (MLE).
UNREGULARIZED = ("mle", "std", "l0")
SELECTION = ("grafting", "mle-ifs", "l2-ifs")
ROW_KEYS = [
    "method",
    "setting",
    "chunk_f1",
    "token_accuracy",
    "compression",
    "nonzero_weights",
    "iterations",
    "passes",
    "wall_s",
    "converged",
]


def choose(scores: list[tuple[dict, float]], keys: tuple[str, ...]) -> dict:
    """The setting with the best held-out score; ties go to the stronger
    regularization (the larger value of ``keys[0]``, then ``keys[1]``, ...).

    Parameters
    ----------
    scores : list of (setting, score)
        ``setting`` maps each of ``keys`` to a number; higher score is better.
    keys : tuple of str
        Setting keys, the one that decides a tie first.
    """
    if not scores:
        raise ValueError("expected at least one scored setting, got none")
    return max(scores, key=lambda s: (s[1], tuple(s[0][k] for k in keys)))[0]


def setting_label(setting: dict) -> str:
    """``{"l2": 3e-06, "n_best": 10}`` -> ``"l2=3e-06 n_best=10"``."""
    return (
        " ".join(
            f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(setting.items())
        )
        or "-"
    )


def head_sentences(path: str, out: str, n: int) -> str:
    """The first ``n`` sentences of a CoNLL file (for quick runs)."""
    with open(path) as f:
        sentences = [s for s in f.read().split("\n\n") if s.strip()][:n]
    with open(out, "w") as f:
        f.write("\n\n".join(s.strip("\n") for s in sentences) + "\n")
    return out


def prepare_data(args) -> dict:
    """train/test and the fit/dev split, prepared in ``args.work`` (or reused)."""
    marker = os.path.join(args.work, "riezler_data.json")
    wanted = {
        "mode": args.mode,
        "max_sentences": args.max_sentences,
        "dev_fraction": args.dev_fraction,
        "cutoff": 2,
    }
    if args.reuse and os.path.exists(marker):
        with open(marker) as f:
            made = json.load(f)
        if made != wanted:
            sys.exit(f"{marker}: data were prepared as {made}, not {wanted}; drop --reuse")
    sources = None
    if args.max_sentences:
        os.makedirs(args.work, exist_ok=True)
        sources = tuple(
            head_sentences(
                shared_corpus("conll2000", name), os.path.join(args.work, "head-" + name), n
            )
            for name, n in (
                ("train.txt", args.max_sentences),
                ("test.txt", max(1, args.max_sentences // 4)),
            )
        )
    if not args.reuse:  # fresh data: no earlier dev scores or checkpoints
        shutil.rmtree(os.path.join(args.work, "runs"), ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(args.work, "riezler_heldout.json"))
    dirs = prepare_all(args.work, args.reuse, args.dev_fraction, {"mode": args.mode}, sources)
    with open(marker, "w") as f:
        json.dump(wanted, f)
    return dirs


def base_config(args) -> dict:
    return {
        "backend": args.backend,
        "plots": False,
        "solver": args.solver,
        "n_best": args.n_best,
        "max_iter": args.max_iter,
        "gtol": args.gtol,
        "kkt_tol": args.kkt_tol,
        "max_seconds": args.max_seconds,
    }


def config_for(method: str, setting: dict, base: dict):
    from sparkmaxent.config import train_config

    return train_config(**{**base, **ROW_CONFIG[method], **setting})


def config_summary(cfg) -> dict:
    """The TrainConfig keys a row's figures depend on (``--resume`` reuses
    a row only when they are the same)."""
    from sparkmaxent.config import train_keys

    keys = train_keys(cfg)
    return {
        k: keys[k]
        for k in (
            "method",
            "l2",
            "l1",
            "elastic_l2",
            "cutoff",
            "standardize",
            "n_best",
            "grad_threshold",
            "max_iter",
            "gtol",
            "kkt_tol",
            "round_tol_ratio",
            "max_rounds",
            "max_seconds",
            "solver",
            "newton_max_active",
            "backend",
        )
    }


def fit_and_score(
    backend,
    method: str,
    setting: dict,
    base: dict,
    eval_dir: str,
    runs_dir: str | None = None,
    resume: bool = False,
) -> dict:
    """Train one row's configuration and score it on ``eval_dir``.

    Selection methods checkpoint every round in ``runs_dir/<method>-<hash of
    the configuration and data>`` and, with ``resume``, continue from there;
    the row then counts passes, iterations and time over all sessions."""
    from sparkmaxent.evaluate import compression, evaluate_dataset
    from sparkmaxent.selection.checkpoint import run_digest
    from sparkmaxent.train import train

    cfg = config_for(method, setting, base)
    out_dir = (
        os.path.join(runs_dir, f"{method}-{run_digest(cfg, backend.space)}")
        if runs_dir and method in SELECTION
        else None
    )
    t0 = time.perf_counter()
    res = train(backend, cfg, output_dir=out_dir, resume=resume and out_dir is not None)
    wall = time.perf_counter() - t0
    rep = res.report
    resumed = method in SELECTION and rep["selection_passes"] > rep["passes"]
    if resumed:  # this session's counters miss the earlier sessions
        rep.update(
            passes=rep["selection_passes"],
            iterations=sum(r.get("iterations", 0) for r in rep["rounds"]),
            evaluations=sum(r.get("evaluations", 0) for r in rep["rounds"]),
        )
        wall = max(wall, rep["selection_elapsed_s"])
    scores = evaluate_dataset(eval_dir, res.weights, backend.space, res.scaling, chunks=True)
    chunks = scores["chunks"]
    row = {
        "method": method,
        "setting": setting_label(setting),
        "chunk_f1": chunks["f1"],
        "precision": chunks["precision"],
        "recall": chunks["recall"],
        "token_accuracy": scores["accuracy"],
        "compression": compression(rep["nonzero_weights"], rep["candidate_features"]),
        "nonzero_weights": rep["nonzero_weights"],
        "candidate_features": rep["candidate_features"],
        "iterations": rep["iterations"],
        "evaluations": rep["evaluations"],
        "passes": rep["passes"],
        "wall_s": round(wall, 2),
        "converged": rep["converged"],
        "objective": rep["objective"],
        "config": config_summary(cfg),
    }
    if method in SELECTION:
        # from the trace: the report's "solvers" counts this session only
        solvers = Counter(r["solver"] for r in rep["rounds"] if "solver" in r)
        row.update(
            rounds=rep["rounds_run"],
            stopped=rep["stopped"],
            resumed=resumed,
            kkt_violation=rep["kkt"]["violation"],
            solvers=dict(solvers),
        )
    else:
        row["optimizer_message"] = rep["optimizer_message"]
    log.info(
        "%s %s: F1 %.4f, %d non-zero, %d iterations, %d passes, %.1f s",
        method,
        row["setting"],
        row["chunk_f1"],
        row["nonzero_weights"],
        row["iterations"],
        row["passes"],
        wall,
    )
    return row


class HeldoutCache:
    """Dev scores of (method, setting) under fixed choice parameters, kept
    in a JSON file so that an interrupted choice resumes.

    A fit that ended by itself stands for any time cap; one ended by the
    cap (``capped_at``) only for the same cap: under another it is fitted
    again (a grafting-family fit resumes from its checkpoint)."""

    def __init__(self, path: str, params: dict):
        self.path, self.params = path, params
        self.entries: dict = {}
        if os.path.exists(path):
            with open(path) as f:
                saved = json.load(f)
            if saved.get("params") == params:
                self.entries = saved["entries"]
            else:
                log.info("%s was made with %s: not reused", path, saved.get("params"))

    def score(
        self, fit, method: str, setting: dict, base: dict, dev_dir: str, runs_dir: str, resume: bool
    ) -> dict:
        key = f"{method} {setting_label(setting)}"
        cap = base.get("max_seconds", 0.0)
        if key not in self.entries or self.entries[key].get("capped_at", cap) != cap:
            row = fit_and_score(fit, method, setting, base, dev_dir, runs_dir, resume)
            self.entries[key] = {
                k: row[k]
                for k in (
                    "chunk_f1",
                    "token_accuracy",
                    "nonzero_weights",
                    "iterations",
                    "passes",
                    "wall_s",
                    "converged",
                )
            }
            if reason_of_message(row.get("stopped")) is StopReason.MAX_SECONDS:
                self.entries[key].update(capped_at=cap, stopped=row["stopped"])
            with open(self.path + ".tmp", "w") as f:
                json.dump({"params": self.params, "entries": self.entries}, f, indent=1)
            os.replace(self.path + ".tmp", self.path)
        return self.entries[key]


def grids(args, chosen_l2: float | None) -> dict[str, list[dict]]:
    """Candidate settings per method chosen on held-out data."""
    floats = lambda text: [float(x) for x in text.split(",") if x]  # noqa: E731
    l2_ifs = floats(args.l2_ifs_grid) if args.l2_ifs_grid else [chosen_l2]
    return {
        "l2": [{"l2": g} for g in floats(args.l2_grid)],
        "l0": [{"cutoff": int(k)} for k in floats(args.cutoff_grid)],
        "grafting": [{"l1": g} for g in floats(args.l1_grid)],
        "mle-ifs": [{"grad_threshold": t} for t in floats(args.threshold_grid)],
        "l2-ifs": [
            {"grad_threshold": t, "l2": g} for t in floats(args.threshold_grid) for g in l2_ifs
        ],
    }


def choose_on_dev(args, dirs: dict, methods: list[str]) -> dict:
    """The setting of every method that has one, by chunk F1 on dev."""
    base = {
        **base_config(args),
        "backend": "local",
        "max_iter": args.select_max_iter,
        "gtol": args.select_gtol,
        "kkt_tol": args.select_kkt_tol,
        "max_seconds": args.select_max_seconds,
    }
    cache = HeldoutCache(
        os.path.join(args.work, "riezler_heldout.json"),
        {
            "select_max_iter": args.select_max_iter,
            "gtol": args.select_gtol,
            "kkt_tol": args.select_kkt_tol,
            "n_best": args.n_best,
            "solver": args.solver,
            "dev_fraction": args.dev_fraction,
            "mode": args.mode,
            "max_sentences": args.max_sentences,
        },
    )
    fit = local_backend(dirs["fit"])
    runs_dir = os.path.join(args.work, "runs")
    out: dict = {}
    # l2 first: l2-ifs uses its gamma2 unless --l2-ifs-grid is given
    needed = [
        m
        for m in ("l2", "l0", "grafting", "mle-ifs", "l2-ifs")
        if m in methods or (m == "l2" and "l2-ifs" in methods and not args.l2_ifs_grid)
    ]
    for method in needed:
        settings = grids(args, out.get("l2", {}).get("chosen", {}).get("l2"))[method]
        scored = [
            (s, cache.score(fit, method, s, base, dirs["dev"], runs_dir, args.resume))
            for s in settings
        ]
        best = choose([(s, r["chunk_f1"]) for s, r in scored], CHOSEN_KEYS[method])
        out[method] = {"chosen": best, "dev": {setting_label(s): r for s, r in scored}}
        log.info("held-out: %s -> %s", method, setting_label(best))
    return out


def table_setting(method: str, heldout: dict) -> dict:
    if method in ("mle", "std"):
        return {}
    return dict(heldout[method]["chosen"])


def plot(n_rows: list[dict], path: str, title: str) -> None:
    """Figure 2's shape: n against chunk F1 and against iterations."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = sorted(n_rows, key=lambda r: r["n"])
    if not rows:
        return
    fig = Figure(figsize=(10, 4))
    FigureCanvasAgg(fig)
    for i, (key, label) in enumerate(
        (("chunk_f1", "chunk F1 on test (%)"), ("iterations", "optimizer iterations"))
    ):
        ax = fig.add_subplot(1, 2, i + 1)
        scale = 100.0 if key == "chunk_f1" else 1.0
        ax.plot([r["n"] for r in rows], [scale * r[key] for r in rows], "o-")
        capped = [r for r in rows if not r["converged"]]
        if capped:
            ax.plot(
                [r["n"] for r in capped],
                [scale * r[key] for r in capped],
                "rx",
                markersize=10,
                label="stopped before convergence",
            )
            ax.legend(fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("n (features added per grafting round)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def make_backend(args, train_dir: str, stack):
    if args.backend == "local":
        return local_backend(train_dir)
    from sparkmaxent.backends.session import spark_session
    from sparkmaxent.backends.spark import SparkBackend

    spark = spark_session("local[2]", "riezler-tables", {"spark.driver.memory": "8g"})
    stack.callback(spark.stop)
    return stack.enter_context(
        SparkBackend(spark, train_dir, bias=True, partitions=args.partitions, name="riezler")
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--methods", default=",".join(METHODS), help="Table 2 rows to run")
    p.add_argument("--n-values", default="1,10,100,1000", help="Table 3's n ('' to skip)")
    p.add_argument(
        "--n-best",
        type=int,
        default=100,
        help="n of Table 2's grafting row and of the held-out choices",
    )
    p.add_argument(
        "--n1-max-rounds",
        type=int,
        default=100,
        help="cap on the rounds of n = 1 (0: until certified, about one round per non-zero weight)",
    )
    p.add_argument("--l2-grid", default="1e-5,3e-6,1e-6")
    p.add_argument("--cutoff-grid", default="2,3,5,7")
    p.add_argument("--l1-grid", default="1e-4,3e-5,1e-5")
    p.add_argument("--threshold-grid", default="1e-3,3e-4,1e-4")
    p.add_argument(
        "--l2-ifs-grid", default="", help="gamma2 values of l2-ifs (default: the one chosen for l2)"
    )
    p.add_argument("--select-max-iter", type=int, default=200)
    p.add_argument("--select-gtol", type=float, default=1e-5)
    p.add_argument(
        "--select-kkt-tol",
        type=float,
        default=1e-3,
        help="train.kkt_tol of the held-out grafting-family fits (their round solver "
        "tolerance is below threshold * kkt_tol; 1e-6 costs far more passes)",
    )
    p.add_argument("--kkt-tol", type=float, default=1e-6, help="train.kkt_tol of the reported fits")
    p.add_argument(
        "--select-max-seconds",
        type=float,
        default=0.0,
        help="train.max_seconds of the held-out grafting-family fits (0: no cap); a "
        "capped fit is scored where it stopped and marked capped_at",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=0.0,
        help="train.max_seconds of the reported grafting-family fits (0: no cap); a "
        "capped row says converged: false and stopped: max_seconds",
    )
    p.add_argument("--max-iter", type=int, default=1000, help="optimizer cap of the reported fits")
    p.add_argument(
        "--mle-max-iter",
        type=int,
        default=400,
        help="cap of mle, std and l0 (MLE need not converge)",
    )
    p.add_argument("--gtol", type=float, default=1e-7)
    p.add_argument(
        "--solver",
        default="lbfgs-b",
        help="grafting-family round solver (Newton's Hessian block is costly with 22 labels)",
    )
    p.add_argument(
        "--backend",
        choices=("local", "spark"),
        default="local",
        help="of the reported fits (held-out choices run in-process)",
    )
    p.add_argument("--partitions", type=int, default=2, help="with --backend spark")
    p.add_argument("--mode", choices=("chunk", "basenp"), default="chunk")
    p.add_argument(
        "--max-sentences",
        type=int,
        default=0,
        help="quick runs: the first N training sentences and N/4 test sentences",
    )
    p.add_argument("--dev-fraction", type=float, default=0.1)
    work_arguments(p, "/tmp/sparkmaxent-riezler", "riezler_tables.json")
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep the rows of --output measured with the same configuration and "
        "continue interrupted grafting-family fits from their checkpoints in "
        "--work/runs (implies --reuse)",
    )
    args = start(p, argv)
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        p.error(f"unknown method(s) {unknown}: expected some of {list(METHODS)}")
    n_values = [int(n) for n in args.n_values.split(",") if n]
    args.reuse = args.reuse or args.resume  # re-preparing would drop the checkpoints

    started = time.perf_counter()
    dirs = prepare_data(args)
    heldout = choose_on_dev(args, dirs, methods + (["grafting"] if n_values else []))
    logging.getLogger("riezler_tables").info(
        "held-out choice: %.1f s", time.perf_counter() - started
    )
    rows: list[dict] = []
    n_rows: list[dict] = []
    png = os.path.splitext(args.output)[0] + "_n.png"
    base = base_config(args)
    extra = {
        "heldout": heldout,
        "heldout_criterion": "chunk F1 on the held-out sentences",
        "data": f"CoNLL-2000 ({args.mode}), 17 templates, predicate cutoff 2"
        + (f", first {args.max_sentences} training sentences" if args.max_sentences else ""),
        "backend": args.backend,
        "settings": {k: v for k, v in vars(args).items() if k not in ("output", "resume", "reuse")},
    }

    previous: dict = {}
    if args.resume and os.path.exists(args.output):
        with open(args.output) as f:
            previous = json.load(f)
        if previous.get("data") != extra["data"]:
            log.info("%s holds results on %s: not reused", args.output, previous.get("data"))
            previous = {}
    # with --resume, rows of methods (and n) not run this time stay in the output
    kept = [r for r in previous.get("rows", []) if r["method"] not in methods]
    kept_n = [r for r in previous.get("n_best_rows", []) if r["n"] not in n_values]
    extra["heldout"] = {**previous.get("heldout", {}), **heldout}

    def save() -> None:
        all_rows = sorted(rows + kept, key=lambda r: METHODS.index(r["method"]))
        all_n = sorted(n_rows + kept_n, key=lambda r: r["n"])
        write_result(args.output, all_rows + [{"table": "n_best", **r} for r in all_n])
        gamma1 = extra["heldout"].get("grafting", {}).get("chosen", {}).get("l1", float("nan"))
        plot(all_n, png, f"l1 grafting, gamma1 = {gamma1:g}")

    def measured(key: str, method: str, setting: dict, cfg: dict) -> dict | None:
        summary = config_summary(config_for(method, setting, cfg))
        return next((r for r in previous.get(key, []) if r.get("config") == summary), None)

    with contextlib.ExitStack() as stack:
        backend = make_backend(args, dirs["train"], stack)
        extra["candidate_features"] = backend.space.n_features
        fitted: dict[str, dict] = {}  # setting label -> row, so n = --n-best runs once

        def row_for(key: str, method: str, setting: dict) -> dict:
            cfg = {**base, "max_iter": args.mle_max_iter} if method in UNREGULARIZED else base
            label = f"{method} {setting_label(setting)}"
            if label not in fitted:
                fitted[label] = measured(key, method, setting, cfg) or fit_and_score(
                    backend,
                    method,
                    setting,
                    cfg,
                    dirs["test"],
                    os.path.join(args.work, "runs"),
                    args.resume,
                )
            return fitted[label]

        for method in methods:
            setting = table_setting(method, heldout)
            if method == "grafting":
                setting["n_best"] = args.n_best
            rows.append(row_for("rows", method, setting))
            save()
        for n in n_values:
            setting = {"l1": heldout["grafting"]["chosen"]["l1"], "n_best": n}
            if n == 1 and args.n1_max_rounds:
                setting["max_rounds"] = args.n1_max_rounds
            n_rows.append({"n": n, **row_for("n_best_rows", "grafting", setting)})
            save()
    if rows:
        print_table(rows, ROW_KEYS)
    if n_rows:
        print_table(n_rows, ["n"] + ROW_KEYS[2:] + ["rounds"])
    print(f"wrote {args.output} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
