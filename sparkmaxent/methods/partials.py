"""The driver half of the thresholded gradient test (kernels/thresholded.py
ships the partials; this module decides from them): ``resolve`` works out
each shipped feature's interval

    (|S_j| - U_j) / W  <=  |g_j|  <=  (|S_j| + U_j) / W

decides the test (the n best over gamma1_tested, the maximum, the count
over it) where the intervals suffice, and otherwise names the few
features whose exact sums one second pass brings
(``ThresholdedGradient.with_exact``). The answer is then the dense test's
bit for bit. Unshipped features of a block that capped what it shipped are
bounded per predicate row (the threshold algorithm of Fagin, Lotem & Naor
2003). The derivation is in kernels/thresholded.py's docstring.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import Weights
from ..kernels.thresholded import ThresholdedGradient
from ..kernels.topk import top_candidates

#: relative widening of every interval: covers the rounding of the sums, so
#: a bound is never tighter than the dense test's computed value
MARGIN = 1e-9
#: relative slack of ``resolve``'s cheap upper bound (|S_j| + U_j) / W, far
#: above the rounding of an interval's bound: below it a feature cannot pass
_NEAR = 1e-6


@dataclass(frozen=True)
class Decided:
    """The test's answer, the dense test's bit for bit (``n_over`` too once
    ``n_undecided`` is 0).

    Attributes
    ----------
    new : ndarray of int64
        The n best inactive features over gamma1_tested, the best first.
    new_grad : ndarray
        Their g_j.
    best : float
        max |g_j| over the inactive features.
    n_over : int
        Inactive features known to have |g_j| > gamma1_tested.
    n_undecided : int
        Inactive features that may or may not (none when asked for the
        exact count; else features outside the n best, left open).
    active_grad : ndarray
        g_j at the active features (gamma2 w_j included).
    """

    new: np.ndarray
    new_grad: np.ndarray
    best: float
    n_over: int
    n_undecided: int
    active_grad: np.ndarray


def resolve(
    part: ThresholdedGradient,
    weights: Weights,
    l2: float,
    gamma1_tested: float,
    n_best: int,
    exact_count: bool = True,
) -> Decided | np.ndarray:
    """The gradient test from merged partials ``part`` at ``weights`` (every
    active feature), or the features whose exact sums it needs to be decided
    (``ThresholdedGradient.with_exact``; one such step always suffices).

    g_j = sums / W as the dense test divides (W = part.weight), gamma2 w_j
    added at the active features; a candidate passes when |g_j| > gamma1_tested.
    ``exact_count``: also decide every feature that may pass (the
    certificate's count), not only those that may be among the n best.

    The intervals are worked out only where the upper bound may pass (a
    cheap bound whose factor dwarfs the rounding of the interval's): every
    other shipped feature is out of the test, unless nothing surely passes
    and the maximum is wanted, when all of them are looked at."""
    active_grad = part.active / part.weight
    active_grad += l2 * weights.values
    near = np.flatnonzero(
        (np.abs(part.sums) + part.rest) * (1 + _NEAR) > gamma1_tested * part.weight
    )
    out = _decide(part, near, weights, gamma1_tested, n_best, exact_count)
    if out is None:
        out = _decide(part, None, weights, gamma1_tested, n_best, exact_count)
    if isinstance(out, np.ndarray):
        return out
    assert out is not None, "the test over every shipped feature always decides"
    new, new_grad, best, n_over, n_undecided = out
    return Decided(new, new_grad, best, n_over, n_undecided, active_grad)


def _decide(
    part: ThresholdedGradient,
    at: np.ndarray | None,
    weights: Weights,
    gamma1_tested: float,
    n_best: int,
    exact_count: bool,
) -> tuple[np.ndarray, np.ndarray, float, int, int] | np.ndarray | None:
    """``resolve`` over the shipped features at positions ``at`` (None: all):
    (new, new_grad, best, n_over, n_undecided), or the features to fetch,
    or None when ``at`` is a subset and nothing surely passes."""
    W = part.weight
    ids, sums, rest = (
        (part.ids, part.sums, part.rest)
        if at is None
        else (part.ids[at], part.sums[at], part.rest[at])
    )
    score = np.abs(sums / W)
    exact = rest == 0
    half = np.where(exact, 0.0, (rest * (1 + MARGIN) + MARGIN * np.abs(sums)) / W)
    lo, hi = np.maximum(score - half, 0.0), score + half
    sure, maybe = lo > gamma1_tested, hi > gamma1_tested
    if at is not None and not sure.any():
        return None
    # the n best: a feature whose upper bound is below the n-th best lower
    # bound has n better ones; every other that may pass is a contender
    floor = gamma1_tested
    if np.count_nonzero(sure) >= n_best:
        floor = float(np.partition(lo[sure], -n_best)[-n_best])
    contenders = maybe & (hi >= floor)
    undecided = maybe & ~sure
    need = ~exact & (contenders | undecided) if exact_count else ~exact & contenders
    # unshipped features: bounded per predicate row, over gamma1_tested
    # only in rows of a block that capped what it shipped
    row_hi = np.zeros(0)
    open_rows = np.zeros(0, dtype=np.int64)
    if part.cut * (1 + MARGIN) > gamma1_tested * W:
        row_hi = np.minimum(part.rows, part.cut) * (1 + MARGIN) / W
        open_rows = np.flatnonzero(row_hi > gamma1_tested)
    fetch_rows = open_rows if exact_count else open_rows[row_hi[open_rows] >= floor]
    if not sure.any():
        # nothing surely passes: the maximum is wanted exactly (fetched with
        # every feature that may pass, so one fetch decides either way),
        # unshipped features of a row whose bound reaches it included
        top_lo = float(lo.max(initial=0.0))
        need |= ~exact & (hi >= top_lo)
        if not len(row_hi):
            row_hi = np.minimum(part.rows, part.cut) * (1 + MARGIN) / W
        reach = np.flatnonzero(row_hi >= max(top_lo, np.nextafter(0, 1)))
        fetch_rows = np.union1d(fetch_rows, reach)
    extra = _unshipped(part, fetch_rows, weights.active_ids())
    if need.any() or len(extra):
        return np.union1d(ids[need], extra)
    keep = np.flatnonzero(contenders)
    top = keep[top_candidates(score[keep], ids[keep], gamma1_tested, n_best)]
    best = float(score[top[0]]) if len(top) else float(score.max(initial=0.0))
    n_over = int(np.count_nonzero(sure))
    n_undecided = int(np.count_nonzero(undecided)) + _n_unshipped(
        part, open_rows, weights.active_ids()
    )
    return ids[top], sums[top] / W, best, n_over, n_undecided


def _in_rows(sorted_ids: np.ndarray, rows: np.ndarray, K: int) -> np.ndarray:
    """How many of ``sorted_ids`` (increasing) fall in each predicate row."""
    return np.searchsorted(sorted_ids, (rows + 1) * K) - np.searchsorted(sorted_ids, rows * K)


def _n_unshipped(part: ThresholdedGradient, rows: np.ndarray, active: np.ndarray) -> int:
    """Inactive features of predicate ``rows`` that no block shipped."""
    K = part.n_labels
    held = _in_rows(part.ids, rows, K).sum() + _in_rows(active, rows, K).sum()
    return int(K * len(rows) - held)


def _unshipped(part: ThresholdedGradient, rows: np.ndarray, active: np.ndarray) -> np.ndarray:
    """The inactive features of predicate ``rows`` that no block shipped."""
    K = part.n_labels
    feats = (rows[:, None] * K + np.arange(K)).ravel()
    for held in (part.ids, active):
        if len(held) and len(feats):
            pos = np.minimum(np.searchsorted(held, feats), len(held) - 1)
            feats = feats[held[pos] != feats]
    return feats


__all__ = ["Decided", "resolve"]
