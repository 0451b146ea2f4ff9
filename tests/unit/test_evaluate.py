"""Metrics: accuracy, per-label P/R/F1 against scikit-learn, conlleval chunk scores, compression."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import precision_recall_fscore_support

from sparkmaxent.evaluate import (
    accuracy,
    chunk_prf,
    chunks,
    compression,
    per_label_prf,
    prf_summary,
    split_tag,
)

# ---- accuracy and per-label scores -----------------------------------------------------


def test_accuracy_plain_and_weighted():
    gold = ["a", "b", "b", "c"]
    pred = ["a", "b", "c", "c"]
    assert accuracy(gold, pred) == 0.75
    # the one error carries half of the weight
    assert accuracy(gold, pred, weights=[1, 1, 3, 1]) == pytest.approx(0.5)
    assert accuracy(np.array([0, 1]), np.array([1, 0])) == 0.0
    with pytest.raises(ValueError, match="3 predictions for 4 gold"):
        accuracy(gold, pred[:3])
    with pytest.raises(ValueError, match="positive total weight"):
        accuracy(gold, pred, weights=[0, 0, 0, 0])
    with pytest.raises(ValueError, match="non-negative"):
        accuracy(gold, pred, weights=[1, -1, 1, 1])


@pytest.mark.parametrize("weighted", [False, True])
def test_per_label_prf_matches_sklearn(weighted):
    rng = np.random.default_rng(4)
    labels = np.array(["DET", "NN", "VB", "JJ", "RB"])
    gold = labels[rng.integers(0, 5, 500)]
    # a noisy predictor: right 60% of the time, biased towards NN otherwise
    pred = np.where(
        rng.random(500) < 0.6, gold, labels[rng.choice(5, 500, p=[0.1, 0.5, 0.2, 0.1, 0.1])]
    )
    w = rng.uniform(0.1, 3.0, 500) if weighted else None
    order = ["VB", "NN", "JJ", "DET", "RB", "UNSEEN"]
    rows = per_label_prf(gold, pred, order, weights=w)
    P, R, F, S = precision_recall_fscore_support(
        gold, pred, labels=order, sample_weight=w, zero_division=0
    )
    assert [r["label"] for r in rows] == order
    np.testing.assert_allclose([r["precision"] for r in rows], P, rtol=1e-12)
    np.testing.assert_allclose([r["recall"] for r in rows], R, rtol=1e-12)
    np.testing.assert_allclose([r["f1"] for r in rows], F, rtol=1e-12)
    np.testing.assert_allclose([r["support"] for r in rows], S, rtol=1e-12)
    assert rows[-1] == {"label": "UNSEEN", "precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    summary = prf_summary(gold, pred, order[:4], weights=w)
    for avg in ("micro", "macro", "weighted"):
        p, r, f, _ = precision_recall_fscore_support(
            gold, pred, labels=order[:4], sample_weight=w, average=avg, zero_division=0
        )
        got = summary[avg]
        assert (got["precision"], got["recall"], got["f1"]) == pytest.approx((p, r, f), rel=1e-12)


def test_per_label_prf_default_labels_and_micro_equals_accuracy():
    gold = [2, 0, 1, 1, 2, 2]
    pred = [2, 1, 1, 0, 0, 2]
    rows = per_label_prf(gold, pred)
    assert [r["label"] for r in rows] == [0, 1, 2]
    # label 2: predicted twice, both right; 3 gold -> P 1, R 2/3
    assert rows[2]["precision"] == 1.0
    assert rows[2]["recall"] == pytest.approx(2 / 3)
    assert rows[2]["f1"] == pytest.approx(0.8)
    assert rows[0] == {"label": 0, "precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    micro = prf_summary(gold, pred)["micro"]
    assert micro["precision"] == micro["recall"] == accuracy(gold, pred) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="distinct labels"):
        per_label_prf(gold, pred, labels=[0, 0, 1])


# ---- conlleval chunks -------------------------------------------------------------------


@pytest.mark.parametrize(
    "tags, expected",
    [
        # IOB2: single-token chunks, chunk at the sentence end
        (["B-NP", "I-NP", "O", "B-VP", "B-NP", "I-NP"], {("NP", 0, 1), ("VP", 3, 3), ("NP", 4, 5)}),
        # IOB1: I-X after O, and I-X opening the sentence, start a chunk
        (["O", "I-NP", "I-NP", "O"], {("NP", 1, 2)}),
        (["I-NP", "I-NP"], {("NP", 0, 1)}),
        # ... by conlleval's O/I rule itself, not only by the type switch from "O"
        (["O", "I", "I", "O", "B", "I"], {("", 1, 2), ("", 4, 5)}),
        # IOB1: B-X after I-X of the same type starts a new chunk
        (["I-NP", "B-NP", "I-NP"], {("NP", 0, 0), ("NP", 1, 2)}),
        # B-X always starts a chunk, also after B-X
        (["B-NP", "B-NP"], {("NP", 0, 0), ("NP", 1, 1)}),
        # a type switch inside I- tags ends one chunk and starts another
        (["B-NP", "I-VP", "I-VP"], {("NP", 0, 0), ("VP", 1, 2)}),
        (["I-NP", "I-VP", "O", "I-VP"], {("NP", 0, 0), ("VP", 1, 1), ("VP", 3, 3)}),
        # types may contain hyphens
        (["B-PP-LOC", "I-PP-LOC", "I-PP"], {("PP-LOC", 0, 1), ("PP", 2, 2)}),
        # IOE1: E-X closes a chunk; I-X after E-X starts one
        (["I-NP", "I-NP", "E-NP", "I-NP", "O"], {("NP", 0, 2), ("NP", 3, 3)}),
        # bracket tags are one-token chunks
        (["[-NP", "[-NP", "O"], {("NP", 0, 0), ("NP", 1, 1)}),
        # tags without a type never start a chunk on their own (conlleval without -r) ...
        (["NN", "VB", "NN"], set()),
        (["O", "O"], set()),
        ([], set()),
        # ... unless they follow a typed tag: a switch to type "" (conlleval quirk)
        (["B-NP", "NN", "O"], {("NP", 0, 0), ("", 1, 2)}),
    ],
)
def test_chunks_follow_conlleval(tags, expected):
    assert chunks(tags) == expected


def test_chunks_raw_tags_are_one_token_each():
    assert chunks(["NP", "NP", "O", "VP"], raw=True) == {("NP", 0, 0), ("NP", 1, 1), ("VP", 3, 3)}
    assert split_tag("NP", raw=True) == ("B", "NP")
    assert split_tag("O", raw=True) == ("O", "")
    assert split_tag("I-PP-LOC") == ("I", "PP-LOC")
    assert split_tag("B-0") == ("B", "")  # Perl's truth test in conlleval


GOLD = [["B-NP", "I-NP", "O", "B-VP", "B-NP"], ["B-PP", "B-NP", "I-NP"]]
PRED = [["B-NP", "I-NP", "O", "B-VP", "I-VP"], ["B-PP", "B-NP", "O"]]


def test_chunk_prf_small_example():
    # gold: NP(0,1) VP(3,3) NP(4,4) | PP(0,0) NP(1,2); pred: NP(0,1) VP(3,4) | PP(0,0) NP(1,1)
    # conlleval: 5 phrases, found 4, correct 2; 6 of 8 tags right
    r = chunk_prf(GOLD, PRED)
    assert (r["n_gold"], r["n_pred"], r["n_correct"]) == (5, 4, 2)
    assert r["precision"] == 0.5
    assert r["recall"] == pytest.approx(0.4)
    assert r["f1"] == pytest.approx(2 * 0.5 * 0.4 / 0.9)
    assert r["accuracy"] == 0.75
    assert r["by_type"]["NP"] == {
        "precision": 0.5,
        "recall": pytest.approx(1 / 3),
        "f1": pytest.approx(0.4),
        "n_gold": 3,
        "n_pred": 2,
        "n_correct": 1,
    }
    assert r["by_type"]["VP"]["n_correct"] == 0 and r["by_type"]["VP"]["f1"] == 0.0
    assert r["by_type"]["PP"]["f1"] == 1.0
    perfect = chunk_prf(GOLD, GOLD)
    assert perfect["precision"] == perfect["recall"] == perfect["f1"] == 1.0


def test_chunk_prf_no_correct_chunk_gives_zero_f1():
    r = chunk_prf([["B-NP", "O"]], [["O", "B-NP"]])
    assert (r["n_gold"], r["n_pred"], r["n_correct"]) == (1, 1, 0)
    assert r["precision"] == r["recall"] == r["f1"] == 0.0
    empty = chunk_prf([["O"]], [["O"]])
    assert empty["f1"] == 0.0 and empty["accuracy"] == 1.0


def test_chunks_never_cross_sentences():
    # I-NP opening the second sentence starts a new chunk: the boundary is an O
    split = chunk_prf([["B-NP"], ["I-NP"]], [["B-NP"], ["I-NP"]])
    joined = chunk_prf([["B-NP", "I-NP"]], [["B-NP", "I-NP"]])
    assert split["n_gold"] == 2 and joined["n_gold"] == 1
    # a chunk running to the end of sentence 1 is closed there, so it is correct
    r = chunk_prf([["B-NP", "I-NP"], ["I-NP", "O"]], [["B-NP", "I-NP"], ["B-VP", "O"]])
    assert r["n_correct"] == 1 and r["n_gold"] == 2 and r["n_pred"] == 2


def test_chunk_prf_equals_chunk_set_intersection_on_iob_tags():
    rng = np.random.default_rng(7)
    pool = np.array(["O", "B-NP", "I-NP", "B-VP", "I-VP", "I-PP"])
    gold = [list(pool[rng.integers(0, 6, n)]) for n in rng.integers(0, 12, 300)]
    pred = [[t if rng.random() < 0.7 else pool[rng.integers(0, 6)] for t in s] for s in gold]
    r = chunk_prf(gold, pred)
    assert r["n_correct"] == sum(len(chunks(g) & chunks(p)) for g, p in zip(gold, pred))
    assert r["n_gold"] == sum(len(chunks(g)) for g in gold)
    assert r["n_pred"] == sum(len(chunks(p)) for p in pred)
    assert 0 < r["n_correct"] < r["n_gold"]


def test_chunk_prf_quirks_of_conlleval():
    # E-X B-X neither ends nor starts a chunk; [-X starts one without ending
    # the open one, which conlleval then never counts as correct
    r = chunk_prf([["B-NP", "[-NP", "O"]], [["B-NP", "[-NP", "O"]])
    assert (r["n_gold"], r["n_pred"], r["n_correct"]) == (2, 2, 1)
    # bare tags score nothing without raw, one-token chunks with it
    assert chunk_prf([["NN", "VB"]], [["NN", "VB"]])["n_gold"] == 0
    raw = chunk_prf([["NN", "VB"]], [["NN", "NN"]], raw=True)
    assert (raw["n_gold"], raw["n_pred"], raw["n_correct"]) == (2, 2, 1)


def test_chunk_prf_rejects_misaligned_input():
    with pytest.raises(ValueError, match="1 predicted for 2 gold"):
        chunk_prf(GOLD, PRED[:1])
    with pytest.raises(ValueError, match="sentence 1: expected 3 predicted tags"):
        chunk_prf(GOLD, [PRED[0], PRED[1][:2]])
    with pytest.raises(ValueError, match="lists of tags"):
        chunk_prf(["B-NP O"], ["B-NP O"])


# ---- compression ---------------------------------------------------------------


def test_compression():
    assert compression(561, 307_000) == pytest.approx(1 - 561 / 307_000)
    assert compression(0, 10) == 1.0 and compression(10, 10) == 0.0
    with pytest.raises(ValueError, match="n_selected <= n_candidates = 10"):
        compression(11, 10)
    with pytest.raises(ValueError, match="positive number of candidate"):
        compression(0, 0)
