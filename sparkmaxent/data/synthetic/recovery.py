"""Scoring a selected feature set against the planted truth."""

from __future__ import annotations

from collections.abc import Sequence

from .planted import CONJUNCTION_SEP, PlantedTruth, SyntheticData


def support_recovery(
    selected: set[tuple[str, str]] | Sequence[tuple[str, str]], data: SyntheticData | PlantedTruth
) -> dict:
    """How well a selected set of (feature, label) pairs recovers the truth.

    Single features are scored against ``data.true_support``; conjunction
    features (names holding ``"&"``, e.g. ``conjunction_name("p3", "p7")``,
    in either order) against ``data.true_conjunctions``, separately. A
    selected redundant copy is a false positive even though it carries the
    same information as its original. ``data`` may be the generated data or
    its ``PlantedTruth`` (e.g. loaded from ``truth.json``).

    Returns
    -------
    dict
        precision, recall : float
            Over single features; precision is 0 with nothing selected,
            recall is 1 with an empty true support.
        n_selected, n_true, n_correct : int
            Single features selected, in the true support, and both.
        n_copies_of_selected : int
            Selected copies whose original, with the same label, is selected too.
        n_copies_for_missed : int
            Selected copies whose original (same label) is in the true support
            but not selected: the selector took the copy instead.
        conj_precision, conj_recall : float
        n_conj_selected, n_conj_true, n_conj_correct : int
    """
    sel = set(selected)
    for item in sel:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise ValueError(f"expected (feature, label) pairs, got {item!r}")
    singles = {s for s in sel if CONJUNCTION_SEP not in s[0]}
    conj_sel = {(frozenset(s[0].split(CONJUNCTION_SEP)), s[1]) for s in sel - singles}
    truth = data.true_support
    conj_truth = {(frozenset(ab), k) for ab, k in data.true_conjunctions}

    n_correct = len(singles & truth)
    copies = data.redundant_copies
    of_selected = sum(1 for f, k in singles if f in copies and (copies[f], k) in singles)
    for_missed = sum(
        1
        for f, k in singles
        if f in copies and (copies[f], k) in truth and (copies[f], k) not in singles
    )
    n_conj_correct = len(conj_sel & conj_truth)
    return {
        "precision": n_correct / len(singles) if singles else 0.0,
        "recall": n_correct / len(truth) if truth else 1.0,
        "n_selected": len(singles),
        "n_true": len(truth),
        "n_correct": n_correct,
        "n_copies_of_selected": of_selected,
        "n_copies_for_missed": for_missed,
        "conj_precision": n_conj_correct / len(conj_sel) if conj_sel else 0.0,
        "conj_recall": n_conj_correct / len(conj_truth) if conj_truth else 1.0,
        "n_conj_selected": len(conj_sel),
        "n_conj_true": len(conj_truth),
        "n_conj_correct": n_conj_correct,
    }


__all__ = ["support_recovery"]
