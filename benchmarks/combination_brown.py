"""The document-classification task of benchmarks/combination.py (the
analogue of Okanohara & Tsujii 2009, Table 2, on the Brown corpus).

``../shared/data/brown`` holds 500 documents in 15 genres (the letter after
the ``c`` of the file name, README). Each genre is one binary task
(that genre against the other 14). Per task the documents are split 4:1
into training and test, stratified by the label, with the seed
``SPLIT_SEED + task index`` (the same split for every method). Features
are the lowercased word tokens (tags dropped, tokens without a letter or
digit dropped), tf-idf with idf from the training documents only and
every document scaled to unit length, so every value is in [0, 1] as the
bound of the search needs. gamma1 (l1-Orig, l1-Comb) is chosen per task by
F2 on a held-out quarter of the training documents (stratified, seeded),
then the model is refitted on all of them; ``LinearSVC``'s C by 5-fold
stratified cross-validation (F2) on the training documents. Reported:
the mean over the 15 tasks of the test F2 (the paper's Table 2 column).

``--brown-balanced``: the tasks are one genre against 14 (6-80 positives
of 500), so every method may weight the classes: each positive training
event weighs negatives / positives and each negative 1 (the usual
"balanced" weighting; ``LinearSVC(class_weight="balanced")`` for the SVM,
whose weights are proportional to these). Test F2 is unweighted.
"""

from __future__ import annotations

import json
import logging
import os
import re

import numpy as np

from benchmarks.common import shared_corpus

log = logging.getLogger("combination.brown")

SPLIT_SEED = 18
GENRES = "abcdefghjklmnpr"
WORD = re.compile(r"[a-z0-9]")


def brown_names(data_dir: str) -> list[str]:
    """The 500 document file names (``c`` + genre letter + number), sorted:
    the order of ``read_brown``'s documents."""
    root = shared_corpus("brown", data_dir=data_dir)
    return sorted(n for n in os.listdir(root) if re.fullmatch(r"c[a-r]\d\d", n))


def read_brown(data_dir: str) -> tuple[list[str], np.ndarray]:
    """The documents (space-joined lowercased words) and their genre letters."""
    root = shared_corpus("brown", data_dir=data_dir)
    names = brown_names(data_dir)
    docs = []
    for name in names:
        with open(os.path.join(root, name)) as f:
            words = [tok.rsplit("/", 1)[0].lower() for tok in f.read().split()]
        docs.append(" ".join(w for w in words if WORD.search(w)))
    return docs, np.array([n[1] for n in names])


def tfidf(fit_docs: list[str], *others: list[str]):
    """tf-idf matrices of ``fit_docs`` and of each of ``others``: idf from
    ``fit_docs``, rows of unit length, then every word divided by its
    largest value in ``fit_docs`` (clipped at 1 elsewhere), so values are
    in [0, 1] and a conjunction of two words present in a document is not
    vanishingly small against its words."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(token_pattern=r"\S+", lowercase=False, norm="l2")
    fit = vec.fit_transform(fit_docs).tocsc()
    scale = 1.0 / np.maximum(fit.max(axis=0).toarray().ravel(), 1e-12)
    out = []
    for X in [fit, *(vec.transform(d) for d in others)]:
        X = X.multiply(scale[None, :]).tocsr()
        X.data = np.minimum(X.data, 1.0)
        out.append(X)
    return out


def balanced_weights(y: np.ndarray) -> np.ndarray:
    """Event weights: negatives / positives for a positive event, 1 for a negative."""
    pos = max(int(np.sum(y == 1)), 1)
    return np.where(y == 1, (len(y) - pos) / pos, 1.0)


def backend(X, y: np.ndarray, weights: np.ndarray | None = None):
    """An in-process backend over binary events (label 1: the genre),
    weighted by ``weights`` (default 1)."""
    from sparkmaxent.backends.local import LocalBackend
    from sparkmaxent.kernels import MULTICLASS, Space
    from sparkmaxent.kernels.blocks import MulticlassBlock

    c = np.ones(len(y)) if weights is None else weights
    block = MulticlassBlock(X.tocsr(), y.astype(np.int64), c, 2)
    return LocalBackend([block], Space(MULTICLASS, X.shape[1], 2, bias=True))


def f2(gold: np.ndarray, pred: np.ndarray) -> float:
    """F2 of the positive label (0 when nothing is both gold and predicted)."""
    tp = float(np.sum((gold == 1) & (pred == 1)))
    fn = float(np.sum((gold == 1) & (pred == 0)))
    fp = float(np.sum((gold == 0) & (pred == 1)))
    return 5 * tp / (5 * tp + 4 * fn + fp) if tp else 0.0


def f2_of(result, X, y: np.ndarray) -> float:
    from sparkmaxent.selection.base import evaluate_backend

    conf = evaluate_backend(backend(X, y), result.weights, None, result.conjunctions).confusion
    tp, fn, fp = conf[1, 1], conf[1, 0], conf[0, 1]
    return float(5 * tp / (5 * tp + 4 * fn + fp)) if tp else 0.0


def splits(labels: np.ndarray, genre: str, index: int):
    """Training and test documents (4:1) and the held-out quarter of training."""
    from sklearn.model_selection import train_test_split

    y = (labels == genre).astype(np.int64)
    idx = np.arange(len(y))
    train, test = train_test_split(idx, test_size=0.2, stratify=y, random_state=SPLIT_SEED + index)
    fit, held = train_test_split(
        train, test_size=0.25, stratify=y[train], random_state=SPLIT_SEED + index
    )
    return y, train, test, fit, held


def grafting_row(docs, y, parts, degree: int, grid, cap, measure, balanced=False) -> dict:
    """One task's l1-Orig / l1-Comb: gamma1 by F2 on the held-out quarter,
    then refitted on all training documents and scored on test
    (``balanced``: classes weighted, ``balanced_weights``)."""
    from sparkmaxent.config import train_config

    train, test, fit, held = parts

    def cfg(g):
        return train_config(
            method="grafting", l1=g, combination_degree=degree, standardize=False, **cap
        )

    def weigh(labels):
        return balanced_weights(labels) if balanced else None

    Xf, Xh = tfidf([docs[i] for i in fit], [docs[i] for i in held])
    scores = []
    for g in grid:
        result, _ = measure(backend(Xf, y[fit], weigh(y[fit])), cfg(g))
        scores.append(f2_of(result, Xh, y[held]))
    gamma = grid[int(np.argmax(scores))]
    Xt, Xs = tfidf([docs[i] for i in train], [docs[i] for i in test])
    result, row = measure(backend(Xt, y[train], weigh(y[train])), cfg(gamma))
    return {"test_score": f2_of(result, Xs, y[test]), "gamma": gamma, **row}


def svm_row(docs, y, parts, balanced=False) -> dict:
    from sklearn.metrics import fbeta_score, make_scorer
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.svm import LinearSVC

    train, test, _, _ = parts
    Xt, Xs = tfidf([docs[i] for i in train], [docs[i] for i in test])
    search = GridSearchCV(
        LinearSVC(class_weight="balanced" if balanced else None),
        {"C": [0.01, 0.1, 1.0, 10.0, 100.0]},
        scoring=make_scorer(fbeta_score, beta=2, zero_division=0),
        cv=StratifiedKFold(5, shuffle=True, random_state=SPLIT_SEED),
    )
    search.fit(Xt, y[train])
    pred = search.predict(Xs)
    return {
        "test_score": f2(y[test], pred),
        "gamma": search.best_params_["C"],
        "active_features": int(np.count_nonzero(search.best_estimator_.coef_)),
    }


def run_brown(args, measure, command: str) -> list[dict]:
    """The rows of the Brown task: l1-Comb (degree 2), l1-Orig, LinearSVC,
    each the mean over the genres' binary tasks (per-task figures kept).
    Each genre's figures are kept in ``<work>/brown/<genre>.json``; with
    ``--reuse`` those are read back (genres run by separate processes)."""
    docs, labels = read_brown(args.data)
    cap = dict(max_seconds=args.max_seconds, n_best=args.n_best, gtol=1e-7)
    methods = [("l1-Comb", 2), ("l1-Orig", 1), ("LinearSVC", 1)]
    per: dict[str, list[dict]] = {m: [] for m, _ in methods}
    genres = args.brown_genres or GENRES
    for index, genre in enumerate(GENRES):
        if genre not in genres:
            continue
        suffix = "_balanced" if args.brown_balanced else ""
        cache = os.path.join(args.work, "brown", f"{genre}{suffix}.json")
        if args.reuse and os.path.exists(cache):
            with open(cache) as f:
                done = json.load(f)
        else:
            y, train, test, fit, held = splits(labels, genre, index)
            parts = (train, test, fit, held)
            done = {}
            for method, degree in methods:
                if method == "LinearSVC":
                    out = svm_row(docs, y, parts, args.brown_balanced)
                else:
                    grid = args.brown_grid
                    out = grafting_row(
                        docs, y, parts, degree, grid, cap, measure, args.brown_balanced
                    )
                done[method] = {**out, "genre": genre}
                log.info("brown %s %s: %s", genre, method, done[method])
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            with open(cache, "w") as f:
                json.dump(done, f)
        for method, _ in methods:
            per[method].append(done[method])
    rows = []
    for method, degree in methods:
        tasks = per[method]

        def mean(key, tasks=tasks):
            vals = [t[key] for t in tasks if t.get(key) is not None]
            return float(np.mean(vals)) if vals else None

        rows.append(
            {
                "task": "brown",
                "method": method,
                "degree": degree,
                "metric": "mean_f2",
                "weighting": "balanced" if args.brown_balanced else "none",
                "test_score": mean("test_score"),
                "active_features": mean("active_features"),
                "conjunctions_examined": max(
                    (t.get("conjunctions_examined") or 0 for t in tasks), default=0
                ),
                "conjunctions_existing": None,
                "passes": mean("passes"),
                "wall_s": mean("wall_s"),
                "driver_peak_mb": max((t.get("driver_peak_mb") or 0 for t in tasks), default=0),
                "executor_peak_mb": None,
                "grid": list(args.brown_grid) if method != "LinearSVC" else [0.01, 0.1, 1, 10, 100],
                "per_task": tasks,
                "command": command,
            }
        )
    return rows
