"""SGC and the Bayes factor at their automatic settings against
scikit-learn's LogisticRegressionCV l2 on the same split (issue 36).

Per corpus (``benchmarks/model_choice.py``'s data: the training file split
at prepare time, 0.2 held out, seed 0; the test file prepared with the
sub-train dictionary), in-process:

- ``sgc``, ``bayes-factor``: one run at the defaults keeping its best
  held-out stage, with ``train.selection.max_seconds`` = ``--seconds``
  (``model_choice.ours``; ``--set KEY=VALUE`` for a variant, e.g.
  ``stage_features=1``, the papers' one feature a stage);
- ``sklearn-l2``: LogisticRegressionCV(Cs=10) chosen on the same held-out
  part (``model_choice.sklearn_row``).

Targets per corpus and method: test score within 1 point of sklearn-l2,
and the run ending with a model (its best held-out stage) with the
selection stopped by the method, its patience or ``max_seconds``; the
row's ``wall_s`` (the whole train() call) against the cap says by how
much the last stage ran past it.

How much of a gap is noise: a small test set (Brown's 93 documents, a
point each) moves the score by whole events, so each of our rows also
pairs its model with sklearn-l2's on the same test events
(``vs_l2_*``, when this work directory holds the anchor's per-event
results from a sklearn-l2 row run with it: run ``--methods sklearn-l2
sgc bayes-factor``): the accuracy gap (per event; per token for
chunking, whose score is chunk F1) with the standard error of the
*paired* difference, the events the two models score differently, and
the test log-likelihood gap with its paired standard error
(``paired_gap``).

Usage::

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.stage_methods --corpora pp brown

writes benchmarks/results/stage_methods.json after every row: this run's
rows and the page's earlier rows of the corpora and methods it did not run
(``model_choice.merged_rows``), each with its own command, commit and load.
``--merge PAGE`` measures nothing: it merges another page's rows (a run
with its own ``--output``) into ``--output`` the same way.
"""

from __future__ import annotations

import argparse
import functools
import os

import numpy as np

from benchmarks.common import (
    RESULTS,
    SHARED_DATA,
    command_line,
    commit,
    load_average,
    merge_arguments,
    merge_pages,
    page_rows,
    print_table,
    start,
    target,
    write_result,
)
from benchmarks.model_choice import (
    CORPORA,
    DEFAULT_SENTENCES,
    arrays,
    corpus_methods,
    merged_rows,
    ours,
    setting,
    sklearn_row,
)
from sparkmaxent.choice.stop_rule import Measure, difference_se

ROW_KEYS = ["corpus", "method", "chosen_setting", "test_score", "features", "wall_s", "stopped"]
METHODS = ("sklearn-l2", "sgc", "bayes-factor")  # the anchor first: our rows pair with it
#: points of test score a stage method may be below scikit-learn's l2
WITHIN = 1.0


def targets(rows: list[dict], seconds: float) -> dict:
    """Per stage method: test score within WITHIN points of sklearn-l2 on
    every corpus (value: the gaps); and every run ending with a model
    within the cap (value: features and wall seconds, the whole train()).
    Rows of a ``--set`` variant (a method name with a space) are shown, not
    targets: the targets are the automatic settings'."""
    anchors = {r["corpus"]: r["test_score"] for r in rows if r["method"] == "sklearn-l2"}
    ours = [r for r in rows if not r["method"].startswith("sklearn") and " " not in r["method"]]
    out = {}
    for method in dict.fromkeys(r["method"] for r in ours):
        gaps = {
            r["corpus"]: round(r["test_score"] - anchors[r["corpus"]], 3)
            for r in ours
            if r["method"] == method and r["corpus"] in anchors and r["test_score"] is not None
        }
        if gaps:
            out[f"{method}: test score - sklearn-l2, every corpus"] = target(
                f"{method} within {WITHIN:g} point of sklearn-l2 on every corpus",
                gaps,
                min(gaps.values()) >= -WITHIN,
            )
    if ours:
        runs = {f"{r['corpus']} {r['method']}": [r["features"], r["wall_s"]] for r in ours}
        ended = all(f and w <= seconds for f, w in runs.values())
        out[f"every run ends with a model within max_seconds {seconds:g}"] = target(
            f"every run ends with a model (features, wall s) within max_seconds {seconds:g}",
            runs,
            ended,
        )
    return out


#: the anchor's per-event test results in a corpus's work directory
ANCHOR_EVENTS = "sklearn-l2-test-events.npz"


def sklearn_events(cv, test_dir: str) -> dict:
    """Per test event (the prepared test set's order): weight ``c``, gold
    label ``y``, ``hit`` (top label correct) and ``loglik`` (log-probability
    of the gold label; NaN for a label the model never saw) of a fitted
    scikit-learn classifier ``cv``."""
    te = arrays(test_dir)
    proba = cv.predict_proba(te.X)
    classes = np.asarray(cv.classes_)
    pos = np.minimum(np.searchsorted(classes, te.y), len(classes) - 1)
    known = classes[pos] == te.y
    loglik = np.full(len(te.y), np.nan)
    rows = np.flatnonzero(known)
    loglik[rows] = np.log(np.maximum(proba[rows, pos[rows]], 1e-300))
    hit = (classes[proba.argmax(axis=1)] == te.y).astype(float)
    return {"c": te.c.astype(float), "y": te.y, "hit": hit, "loglik": loglik}


def our_events(scores) -> dict:
    """``sklearn_events``'s fields from our test pass (``EventScores``)."""
    return {"c": scores.c, "y": scores.y, "hit": scores.hit.astype(float), "loglik": -scores.loss}


def paired_gap(ours: dict, anchor: dict) -> dict:
    """Ours minus the anchor on the same test events: accuracy in points
    and test log-likelihood, each with the standard error of the paired
    difference (``stop_rule.difference_se``: event by event, so the noise
    both models share cancels), and how many events the two score
    differently (a gap of a few such events is within a sign test's
    noise). Raises ValueError when the two are not the same events in the
    same order."""
    same = len(ours["y"]) == len(anchor["y"]) and np.array_equal(ours["y"], anchor["y"])
    if not same or not np.allclose(ours["c"], anchor["c"]):
        raise ValueError("our test events and the anchor's differ (labels, weights or order)")
    c = anchor["c"]

    def gap(field: str, scale: float) -> tuple[float, float]:
        a = Measure.of_units(scale * ours[field], c)
        b = Measure.of_units(scale * anchor[field], c)
        both = np.isfinite(ours[field]) & np.isfinite(anchor[field])
        mean = float(np.average(scale * (ours[field] - anchor[field])[both], weights=c[both]))
        return round(mean, 4), round(float(difference_se(a, b)), 4)

    accuracy, accuracy_se = gap("hit", 100.0)
    loglik, loglik_se = gap("loglik", 1.0)
    return {
        "vs_l2_accuracy": accuracy,
        "vs_l2_accuracy_se": accuracy_se,
        "vs_l2_differ": int(np.sum(ours["hit"] != anchor["hit"])),
        "vs_l2_ours_right": int(np.sum(ours["hit"] > anchor["hit"])),
        "vs_l2_loglik": loglik,
        "vs_l2_loglik_se": loglik_se,
    }


def cv_path(cv) -> dict:
    """How LogisticRegressionCV ``cv`` chose its C: each C of its grid,
    the held-out score it chose by (its ``scoring``, mean over folds) and
    the lbfgs iterations each C's fit ran (first fold; its path is
    warm-started, so a point that stops after a few iterations is close
    to the one before). Near-equal scores, or points of a few iterations,
    say that the choice, and the anchor's test score, rest on little."""
    scores = cv.scores_  # a dict by class (the same for each) in the legacy layout
    scores = np.asarray(
        next(iter(scores.values())) if isinstance(scores, dict) else scores, dtype=float
    )
    iterations = np.asarray(cv.n_iter_).reshape(-1, len(cv.Cs_))  # (folds x one l1 ratio) x Cs
    return {
        "cv_Cs": [float(f"{c:.4g}") for c in cv.Cs_],
        "cv_scores": [round(float(v), 5) for v in scores.reshape(-1, len(cv.Cs_)).mean(axis=0)],
        "cv_iterations": [int(v) for v in iterations[0]],
    }


def measure(name: str, method: str, dirs: dict, args) -> dict:
    """One row: sklearn-l2 (its choice of C, ``cv_path``; its per-event
    test results kept in the work directory) or our method, paired with those results when they are
    there (``paired_gap``'s ``vs_l2_*`` fields; ``vs_l2_anchor_score``:
    the anchor's test score they are paired with)."""
    keep: dict = {}
    anchor_path = os.path.join(args.work, name, ANCHOR_EVENTS)
    if method == "sklearn-l2":
        row = sklearn_row(name, method, dirs, args.l2_cap, keep=keep)
        if "cv" in keep:
            row.update(cv_path(keep["cv"]))
            events = sklearn_events(keep["cv"], dirs["test"])
            np.savez(anchor_path, test_score=row["test_score"], **events)
        return row
    row = ours(name, method, dirs, args, keep=keep)
    if "test_events" in keep and os.path.exists(anchor_path):
        with np.load(anchor_path) as saved:
            anchor = {k: saved[k] for k in saved.files}
        row["vs_l2_anchor_score"] = float(anchor["test_score"])
        row.update(paired_gap(our_events(keep["test_events"]), anchor))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", choices=CORPORA, default=["pp", "brown"])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--data", default=SHARED_DATA, help="the shared corpora")
    parser.add_argument("--work", default="/tmp/sparkmaxent-stage-methods")
    parser.add_argument("--reuse", action="store_true", help="reuse prepared data in --work")
    parser.add_argument("--output", default=os.path.join(RESULTS, "stage_methods.json"))
    parser.add_argument("--conll-sentences", type=int, default=DEFAULT_SENTENCES)
    parser.add_argument("--seconds", type=float, default=240.0, help="train.selection.max_seconds")
    parser.add_argument("--l2-cap", type=float, default=600.0, help="seconds for sklearn-l2")
    parser.add_argument("--set", action="append", default=[], type=setting, metavar="KEY=VALUE")
    merge_arguments(parser)
    args = start(parser, argv)
    if args.merge:
        page_targets = functools.partial(targets, seconds=args.seconds)
        merge_pages(args.output, args.merge, merged_rows, page_targets, "stage_methods")
        return 0
    # model_choice.ours reads these
    args.folds, args.stage_seconds = 0, args.seconds
    earlier = page_rows(args.output)
    rows: list[dict] = []
    for name, method, dirs in corpus_methods(args, "stage-methods"):
        rows.append(measure(name, method, dirs, args))
        rows[-1].update(command=command_line(), commit=commit(), load_average=load_average())
        print_table(rows[-1:], ROW_KEYS)
        page = merged_rows(earlier, rows)
        write_result(args.output, page, targets(page, args.seconds))
    print_table(rows, ROW_KEYS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
