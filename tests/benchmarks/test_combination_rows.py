"""benchmarks/combination.py: a run's rows replace only the old rows of
the same measurement (task, method, degree, atoms, size, label)."""

from __future__ import annotations

from benchmarks.combination import merge_rows


def row(method, degree, atoms="10 unigrams", sentences=1000, label=None, score=0.0):
    out = {"task": "conll", "method": method, "degree": degree, "atoms": atoms}
    return {**out, "sentences": sentences, "label": label, "test_score": score}


def test_a_rerun_replaces_its_own_rows_and_keeps_every_other():
    old = [
        row("l1-Comb", 2, score=0.1),
        row("l1-Comb", 2, sentences=0, score=0.2),  # full data: another measurement
        row("l1-Comb", 2, atoms="17 templates", score=0.3),
        row("l1-Comb", 3, score=0.4),
        row("l1-Orig", 1, score=0.5),
        {**row("l1-Comb", 2, score=0.6), "task": "pp", "atoms": "words"},
    ]
    new = [row("l1-Comb", 2, score=0.9)]
    merged = merge_rows(old, new)
    assert [r["test_score"] for r in merged] == [0.2, 0.3, 0.4, 0.5, 0.6, 0.9]


def test_a_labelled_run_keeps_the_unlabelled_rows_of_the_same_method():
    old = [row("l1-Comb", 2, score=0.1), row("l1-Comb", 3, label="s5", score=0.2)]
    new = [row("l1-Comb", 2, label="s5", score=0.8), row("l1-Comb", 3, label="s5", score=0.9)]
    merged = merge_rows(old, new)
    assert [r["test_score"] for r in merged] == [0.1, 0.8, 0.9]
    # sentences 0 and None both mean every training sentence
    assert merge_rows([row("l2", 1, sentences=None)], [row("l2", 1, sentences=0)]) == [
        row("l2", 1, sentences=0)
    ]
