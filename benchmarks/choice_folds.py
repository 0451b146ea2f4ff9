"""Held-out choice against k-fold choice by training size: the measurements
behind ``train.choice.kfold_max_events`` (docs/methods/model-choice.md).

Training data only: each corpus is split as in ``benchmarks.model_choice``
(its sub-train part D and held-out part E, prepared there; the test data
is not read). From D, nested subsamples S of 1/16, 1/8, ... of its groups
(a tagged sentence, else an event; ``choice/folds.py``'s seeded,
label-stratified assignment into 16 parts, the first j parts kept). On
each S, a path (``l2``; ``grafting``, with its l2 mixes; ``grafting-l1``,
pure l1: ``l2_mixes`` [0]) at the defaults is chosen

- ``heldout``: on an inner held-out fifth of S (``train.choice.folds`` 1),
  then refitted on all of S (``train.choice.refit``);
- ``folds``: by 5 folds over all of S (``train.choice.folds`` 5 over both
  inner parts joined: the automatic choice of a path,
  ``train.choice.kfold_max_events`` / ``kfold_max_events_grafting``),
  refitted on S;

so both models see the same events, and differ only in the choice. Both
are scored on E, which neither saw: log-likelihood (``loglik``, the
criterion) and accuracy. ``wall_s`` and ``passes`` are the whole training
call (choice and refit). The page keeps the rows of the corpora a run
does not measure, each row with its command.

Usage (after ``benchmarks.model_choice`` prepared the corpora in its
--work directory)::

    python -m benchmarks.choice_folds --corpora pp conll --sizes 1 2 4 8
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from benchmarks.common import (
    RESULTS,
    command_line,
    commit,
    load_average,
    print_table,
    start,
    write_result,
)
from benchmarks.model_choice import backend
from sparkmaxent.backends.subset import FoldBackend
from sparkmaxent.choice.folds import fold_of_groups
from sparkmaxent.choice.heldout import score_on
from sparkmaxent.config import train_config
from sparkmaxent.kernels import Weights
from sparkmaxent.kernels.predict import EventScoresTask
from sparkmaxent.train import train

KEYS = ["corpus", "method", "events", "choice", "chosen", "features", "loglik", "accuracy",
        "passes", "wall_s"]  # fmt: skip
METHODS = {
    "l2": {"method": "l2"},
    "grafting-l1": {"method": "grafting", "l2_mixes": [0]},
    "grafting": {"method": "grafting"},  # with its l2 mixes, the default
}
PARTS = 16


def groups_of(b) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct groups, the part 0..PARTS-1 of each) of a backend's events."""
    ev = b.run(EventScoresTask(b.space, Weights.zeros(b.space), None))
    return fold_of_groups(ev.group, ev.y, PARTS, seed=7)


def one(train_part, heldout_part, evaluation, keys: dict) -> dict:
    """Train with ``keys`` and score the model on ``evaluation``."""
    t0, passes0 = time.perf_counter(), train_part.passes
    res = train(train_part, train_config(path=True, **keys), heldout_part)
    wall = time.perf_counter() - t0
    rep = res.report
    if "folds" in rep:
        chosen = rep["folds"]["grid"][rep["folds"]["chosen"]]
    else:
        chosen = rep["path"]["points"][rep["path"]["chosen"]][rep["path"]["parameter"]]
    loglik = score_on(evaluation, res.weights, res.scaling, "loglik")
    accuracy = score_on(evaluation, res.weights, res.scaling, "accuracy")
    return {
        "choice": "folds" if "folds" in rep else "heldout",
        "chosen": float(chosen),
        "features": int(res.weights.nnz),
        "loglik": round(loglik["heldout_score"], 5),
        "loglik_se": round(loglik["heldout_se"], 5),
        "accuracy": round(100 * accuracy["heldout_score"], 3),
        "passes": train_part.passes - passes0,
        "wall_s": round(wall, 2),
    }


def kept_rows(path: str, corpora: list[str]) -> list[dict]:
    """The current page's rows of the corpora this run does not measure,
    each with its own ``command`` (the page's, for rows written before rows
    carried one)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        page = json.load(f)
    rows = [r for r in page.get("rows", []) if r["corpus"] not in corpora]
    return [{"command": page.get("command"), "commit": page.get("commit"), **r} for r in rows]


def corpus_rows(name: str, args, rows: list[dict], kept: list[dict]) -> None:
    """Append ``name``'s rows to ``rows``, the page (``kept`` rows first)
    rewritten after each."""
    work, sizes, methods = args.work, args.sizes, args.methods
    dirs = {s: os.path.join(work, name, s) for s in ("train", "heldout")}
    if not all(os.path.exists(os.path.join(d, "dataset.json")) for d in dirs.values()):
        raise SystemExit(f"{name}: run benchmarks.model_choice --corpora {name} first")
    base, evaluation = backend(dirs["train"]), backend(dirs["heldout"])
    units, part = groups_of(base)
    for j in sizes:
        subsample = FoldBackend(base, units[part < j], True)
        s_units, inner = fold_of_groups(*_group_y(subsample), 5, seed=1)
        s_train = FoldBackend(subsample, s_units[inner != 0], True)
        s_held = FoldBackend(subsample, s_units[inner == 0], True)
        events = len(_group_y(subsample)[0])
        for method in methods:
            for folds in (1, 5):  # held-out, then 5 folds of both parts
                keys = {**METHODS[method], "folds": folds}
                row = {"corpus": name, "method": method, "events": events, "parts": f"{j}/16"}
                # S itself is both inner parts joined: one backend, the blocks each
                # holding their share of either part (as the automatic choice joins them)
                parts = (s_train, s_held) if folds == 1 else (subsample, None)
                row.update(one(*parts, evaluation, keys))
                row.update(load_average=load_average(), command=command_line(), commit=commit())
                print_table([row], KEYS)
                rows.append(row)
                write_result(args.output, kept + rows)


def _group_y(b) -> tuple[np.ndarray, np.ndarray]:
    ev = b.run(EventScoresTask(b.space, Weights.zeros(b.space), None))
    return ev.group, ev.y


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", default=["pp", "conll"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 2, 4, 8],
                        help="subsamples of D: this many sixteenths")  # fmt: skip
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--work", default="/tmp/sparkmaxent-model-choice")
    parser.add_argument("--output", default=os.path.join(RESULTS, "choice_folds.json"))
    args = start(parser, argv)
    rows: list[dict] = []
    kept = kept_rows(args.output, args.corpora)  # other corpora's rows stay on the page
    for name in args.corpora:
        corpus_rows(name, args, rows, kept)
    print_table(rows, KEYS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
