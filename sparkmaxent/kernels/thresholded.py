"""The dense gradient test of grafting in one pass, without shipping each data
block's dense partial gradient to the driver: thresholded partials.

The test (selection/grafting.py) needs, over all candidates, the ``n_best``
inactive features with |g_j| > t (in their order, with their g_j), max
|g_j| over the inactive ones and the count over t (the KKT certificate), and
g_j at the active features; g_j = sum_b G_bj / W over the data blocks b.

Block b ships its exact sums at the active features, the inactive entries
with |G_bj| > tau W_b (tau < t, W_b the block's event weight), and m_b, the
largest |G_bj| it kept back (m_b <= tau W_b). If |sum_b G_bj| > t W then some
block has |G_bj| > t W_b > tau W_b, so a feature no block shipped has |g_j|
<= sum_b m_b / W <= tau < t: it is out of the test, bounded. For a shipped
feature the driver knows the sum S_j of the shipped parts and that the rest
is at most U_j, the sum of m_b over the blocks that kept it back:

    (|S_j| - U_j) / W  <=  |g_j|  <=  (|S_j| + U_j) / W

A feature with U_j = 0 is exact, bit for bit the dense sum (the same
partials added in the same merge order; a kept-back part is then 0).
``resolve`` decides the test from the intervals where they suffice and
names the few features whose exact sums it needs otherwise (one that may
or may not pass, one that may be among the n best, the maximum); a second
pass (``ExactSumsTask``, over those features' columns only) brings them,
and the answer is then the dense test's. The bytes shipped follow the
features near or above the threshold instead of every predicate a block
holds.

A block may also cap what it ships at its ``keep`` entries of largest
|G_bj| (a selection-only test needs the n best, not the count over t; the
threshold algorithm of Fagin, Lotem & Naor 2003). Its kept-back parts are
then bounded by its cut c_b >= tau W_b (its largest kept-back |G_bj|), so
an unshipped feature of predicate row r has |g_j| <= min(rows_r, sum_b c_b)
/ W, which may pass: ``resolve`` fetches the unshipped features of every
row whose bound reaches the n-th best lower bound (none when the caps are
large enough) and leaves the rows that only may pass open, in the count.
A certificate's test (``exact_count``) runs uncapped.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .blocks import Block
from .loss import LossGrad, loss_grad, loss_grad_at
from .params import Scaling, Space, Weights
from .topk import top_candidates, union_positions

#: relative widening of every interval: covers the rounding of the sums, so
#: a bound is never tighter than the dense test's computed value
MARGIN = 1e-9
#: relative slack of ``resolve``'s cheap upper bound (|S_j| + U_j) / W, far
#: above the rounding of an interval's bound: below it a feature cannot pass
_NEAR = 1e-6
#: steps per octave of the pickled row bounds (``_code_rows``)
_STEPS = 8


def _code_rows(rows: np.ndarray) -> tuple[float, np.ndarray]:
    """Non-negative bounds as their maximum and a byte each, rounded up
    (``_decode_rows`` gives every bound back at least as large; 0 stays 0):
    a pickled partial's bounds cost a byte per predicate."""
    top = float(rows.max(initial=0.0))
    code = np.zeros(len(rows), dtype=np.uint8)
    nz = rows > 0
    octaves = np.log2(top / rows[nz]) * _STEPS - 1e-6  # rounds the bound up
    code[nz] = np.clip(255 - np.floor(np.maximum(octaves, 0.0)), 1, 255)
    return top, code


def _decode_rows(top: float, code: np.ndarray) -> np.ndarray:
    return np.where(code == 0, 0.0, top * np.exp2((code.astype(np.float64) - 255) / _STEPS))


@dataclass
class ThresholdedGradient:
    """A data block's (or several merged blocks') thresholded partial gradient.

    Attributes
    ----------
    loss, weight, correct, grad_bias : as in ``LossGrad``.
    active : ndarray, shape (n_active,)
        Exact gradient sums at the task's active features.
    ids : ndarray of int64, increasing
        Inactive features some block shipped.
    sums : ndarray, shape like ids
        The sum of their shipped parts.
    rest : ndarray, shape like ids
        Bound on the sum of their kept-back parts (0: exact).
    rows : ndarray, shape (n_predicates,)
        Bound on the sum of the kept-back parts of an unshipped feature of
        each predicate (feature j is of predicate j // n_labels): a block's
        largest kept-back |G_bj| in that predicate's row, 0 where the row's
        kept-back entries are all 0 (a predicate the block does not hold).
    n_labels : int
    cut : float
        Bound on the sum of the kept-back parts of any feature: the sum of
        the blocks' cuts (tau W_b, or a capped block's largest kept-back
        |G_bj|); below the threshold times W unless some block capped.
    """

    loss: float
    weight: float
    correct: float
    grad_bias: np.ndarray | None
    active: np.ndarray
    ids: np.ndarray
    sums: np.ndarray
    rest: np.ndarray
    rows: np.ndarray
    n_labels: int
    cut: float

    def merge(self, other: ThresholdedGradient) -> ThresholdedGradient:
        ids, mine, theirs = union_positions(self.ids, other.ids)
        # a + b where both shipped, as the dense merge adds them
        sums = np.zeros(len(ids))
        sums[mine] = self.sums
        sums[theirs] += other.sums
        K = self.n_labels
        rows = ids // K
        rest = np.minimum(self.rows[rows], self.cut)
        rest[mine] = self.rest
        theirs_rest = np.minimum(other.rows[rows], other.cut)
        theirs_rest[theirs] = other.rest
        rest += theirs_rest
        return ThresholdedGradient(
            self.loss + other.loss,
            self.weight + other.weight,
            self.correct + other.correct,
            None if self.grad_bias is None else self.grad_bias + other.grad_bias,
            self.active + other.active,
            ids,
            sums,
            rest,
            self.rows + other.rows,
            K,
            self.cut + other.cut,
        )

    def scalars(self) -> LossGrad:
        """Loss, weight, correct and bias sums as a LossGrad without gradient."""
        return LossGrad(self.loss, self.weight, self.correct, np.zeros(0), self.grad_bias)

    def with_exact(self, ids: np.ndarray, sums: np.ndarray) -> ThresholdedGradient:
        """The same partial with the exact sums ``sums`` at features ``ids``
        (increasing; a fetch pass's answer), shipped or not."""
        all_ids, mine, theirs = union_positions(self.ids, ids)
        out_sums, rest = np.zeros(len(all_ids)), np.zeros(len(all_ids))
        out_sums[mine], rest[mine] = self.sums, self.rest
        out_sums[theirs], rest[theirs] = sums, 0.0
        return dataclasses.replace(self, ids=all_ids, sums=out_sums, rest=rest)

    # Pickled (a partition's result on its way to the driver): ids as a bit
    # mask over the features or as 32-bit integers, whichever is smaller;
    # rest omitted while all 0 (a single block's); the row bounds a byte
    # each, rounded up (bounds stay bounds).
    def __getstate__(self) -> dict:
        state = {k: v for k, v in vars(self).items() if k not in ("ids", "rest", "rows")}
        n = len(self.rows) * self.n_labels
        if 32 * len(self.ids) > n:
            mask = np.zeros(n, dtype=bool)
            mask[self.ids] = True
            state["ids_mask"] = np.packbits(mask)
        else:
            state["ids"] = self.ids.astype(np.uint32 if n < 2**32 else np.int64)
        if self.rest.any():
            state["rest"] = self.rest
        state["n_rows"] = len(self.rows)
        state["rows_top"], state["rows_code"] = _code_rows(self.rows)
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        n = state["n_rows"] * state["n_labels"]
        if "ids_mask" in state:
            # as bool: numpy's nonzero over bytes known to be 0/1 is far faster
            ids = np.flatnonzero(np.unpackbits(state.pop("ids_mask"), count=n).view(bool))
        else:
            ids = state.pop("ids")
        state["ids"] = ids.astype(np.int64, copy=False)
        state.setdefault("rest", np.zeros(len(ids)))
        state["rows"] = _decode_rows(state.pop("rows_top"), state.pop("rows_code"))
        del state["n_rows"]
        self.__dict__.update(state)


def threshold_partial(
    lg: LossGrad, active: np.ndarray, tau: float, n_labels: int, keep: int | None = None
) -> ThresholdedGradient:
    """Block sums ``lg`` (gradient over all features) as a thresholded
    partial: exact at ``active``, elsewhere the entries with |G_j| > tau W_b
    (and any non-finite one, which the driver's checks then reject), at
    most ``keep`` of them (those of largest |G_j|; None: all)."""
    score = np.abs(lg.grad)
    score[active] = 0.0
    ids = np.flatnonzero(~(score <= tau * lg.weight)).astype(np.int64)
    if keep is not None and len(ids) > keep:
        # non-finite entries first, so the driver's checks see them
        rank = np.nan_to_num(score[ids], nan=np.inf)
        ids = np.sort(ids[np.argpartition(rank, len(ids) - keep)[len(ids) - keep :]])
    score[ids] = 0.0
    # a segment maximum per predicate row: the same values as a row-wise
    # max over the (predicates, labels) view, without its per-row loop
    rows = (
        np.maximum.reduceat(score, np.arange(0, len(score), n_labels))
        if len(score)
        else np.zeros(0)
    )
    return ThresholdedGradient(
        lg.loss,
        lg.weight,
        lg.correct,
        lg.grad_bias,
        lg.grad[active],
        ids,
        lg.grad[ids],
        np.zeros(len(ids)),
        rows,
        n_labels,
        max(tau * lg.weight, float(rows.max(initial=0.0))),
    )


def _test_sums(block: Block, space: Space, weights: Weights, scaling: Scaling | None) -> LossGrad:
    """The dense test's own kernel: ``loss_grad`` over every feature, scored
    with the non-zero weights (``Objective.evaluate``), so every sum here is
    the dense test's bit for bit."""
    return loss_grad(block, space, weights.sparse(), scaling, None)


@dataclass(frozen=True)
class ThresholdedTestTask:
    """A picklable pass of the thresholded test: per block, the dense test's
    sums shipped as a ``ThresholdedGradient`` at cut ``tau``.

    ``weights`` lists every active feature (zero-valued ones included);
    ``keep``: each block ships at most this many entries above its cut."""

    space: Space
    weights: Weights
    scaling: Scaling | None
    tau: float
    keep: int | None = None

    def __call__(self, block: Block) -> ThresholdedGradient:
        lg = _test_sums(block, self.space, self.weights, self.scaling)
        return threshold_partial(
            lg, self.weights.active_ids(), self.tau, self.space.n_labels, self.keep
        )


@dataclass(frozen=True)
class ExactSumsTask:
    """A picklable pass: the thresholded test's sums at features ``ids`` only
    (its second pass), as a LossGrad: the dense test's sums there bit for
    bit, from the gathered columns of ``ids`` (``loss_grad_at``), not a
    kernel over every feature."""

    space: Space
    weights: Weights
    scaling: Scaling | None
    ids: np.ndarray

    def __call__(self, block: Block) -> LossGrad:
        return loss_grad_at(block, self.space, self.weights.sparse(), self.scaling, self.ids)


@dataclass(frozen=True)
class Decided:
    """The test's answer, the dense test's bit for bit (``n_over`` too once
    ``n_undecided`` is 0).

    Attributes
    ----------
    new : ndarray of int64
        The n best inactive features over the threshold, the best first.
    new_grad : ndarray
        Their g_j.
    best : float
        max |g_j| over the inactive features.
    n_over : int
        Inactive features known to have |g_j| > threshold.
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
    threshold: float,
    n_best: int,
    exact_count: bool = True,
) -> Decided | np.ndarray:
    """The gradient test from merged partials ``part`` at ``weights`` (every
    active feature), or the features whose exact sums it needs to be decided
    (``ThresholdedGradient.with_exact``; one such step always suffices).

    g_j = sums / W as the dense test divides (W = part.weight), gamma2 w_j
    added at the active features; a candidate passes when |g_j| > threshold.
    ``exact_count``: also decide every feature that may pass (the
    certificate's count), not only those that may be among the n best.

    The intervals are worked out only where the upper bound may pass (a
    cheap bound whose factor dwarfs the rounding of the interval's): every
    other shipped feature is out of the test, unless nothing surely passes
    and the maximum is wanted, when all of them are looked at."""
    active_grad = part.active / part.weight
    active_grad += l2 * weights.values
    near = np.flatnonzero((np.abs(part.sums) + part.rest) * (1 + _NEAR) > threshold * part.weight)
    out = _decide(part, near, weights, threshold, n_best, exact_count)
    if out is None:
        out = _decide(part, None, weights, threshold, n_best, exact_count)
    if isinstance(out, np.ndarray):
        return out
    assert out is not None, "the test over every shipped feature always decides"
    new, new_grad, best, n_over, n_undecided = out
    return Decided(new, new_grad, best, n_over, n_undecided, active_grad)


def _decide(
    part: ThresholdedGradient,
    at: np.ndarray | None,
    weights: Weights,
    threshold: float,
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
    sure, maybe = lo > threshold, hi > threshold
    if at is not None and not sure.any():
        return None
    # the n best: a feature whose upper bound is below the n-th best lower
    # bound has n better ones; every other that may pass is a contender
    floor = threshold
    if np.count_nonzero(sure) >= n_best:
        floor = float(np.partition(lo[sure], -n_best)[-n_best])
    contenders = maybe & (hi >= floor)
    undecided = maybe & ~sure
    need = ~exact & (contenders | undecided) if exact_count else ~exact & contenders
    # unshipped features: bounded per predicate row, over the threshold
    # only in rows of a block that capped what it shipped
    row_hi = np.zeros(0)
    open_rows = np.zeros(0, dtype=np.int64)
    if part.cut * (1 + MARGIN) > threshold * W:
        row_hi = np.minimum(part.rows, part.cut) * (1 + MARGIN) / W
        open_rows = np.flatnonzero(row_hi > threshold)
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
    top = keep[top_candidates(score[keep], ids[keep], threshold, n_best)]
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


__all__ = [
    "Decided",
    "ExactSumsTask",
    "ThresholdedGradient",
    "ThresholdedTestTask",
    "resolve",
    "threshold_partial",
]
