"""Is SGC's chosen stage under-regularized? Its features refitted on the
training part under a grid of Gaussian priors, scored on the held-out part.

SGC's stages fit the selected weights under the gain prior (sigma^2 =
``train.ifs.gain_prior_variance``, sum units: gamma2 = 1 / (sigma^2 W)),
and its training loss ends near 0 on long documents. Per corpus
(``model_choice``'s split, 0.2 held out; the test part is not read): one
SGC run at the defaults keeping its best held-out stage (no refit), then
the chosen stage's features refitted on the training part alone (L-BFGS,
warm-started from the stage) at each sigma^2 of ``--variances`` and
scored on the held-out part. The variance of the Gaussian prior adjusted
on held-out data apart from the selection is Riezler & Vasserman's
(2004, Table 3) l2-ifs.

Rows: corpus, stage, features, sigma^2, gamma2, training loss, held-out
log-likelihood, accuracy, and the held-out log-likelihood's difference to
the stage's own fit in standard errors of the paired difference (event by
event). Target: the stage's own prior within one such standard error of
the best sigma^2.

Usage::

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.sgc_prior --corpora brown --reuse
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from benchmarks.common import (
    RESULTS,
    SHARED_DATA,
    command_line,
    commit,
    load_average,
    print_table,
    start,
    target,
    write_result,
)
from benchmarks.model_choice import CORPORA, DEFAULT_SENTENCES, backend, corpus_methods
from sparkmaxent.choice.heldout import measure_weights
from sparkmaxent.choice.stop_rule import difference_se
from sparkmaxent.config import train_config
from sparkmaxent.kernels.loss import LossGradTask
from sparkmaxent.methods.baselines import fit_smooth
from sparkmaxent.selection.base import TrainingContext
from sparkmaxent.train import train

ROW_KEYS = ["corpus", "stage", "features", "sigma2", "train_loss", "heldout_score",
            "heldout_accuracy", "gap_se"]  # fmt: skip


def prior_rows(name: str, dirs: dict, args) -> list[dict]:
    """The chosen stage of one SGC run, refitted at every sigma^2."""
    tr, he = backend(dirs["train"]), backend(dirs["heldout"])
    config = train_config(method="sgc", max_seconds=args.seconds, refit=False, criterion="loglik")
    res = train(tr, config, he)
    stage = res.report.stage_choice
    ctx = TrainingContext(tr, config, scaling=res.scaling, heldout=he)
    refit_ctx = TrainingContext(tr, train_config(method="l2"), scaling=res.scaling)
    own_scores, own = measure_weights(ctx, res.weights)
    total = weight_of(tr, res.weights)
    rows = []
    for s2 in args.variances:
        l2 = 1.0 / (s2 * total)
        fit = fit_smooth(refit_ctx, res.weights.active_ids(), l2, res.weights)
        scores, measure = measure_weights(ctx, fit.weights)
        se = difference_se(measure, own)
        rows.append({
            "corpus": name, "stage": stage.chosen_round, "stages_run": stage.stages_run,
            "features": int(res.weights.nnz), "sigma2": s2, "l2": l2,
            "train_loss": round(float(fit.report["loss"]), 6),
            "heldout_score": round(scores["heldout_score"], 6),
            "heldout_accuracy": round(scores["heldout_accuracy"], 4),
            "gap_se": round((scores["heldout_score"] - own.score) / se, 3) if se > 0 else 0.0,
            "evaluations": fit.report["evaluations"],
        })  # fmt: skip
    rows.append({
        "corpus": name, "stage": stage.chosen_round, "stages_run": stage.stages_run,
        "features": int(res.weights.nnz), "sigma2": float(config.ifs.gain_prior_variance),
        "l2": None, "train_loss": round(float(res.report["loss"]), 6), "stage_fit": True,
        "heldout_score": round(own_scores["heldout_score"], 6),
        "heldout_accuracy": round(own_scores["heldout_accuracy"], 4), "gap_se": 0.0,
    })  # fmt: skip
    return rows


def weight_of(events, weights) -> float:
    """The event weight W of a backend's events (one loss pass)."""
    zero = np.zeros(0, dtype=np.int64)
    return float(events.run(LossGradTask(events.space, weights, None, zero)).weight)


def targets(rows: list[dict]) -> dict:
    out = {}
    for corpus in dict.fromkeys(r["corpus"] for r in rows):
        grid = [r for r in rows if r["corpus"] == corpus and not r.get("stage_fit")]
        best = max(grid, key=lambda r: r["heldout_score"])
        out[f"{corpus}: the stage's prior within 1 SE of the best refit prior"] = target(
            "the stage's own fit within one standard error (paired) of the best sigma^2 "
            "refit on held-out log-likelihood",
            {"best_sigma2": best["sigma2"], "gap_se": best["gap_se"]},
            best["gap_se"] <= 1.0,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", choices=CORPORA, default=["brown"])
    parser.add_argument("--data", default=SHARED_DATA, help="the shared corpora")
    parser.add_argument("--work", default="/tmp/sparkmaxent-stage-methods")
    parser.add_argument("--reuse", action="store_true", help="reuse prepared data in --work")
    parser.add_argument("--output", default=os.path.join(RESULTS, "sgc_prior.json"))
    parser.add_argument("--conll-sentences", type=int, default=DEFAULT_SENTENCES)
    parser.add_argument("--seconds", type=float, default=240.0, help="train.selection.max_seconds")
    parser.add_argument("--variances", type=float, nargs="+", default=[0.1, 0.3, 1, 3, 10, 30])
    args = start(parser, argv)
    args.methods = ["sgc"]
    rows: list[dict] = []
    for name, _, dirs in corpus_methods(args, "sgc-prior"):
        new = prior_rows(name, dirs, args)
        for row in new:
            row.update(command=command_line(), commit=commit(), load_average=load_average())
        rows += new
        print_table(new, ROW_KEYS)
        write_result(args.output, rows, targets(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
