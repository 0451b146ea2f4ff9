"""The shared sweeps of the loss kernels (``loss.py``): one sweep of a
multiclass block scores its events (linear scores, ``_linear_scores``),
turns the scores into residuals R = c (P - Y) in place (``_residual_rows``)
and multiplies them into gradient sums G = X^T R, over row chunks that stay
in the CPU cache where scipy's own kernels can be called (``_chunkable``).
``_sweep`` is the general sweep (the gradient over any columns, the
probabilities handed out chunk by chunk on request), ``_active_sweep`` an
active-set pass's (the gradient over the scoring columns); neither keeps
the (m, K) residual matrix, nor the probabilities.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp

from . import sparsetools
from .softmax import weighted_softmax


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


#: takes a sweep's probabilities rows a..b, (a, b, P[a:b]), in row order
ProbaRows = Callable[[int, int, np.ndarray], None]


def _sweep(
    Xs,
    W,
    bias,
    mean,
    inv,
    Xg,
    y: np.ndarray,
    c: np.ndarray,
    proba_rows: ProbaRows | None,
    chunk_entries: int,
):
    """Scores Xs @ W (scaled, ``_linear_scores``), the residual in their place
    (``_residual_rows``), G = Xg^T R, the gradient sums over Xg's columns,
    and r_sum = 1^T R, the bias's.

    Over row chunks small enough to stay in the CPU cache where scipy's
    own product kernels can be called (``_chunkable``): a chunk's rows are
    scored, turned into residuals and added into G and r_sum in one
    chunk-sized buffer before the next chunk, instead of a dozen sweeps of
    the whole (m, K) matrix through memory, and the (m, K) residual matrix
    is never held, nor the probabilities: with ``proba_rows`` each chunk's
    are handed to it (curvature) before the next. G is the same bit
    for bit: each row's arithmetic is the same, and G's product (scipy's
    ``csc_matvecs``) adds the events in the same order into the same buffer
    whether called once or chunk by chunk. r_sum adds its chunks' column
    sums (equal to one sum over the whole column to rounding; the same
    chunks, so the same bits, as ``_active_sweep``'s).

    Returns (r_sum, G, gold, top, lse), the last three as
    ``_residual_rows``."""
    keep = proba_rows is not None
    if not _chunkable(Xs, W, Xg):
        R = np.ascontiguousarray(_linear_scores(Xs, W, bias, mean, inv))
        gold, top, lse, proba = _residual_rows(R, y, c, keep)
        if proba_rows is not None and proba is not None:
            proba_rows(0, len(y), proba)
        return np.ones(len(y)) @ R, _dense(Xg.T @ R), gold, top, lse
    m, K = Xs.shape[0], W.shape[1]
    G, r_sum = np.zeros((Xg.shape[1], K)), np.zeros(K)
    gold, lse, top = np.empty(m), np.empty(m), np.empty(m, dtype=np.intp)
    for a, b, S in scored_chunks(Xs, W, bias, mean, inv, chunk_entries):
        gold[a:b], top[a:b], lse[a:b], p = _residual_rows(S, y[a:b], c[a:b], keep)
        if proba_rows is not None and p is not None:
            proba_rows(a, b, p)
        r_sum += np.ones(b - a) @ S
        _add_chunk_gradient(Xg, a, b, S, G)
    return r_sum, G, gold, top, lse


def scored_chunks(
    Xs, W, bias, mean, inv, chunk_entries: int, out: np.ndarray | None = None
) -> Iterator[tuple[int, int, np.ndarray]]:
    """The linear scores (``_linear_scores``, ``_chunkable`` arguments) row
    chunk by row chunk, each of ``chunk_entries // K`` rows (at least one,
    the last what is left): (a, b, S), S rows a..b of the scores
    (``_chunk_scores``), written into ``out[a:b]`` when ``out`` (m, K) is
    given, else into one chunk-sized buffer that the next chunk overwrites
    (so S is used before the next is asked for)."""
    W, shift = _scaled(W, mean, inv)
    m, K = Xs.shape[0], W.shape[1]
    Wf = np.ascontiguousarray(W, dtype=np.float64).reshape(-1)
    step = max(1, chunk_entries // K)
    buffer = np.empty((min(step, m), K)) if out is None else out
    for a in range(0, m, step):
        b = min(m, a + step)
        S = buffer[a:b] if out is not None else buffer[: b - a]
        yield a, b, _chunk_scores(Xs, Wf, shift, bias, a, b, S)


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
    correct count and r_sum are ``_sweep``'s bit for bit (the same
    arithmetic per row and per chunk).

    Returns (G, r_sum, loss, correct)."""
    m, K = Xs.shape[0], W.shape[1]
    G, r_sum = np.zeros((Xs.shape[1], K)), np.zeros(K)
    gold, lse, top = np.empty(m), np.empty(m), np.empty(m, dtype=np.intp)
    for a, b, S in scored_chunks(Xs, W, bias, mean, inv, chunk_entries):
        gold[a:b], top[a:b], lse[a:b], _ = _residual_rows(S, y[a:b], c[a:b], False)
        r_sum += np.ones(b - a) @ S
        _add_chunk_gradient(Xs, a, b, S, G)
    return G, r_sum, float(c @ (lse - gold)), float(c @ (top == y))
