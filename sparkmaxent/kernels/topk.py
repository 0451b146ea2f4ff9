"""The block-wise gradient test: the n best candidates and the KKT figures of
grafting without a dense gradient over all candidates in one place.

The test needs only the ``n_best`` inactive features with the largest |g_j|
above gamma1_tested, max |g_j| and the count above it, and g_j of the active
features; all three decompose over feature blocks (the global n best by
(-|g_j|, j) are among each block's n best). So each feature block is reduced
to a ``GradientSummary`` and the driver merges the summaries, never holding
a dense n_features vector. Feature block b covers ids [b * size, (b + 1) * size).

Nothing here is O(candidates): a data block's partial gradient covers only
the predicates it holds (``BlockGradient``: a block's gradient is zero at
every other predicate), its feature-block pieces are sparse (``GradPiece``),
and a summary needs the piece and the active features only, so a candidate
space far larger than memory (10^10 features) costs what the events and the
active set cost.

This module is the executor half: the top-k rule (``top_candidates``, also
the merge's and the dense test's), the per-block summary, and its merge.
The orchestration is the backends' keyed pass (kernels/keyed.py,
``LocalBackend.run``, ``SparkBackend.run``); the driver's check of the merged summary
and the test itself in methods/gradient_test.py (``BlockwiseTest``).
See docs/methods/grafting.md, "Block-wise gradient test".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .blocks import Block, CandidateBlock, MulticlassBlock
from .loss import LossGrad, full_loss_grad
from .packing import pack_nonzero
from .params import Scaling, Space, Weights

# Key of the scalar sums (loss, weight, correct, bias gradient) among the
# feature-block keys 0, 1, ... of a block-wise pass.
SCALARS_KEY = -1


def top_candidates(score: np.ndarray, ids: np.ndarray, gamma1_tested: float, n: int) -> np.ndarray:
    """Positions of the ``n`` best entries with ``score > gamma1_tested``, in the
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
    passing = np.flatnonzero(score > gamma1_tested)
    if len(passing) > n:
        s = score[passing]
        kth = np.partition(s, len(s) - n)[len(s) - n]  # the n-th largest score
        # keep every entry tied with it: the id order decides among them
        passing = passing[s >= kth]
    order = np.lexsort((ids[passing], -score[passing]))
    return passing[order[:n]]


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """The distinct values of ``x``, increasing, as ``np.unique`` gives them,
    by a sort and a comparison of neighbours: numpy 2's ``unique`` hashes,
    several times slower on the millions of ids of a block or of a gradient
    test's pieces (a stable sort also merges two increasing runs in one
    sweep)."""
    u = np.sort(x, kind="stable")
    return u[_firsts(u)]


def _firsts(u: np.ndarray) -> np.ndarray:
    """Where a sorted array's entries differ from the one before (the first
    of each run of equal values)."""
    keep = np.ones(len(u), dtype=bool)
    np.not_equal(u[1:], u[:-1], out=keep[1:])
    return keep


def union_positions(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The union ``u`` of two increasing arrays of distinct ids, increasing
    (as ``np.union1d`` gives it), and where every entry of ``a`` and of ``b``
    is in it (``u[pa] == a``, ``u[pb] == b``), with no binary search per id
    (which cost more than the union itself on the ~10^6 ids of a gradient
    test's pieces): ids filling at least an eighth of their span are marked
    over it, a byte each (1: in ``a``, 2: in ``b``, 3: both), and the union's
    marks say where each side's ids are (no cumulative sum over the span);
    sparser ones come from one stable argsort of both (two increasing runs,
    one merge sweep)."""
    if len(a) and len(b):
        lo, hi = min(a[0], b[0]), max(a[-1], b[-1])
        if hi - lo < 8 * (len(a) + len(b)):
            mark = np.zeros(hi - lo + 1, dtype=np.uint8)
            mark[a - lo] = 1
            mark[b - lo] += 2
            u = np.flatnonzero(mark != 0)
            side = mark[u]
            return lo + u, np.flatnonzero(side != 2), np.flatnonzero(side >= 2)
    both = np.concatenate([a, b])
    order = np.argsort(both, kind="stable")
    s = both[order]
    first = _firsts(s)
    pos = np.empty(len(s), dtype=np.int64)
    pos[order] = np.cumsum(first) - 1
    return s[first], pos[: len(a)], pos[len(a) :]


@dataclass
class BlockGradient:
    """Loss sums and gradient sums of one or more data blocks at the
    predicates they hold (mergeable): the partial of the block-wise test,
    O(predicates held x labels) instead of O(candidates).

    Attributes
    ----------
    loss, weight, correct : float
        As in ``LossGrad``.
    preds : ndarray of int64, shape (n,)
        Predicates covered, increasing; the gradient is zero at every other.
    grad : ndarray, shape (n, n_labels)
        Gradient sums at features ``preds[i] * n_labels + k``.
    grad_bias : ndarray of shape (K,) or None
    """

    loss: float
    weight: float
    correct: float
    preds: np.ndarray
    grad: np.ndarray
    grad_bias: np.ndarray | None

    def merge(self, other: BlockGradient) -> BlockGradient:
        preds, mine, theirs = union_positions(self.preds, other.preds)
        grad = np.zeros((len(preds), self.grad.shape[1]))
        # 0 + a + b per feature, as the sum of dense gradients adds them
        grad[mine] = self.grad
        grad[theirs] += other.grad
        return BlockGradient(
            self.loss + other.loss,
            self.weight + other.weight,
            self.correct + other.correct,
            preds,
            grad,
            None if self.grad_bias is None else self.grad_bias + other.grad_bias,
        )

    def scalars(self) -> LossGrad:
        """The loss, weight, correct and bias sums as a LossGrad without gradient."""
        return LossGrad(self.loss, self.weight, self.correct, np.zeros(0), self.grad_bias)


@dataclass
class GradPiece:
    """Gradient sums at some features of one feature block (mergeable).

    Pickles (how a shuffle ships it) as a bit mask over the span of its ids
    and the non-zero values (``packing.py``'s format), so a piece costs a bit
    per feature of its span plus its values, never O(candidates).

    Attributes
    ----------
    ids : ndarray of int64
        Feature ids, increasing.
    grad : ndarray, shape like ids
    """

    ids: np.ndarray
    grad: np.ndarray

    def merge(self, other: GradPiece) -> GradPiece:
        ids, mine, theirs = union_positions(self.ids, other.ids)
        grad = np.zeros(len(ids))
        grad[mine] = self.grad
        grad[theirs] += other.grad
        return GradPiece(ids, grad)

    def __getstate__(self) -> dict:
        lo = int(self.ids[0]) if len(self.ids) else 0
        span = int(self.ids[-1]) + 1 - lo if len(self.ids) else 0
        dense = np.zeros(span)
        dense[self.ids - lo] = self.grad
        return {"lo": lo, **pack_nonzero(dense)}

    def __setstate__(self, state: dict) -> None:
        nonzero = np.unpackbits(state["mask"], count=state["size"]).view(bool)
        self.ids = state["lo"] + np.flatnonzero(nonzero)
        self.grad = state["values"]


def held_predicates(block: Block) -> np.ndarray:
    """The predicates (candidate-set features) a block holds, increasing."""
    X = block.X if isinstance(block, MulticlassBlock) else block.F
    return sorted_unique(X.indices).astype(np.int64)


def compact_pays(block: Block, space: Space) -> bool:
    """Whether a block's partial is cheaper over the predicates it holds than
    over all of them: when its stored entries are fewer than half the
    predicates (then it holds fewer still), so a huge candidate space costs a
    block only what it holds, and a block that reaches most predicates skips
    the renumbering."""
    X = block.X if isinstance(block, MulticlassBlock) else block.F
    return 2 * X.nnz < space.n_predicates


def compact(
    block: Block, space: Space, weights: Weights, scaling: Scaling | None, preds: np.ndarray
) -> tuple[Block, Space, Weights, Scaling | None]:
    """``block`` and the model over the predicates ``preds`` only (every one
    the block holds and every one of a non-zero weight), renumbered
    0..len(preds)-1 in the same order: the kernels then compute, bit for bit,
    the sums of the whole space at those predicates."""
    K = space.n_labels
    X = block.X if isinstance(block, MulticlassBlock) else block.F
    Xc = sp.csr_matrix(
        (X.data, np.searchsorted(preds, X.indices).astype(X.indices.dtype), X.indptr),
        shape=(X.shape[0], len(preds)),
    )
    ids = np.asarray(weights.ids)
    local = np.searchsorted(preds, ids // K) * K + ids % K
    cspace = Space(space.shape, len(preds), K, space.bias)
    cscaling = None if scaling is None else Scaling(scaling.mean[preds], scaling.inv_scale[preds])
    cblock: Block
    if isinstance(block, MulticlassBlock):
        cblock = MulticlassBlock(Xc, block.y, block.c, block.n_labels)
    else:
        cblock = CandidateBlock(Xc, block.event_ptr, block.correct, block.c)
    return cblock, cspace, Weights(local, weights.values, weights.bias), cscaling


@dataclass
class GradientSummary:
    """What the gradient test keeps of g over some feature blocks (mergeable).

    Attributes
    ----------
    gamma1_tested : float
        gamma1 plus the zero-weight margin (``Penalty.gamma1_tested``): a
        candidate passes when |g_j| > gamma1_tested (Riezler & Vasserman, Figure 1);
        ``n_over`` counts against it too.
    n_best : int
    top_ids : ndarray of int64, shape (<= n_best,)
        Inactive features with |g_j| > gamma1_tested, the best first (order of
        ``top_candidates``).
    top_grad : ndarray, shape like top_ids
        Their g_j.
    max_inactive : float
        max |g_j| over inactive features (0 if none).
    n_over : int
        Inactive features with |g_j| > gamma1_tested.
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

    gamma1_tested: float
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
    def empty(gamma1_tested: float, n_best: int, lg: LossGrad | None = None) -> GradientSummary:
        none = np.zeros(0, dtype=np.int64)
        return GradientSummary(
            gamma1_tested, n_best, none, np.zeros(0), 0.0, 0, none, np.zeros(0), 0, lg
        )

    def merge(self, other: GradientSummary) -> GradientSummary:
        if (self.gamma1_tested, self.n_best) != (other.gamma1_tested, other.n_best):
            raise ValueError(
                "cannot merge gradient summaries of different tests: gamma1_tested "
                f"{self.gamma1_tested} / {other.gamma1_tested}, "
                f"n_best {self.n_best} / {other.n_best}"
            )
        ids = np.concatenate([self.top_ids, other.top_ids])
        grad = np.concatenate([self.top_grad, other.top_grad])
        keep = top_candidates(np.abs(grad), ids, self.gamma1_tested, self.n_best)
        if self.lg is None or other.lg is None:
            lg = self.lg if other.lg is None else other.lg
        else:
            lg = self.lg.merge(other.lg)
        return GradientSummary(
            self.gamma1_tested,
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


@dataclass(frozen=True)
class GradientTestTask:
    """A picklable block-wise gradient test at ``weights``, a keyed pass
    (kernels/keyed.py: ``backend.run(Keyed(task))``).

    Per data block: ``partial`` (the gradient sums at the predicates the
    block holds, the same kernel as the dense test) and ``split`` into keyed
    feature-block pieces; per feature block, once the pieces are summed:
    ``summarize``.

    Attributes
    ----------
    weights : Weights
        All active features (zero-valued ones included: they are excluded
        from selection like the rest); scoring uses the non-zero ones only,
        as the dense test does (``Objective.at``).
    l2 : float
        gamma2: g_j = G_j / W + gamma2 w_j.
    gamma1_tested, n_best : selection rule of the test (gamma1_tested >= 0: a
        feature no event holds, g_j = 0, never passes).
    block_size : int
        Features per feature block.
    """

    space: Space
    weights: Weights
    scaling: Scaling | None
    l2: float
    gamma1_tested: float
    n_best: int
    block_size: int

    def __post_init__(self):
        if self.block_size < 1:
            raise ValueError(f"expected a feature block size >= 1, got {self.block_size}")
        if self.n_best < 1:
            raise ValueError(f"expected n_best >= 1, got {self.n_best}")
        if not self.gamma1_tested >= 0:
            raise ValueError(f"expected gamma1_tested >= 0, got {self.gamma1_tested}")

    @property
    def n_blocks(self) -> int:
        return -(-self.space.n_features // self.block_size)

    @property
    def n_keys(self) -> int:
        """The feature blocks and the scalars' key (a keyed pass, kernels/keyed.py)."""
        return self.n_blocks + 1

    def partial(self, block: Block) -> BlockGradient:
        """Loss and gradient sums of one data block at the predicates it
        holds and those of the non-zero weights (with centering, also every
        predicate of non-zero mean: the centering term reaches them)."""
        weights, K = self.weights.sparse(), self.space.n_labels
        if not compact_pays(block, self.space):
            # the block reaches most predicates: renumbering costs more than
            # the dense sums, and keeps no less memory (same sums, bit for bit)
            lg = full_loss_grad(block, self.space, weights, self.scaling)
            grad = lg.grad.reshape(self.space.n_predicates, K)
            preds = np.flatnonzero(grad.any(axis=1)).astype(np.int64)
            return BlockGradient(lg.loss, lg.weight, lg.correct, preds, grad[preds], lg.grad_bias)
        parts = [held_predicates(block), np.asarray(weights.ids) // K]
        if self.scaling is not None and isinstance(block, MulticlassBlock):
            parts.append(np.flatnonzero(self.scaling.mean))
        preds = sorted_unique(np.concatenate(parts).astype(np.int64))
        cblock, cspace, cweights, cscaling = compact(
            block, self.space, weights, self.scaling, preds
        )
        lg = full_loss_grad(cblock, cspace, cweights, cscaling)
        return BlockGradient(
            lg.loss, lg.weight, lg.correct, preds, lg.grad.reshape(len(preds), K), lg.grad_bias
        )

    def split(self, partial: BlockGradient) -> Iterator[tuple[int, LossGrad | GradPiece]]:
        """``(SCALARS_KEY, LossGrad without grad)`` then ``(b, GradPiece of
        the sums in feature block b)`` for every feature block b (empty where
        the data hold none of its predicates, so every block is summarized)."""
        yield SCALARS_KEY, partial.scalars()
        K = self.space.n_labels
        ids = (partial.preds[:, None] * K + np.arange(K)).ravel()
        grad = partial.grad.ravel()
        cuts = np.searchsorted(ids, np.arange(self.n_blocks + 1, dtype=np.int64) * self.block_size)
        for b in range(self.n_blocks):
            yield b, GradPiece(ids[cuts[b] : cuts[b + 1]], grad[cuts[b] : cuts[b + 1]])

    def summarize(self, key: int, value, weight: float) -> GradientSummary:
        """The summary of one summed piece: the scalars (a LossGrad), or
        feature block ``key`` (a GradPiece of gradient sums) over total event
        weight ``weight``. Only the piece's features and the block's active
        ones are looked at: every other g_j is 0, below gamma1_tested."""
        if key == SCALARS_KEY:
            return GradientSummary.empty(self.gamma1_tested, self.n_best, value)
        lo = key * self.block_size
        n = min(self.block_size, self.space.n_features - lo)
        ids = self.weights.active_ids()
        a, b = np.searchsorted(ids, [lo, lo + n])
        feats, held, local = union_positions(value.ids, ids[a:b])
        # g = G / W + gamma2 w, element by element as the dense test computes it
        g = np.zeros(len(feats))
        g[held] = value.grad / weight
        g[local] += self.l2 * self.weights.values[a:b]
        score = np.abs(g)
        score[local] = -1.0  # active features are never selected again
        top = top_candidates(score, feats, self.gamma1_tested, self.n_best)
        return GradientSummary(
            self.gamma1_tested,
            self.n_best,
            feats[top].astype(np.int64),
            g[top],
            float(score.max(initial=0.0)),
            int(np.count_nonzero(score > self.gamma1_tested)),
            ids[a:b].copy(),
            g[local],
            n,
        )

    def partial_weight(self, partial: BlockGradient) -> float:
        """The event weight summed in (merged) partials."""
        return partial.weight

    def result_weight(self, result: GradientSummary) -> float | None:
        """The event weight of a merged summary's loss sums (None: none kept)."""
        return result.lg.weight if result.lg is not None else None
