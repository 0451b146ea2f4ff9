"""Loss, gradient and model probabilities of one block (the conditional maxent
model over both event shapes, ``blocks.py``).

For event i with weight c_i, candidates Y_i and correct candidates C_i:

    p(y | x_i)   = exp(w . f(x_i, y)) / sum_{y' in Y_i} exp(w . f(x_i, y'))
    loss_i       = -log sum_{y in C_i} p(y | x_i)
    d loss_i/dw  = E_p[f | x_i] - E_p[f | x_i, C_i]

Kernels return *sums* over events (loss, gradient, weight); the driver
divides by the total event weight once, so any split of the data into blocks
gives the same objective.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .blocks import Block, CandidateBlock, MulticlassBlock
from .colcache import COLUMNS, gather_columns
from .mergeable import Summed
from .packing import pack_nonzero, unpack_nonzero
from .params import Scaling, Space, Weights
from .softmax import row_logsumexp, row_softmax, segment_logsumexp
from .sweep import ProbaRows, _active_sweep, _chunkable, _linear_scores, _sweep

#: scores per row chunk of a block (``_sweep``): a chunk's rows stay in the
#: CPU cache through every step of the kernel
CHUNK_ENTRIES = 1 << 17  # the default of loss_grad(chunk_entries=)


def multiclass_scores(
    block: MulticlassBlock, space: Space, weights: Weights, scaling: Scaling | None = None
) -> np.ndarray:
    """Scores S[i, k] = w . f(x_i, k) + b_k, shape (m, K)."""
    return _linear_scores(
        block.X,
        weights.matrix(space),
        weights.bias,
        None if scaling is None else scaling.mean,
        None if scaling is None else scaling.inv_scale,
    )


def candidate_scores(
    block: CandidateBlock, space: Space, weights: Weights, scaling: Scaling | None = None
) -> np.ndarray:
    """Score of every candidate, shape (n_candidates_total,). Centering is
    omitted: it shifts all candidates of an event alike (see Scaling)."""
    if weights.ids is None:
        w = weights.values
    else:
        w = np.zeros(space.n_predicates)
        w[weights.ids] = weights.values
    return block.F @ (w if scaling is None else w * scaling.inv_scale)


def multiclass_proba(
    block: MulticlassBlock, space: Space, weights: Weights, scaling: Scaling | None = None
) -> np.ndarray:
    """p(k | x_i), shape (m, K)."""
    return row_softmax(multiclass_scores(block, space, weights, scaling))[1]


def candidate_proba(
    block: CandidateBlock, space: Space, weights: Weights, scaling: Scaling | None = None
) -> np.ndarray:
    """p(y | x_i) of every candidate within its event, shape (n_candidates_total,)."""
    s = candidate_scores(block, space, weights, scaling)
    lse = segment_logsumexp(s, block.event_ptr)
    return np.exp(s - np.repeat(lse, np.diff(block.event_ptr)))


@dataclass
class LossGrad(Summed):
    """Mergeable sums of one or more blocks.

    Attributes
    ----------
    loss : float
        sum_i c_i * loss_i.
    weight : float
        sum_i c_i.
    correct : float
        sum_i c_i [the top-scoring candidate of event i is correct].
    grad : ndarray, shape (n_features,) or (len(grad_ids),)
        sum_i c_i * d loss_i / dw over the requested features.
    grad_bias : ndarray of shape (K,) or None
    """

    loss: float
    weight: float
    correct: float
    grad: np.ndarray
    grad_bias: np.ndarray | None

    # Pickling (how a partition's result reaches the driver) ships the
    # gradient's non-zeros and a bit mask of where they are (packing.py): a
    # block's gradient over all candidates is zero at every predicate the
    # block does not hold, so the bytes shipped follow the block's
    # predicates rather than the candidate space.
    def __getstate__(self) -> dict:
        return {**vars(self), "grad": pack_nonzero(self.grad)}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.grad = unpack_nonzero(state["grad"])


def _columns(
    block: MulticlassBlock, preds: np.ndarray, scaling: Scaling | None
) -> tuple[sp.csr_matrix, np.ndarray | None, np.ndarray | None]:
    """The predicate columns ``preds`` of the block and their centering and
    scaling: a column gather costs one sweep of the block, far less than a
    sparse-by-sparse product with all predicates, and is kept between the
    passes of one active set (``colcache.py``)."""
    X = block.X
    Xs = COLUMNS.get("columns", X, (preds,), lambda: gather_columns(X, preds))
    if scaling is None:
        return Xs, None, None
    return Xs, scaling.mean[preds], scaling.inv_scale[preds]


def _gathered(weights: Weights, preds: np.ndarray, inverse: np.ndarray, K: int) -> np.ndarray:
    """The weights as a dense (len(preds), K) matrix over the gathered
    predicates; ``inverse`` places each weight's predicate among them."""
    assert weights.ids is not None, "sparse weights only"
    W = np.zeros((len(preds), K))
    W[inverse, weights.ids % K] = weights.values
    return W


def _checked(block: MulticlassBlock) -> MulticlassBlock:
    if np.any(block.y < 0):
        raise ValueError("cannot train on events whose label was not seen in training (label -1)")
    return block


def _scoring(
    block: MulticlassBlock,
    space: Space,
    weights: Weights,
    scaling: Scaling | None,
    also: np.ndarray | None = None,
) -> tuple[tuple, np.ndarray | None]:
    """What scores the block: (X, W, mean, inv_scale) over the predicates in
    play only for sparse weights (their gathered columns, plus those of the
    features ``also`` when given), over all of them for dense weights; and
    the rows of ``also``'s predicates among the gathered columns."""
    mean = None if scaling is None else scaling.mean
    inv = None if scaling is None else scaling.inv_scale
    if weights.ids is None:
        return (block.X, weights.matrix(space), mean, inv), None
    K, n_w = space.n_labels, len(weights.ids)
    wanted = [weights.ids // K] + ([np.asarray(also) // K] if also is not None else [])
    preds, inverse = np.unique(np.concatenate(wanted), return_inverse=True)
    Xs, mean_s, inv_s = _columns(block, preds, scaling)
    scoring = (Xs, _gathered(weights, preds, inverse[:n_w], K), mean_s, inv_s)
    return scoring, (inverse[n_w:] if also is not None else None)


def _full_request(block: MulticlassBlock, space: Space, weights: Weights, scaling):
    """(scoring, gradient columns) of a pass whose gradient covers every
    predicate: the block itself."""
    scoring, _ = _scoring(block, space, weights, scaling)
    mean = None if scaling is None else scaling.mean
    inv = None if scaling is None else scaling.inv_scale
    return scoring, (block.X, mean, inv, None)


def _active_request(block: MulticlassBlock, space: Space, weights: Weights, scaling, grad_ids):
    """(scoring, gradient columns) of an active-set pass (sparse weights):
    the gradient over the scoring columns themselves."""
    scoring, g_rows = _scoring(block, space, weights, scaling, also=grad_ids)
    Xs, _, mean_s, inv_s = scoring
    return scoring, (Xs, mean_s, inv_s, g_rows)


def _subset_request(block: MulticlassBlock, space: Space, weights: Weights, scaling, grad_ids):
    """(scoring, gradient columns) of a pass with the gradient at
    ``grad_ids`` alone: scored as a full pass scores, the gradient over the
    separately gathered columns of ``grad_ids``."""
    scoring, _ = _scoring(block, space, weights, scaling)
    preds, g_rows = np.unique(np.asarray(grad_ids) // space.n_labels, return_inverse=True)
    X, mean, inv = _columns(block, preds, scaling)
    return scoring, (X, mean, inv, g_rows)


def _swept(
    block: MulticlassBlock,
    space: Space,
    weights: Weights,
    request: tuple,
    grad_ids: np.ndarray | None,
    chunk_entries: int,
    proba_rows: ProbaRows | None = None,
) -> LossGrad:
    """A request's pass through the general ``_sweep``, the probabilities
    handed to ``proba_rows`` chunk by chunk when given."""
    (Xs, W, w_mean, w_inv), (X, mean, inv, g_rows) = request
    r_sum, G, gold, top, lse = _sweep(
        Xs, W, weights.bias, w_mean, w_inv, X, block.y, block.c, proba_rows, chunk_entries
    )
    correct = float(block.c @ (top == block.y))
    loss = float(block.c @ (lse - gold))
    return _summed(block, space, G, r_sum, (mean, inv, g_rows), grad_ids, loss, correct)


def _summed(block, space, G, r_sum, columns, grad_ids, loss: float, correct: float) -> LossGrad:
    """The LossGrad of a sweep: G centered and scaled over its columns
    (mean, inv_scale, and the rows of ``grad_ids`` among them), the
    gradient read at ``grad_ids`` (all features when None)."""
    mean, inv, g_rows = columns
    if mean is not None and inv is not None:
        G = inv[:, None] * (G - mean[:, None] * r_sum[None, :])
    K = space.n_labels
    grad = G.ravel() if grad_ids is None else G[g_rows, np.asarray(grad_ids) % K]
    return LossGrad(loss, float(block.c.sum()), correct, grad, r_sum if space.bias else None)


def _candidate_loss_grad(
    block: CandidateBlock,
    space: Space,
    weights: Weights,
    scaling: Scaling | None,
    grad_ids: np.ndarray | None,
) -> tuple[LossGrad, np.ndarray]:
    ptr, lengths = block.event_ptr, np.diff(block.event_ptr)
    s = candidate_scores(block, space, weights, scaling)
    lse_all = segment_logsumexp(s, ptr)
    lse_correct = segment_logsumexp(np.where(block.correct, s, -np.inf), ptr)
    if not np.all(np.isfinite(lse_correct)):
        raise ValueError("cannot train on candidate-set events without a correct candidate")
    loss = float(block.c @ (lse_all - lse_correct))
    # top-scoring candidate correct? (ties count as correct if any tied one is)
    top = np.maximum.reduceat(s, ptr[:-1])
    hit = np.maximum.reduceat(
        (block.correct & (s == np.repeat(top, lengths))).astype(np.int8), ptr[:-1]
    )
    correct = float(block.c @ hit)
    p = np.exp(s - np.repeat(lse_all, lengths))
    q = np.where(block.correct, np.exp(s - np.repeat(lse_correct, lengths)), 0.0)
    r = np.repeat(block.c, lengths) * (p - q)
    if grad_ids is None:
        g = block.F.T @ r
        if scaling is not None:
            g = g * scaling.inv_scale
    else:
        ids = np.asarray(grad_ids)
        g = block.F[:, ids].T @ r
        if scaling is not None:
            g = g * scaling.inv_scale[ids]
    return LossGrad(loss, float(block.c.sum()), correct, np.asarray(g, dtype=np.float64), None), p


def full_loss_grad(
    block: Block,
    space: Space,
    weights: Weights,
    scaling: Scaling | None = None,
    *,
    chunk_entries: int = CHUNK_ENTRIES,
) -> LossGrad:
    """Loss and gradient sums over all ``space.n_features`` features (the
    gradient test of grafting): sparse weights score over their own
    gathered columns, the gradient is taken over every predicate."""
    if isinstance(block, MulticlassBlock):
        request = _full_request(_checked(block), space, weights, scaling)
        return _swept(block, space, weights, request, None, chunk_entries)
    return _candidate_loss_grad(block, space, weights, scaling, None)[0]


def active_loss_grad(
    block: Block,
    space: Space,
    weights: Weights,
    scaling: Scaling | None,
    grad_ids: np.ndarray,
    *,
    chunk_entries: int = CHUNK_ENTRIES,
) -> LossGrad:
    """Loss and gradient sums at ``grad_ids`` of an active-set pass: sparse
    weights score and take the gradient over the same gathered columns
    (theirs and those of ``grad_ids``), in one chunk-sized buffer where
    scipy's own kernels can be called (``_active_sweep``). Dense weights:
    :func:`loss_grad_at`."""
    if weights.ids is None or not isinstance(block, MulticlassBlock):
        return loss_grad_at(block, space, weights, scaling, grad_ids, chunk_entries=chunk_entries)
    scoring, columns = _active_request(_checked(block), space, weights, scaling, grad_ids)
    Xs, W, mean_s, inv_s = scoring
    if not _chunkable(Xs, W, Xs):
        request = (scoring, columns)
        return _swept(block, space, weights, request, grad_ids, chunk_entries)
    G, r_sum, loss, correct = _active_sweep(
        Xs, W, weights.bias, mean_s, inv_s, block.y, block.c, chunk_entries
    )
    return _summed(block, space, G, r_sum, columns[1:], grad_ids, loss, correct)


def loss_grad_at(
    block: Block,
    space: Space,
    weights: Weights,
    scaling: Scaling | None,
    grad_ids: np.ndarray,
    *,
    chunk_entries: int = CHUNK_ENTRIES,
) -> LossGrad:
    """Loss and gradient sums at ``grad_ids``, bit for bit those a
    full-gradient pass (:func:`full_loss_grad`) gives there: scored over
    the weights' own columns as that pass scores, the gradient over the
    gathered columns of ``grad_ids`` alone, added in the same event order.
    An active-set pass's cost instead of a full kernel's (the thresholded
    test's fetch pass, kernels/thresholded.py)."""
    if isinstance(block, MulticlassBlock):
        request = _subset_request(_checked(block), space, weights, scaling, grad_ids)
        return _swept(block, space, weights, request, grad_ids, chunk_entries)
    return _candidate_loss_grad(block, space, weights, scaling, grad_ids)[0]


def loss_grad_proba(
    block: Block,
    space: Space,
    weights: Weights,
    scaling: Scaling | None = None,
    grad_ids: np.ndarray | None = None,
    *,
    chunk_entries: int = CHUNK_ENTRIES,
) -> tuple[LossGrad, np.ndarray]:
    """:func:`loss_grad`'s sums plus the model probabilities computed on the
    way, for kernels that also need curvature: P of shape (m, K) for
    multiclass blocks, p of shape (n_candidates_total,) for candidate sets."""
    if not isinstance(block, MulticlassBlock):
        return _candidate_loss_grad(block, space, weights, scaling, grad_ids)
    P = np.empty((block.n_events, space.n_labels))

    def keep(a: int, b: int, p: np.ndarray) -> None:
        P[a:b] = p

    lg = loss_grad_feeding(block, space, weights, scaling, grad_ids, keep, chunk_entries)
    return lg, P


def loss_grad_feeding(
    block: MulticlassBlock,
    space: Space,
    weights: Weights,
    scaling: Scaling | None,
    grad_ids: np.ndarray | None,
    proba_rows: ProbaRows,
    chunk_entries: int = CHUNK_ENTRIES,
) -> LossGrad:
    """:func:`loss_grad_proba`'s sums of a multiclass block, its
    probabilities handed to ``proba_rows(a, b, P[a:b])`` row chunk by row
    chunk in row order instead of kept: a curvature pass sums its Hessian
    from them as they come, never holding the (m, K) matrix."""
    _checked(block)
    if grad_ids is None:
        request = _full_request(block, space, weights, scaling)
    elif weights.ids is not None:
        request = _active_request(block, space, weights, scaling, grad_ids)
    else:
        request = _subset_request(block, space, weights, scaling, grad_ids)
    return _swept(block, space, weights, request, grad_ids, chunk_entries, proba_rows)


def loss_grad(
    block: Block,
    space: Space,
    weights: Weights,
    scaling: Scaling | None = None,
    grad_ids: np.ndarray | None = None,
    *,
    chunk_entries: int = CHUNK_ENTRIES,
) -> LossGrad:
    """Loss and gradient sums of one block, the pass its request names:
    ``grad_ids`` None, :func:`full_loss_grad`; sparse weights,
    :func:`active_loss_grad`; dense weights, :func:`loss_grad_at`.

    Parameters
    ----------
    grad_ids : ndarray of int64 or None
        Feature ids at which the gradient is wanted; None for all
        ``space.n_features`` of them (the gradient test of grafting).
    chunk_entries : scores per row chunk of a multiclass block's sweep.
    """
    if grad_ids is None:
        return full_loss_grad(block, space, weights, scaling, chunk_entries=chunk_entries)
    return active_loss_grad(block, space, weights, scaling, grad_ids, chunk_entries=chunk_entries)


@dataclass(frozen=True)
class LossGradTask:
    """A picklable pass: loss and gradient of every block, merged."""

    space: Space
    weights: Weights
    scaling: Scaling | None = None
    grad_ids: np.ndarray | None = None

    def __call__(self, block: Block) -> LossGrad:
        return loss_grad(block, self.space, self.weights, self.scaling, self.grad_ids)


@dataclass
class PointsLossGrad:
    """Mergeable loss and gradient sums at several points (``PointsTask``)."""

    points: list[LossGrad]

    def merge(self, other: PointsLossGrad) -> PointsLossGrad:
        return PointsLossGrad([a.merge(b) for a, b in zip(self.points, other.points)])


@dataclass(frozen=True)
class PointsTask:
    """A picklable pass: ``LossGradTask`` at each of ``points`` in one pass
    (a line search's trial steps, each with the gradient the next iteration
    needs), bit for bit what one pass per point gives."""

    space: Space
    points: tuple[Weights, ...]
    scaling: Scaling | None = None
    grad_ids: np.ndarray | None = None

    def __call__(self, block: Block) -> PointsLossGrad:
        return PointsLossGrad(
            [loss_grad(block, self.space, w, self.scaling, self.grad_ids) for w in self.points]
        )


@dataclass
class RayLoss(Summed):
    """Mergeable loss sums at the points of one ray (``ray_losses``)."""

    loss: np.ndarray  # shape (n_steps,)
    weight: float


#: scores per row chunk of ``ray_losses``: each chunk is scored and its
#: steps' log-sum-exps taken before the next, so no (m, K) array is built
RAY_CHUNK_ENTRIES = 1 << 20


def _ray_scorer(
    block: MulticlassBlock,
    space: Space,
    weights: Weights,
    direction: Weights,
    scaling: Scaling | None,
):
    """A function of rows a..b: their scores at the weights and along the
    direction. Sparse weights score over their gathered predicate columns,
    the active-set pass's own (kept between passes, ``_columns``): nothing
    the size of all predicates is built, unlike ``Weights.matrix``. A row's
    scores are the same bits whatever rows are scored with it (scipy's
    product sums each row on its own)."""
    ids = weights.ids
    if ids is None or direction.ids is None or not np.array_equal(ids, direction.ids):
        X, W0, Wd = block.X, weights.matrix(space), direction.matrix(space)
        mean = None if scaling is None else scaling.mean
        inv = None if scaling is None else scaling.inv_scale
    else:
        K = space.n_labels
        preds, inverse = np.unique(ids // K, return_inverse=True)
        X, mean, inv = _columns(block, preds, scaling)
        W0, Wd = (_gathered(w, preds, inverse, K) for w in (weights, direction))

    def scores(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        rows = X[a:b]
        return (
            _linear_scores(rows, W0, weights.bias, mean, inv),
            _linear_scores(rows, Wd, direction.bias, mean, inv),
        )

    return scores


def ray_losses(
    block: Block,
    space: Space,
    weights: Weights,
    direction: Weights,
    steps: np.ndarray,
    scaling: Scaling | None = None,
    chunk_entries: int = RAY_CHUNK_ENTRIES,
) -> np.ndarray:
    """Loss sums at ``weights + t * direction`` for every t in ``steps``.

    Scores are linear in t, so the block is scored twice (at the weights
    and along the direction) and each step costs a log-sum-exp, not a pass:
    a backtracking line search tries all its steps in one pass. The two
    Weights range over the same ids (or are both dense). Multiclass blocks
    go by row chunks of about ``chunk_entries`` scores (the chunks' sums
    added in turn: equal to one chunk's to rounding), so the pass's
    temporaries are a chunk's, not the block's (m, K) arrays per step.

    Returns
    -------
    ndarray, shape (len(steps),)
    """
    steps = np.asarray(steps, dtype=np.float64)
    if isinstance(block, MulticlassBlock):
        if np.any(block.y < 0):
            raise ValueError(
                "cannot train on events whose label was not seen in training (label -1)"
            )
        if chunk_entries < 1:
            raise ValueError(f"expected chunk_entries >= 1, got {chunk_entries}")
        scores, m = _ray_scorer(block, space, weights, direction, scaling), block.n_events
        out, step = np.zeros(len(steps)), max(1, chunk_entries // space.n_labels)
        for a in range(0, m, step):
            b = min(m, a + step)
            S0, D = scores(a, b)
            # the gold label's score is linear in t too: no (m, K) gather per step
            rows, c = np.arange(b - a), block.c[a:b]
            gold0, gold_d = S0[rows, block.y[a:b]], D[rows, block.y[a:b]]
            out += [c @ (row_logsumexp(S0 + t * D) - (gold0 + t * gold_d)) for t in steps]
        return out
    s0 = candidate_scores(block, space, weights, scaling)
    ds = candidate_scores(block, space, direction, scaling)
    out = np.empty(len(steps))
    for k, t in enumerate(steps):
        s = s0 + t * ds
        lse_correct = segment_logsumexp(np.where(block.correct, s, -np.inf), block.event_ptr)
        out[k] = block.c @ (segment_logsumexp(s, block.event_ptr) - lse_correct)
    return out


@dataclass(frozen=True)
class RayTask:
    """A picklable pass: ``ray_losses`` of every block, merged."""

    space: Space
    weights: Weights
    direction: Weights
    steps: np.ndarray
    scaling: Scaling | None = None

    def __call__(self, block: Block) -> RayLoss:
        return RayLoss(
            ray_losses(block, self.space, self.weights, self.direction, self.steps, self.scaling),
            float(block.c.sum()),
        )
