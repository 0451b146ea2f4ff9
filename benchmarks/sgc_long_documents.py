"""SGC on long documents: passes per stage, and the gain prior's default.

The Brown genre task (one document per file, genre = the file name's
letter, bag of words of lower-cased alphabetic tokens with their counts as
feature values) with a fixed 4:1 train/test split; the training part is
split again 4:1 into sub-train and held-out, and only those are used here
(the test part is not read). Datasets are written in-process.

Rows: for counts (``word:n``) and binary features, SGC's passes per stage;
for each ``train.ifs.gain_prior_variance`` of ``--prior-variance``, held-out accuracy and loss
after 25..``--stages`` stages, the stage of the best held-out loss, and the
final training loss.

Usage::

    .venv/bin/python -m benchmarks.sgc_long_documents --stages 400
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import tempfile
import time

import numpy as np
import scipy.sparse as sp

from benchmarks.common import RESULTS, print_table, shared_corpus, start, write_result
from sparkmaxent.backends.factory import make_backend
from sparkmaxent.config import train_config
from sparkmaxent.data.load import write_events
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.kernels import MULTICLASS, MulticlassBlock
from sparkmaxent.methods.round_details import IfsStage
from sparkmaxent.train import train as fit


def brown_documents(brown_dir: str) -> list[tuple[str, collections.Counter]]:
    """(genre, word counts) of every Brown file, in a fixed shuffled order."""
    docs = []
    for name in sorted(os.listdir(brown_dir)):
        if len(name) != 4 or not name[0].isalpha() or not name[2:].isdigit():
            continue
        with open(os.path.join(brown_dir, name), encoding="utf-8") as f:
            words = [t.rsplit("/", 1)[0].lower() for t in f.read().split()]
        docs.append((name[1], collections.Counter(w for w in words if w.isalpha())))
    random.Random(0).shuffle(docs)
    return docs


def write_split(docs, vocab, labels, out: str, binary: bool) -> None:
    rows, cols, vals = [], [], []
    for i, (_, counts) in enumerate(docs):
        for w, n in counts.items():
            if w in vocab:
                rows.append(i)
                cols.append(vocab[w])
                vals.append(1.0 if binary else float(n))
    X = sp.csr_matrix((vals, (rows, cols)), shape=(len(docs), len(vocab)))
    y = np.array([labels.index(g) for g, _ in docs])
    block = MulticlassBlock(X=X, y=y, c=np.ones(len(docs)), n_labels=len(labels))
    write_events(block, out, DatasetInfo(MULTICLASS, len(vocab), labels))


def run_sgc(train: str, heldout: str, stages: int, **keys) -> dict:
    cfg = train_config(method="sgc", max_features=stages, plots=False, **keys)
    t0 = time.perf_counter()
    report = fit(
        make_backend("local", train, bias=True), cfg, make_backend("local", heldout, bias=True)
    ).report
    r = report.rounds
    loss = [x.heldout["heldout_loss"] for x in r]
    accuracy = [x.heldout["heldout_accuracy"] for x in r]
    marks = [n for n in (25, 50, 100, 200, 400, 800, 1600) if n <= len(r)]
    best = min(range(len(r)), key=lambda i: loss[i])
    return {
        "stages": len(r),
        "passes_per_stage": sum(x.detail_as(IfsStage).stage_passes for x in r) / len(r),
        "heldout_accuracy": {n: round(accuracy[n - 1], 4) for n in marks},
        "heldout_loss": {n: round(loss[n - 1], 4) for n in marks},
        "best_heldout_loss_stage": best + 1,
        "best_heldout_loss": loss[best],
        "accuracy_at_best_loss": accuracy[best],
        "final_training_loss": report.fit["loss"],
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="the Brown corpus directory")
    parser.add_argument("--stages", type=int, default=400)
    parser.add_argument("--pass-stages", type=int, default=40)
    parser.add_argument("--prior-variance", type=float, nargs="+", default=[0.0, 1.0, 0.1])
    parser.add_argument("--output", default=os.path.join(RESULTS, "sgc_long_documents.json"))
    args = start(parser, argv)
    docs = brown_documents(args.data or shared_corpus("brown"))
    train = docs[: len(docs) * 4 // 5]  # the last fifth is the test part, not read
    sub, held = train[: len(train) * 4 // 5], train[len(train) * 4 // 5 :]
    labels = sorted({g for g, _ in docs})
    vocab = {w: i for i, w in enumerate(sorted({w for _, c in sub for w in c}))}
    rows = []
    with tempfile.TemporaryDirectory(prefix="sgc-long-") as work:
        for binary in (False, True):
            kind = "binary" if binary else "counts"
            for name, part in (("sub", sub), ("held", held)):
                write_split(part, vocab, labels, os.path.join(work, f"{kind}-{name}"), binary)
        for kind in ("counts", "binary"):
            res = run_sgc(
                os.path.join(work, f"{kind}-sub"),
                os.path.join(work, f"{kind}-held"),
                args.pass_stages,
                gain_prior_variance=0.0,
            )
            rows.append({"experiment": "passes", "features": kind, **res})
        for s2 in args.prior_variance:
            res = run_sgc(
                os.path.join(work, "counts-sub"),
                os.path.join(work, "counts-held"),
                args.stages,
                gain_prior_variance=s2,
            )
            rows.append({"experiment": "prior", "features": "counts", "prior_variance": s2, **res})
    print_table(
        rows,
        ["experiment", "features", "prior_variance", "stages", "passes_per_stage"]
        + ["best_heldout_loss_stage", "accuracy_at_best_loss", "final_training_loss"],
    )
    print(f"split: {len(sub)} / {len(held)} events, {len(labels)} labels, {len(vocab)} words")
    write_result(args.output, rows)


if __name__ == "__main__":
    main()
