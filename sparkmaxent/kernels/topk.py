"""The block-wise gradient test: the n best candidates and the KKT figures of
grafting without a dense gradient over all candidates in one place.

The test needs only the ``n_best`` inactive features with the largest |g_j|
above a threshold, max |g_j| and the count above it, and g_j of the active
features; all three decompose over feature blocks (the global n best by
(-|g_j|, j) are among each block's n best). So each feature block is reduced
to a ``GradientSummary`` and the driver merges the summaries, never holding
a dense n_features vector. Feature block b covers ids [b * size, (b + 1) * size).

This module is the pure-numpy half: the top-k rule (``top_candidates``, also
the dense test's), the per-block summary, and its merge. The orchestration
is in backends (``LocalBackend.gradient_test``, ``SparkBackend.gradient_test``).
See docs/methods/grafting.md, "Block-wise gradient test".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .blocks import Block
from .loss import LossGrad, loss_grad
from .params import Scaling, Space, Weights

# Key of the scalar sums (loss, weight, correct, bias gradient) among the
# feature-block keys 0, 1, ... of a block-wise pass.
SCALARS_KEY = -1


def top_candidates(score: np.ndarray, ids: np.ndarray, threshold: float, n: int) -> np.ndarray:
    """Positions of the ``n`` best entries with ``score > threshold``, in the
    order (-score, id): the largest first, ties broken by the smaller id.

    The order is total, so the n best of a union are among the union of the
    n best of its parts: the block-wise test merges per-block answers with
    this same function and gets exactly the dense answer.

    Parameters
    ----------
    score : ndarray of float, shape (m,)
    ids : ndarray of int64, shape (m,)
        Feature ids of the entries (distinct).
    """
    if n < 1:
        raise ValueError(f"expected n_best >= 1, got {n}")
    passing = np.flatnonzero(score > threshold)
    if len(passing) > n:
        s = score[passing]
        kth = np.partition(s, len(s) - n)[len(s) - n]  # the n-th largest score
        # keep every entry tied with it: the id order decides among them
        passing = passing[s >= kth]
    order = np.lexsort((ids[passing], -score[passing]))
    return passing[order[:n]]


@dataclass
class GradientSummary:
    """What the gradient test keeps of g over some feature blocks (mergeable).

    Attributes
    ----------
    threshold : float
        Selection threshold; ``n_over`` counts against it too.
    n_best : int
    top_ids : ndarray of int64, shape (<= n_best,)
        Inactive features with |g_j| > threshold, the best first (order of
        ``top_candidates``).
    top_grad : ndarray, shape like top_ids
        Their g_j.
    max_inactive : float
        max |g_j| over inactive features (0 if none).
    n_over : int
        Inactive features with |g_j| > threshold.
    active_ids : ndarray of int64
        The active features in the blocks covered (any order until ``finish``).
    active_grad : ndarray
        Their g_j (gamma2 w_j included).
    n_features : int
        Features covered.
    lg : LossGrad or None
        Loss, weight, correct and bias-gradient sums of the pass (``grad``
        empty); set by the scalar piece.
    """

    threshold: float
    n_best: int
    top_ids: np.ndarray
    top_grad: np.ndarray
    max_inactive: float
    n_over: int
    active_ids: np.ndarray
    active_grad: np.ndarray
    n_features: int
    lg: LossGrad | None = None

    @staticmethod
    def empty(threshold: float, n_best: int, lg: LossGrad | None = None) -> GradientSummary:
        none = np.zeros(0, dtype=np.int64)
        return GradientSummary(
            threshold, n_best, none, np.zeros(0), 0.0, 0, none, np.zeros(0), 0, lg
        )

    def merge(self, other: GradientSummary) -> GradientSummary:
        if (self.threshold, self.n_best) != (other.threshold, other.n_best):
            raise ValueError(
                "cannot merge gradient summaries of different tests: threshold "
                f"{self.threshold} / {other.threshold}, "
                f"n_best {self.n_best} / {other.n_best}"
            )
        ids = np.concatenate([self.top_ids, other.top_ids])
        grad = np.concatenate([self.top_grad, other.top_grad])
        keep = top_candidates(np.abs(grad), ids, self.threshold, self.n_best)
        if self.lg is None or other.lg is None:
            lg = self.lg if other.lg is None else other.lg
        else:
            lg = self.lg.merge(other.lg)
        return GradientSummary(
            self.threshold,
            self.n_best,
            ids[keep],
            grad[keep],
            max(self.max_inactive, other.max_inactive),
            self.n_over + other.n_over,
            np.concatenate([self.active_ids, other.active_ids]),
            np.concatenate([self.active_grad, other.active_grad]),
            self.n_features + other.n_features,
            lg,
        )

    def finish(self, space: Space, active: np.ndarray) -> GradientSummary:
        """Check that every feature was covered once and sort the active
        features as ``active`` (the weights' ids)."""
        if self.n_features != space.n_features:
            raise RuntimeError(
                f"the block-wise gradient test covered {self.n_features} features, "
                f"expected all {space.n_features}"
            )
        if self.lg is None:
            raise RuntimeError("the block-wise gradient test lost its loss and weight sums")
        order = np.argsort(self.active_ids, kind="stable")
        ids = self.active_ids[order]
        if not np.array_equal(ids, active):
            raise RuntimeError(
                f"the block-wise gradient test returned {len(ids)} active features, "
                f"expected the {len(active)} of the weights"
            )
        return GradientSummary(
            self.threshold,
            self.n_best,
            self.top_ids,
            self.top_grad,
            self.max_inactive,
            self.n_over,
            ids,
            self.active_grad[order],
            self.n_features,
            self.lg,
        )


@dataclass(frozen=True)
class GradientTestTask:
    """A picklable block-wise gradient test at ``weights``.

    Per data block: ``partial`` (the dense partial gradient sums, the same
    kernel as the dense test) and ``split`` into keyed feature-block slices;
    per feature block, once the slices are summed: ``summarize``.

    Attributes
    ----------
    weights : Weights
        All active features (zero-valued ones included: they are excluded
        from selection like the rest); scoring uses the non-zero ones only,
        as the dense test does (``Objective.evaluate``).
    l2 : float
        gamma2: g_j = G_j / W + gamma2 w_j.
    threshold, n_best : selection rule of the test.
    block_size : int
        Features per feature block.
    """

    space: Space
    weights: Weights
    scaling: Scaling | None
    l2: float
    threshold: float
    n_best: int
    block_size: int

    def __post_init__(self):
        if self.block_size < 1:
            raise ValueError(f"expected a feature block size >= 1, got {self.block_size}")
        if self.n_best < 1:
            raise ValueError(f"expected n_best >= 1, got {self.n_best}")

    @property
    def n_blocks(self) -> int:
        return -(-self.space.n_features // self.block_size)

    def partial(self, block: Block) -> LossGrad:
        """Loss and dense gradient sums of one data block."""
        return loss_grad(block, self.space, self.weights.sparse(), self.scaling, None)

    def split(self, lg: LossGrad) -> Iterator[tuple[int, LossGrad]]:
        """``(SCALARS_KEY, LossGrad without grad)`` then ``(b, LossGrad of
        G[b-th block] alone)`` for every feature block b (slices are views).
        Pieces are LossGrads so that they pickle as LossGrads do, non-zeros
        only: a block's piece is zero at every predicate the block lacks."""
        yield SCALARS_KEY, LossGrad(lg.loss, lg.weight, lg.correct, np.zeros(0), lg.grad_bias)
        size = self.block_size
        for b in range(self.n_blocks):
            yield b, LossGrad(0.0, 0.0, 0.0, lg.grad[b * size : (b + 1) * size], None)

    def summarize(self, key: int, value: LossGrad, weight: float) -> GradientSummary:
        """The summary of one summed piece: the scalars, or feature block
        ``key`` with gradient sums ``value.grad`` (shape (<= block_size,))
        over total event weight ``weight``."""
        if key == SCALARS_KEY:
            return GradientSummary.empty(self.threshold, self.n_best, value)
        lo = key * self.block_size
        ids = self.weights.active_ids()
        a, b = np.searchsorted(ids, [lo, lo + len(value.grad)])
        local = ids[a:b] - lo
        # g = G / W + gamma2 w, element by element as the dense test computes it
        g = value.grad / weight
        g[local] += self.l2 * self.weights.values[a:b]
        score = np.abs(g)
        score[local] = -1.0  # active features are never selected again
        top = top_candidates(score, np.arange(lo, lo + len(g)), self.threshold, self.n_best)
        return GradientSummary(
            self.threshold,
            self.n_best,
            lo + top.astype(np.int64),
            g[top],
            float(score.max(initial=0.0)),
            int(np.count_nonzero(score > self.threshold)),
            ids[a:b].copy(),
            g[local],
            len(g),
        )

    def summarize_all(self, lg: LossGrad, weight: float) -> GradientSummary:
        """Split merged sums ``lg`` and summarize every piece in-process (the
        LocalBackend's test: same numbers as a distributed one)."""
        out = None
        for key, value in self.split(lg):
            piece = self.summarize(key, value, weight)
            out = piece if out is None else out.merge(piece)
        assert out is not None, "split always yields the scalars piece"
        return out
