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
pass (``ExactSumsTask``) brings them, and the answer is
then the dense test's. The bytes shipped follow the features near or above
the threshold instead of every predicate a block holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .blocks import Block
from .loss import LossGrad, loss_grad
from .params import Scaling, Space, Weights
from .topk import top_candidates, union_positions

#: relative widening of every interval: covers the rounding of the sums, so
#: a bound is never tighter than the dense test's computed value
MARGIN = 1e-9


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
    rest_all : float
        Bound on the sum of the kept-back parts of a feature no block shipped.
    """

    loss: float
    weight: float
    correct: float
    grad_bias: np.ndarray | None
    active: np.ndarray
    ids: np.ndarray
    sums: np.ndarray
    rest: np.ndarray
    rest_all: float

    def merge(self, other: ThresholdedGradient) -> ThresholdedGradient:
        ids, mine, theirs = union_positions(self.ids, other.ids)
        # a + b where both shipped, as the dense merge adds them
        sums = np.zeros(len(ids))
        sums[mine] = self.sums
        sums[theirs] += other.sums
        rest = np.full(len(ids), self.rest_all)
        rest[mine] = self.rest
        theirs_rest = np.full(len(ids), other.rest_all)
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
            self.rest_all + other.rest_all,
        )

    def scalars(self) -> LossGrad:
        """Loss, weight, correct and bias sums as a LossGrad without gradient."""
        return LossGrad(self.loss, self.weight, self.correct, np.zeros(0), self.grad_bias)

    def with_exact(self, ids: np.ndarray, sums: np.ndarray) -> ThresholdedGradient:
        """The same partial with the exact sums ``sums`` at shipped features
        ``ids`` (a fetch pass's answer)."""
        pos = np.searchsorted(self.ids, ids)
        if not np.array_equal(self.ids[np.minimum(pos, len(self.ids) - 1)], ids):
            raise ValueError("expected exact sums at shipped features only")
        out_sums, rest = self.sums.copy(), self.rest.copy()
        out_sums[pos], rest[pos] = sums, 0.0
        return ThresholdedGradient(
            self.loss,
            self.weight,
            self.correct,
            self.grad_bias,
            self.active,
            self.ids,
            out_sums,
            rest,
            self.rest_all,
        )


def threshold_partial(lg: LossGrad, active: np.ndarray, tau: float) -> ThresholdedGradient:
    """Block sums ``lg`` (gradient over all features) as a thresholded
    partial: exact at ``active``, elsewhere the entries with |G_j| > tau W_b
    (and any non-finite one, which the driver's checks then reject)."""
    score = np.abs(lg.grad)
    score[active] = 0.0
    ids = np.flatnonzero(~(score <= tau * lg.weight)).astype(np.int64)
    score[ids] = 0.0
    return ThresholdedGradient(
        lg.loss,
        lg.weight,
        lg.correct,
        lg.grad_bias,
        lg.grad[active],
        ids,
        lg.grad[ids],
        np.zeros(len(ids)),
        float(score.max(initial=0.0)),
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

    ``weights`` lists every active feature (zero-valued ones included)."""

    space: Space
    weights: Weights
    scaling: Scaling | None
    tau: float

    def __call__(self, block: Block) -> ThresholdedGradient:
        lg = _test_sums(block, self.space, self.weights, self.scaling)
        return threshold_partial(lg, self.weights.active_ids(), self.tau)


@dataclass(frozen=True)
class ExactSumsTask:
    """A picklable pass: the thresholded test's sums at features ``ids`` only
    (its second pass), as a LossGrad."""

    space: Space
    weights: Weights
    scaling: Scaling | None
    ids: np.ndarray

    def __call__(self, block: Block) -> LossGrad:
        lg = _test_sums(block, self.space, self.weights, self.scaling)
        return LossGrad(lg.loss, lg.weight, lg.correct, lg.grad[self.ids], lg.grad_bias)


@dataclass(frozen=True)
class Decided:
    """The test's answer, the dense test's bit for bit.

    Attributes
    ----------
    new : ndarray of int64
        The n best inactive features over the threshold, the best first.
    new_grad : ndarray
        Their g_j.
    best : float
        max |g_j| over the inactive features.
    n_over : int
        Inactive features with |g_j| > threshold.
    active_grad : ndarray
        g_j at the active features (gamma2 w_j included).
    """

    new: np.ndarray
    new_grad: np.ndarray
    best: float
    n_over: int
    active_grad: np.ndarray


@dataclass(frozen=True)
class Undecided:
    """What the intervals leave open: exact sums wanted at ``fetch`` (shipped
    features), or, when ``dense``, a feature no block shipped may hold the
    maximum and only the dense gradient tells."""

    fetch: np.ndarray
    dense: bool = False


def resolve(
    part: ThresholdedGradient,
    weights: Weights,
    l2: float,
    threshold: float,
    n_best: int,
    n_features: int,
) -> Decided | Undecided:
    """The gradient test from merged partials ``part`` at ``weights`` (every
    active feature), or what it needs to be decided.

    g_j = sums / W as the dense test divides (W = part.weight), gamma2 w_j
    added at the active features; a candidate passes when |g_j| > threshold."""
    W = part.weight
    active_grad = part.active / W
    active_grad += l2 * weights.values
    score = np.abs(part.sums / W)
    exact = part.rest == 0
    half = np.where(exact, 0.0, (part.rest * (1 + MARGIN) + MARGIN * np.abs(part.sums)) / W)
    lo, hi = np.maximum(score - half, 0.0), score + half
    sure, maybe = lo > threshold, hi > threshold
    # the n best: a feature whose upper bound is below the n-th best lower
    # bound has n better ones; every other that may pass is a contender
    floor = threshold
    if np.count_nonzero(sure) >= n_best:
        floor = float(np.partition(lo[sure], -n_best)[-n_best])
    contenders = maybe & (hi >= floor)
    need = ~exact & (contenders | (maybe & ~sure))
    dense = False
    if not sure.any():
        # nothing surely passes: the maximum is wanted exactly (fetched with
        # any feature that may pass, so one fetch decides either way)
        top_lo = float(lo.max(initial=0.0))
        need |= ~exact & (hi >= top_lo)
        unshipped = n_features - len(part.active) - len(part.ids)
        dense = unshipped > 0 and part.rest_all > 0 and part.rest_all * (1 + MARGIN) / W >= top_lo
    if need.any() or dense:
        return Undecided(part.ids[need], dense)
    keep = np.flatnonzero(contenders)
    top = keep[top_candidates(score[keep], part.ids[keep], threshold, n_best)]
    best = float(score[top[0]]) if len(top) else float(score.max(initial=0.0))
    return Decided(
        part.ids[top],
        part.sums[top] / W,
        best,
        int(np.count_nonzero(sure)),
        active_grad,
    )


__all__ = [
    "Decided",
    "ExactSumsTask",
    "ThresholdedGradient",
    "ThresholdedTestTask",
    "Undecided",
    "resolve",
    "threshold_partial",
]
