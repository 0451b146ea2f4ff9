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
    corpus_methods,
    merged_rows,
    ours,
    setting,
    sklearn_row,
)

ROW_KEYS = ["corpus", "method", "chosen_setting", "test_score", "features", "wall_s", "stopped"]
METHODS = ("sgc", "bayes-factor", "sklearn-l2")
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
        if method == "sklearn-l2":
            rows.append(sklearn_row(name, method, dirs, args.l2_cap))
        else:
            rows.append(ours(name, method, dirs, args))
        rows[-1].update(command=command_line(), commit=commit(), load_average=load_average())
        print_table(rows[-1:], ROW_KEYS)
        page = merged_rows(earlier, rows)
        write_result(args.output, page, targets(page, args.seconds))
    print_table(rows, ROW_KEYS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
