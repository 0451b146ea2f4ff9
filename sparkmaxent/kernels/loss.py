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
from typing import Any

import numpy as np
import scipy.sparse as sp

from . import sparsetools
from .blocks import Block, CandidateBlock, MulticlassBlock
from .colcache import COLUMNS, gather_columns
from .packing import pack_nonzero, unpack_nonzero
from .params import Scaling, Space, Weights
from .softmax import row_logsumexp, row_softmax, segment_logsumexp, weighted_softmax

#: scores per row chunk of a block (``_sweep``): a chunk's rows stay in the
#: CPU cache through every step of the kernel
CHUNK_ENTRIES = 1 << 17  # the default of loss_grad(chunk_entries=)


def _dense(A) -> np.ndarray:
    return A.toarray() if sp.issparse(A) else np.asarray(A)


def _scaled(
    W, mean: np.ndarray | None, inv_scale: np.ndarray | None
) -> tuple[Any, np.ndarray | None]:
    """W with the scaling folded in, and the centering term: the row vector
    ``mean @ W`` every event's scores lose (None without centering)."""
    if inv_scale is not None:
        W = W.multiply(inv_scale[:, None]).tocsr() if sp.issparse(W) else W * inv_scale[:, None]
    if mean is None:
        return W, None
    return W, _dense(sp.csr_matrix(mean[None, :]) @ W).ravel() if sp.issparse(W) else mean @ W


def _linear_scores(
    X, W, bias: np.ndarray | None, mean: np.ndarray | None, inv_scale: np.ndarray | None
) -> np.ndarray:
    """S = ((X - mean) * inv_scale) @ W + bias without densifying X: the
    centering term is one row vector subtracted from every event."""
    W, shift = _scaled(W, mean, inv_scale)
    S = _dense(X @ W)
    if shift is not None:
        S -= shift
    if bias is not None:
        S += bias[None, :]
    return S


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
class LossGrad:
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

    def merge(self, other: LossGrad) -> LossGrad:
        return LossGrad(
            self.loss + other.loss,
            self.weight + other.weight,
            self.correct + other.correct,
            self.grad + other.grad,
            None if self.grad_bias is None else self.grad_bias + other.grad_bias,
        )

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


def _residual_rows(
    S: np.ndarray, y: np.ndarray, c: np.ndarray, keep_proba: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Turn the scores S (C-ordered, shape (m, K)) into the residual
    R = c * (P - Y) in place, whose products with the predicates give the
    gradient; return the gold scores, the top label (ties to the first),
    the log-normalizers and P itself when ``keep_proba`` (curvature)."""
    # entries (i, k) read through the flat array: the same values as
    # S[rows, k], without two-dimensional fancy indexing's cost
    flat, start = S.reshape(-1), np.arange(len(y)) * S.shape[1]
    gold_at = start + y
    gold = flat[gold_at]
    # the row maxima through argmax, which also settles the correct-label
    # count: one sweep of S instead of two
    top = S.argmax(axis=1)
    lse, _, proba = weighted_softmax(S, c, flat[start + top], keep_proba)
    flat[gold_at] -= c
    return gold, top, lse, proba


def _chunkable(Xs, W, Xg) -> bool:
    """Whether ``_sweep`` can run scipy's own kernels over row chunks."""
    return (
        sparsetools.available()
        and isinstance(W, np.ndarray)
        and all(
            X.format == "csr" and X.indptr.dtype == X.indices.dtype and X.data.dtype == np.float64
            for X in (Xs, Xg)
        )
    )


def _sweep(
    Xs, W, bias, mean, inv, Xg, y: np.ndarray, c: np.ndarray, keep_proba: bool, chunk_entries: int
):
    """Scores Xs @ W (scaled, ``_linear_scores``), the residual in their place
    (``_residual_rows``) and G = Xg^T R, the gradient sums over Xg's columns.

    Over row chunks small enough to stay in the CPU cache where scipy's
    own product kernels can be called (``_chunkable``): a chunk's rows are
    scored, turned into residuals and added into G before the next chunk,
    instead of a dozen sweeps of the whole (m, K) matrix through memory.
    The sums are the same bit for bit: each row's arithmetic is the same,
    and G's product (scipy's ``csc_matvecs``) adds the events in the same
    order into the same buffer whether called once or chunk by chunk.

    Returns (R, G, gold, top, lse, proba) as ``_residual_rows``."""
    if not _chunkable(Xs, W, Xg):
        R = np.ascontiguousarray(_linear_scores(Xs, W, bias, mean, inv))
        rows = _residual_rows(R, y, c, keep_proba)
        return (R, _dense(Xg.T @ R), *rows)
    W, shift = _scaled(W, mean, inv)
    m, K = Xs.shape[0], W.shape[1]
    Wf = np.ascontiguousarray(W, dtype=np.float64).reshape(-1)
    R, G = np.empty((m, K)), np.zeros((Xg.shape[1], K))
    gold, lse, top = np.empty(m), np.empty(m), np.empty(m, dtype=np.intp)
    proba = np.empty((m, K)) if keep_proba else None
    step = max(1, chunk_entries // K)
    for a in range(0, m, step):
        b = min(m, a + step)
        S = _chunk_scores(Xs, Wf, shift, bias, a, b, R[a:b])
        gold[a:b], top[a:b], lse[a:b], p = _residual_rows(S, y[a:b], c[a:b], keep_proba)
        if proba is not None:
            proba[a:b] = p
        _add_chunk_gradient(Xg, a, b, S, G)
    return R, G, gold, top, lse, proba


def _chunk_scores(Xs, Wf, shift, bias, a: int, b: int, S: np.ndarray) -> np.ndarray:
    """Rows a..b of the linear scores written into ``S`` (shape (b - a, K))
    by scipy's own CSR kernel: Xs[a:b] W, less the scaling's shift, plus
    the bias. Returns ``S``."""
    S.fill(0.0)
    sparsetools.csr_matvecs(
        b - a, Xs.shape[1], S.shape[1], Xs.indptr[a : b + 1], Xs.indices, Xs.data, Wf,
        S.reshape(-1),
    )  # fmt: skip
    if shift is not None:
        S -= shift
    if bias is not None:
        S += bias[None, :]
    return S


def _add_chunk_gradient(Xg, a: int, b: int, S: np.ndarray, G: np.ndarray) -> None:
    """G += Xg[a:b]^T S in place (scipy's CSC kernel on the chunk's rows,
    in the same order as one product over every row)."""
    sparsetools.csc_matvecs(
        Xg.shape[1], b - a, S.shape[1], Xg.indptr[a : b + 1], Xg.indices, Xg.data,
        S.reshape(-1), G.reshape(-1),
    )  # fmt: skip


def _active_sweep(
    Xs: sp.csr_matrix,
    W: np.ndarray,
    bias: np.ndarray | None,
    mean: np.ndarray | None,
    inv: np.ndarray | None,
    y: np.ndarray,
    c: np.ndarray,
    chunk_entries: int,
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """``_sweep`` of an active-set pass (the gradient over the scoring
    columns themselves, no probabilities kept; ``_chunkable`` arguments):
    each row chunk is scored, turned into residuals and added into
    G = Xs^T R and r_sum = 1^T R in one chunk-sized buffer, so the (m, K)
    residual matrix is never written out and read back. G, the loss and the
    correct count are ``_sweep``'s bit for bit (the same arithmetic per row
    and per chunk); r_sum adds its chunks' column sums, ``_sweep`` the
    whole column at once (equal to rounding).

    Returns (G, r_sum, loss, correct)."""
    W, shift = _scaled(W, mean, inv)
    m, K = Xs.shape[0], W.shape[1]
    Wf = np.ascontiguousarray(W, dtype=np.float64).reshape(-1)
    step = max(1, chunk_entries // K)
    buffer, G, r_sum = np.empty((min(step, m), K)), np.zeros((Xs.shape[1], K)), np.zeros(K)
    gold, lse, top = np.empty(m), np.empty(m), np.empty(m, dtype=np.intp)
    for a in range(0, m, step):
        b = min(m, a + step)
        S = _chunk_scores(Xs, Wf, shift, bias, a, b, buffer[: b - a])
        gold[a:b], top[a:b], lse[a:b], _ = _residual_rows(S, y[a:b], c[a:b], False)
        r_sum += np.ones(b - a) @ S
        _add_chunk_gradient(Xs, a, b, S, G)
    return G, r_sum, float(c @ (lse - gold)), float(c @ (top == y))


def _multiclass_loss_grad(
    block: MulticlassBlock,
    space: Space,
    weights: Weights,
    scaling: Scaling | None,
    grad_ids: np.ndarray | None,
    keep_proba: bool = False,
    apart: bool = False,
    chunk_entries: int = CHUNK_ENTRIES,
) -> tuple[LossGrad, np.ndarray | None]:
    """``loss_grad_proba`` of a multiclass block; ``apart``: sparse weights
    score over their own columns only, as a full-gradient pass scores, and
    the gradient is taken over the separately gathered columns of
    ``grad_ids`` (``loss_grad_at``)."""
    if np.any(block.y < 0):
        raise ValueError("cannot train on events whose label was not seen in training (label -1)")
    K = space.n_labels
    X, g_rows, together = block.X, None, False
    mean = None if scaling is None else scaling.mean
    inv = None if scaling is None else scaling.inv_scale
    if weights.ids is not None:
        # sparse weights: score with the predicates in play only; an
        # active-set pass takes its gradient over the same gathered columns
        n_w = len(weights.ids)
        together = grad_ids is not None and not apart
        wanted = [weights.ids // K] + ([np.asarray(grad_ids) // K] if together else [])
        preds, inverse = np.unique(np.concatenate(wanted), return_inverse=True)
        Xs, mean_s, inv_s = _columns(block, preds, scaling)
        scoring = (Xs, _gathered(weights, preds, inverse[:n_w], K), mean_s, inv_s)
        if together:
            X, g_rows, mean, inv = Xs, inverse[n_w:], mean_s, inv_s
    else:
        scoring = (X, weights.matrix(space), mean, inv)
    if grad_ids is not None and g_rows is None:  # dense weights, gradient on a subset
        preds, g_rows = np.unique(np.asarray(grad_ids) // K, return_inverse=True)
        X, mean, inv = _columns(block, preds, scaling)
    Xs, W, w_mean, w_inv = scoring
    proba = None
    if together and not keep_proba and _chunkable(Xs, W, Xs):
        G, r_sum, loss, correct = _active_sweep(
            Xs, W, weights.bias, w_mean, w_inv, block.y, block.c, chunk_entries
        )
    else:
        R, G, gold, top, lse, proba = _sweep(
            Xs, W, weights.bias, w_mean, w_inv, X, block.y, block.c, keep_proba, chunk_entries
        )
        correct = float(block.c @ (top == block.y))
        loss = float(block.c @ (lse - gold))
        r_sum = np.ones(block.n_events) @ R
    if mean is not None and inv is not None:
        G = inv[:, None] * (G - mean[:, None] * r_sum[None, :])
    grad = G.ravel() if grad_ids is None else G[g_rows, np.asarray(grad_ids) % K]
    return LossGrad(loss, float(block.c.sum()), correct, grad, r_sum if space.bias else None), proba


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


def loss_grad(
    block: Block,
    space: Space,
    weights: Weights,
    scaling: Scaling | None = None,
    grad_ids: np.ndarray | None = None,
    *,
    chunk_entries: int = CHUNK_ENTRIES,
) -> LossGrad:
    """Loss and gradient sums of one block.

    Parameters
    ----------
    grad_ids : ndarray of int64 or None
        Feature ids at which the gradient is wanted; None for all
        ``space.n_features`` of them (the gradient test of grafting).
    chunk_entries : scores per row chunk of a multiclass block's sweep.
    """
    return loss_grad_proba(
        block, space, weights, scaling, grad_ids, keep_proba=False, chunk_entries=chunk_entries
    )[0]


def loss_grad_at(
    block: Block,
    space: Space,
    weights: Weights,
    scaling: Scaling | None,
    grad_ids: np.ndarray,
) -> LossGrad:
    """Loss and gradient sums at ``grad_ids`` (sparse ``weights``), bit for
    bit those a full-gradient pass (``loss_grad`` with ``grad_ids`` None)
    gives there: scored over the weights' own columns as that pass scores,
    the gradient over the gathered columns of ``grad_ids`` alone, added in
    the same event order. An active-set pass's cost instead of a full
    kernel's (the thresholded test's fetch pass, kernels/thresholded.py)."""
    if isinstance(block, MulticlassBlock):
        return _multiclass_loss_grad(block, space, weights, scaling, grad_ids, apart=True)[0]
    return _candidate_loss_grad(block, space, weights, scaling, grad_ids)[0]


def loss_grad_proba(
    block: Block,
    space: Space,
    weights: Weights,
    scaling: Scaling | None = None,
    grad_ids: np.ndarray | None = None,
    keep_proba: bool = True,
    *,
    chunk_entries: int = CHUNK_ENTRIES,
) -> tuple[LossGrad, np.ndarray | None]:
    """``loss_grad`` plus the model probabilities it computed on the way
    (for kernels that also need curvature): P of shape (m, K) for multiclass
    blocks, p of shape (n_candidates_total,) for candidate sets."""
    if isinstance(block, MulticlassBlock):
        return _multiclass_loss_grad(
            block, space, weights, scaling, grad_ids, keep_proba, chunk_entries=chunk_entries
        )
    return _candidate_loss_grad(block, space, weights, scaling, grad_ids)


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
class RayLoss:
    """Mergeable loss sums at the points of one ray (``ray_losses``)."""

    loss: np.ndarray  # shape (n_steps,)
    weight: float

    def merge(self, other: RayLoss) -> RayLoss:
        return RayLoss(self.loss + other.loss, self.weight + other.weight)


def _ray_scores(
    block: MulticlassBlock,
    space: Space,
    weights: Weights,
    direction: Weights,
    scaling: Scaling | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Scores at the weights and along the direction. Sparse weights score
    over their gathered predicate columns, the active-set pass's own (kept
    between passes, ``_columns``): nothing the size of all predicates is
    built, unlike ``Weights.matrix``."""
    ids = weights.ids
    if ids is None or direction.ids is None or not np.array_equal(ids, direction.ids):
        return (
            multiclass_scores(block, space, weights, scaling),
            multiclass_scores(block, space, direction, scaling),
        )
    K = space.n_labels
    preds, inverse = np.unique(ids // K, return_inverse=True)
    Xs, mean_s, inv_s = _columns(block, preds, scaling)

    def scores(w: Weights) -> np.ndarray:
        return _linear_scores(Xs, _gathered(w, preds, inverse, K), w.bias, mean_s, inv_s)

    return scores(weights), scores(direction)


def ray_losses(
    block: Block,
    space: Space,
    weights: Weights,
    direction: Weights,
    steps: np.ndarray,
    scaling: Scaling | None = None,
) -> np.ndarray:
    """Loss sums at ``weights + t * direction`` for every t in ``steps``.

    Scores are linear in t, so the block is scored twice (at the weights
    and along the direction) and each step costs a log-sum-exp, not a pass:
    a backtracking line search tries all its steps in one pass. The two
    Weights range over the same ids (or are both dense).

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
        S0, D = _ray_scores(block, space, weights, direction, scaling)
        # the gold label's score is linear in t too: no (m, K) gather per step
        rows = np.arange(block.n_events)
        gold0, gold_d = S0[rows, block.y], D[rows, block.y]
        return np.array(
            [block.c @ (row_logsumexp(S0 + t * D) - (gold0 + t * gold_d)) for t in steps]
        )
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
