"""Evaluation metrics: accuracy, per-label precision/recall/F1, chunk F1, compression.

Pure numpy. Every score is a fraction in [0, 1], not a percentage (conlleval
prints percentages; multiply by 100 to compare). A precision or recall whose
denominator is zero is 0 (scikit-learn's ``zero_division=0``), and
F1 = 2PR / (P + R) is 0 when P + R = 0.

Chunk scores follow the CoNLL-2000 shared task's ``conlleval`` script
(Tjong Kim Sang & Buchholz 2000; script version 2004-01-26) rule for rule:
see ``chunks`` and ``chunk_prf``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Hashable, Sequence

import numpy as np

logger = logging.getLogger(__name__)


def _f1(p: float, r: float) -> float:
    return 2.0 * p * r / (p + r) if p + r > 0 else 0.0


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b > 0 else 0.0


def _check_pair(gold, pred, weights) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g, p = np.asarray(gold), np.asarray(pred)
    if g.ndim != 1 or p.ndim != 1:
        raise ValueError(
            f"expected 1-D gold and predicted labels, got shapes {g.shape} and {p.shape}"
        )
    if len(g) != len(p):
        raise ValueError(
            f"expected as many predictions as gold labels, got {len(p)} "
            f"predictions for {len(g)} gold labels"
        )
    if weights is None:
        w = np.ones(len(g))
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != g.shape:
            raise ValueError(f"expected one weight per event, shape {g.shape}, got shape {w.shape}")
        if np.any(~np.isfinite(w)) or np.any(w < 0):
            raise ValueError(
                "expected finite non-negative event weights, got negative or non-finite ones"
            )
    return g, p, w


# ---- classification ---------------------------------------------------------------


def accuracy(
    gold: Sequence[Hashable] | np.ndarray,
    pred: Sequence[Hashable] | np.ndarray,
    weights: Sequence[float] | np.ndarray | None = None,
) -> float:
    """Share of (weighted) events whose predicted label is the gold one.

    Parameters
    ----------
    gold, pred : array-like, shape (m,)
        Labels (strings or integers).
    weights : array-like of float, shape (m,), optional
        Event weights (counts); default 1 each.

    Returns
    -------
    float in [0, 1]
    """
    g, p, w = _check_pair(gold, pred, weights)
    total = w.sum()
    if total <= 0:
        raise ValueError(
            f"expected events with positive total weight, got {len(g)} events "
            f"of total weight {total}"
        )
    return float(w @ (g == p)) / float(total)


def _label_counts(gold, pred, labels, weights):
    g, p, w = _check_pair(gold, pred, weights)
    if labels is None:
        labels = np.unique(np.concatenate([g, p])) if len(g) else np.asarray([])
    labs = np.asarray(labels)
    if labs.ndim != 1 or len(np.unique(labs)) != len(labs):
        raise ValueError(f"expected a list of distinct labels, got {list(labels)}")
    order = np.argsort(labs, kind="stable")
    sorted_labs = labs[order]

    def index(y: np.ndarray) -> np.ndarray:
        # position of y in labels, or -1 when y is not one of them
        if len(sorted_labs) == 0:
            return np.full(len(y), -1)
        pos = np.clip(np.searchsorted(sorted_labs, y), 0, len(sorted_labs) - 1)
        return np.where(sorted_labs[pos] == y, order[pos], -1)

    gi, pi = index(g), index(p)
    n = len(labs)
    hit = (g == p) & (gi >= 0)
    tp = np.bincount(gi[hit], weights=w[hit], minlength=n)
    n_gold = np.bincount(gi[gi >= 0], weights=w[gi >= 0], minlength=n)
    n_pred = np.bincount(pi[pi >= 0], weights=w[pi >= 0], minlength=n)
    return labs, tp, n_gold, n_pred


def per_label_prf(
    gold: Sequence[Hashable] | np.ndarray,
    pred: Sequence[Hashable] | np.ndarray,
    labels: Sequence[Hashable] | None = None,
    weights: Sequence[float] | np.ndarray | None = None,
) -> list[dict]:
    """Precision, recall and F1 of each label (one-vs-rest).

    For label k: precision = tp_k / #pred_k, recall = tp_k / #gold_k,
    F1 = 2PR / (P + R), counts weighted by ``weights``; the same as
    ``sklearn.metrics.precision_recall_fscore_support(average=None,
    zero_division=0)``.

    Parameters
    ----------
    gold, pred : array-like, shape (m,)
    labels : sequence, optional
        Labels to report, in this order; default: every label seen in gold
        or pred, sorted. Events whose labels are not listed count for no row.
    weights : array-like of float, shape (m,), optional

    Returns
    -------
    list of dict
        One per label: label, precision, recall, f1, support (weighted
        number of gold events with that label; an int without weights).
    """
    labs, tp, n_gold, n_pred = _label_counts(gold, pred, labels, weights)
    rows = []
    for lab, t, ng, npred in zip(labs.tolist(), tp, n_gold, n_pred):
        p, r = _ratio(t, npred), _ratio(t, ng)
        rows.append(
            {
                "label": lab,
                "precision": p,
                "recall": r,
                "f1": _f1(p, r),
                "support": int(ng) if weights is None else float(ng),
            }
        )
    return rows


def prf_summary(
    gold: Sequence[Hashable] | np.ndarray,
    pred: Sequence[Hashable] | np.ndarray,
    labels: Sequence[Hashable] | None = None,
    weights: Sequence[float] | np.ndarray | None = None,
) -> dict:
    """Per-label scores and their micro, macro and weighted averages.

    * micro: precision = sum tp / sum #pred, recall = sum tp / sum #gold over
      ``labels``; with all labels listed both equal the accuracy. Leave a
      "null" label (e.g. "O") out of ``labels`` to score the others only.
    * macro: unweighted mean of the per-label precision, recall and F1 (F1
      is the mean of the F1s, as in scikit-learn, not the F1 of the means).
    * weighted: mean of the per-label scores weighted by support.

    Returns
    -------
    dict
        per_label (as ``per_label_prf``), micro, macro, weighted: each a dict
        of precision, recall, f1, support.
    """
    rows = per_label_prf(gold, pred, labels, weights)
    _, tp, n_gold, n_pred = _label_counts(gold, pred, labels, weights)
    total = float(n_gold.sum())
    mp, mr = _ratio(tp.sum(), n_pred.sum()), _ratio(tp.sum(), total)
    P = np.array([r["precision"] for r in rows])
    R = np.array([r["recall"] for r in rows])
    F = np.array([r["f1"] for r in rows])
    mean = (lambda a: float(a.mean())) if rows else (lambda a: 0.0)
    wmean = (lambda a: float(a @ n_gold) / total) if total > 0 else (lambda a: 0.0)
    support = int(total) if weights is None else total
    return {
        "per_label": rows,
        "micro": {"precision": mp, "recall": mr, "f1": _f1(mp, mr), "support": support},
        "macro": {"precision": mean(P), "recall": mean(R), "f1": mean(F), "support": support},
        "weighted": {"precision": wmean(P), "recall": wmean(R), "f1": wmean(F), "support": support},
    }


# ---- chunks (conlleval) -------------------------------------------------------------

# conlleval: `$tag =~ /^([^-]*)-(.*)$/`: prefix up to the first hyphen, type after it
_TAG_RE = re.compile(r"^([^-]*)-(.*)$", re.DOTALL)


def split_tag(tag: str, raw: bool = False) -> tuple[str, str]:
    """A chunk tag as conlleval reads it: (prefix, type).

    ``"B-NP"`` -> ("B", "NP"); ``"B-PP-LOC"`` -> ("B", "PP-LOC") (types may hold
    hyphens); a tag without a hyphen (``"O"``, ``"NN"``) has type "". A type of
    "0" reads as "" (Perl's truth test in conlleval). With ``raw`` (conlleval
    ``-r``: tags without B-/I- prefix, one word per chunk) every tag other
    than "O" is read as "B-" + tag.
    """
    if raw and tag != "O":
        tag = "B-" + tag
    m = _TAG_RE.match(tag)
    if m is None:
        return tag, ""
    prefix, typ = m.group(1), m.group(2)
    return prefix, ("" if typ == "0" else typ)


def _end_of_chunk(prev_tag: str, tag: str, prev_type: str, typ: str) -> bool:
    """conlleval endOfChunk: did a chunk end between the previous token and this one?"""
    if prev_tag in ("B", "I") and tag in ("B", "O"):
        return True
    if prev_tag == "E" and tag in ("E", "I", "O"):
        return True
    # a type switch ends a chunk, unless the previous token was outside
    if prev_tag not in ("O", ".") and prev_type != typ:
        return True
    # "[" and "]" chunks are one token long (conlleval correction 1998-12-22)
    return prev_tag in ("[", "]")


def _start_of_chunk(prev_tag: str, tag: str, prev_type: str, typ: str) -> bool:
    """conlleval startOfChunk: did a chunk start at this token?"""
    if tag == "B" and prev_tag in ("B", "I", "O"):
        return True
    if tag == "I" and prev_tag in ("O", "E"):  # I-X after O starts a chunk (IOB1)
        return True
    if tag == "E" and prev_tag in ("E", "O"):
        return True
    # a type switch starts a chunk, unless this token is outside
    if tag not in ("O", ".") and prev_type != typ:
        return True
    return tag in ("[", "]")


def chunks(tags: Sequence[str], raw: bool = False) -> set[tuple[str, int, int]]:
    """Chunks of one sentence under conlleval's rules.

    A sentence is preceded and followed by an outside token (conlleval's
    sentence boundary), so chunks never cross sentences. With IOB1/IOB2 tags:
    "B-X" always starts a chunk; "I-X" starts one after "O", at the start of
    a sentence, or after a tag of another type; a chunk ends before "O",
    before "B-", before a type switch, and at the sentence end. A tag without
    a type ("NN") never starts a chunk unless it follows a typed tag (a type
    switch to type ""): conlleval scores such tags only with ``raw`` (``-r``),
    where each non-"O" tag is a one-token chunk. IOE ("E-X") and bracket
    ("[-X", "]-X") tags follow conlleval too.

    Parameters
    ----------
    tags : sequence of str, length n
    raw : bool
        conlleval's ``-r``: read every non-"O" tag as "B-" + tag.

    Returns
    -------
    set of (type, start, end)
        Token positions, ``end`` inclusive (first and last token of the
        chunk); the type is that of the chunk's first token. Where conlleval
        starts a chunk without ending the open one (only possible with
        non-IOB tag mixes such as "E-X B-X" or "[-X"), the open chunk is closed
        at the previous token; conlleval never counts such a chunk as correct
        (``chunk_prf`` follows it exactly).
    """
    out: set[tuple[str, int, int]] = set()
    prev, prev_type = "O", ""
    start, open_type = -1, ""
    for i, tag in enumerate(tags):
        cur, typ = split_tag(tag, raw)
        if start >= 0 and _end_of_chunk(prev, cur, prev_type, typ):
            out.add((open_type, start, i - 1))
            start = -1
        if _start_of_chunk(prev, cur, prev_type, typ):
            if start >= 0:
                out.add((open_type, start, i - 1))
            start, open_type = i, typ
        prev, prev_type = cur, typ
    if start >= 0:
        out.add((open_type, start, len(tags) - 1))
    return out


def chunk_prf(
    gold_sentences: Sequence[Sequence[str]],
    pred_sentences: Sequence[Sequence[str]],
    raw: bool = False,
) -> dict:
    """Chunk precision, recall and F1 exactly as conlleval computes them.

    A predicted chunk is correct only when its type and both boundaries
    match a gold chunk. This is a token-by-token port of conlleval's main
    loop (version 2004-01-26), with a sentence boundary (an "O" token in both
    columns, as conlleval reads an empty line) after every sentence; for IOB
    tags it equals intersecting the sets of ``chunks`` sentence by sentence.

    Parameters
    ----------
    gold_sentences, pred_sentences : sequence of sequence of str
        Tags per token per sentence; the two must agree in the number of
        sentences and of tokens in each.
    raw : bool
        conlleval's ``-r`` (see ``split_tag``).

    Returns
    -------
    dict
        precision, recall, f1 : float in [0, 1] (fractions, not percent)
        n_gold, n_pred, n_correct : int   (conlleval's "phrases", "found",
            "correct")
        accuracy : float   (token tag accuracy, boundaries excluded)
        by_type : dict type -> dict(precision, recall, f1, n_gold, n_pred,
            n_correct)
    """
    _check_sentences(gold_sentences, pred_sentences)
    n_correct = n_gold = n_pred = correct_tags = n_tokens = 0
    by_type: dict[str, list[int]] = {}  # type -> [correct, gold, pred]

    def bump(typ: str, slot: int) -> None:
        by_type.setdefault(typ, [0, 0, 0])[slot] += 1

    in_correct = False
    last_c, last_ct, last_g, last_gt = "O", "", "O", ""
    for g_sent, p_sent in zip(gold_sentences, pred_sentences):
        # the trailing (None, None) is the sentence boundary, read as O / O
        for g_tag, p_tag in [*zip(g_sent, p_sent), (None, None)]:
            boundary = g_tag is None
            if g_tag is None:
                c, ct, g, gt = "O", "", "O", ""
            else:
                assert p_tag is not None, "only the boundary pair is (None, None)"
                c, ct = split_tag(g_tag, raw)
                g, gt = split_tag(p_tag, raw)
            end_c = _end_of_chunk(last_c, c, last_ct, ct)
            end_g = _end_of_chunk(last_g, g, last_gt, gt)
            start_c = _start_of_chunk(last_c, c, last_ct, ct)
            start_g = _start_of_chunk(last_g, g, last_gt, gt)
            if in_correct:
                if end_c and end_g and last_gt == last_ct:
                    in_correct = False
                    n_correct += 1
                    bump(last_ct, 0)
                elif end_c != end_g or gt != ct:
                    in_correct = False
            if start_c and start_g and gt == ct:
                in_correct = True
            if start_c:
                n_gold += 1
                bump(ct, 1)
            if start_g:
                n_pred += 1
                bump(gt, 2)
            if not boundary:
                correct_tags += int(c == g and ct == gt)
                n_tokens += 1
            last_c, last_ct, last_g, last_gt = c, ct, g, gt
    if in_correct:  # conlleval: a chunk still open at the end of input counts
        n_correct += 1
        bump(last_ct, 0)

    return {
        **_prf(n_correct, n_gold, n_pred),
        "accuracy": _ratio(correct_tags, n_tokens),
        "by_type": {typ: _prf(*by_type[typ]) for typ in sorted(by_type)},
    }


def _prf(n_correct: int, n_gold: int, n_pred: int) -> dict:
    p, r = _ratio(n_correct, n_pred), _ratio(n_correct, n_gold)
    return {
        "precision": p,
        "recall": r,
        "f1": _f1(p, r),
        "n_gold": n_gold,
        "n_pred": n_pred,
        "n_correct": n_correct,
    }


def _check_sentences(gold_sentences, pred_sentences) -> None:
    if len(gold_sentences) != len(pred_sentences):
        raise ValueError(
            f"expected as many predicted sentences as gold ones, got "
            f"{len(pred_sentences)} predicted for {len(gold_sentences)} gold"
        )
    for s, (g, p) in enumerate(zip(gold_sentences, pred_sentences)):
        if isinstance(g, str) or isinstance(p, str):
            raise ValueError(f"expected sentences as lists of tags, got a string at sentence {s}")
        if len(g) != len(p):
            raise ValueError(
                f"sentence {s}: expected {len(g)} predicted tags (one per gold tag), got {len(p)}"
            )


# ---- a whole test set ---------------------------------------------------------


def is_iob(labels: Sequence[str]) -> bool:
    """Whether labels are IOB chunk tags (some start with B- or I-)."""
    return any(str(label)[:2] in ("B-", "I-") for label in labels)


def score_tagging(
    groups: np.ndarray,
    event_ids: np.ndarray,
    gold: Sequence[Hashable] | np.ndarray,
    pred: Sequence[Hashable] | np.ndarray,
    labels: Sequence[str],
    chunks: bool | None = None,
) -> dict:
    """Accuracy, per-label P/R/F1 and, for IOB chunk tags, conlleval chunk
    P/R/F1 of predictions on events in any order: events are put back in
    source order (``group`` = sentence, then ``event_id``). A gold label not
    among ``labels`` (unseen in training) is never predicted: an error.
    ``chunks`` None: score chunks when the labels are IOB tags."""
    if chunks is None:
        chunks = is_iob(labels)
    order = np.lexsort((np.asarray(event_ids), np.asarray(groups)))
    gold = np.asarray(gold, dtype=object)[order]
    pred = np.asarray(pred, dtype=object)[order]
    groups = np.asarray(groups)[order]
    unseen = ~np.isin(gold, np.asarray(list(labels), dtype=object))
    report = {
        "events": int(len(gold)),
        "accuracy": accuracy(gold, pred),
        "unseen_gold_labels": int(unseen.sum()),
        "per_label": per_label_prf(gold, pred, list(labels)),
    }
    if chunks:
        cuts = np.flatnonzero(np.diff(groups)) + 1
        report["chunks"] = chunk_prf(
            [list(s) for s in np.split(gold, cuts)], [list(s) for s in np.split(pred, cuts)]
        )
    return report


def evaluate_dataset(
    dataset_dir: str, weights, space, scaling=None, chunks: bool | None = None, conjunctions=None
) -> dict:
    """``score_tagging`` of in-process predictions on a prepared multiclass
    dataset (prepared with the training vocabulary, duplicates not merged);
    for benchmarks and data that fit the driver. ``chunks`` None: when the
    labels are IOB tags. ``conjunctions``: formed in the events first
    (weights over atoms and conjunctions)."""
    from .data.load import read_events_table
    from .data.schema import DatasetInfo, block_from_arrow
    from .kernels.blocks import MulticlassBlock
    from .kernels.predict import predict_multiclass

    info = DatasetInfo.load(dataset_dir)
    if info.shape != "multiclass":
        raise ValueError(f"{dataset_dir}: expected multiclass events, got {info.shape}")
    table = read_events_table(dataset_dir, info)
    block = block_from_arrow(table, info)
    assert isinstance(block, MulticlassBlock), "block_from_arrow follows info.shape"
    if conjunctions is not None:
        block = conjunctions.expand(block)
    predicted, _ = predict_multiclass(block, space, weights, scaling)
    labels = list(info.labels)
    gold = [info.label_name(int(y)) for y in table.column("label").to_numpy()]
    return score_tagging(
        table.column("group").to_numpy(),
        table.column("event_id").to_numpy(),
        gold,
        [labels[int(k)] for k in predicted],
        labels,
        chunks,
    )


# ---- model size --------------------------------------------------------------


def compression(n_selected: int, n_candidates: int) -> float:
    """Share of candidate features left out of the model, 1 - n_selected / n_candidates.

    Parameters
    ----------
    n_selected : int
        Features in the model (e.g. non-zero weights), 0 <= n_selected <= n_candidates.
    n_candidates : int
        Candidate features (> 0).
    """
    if n_candidates <= 0:
        raise ValueError(f"expected a positive number of candidate features, got {n_candidates}")
    if not 0 <= n_selected <= n_candidates:
        raise ValueError(
            f"expected 0 <= n_selected <= n_candidates = {n_candidates}, "
            f"got n_selected = {n_selected}"
        )
    return 1.0 - n_selected / n_candidates
