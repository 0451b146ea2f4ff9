"""The executor half of grafting's dense gradient test in one pass, without
shipping each data block's dense partial gradient to the driver:
thresholded partials.

The test (methods/gradient_test.py) needs, over all candidates, the ``n_best``
inactive features with |g_j| > t (t = gamma1_tested, in their order, with
their g_j), max |g_j| over the inactive ones and the count over t (the KKT
certificate), and g_j at the active features; g_j = sum_b G_bj / W over the
data blocks b.

Block b ships its exact sums at the active features, the inactive entries
with |G_bj| > tau W_b (tau = gamma1_cut = partial_cut t < t, W_b the
block's event weight), and m_b, the largest |G_bj| it kept back (m_b <= tau
W_b). If |sum_b G_bj| > t W then some
block has |G_bj| > t W_b > tau W_b, so a feature no block shipped has |g_j|
<= sum_b m_b / W <= tau < t: it is out of the test, bounded. For a shipped
feature the driver knows the sum S_j of the shipped parts and that the rest
is at most U_j, the sum of m_b over the blocks that kept it back:

    (|S_j| - U_j) / W  <=  |g_j|  <=  (|S_j| + U_j) / W

A feature with U_j = 0 is exact, bit for bit the dense sum (the same
partials added in the same merge order; a kept-back part is then 0).
The driver (``methods/partials.py`` ``resolve``) decides the test from
the intervals where they suffice and
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
from .curvature import Curvature, CurvatureTask
from .loss import LossGrad, LossGradTask, full_loss_grad, loss_grad_at
from .mergeable import Summed
from .params import Scaling, Space, Weights
from .topk import union_positions

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
    lg: LossGrad, active: np.ndarray, gamma1_cut: float, n_labels: int, keep: int | None = None
) -> ThresholdedGradient:
    """Block sums ``lg`` (gradient over all features) as a thresholded
    partial: exact at ``active``, elsewhere the entries with |G_j| > gamma1_cut W_b
    (and any non-finite one, which the driver's checks then reject), at
    most ``keep`` of them (those of largest |G_j|; None: all)."""
    score = np.abs(lg.grad)
    score[active] = 0.0
    ids = np.flatnonzero(~(score <= gamma1_cut * lg.weight)).astype(np.int64)
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
        max(gamma1_cut * lg.weight, float(rows.max(initial=0.0))),
    )


def _test_sums(block: Block, space: Space, weights: Weights, scaling: Scaling | None) -> LossGrad:
    """The dense test's own kernel: ``full_loss_grad`` (every feature), scored
    with the non-zero weights (``Objective.at``), so every sum here is
    the dense test's bit for bit."""
    return full_loss_grad(block, space, weights.sparse(), scaling)


@dataclass(frozen=True)
class ThresholdedTestTask:
    """A picklable pass of the thresholded test: per block, the dense test's
    sums shipped as a ``ThresholdedGradient`` at cut ``gamma1_cut``.

    ``weights`` lists every active feature (zero-valued ones included);
    ``gamma1_cut``: the cut, ``partial_cut`` times gamma1_tested (below it);
    ``keep``: each block ships at most this many entries above its cut."""

    space: Space
    weights: Weights
    scaling: Scaling | None
    gamma1_cut: float
    keep: int | None = None

    def __call__(self, block: Block) -> ThresholdedGradient:
        lg = _test_sums(block, self.space, self.weights, self.scaling)
        return threshold_partial(
            lg, self.weights.active_ids(), self.gamma1_cut, self.space.n_labels, self.keep
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


@dataclass
class WithPartial(Summed):
    """A solver pass's own sums (``lg``, its gradient over the solver's
    features only; ``hess_upper``, a curvature pass's Hessian as in
    ``Curvature``, else None) and the next gradient test's ``partial``."""

    lg: LossGrad
    hess_upper: np.ndarray | None
    partial: ThresholdedGradient


@dataclass(frozen=True)
class WithPartialTask:
    """A picklable full-gradient solver pass (``inner``: a ``LossGradTask``
    over every feature or a ``CurvatureTask`` with ``full_gradient``, both
    scoring the non-zero weights, so their gradient sums are the dense
    test's) that ships no dense gradient: per block its sums with the
    gradient cut to the features ``ids`` (the solver's), and the
    ``ThresholdedTestTask`` partial at cut ``gamma1_cut`` (at most ``keep``
    entries) of the test at the pass's weights with active features
    ``test_ids`` (the non-zero ones when the round prunes zeros), the
    thresholded test's pass there bit for bit."""

    inner: LossGradTask | CurvatureTask
    ids: np.ndarray
    test_ids: np.ndarray
    gamma1_cut: float
    keep: int | None = None

    def __call__(self, block: Block) -> WithPartial:
        out = self.inner(block)
        lg, hess = (out.lg, out.hess_upper) if isinstance(out, Curvature) else (out, None)
        part = threshold_partial(
            lg, self.test_ids, self.gamma1_cut, self.inner.space.n_labels, self.keep
        )
        return WithPartial(dataclasses.replace(lg, grad=lg.grad[self.ids]), hess, part)


__all__ = [
    "WithPartial",
    "WithPartialTask",
    "ExactSumsTask",
    "ThresholdedGradient",
    "ThresholdedTestTask",
    "threshold_partial",
]
