"""Curvature over the active set: the Hessian block a second-order pass returns.

One pass over a block returns loss, gradient *and* the Hessian of the loss
over a set of features (the active set of a selection round) plus the bias,
so the driver can take Newton steps (``solvers/newton.py``) instead of the
many first-order evaluations per round that L-BFGS-B needs.

Multiclass: H[(p,k),(q,l)] = sum_i c_i e_ip e_iq P_ik (delta_kl - P_il), with
centering applied as a reparameterization of the bias, never materialised.
Candidate sets: the PSD part sum_i c_i Cov_p[f], exact with one correct
candidate per event and an upper bound otherwise (Riezler et al. 2002).
Like every kernel, this one returns sums; the driver divides by the weight.
The derivation: docs/methods/grafting.md, "The round solver".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from . import sparsetools
from .blocks import Block, CandidateBlock, MulticlassBlock
from .colcache import COLUMNS, gather_columns
from .loss import LossGrad, loss_grad_feeding, loss_grad_proba
from .mergeable import Summed
from .packing import pack_nonzero, unpack_nonzero
from .params import Scaling, Space, Weights

Raw = tuple[np.ndarray, np.ndarray, np.ndarray]  # a compressed matrix: indptr, indices, data


@dataclass
class Curvature(Summed):
    """Mergeable sums of a second-order pass.

    The Hessian is symmetric, so a pass's result carries its upper triangle
    only: the partition results the driver collects are (N + 1) N / 2
    doubles each instead of N^2 (N = n + n_bias), about half the bytes
    moved through Spark.

    Attributes
    ----------
    lg : LossGrad
        Loss and gradient sums (gradient over ``hess_ids``, or over all
        features when the pass asked for the full gradient).
    hess_upper : ndarray, shape (N (N + 1) / 2,)
        The upper triangle, row by row, of sum_i c_i d^2 loss_i / d theta^2
        over theta = [w over hess_ids, bias] (candidate sets: the PSD part,
        see the module docstring).
    """

    lg: LossGrad
    hess_upper: np.ndarray

    @classmethod
    def of(cls, lg: LossGrad, hess: np.ndarray, order: np.ndarray | None = None) -> Curvature:
        """Pack ``hess``, or ``hess[np.ix_(order, order)]`` when ``order`` is given."""
        if order is None:
            return cls(lg, np.concatenate([hess[i, i:] for i in range(len(hess))]))
        return cls(lg, np.concatenate([hess[o, order[i:]] for i, o in enumerate(order)]))

    @property
    def hess(self) -> np.ndarray:
        """The symmetric matrix, shape (N, N)."""
        size = (math.isqrt(8 * len(self.hess_upper) + 1) - 1) // 2
        H = np.zeros((size, size))
        start = 0
        for i in range(size):
            H[i, i:] = self.hess_upper[start : start + size - i]
            start += size - i
        # the lower triangle tile by tile: adding the whole transpose reads
        # it column-wise (tile size chosen by measurement, see docs/benchmarks.md)
        tile = 512
        for i in range(0, size, tile):
            for j in range(0, i, tile):
                H[i : i + tile, j : j + tile] = H[j : j + tile, i : i + tile].T
            diagonal = H[i : i + tile, i : i + tile]
            diagonal += np.triu(diagonal, 1).T
        return H

    # Pickling (how a partition's result reaches the driver) ships the
    # triangle's non-zeros and a bit mask of where they are (packing.py):
    # two features whose predicates never occur in one event have a 0
    # entry, and on sparse NLP data most entries are (see docs/benchmarks.md).
    def __getstate__(self) -> dict:
        return {"lg": self.lg, **pack_nonzero(self.hess_upper)}

    def __setstate__(self, state: dict) -> None:
        self.lg = state["lg"]
        self.hess_upper = unpack_nonzero(state)


def _gather_columns(
    X: sp.csr_matrix, cols: np.ndarray, scale: np.ndarray | None, csc: bool = False
):
    """X[:, cols] (columns may repeat) times ``scale`` per gathered column,
    as CSR (CSC when ``csc``); kept between the passes of one active set
    (``colcache.py``)."""

    def build():
        # the distinct predicates gathered first: nothing over all of X's columns
        preds, inverse = np.unique(cols, return_inverse=True)
        E = gather_columns(X, preds)
        if not np.array_equal(preds, cols):
            E = E[:, inverse].tocsr()
        if scale is not None:
            E = (E @ sp.diags(scale)).tocsr()
        return E.tocsc() if csc else E

    return COLUMNS.get("csc" if csc else "csr", X, (cols, scale), build)


def _dense_product(A: Raw, B: Raw, M: int, inner: int, N: int) -> np.ndarray:
    """(A @ B).toarray() for A (M x inner) given as CSR arrays and B
    (inner x N) as CSC arrays, without the product's symbolic phase.

    scipy sizes a sparse product by a symbolic pass over both operands
    before its numeric pass (see docs/benchmarks.md for its share of the
    kernel); the curvature wants the product dense, whose size bounds the
    non-zeros, so the numeric pass (scipy's own, after scipy's own
    conversion of B to CSR: the same sums in the same order, bit for bit
    the public product) runs into buffers of that size. Raw arrays spare
    the copies scipy's constructors make of slices of larger arrays."""
    if not sparsetools.available() or M * N == 0:
        a, b = sp.csr_matrix(A[::-1], (M, inner)), sp.csc_matrix(B[::-1], (inner, N))
        return (a @ b).toarray()
    parts = (A[0], A[1], B[0], B[1])
    idx = np.int32 if M * N < 2**31 and all(a.dtype == np.int32 for a in parts) else np.int64
    a_ptr, a_ind, b_ptr, b_ind = (a.astype(idx, copy=False) for a in parts)
    nnz_b = len(B[2])
    # B as CSR (its CSC arrays are the CSR arrays of B^T), as scipy converts it
    r_ptr, r_ind, r_data = np.empty(inner + 1, idx), np.empty(nnz_b, idx), np.empty(nnz_b)
    sparsetools.csr_tocsc(N, inner, b_ptr, b_ind, B[2], r_ptr, r_ind, r_data)
    indptr, indices, data = np.empty(M + 1, idx), np.empty(M * N, idx), np.empty(M * N)
    sparsetools.csr_matmat(M, N, a_ptr, a_ind, A[2], r_ptr, r_ind, r_data, indptr, indices, data)
    out = np.zeros((M, N))
    sparsetools.csr_todense(M, N, indptr, indices, data, out)  # adds each entry once: exact
    return out


def _label_blocks(
    E: sp.csc_matrix,
    labels: np.ndarray,
    P_entry: np.ndarray,
    cP: np.ndarray,
    n_labels: int,
    out: np.ndarray,
) -> None:
    """sum_i c_i e_ia e_ib P_(i,k_a) (delta(k_a = k_b) - P_(i,k_b)), the (w, w)
    block, written into ``out`` (n x n, zeros).

    ``E`` holds the scaled predicate values of the features as columns
    ordered by label (``labels`` non-decreasing), so that the features of
    label k are one column slice; ``P_entry`` is P_(i,k_b) of each entry
    of E, ``cP`` is c_i P_ik. The block is symmetric; it is built one
    block column per label, below the diagonal only:

        H[>=k, k] = Q_k^T diag(c P_k) Z_k,  Q_k[i, b] = e_ib (delta(k_b = k) - P_(i,k_b))

    with Z_k the columns of label k. Term 1 of the module docstring is
    folded into the diagonal block (Z_k^T diag(c P_k (1 - P_k)) Z_k), and
    each pair of labels is multiplied once: about half the sparse products
    of V^T diag(c) V plus a product per label.
    """
    n = E.shape[1]
    ptr, rows = E.indptr, E.indices
    q = -E.data * P_entry  # Q_k's entries of labels > k ...
    own = E.data * (1.0 - P_entry)  # ... and of label k
    bounds = np.searchsorted(labels, np.arange(n_labels + 1))
    for k in range(n_labels):
        a, b = bounds[k], bounds[k + 1]
        if a == b:
            continue
        s, e = ptr[a], ptr[b]
        # Z_k as CSC arrays: label k's column slice of E
        Zk = (ptr[a : b + 1] - s, rows[s:e], E.data[s:e] * cP[rows[s:e], k])
        q[s:e] = own[s:e]  # label k's entries: later labels' products start past them
        # Q_k^T as CSR arrays: the CSC columns (features) of labels >= k become rows
        QkT = (ptr[a:] - s, rows[s:], q[s:])
        column = _dense_product(QkT, Zk, n - a, E.shape[0], b - a)
        out[a:, a:b] = column
        out[a:b, b:] = column[b - a :].T


#: expanded entries (an active feature's predicate once per its label) and
#: rows' label probabilities per row chunk of ``multiclass_hessian``: bounds
#: the chunk's temporaries, each a few times this many doubles, whatever
#: the block's size
HESSIAN_CHUNK_ENTRIES = 1 << 21


def _row_chunks(
    X: sp.csr_matrix, repeats: np.ndarray, chunk_entries: int, per_row: int = 0
) -> np.ndarray:
    """Row bounds [0, ..., m] cutting X (CSR) into chunks of at most about
    ``chunk_entries`` entries, column j counted ``repeats[j]`` times and
    each row ``per_row`` more (its dense arrays: a block whose active
    columns are sparse is still many rows of probabilities); a row with
    more entries is a chunk of its own."""
    m = X.shape[0]
    cum = np.concatenate([[0], np.cumsum(repeats[X.indices], dtype=np.int64)])[X.indptr]
    cum += per_row * np.arange(m + 1, dtype=np.int64)
    cuts = np.searchsorted(cum, np.arange(chunk_entries, cum[-1], chunk_entries), side="right")
    return np.unique(np.concatenate([[0], cuts - 1, [m]]).clip(0, m))


def _expanded_chunk(
    Xd: sp.csr_matrix, a: int, b: int, inverse: np.ndarray, scale: np.ndarray | None
) -> sp.csc_matrix:
    """Rows a..b of the features' columns as CSC: the distinct predicates'
    columns ``Xd`` repeated by ``inverse`` (a predicate once per label of
    its features), times ``scale`` per column."""
    E = Xd[a:b][:, inverse]
    if scale is not None:
        E = E @ sp.diags(scale)
    return E.tocsc()


class MulticlassHessian:
    """Hessian sums of a multiclass block over ``ids`` (+ bias when the space
    has one), with the features grouped by label, taken from the model
    probabilities row chunk by row chunk as a loss pass hands them out
    (``add_rows``, in row order; ``loss.loss_grad_feeding``), so that a
    curvature pass never holds the (m, K) matrix: only the rows of the
    chunk being filled.

    The sums run over row chunks of the block (``chunk_entries``): the
    features' columns repeat a predicate once per label, so over the whole
    block they hold many times the block's own non-zeros, and every
    per-entry temporary would too, as would the per-row (m, K) products of
    P; a chunk's are bounded. The gathered columns kept between passes
    (``colcache.py``) are the distinct predicates', those the loss pass
    gathers. Chunks add their sums in turn: equal to one chunk's to
    rounding, and the same chunks however the rows are handed in.

    ``ids``: feature ids ``p * K + k``; ``chunk_entries``: feature entries
    per row chunk, about (``_row_chunks``; None, ``HESSIAN_CHUNK_ENTRIES``).
    """

    def __init__(
        self,
        block: MulticlassBlock,
        space: Space,
        ids: np.ndarray,
        scaling: Scaling | None = None,
        chunk_entries: int | None = None,
    ):
        if chunk_entries is None:
            chunk_entries = HESSIAN_CHUNK_ENTRIES
        if chunk_entries < 1:
            raise ValueError(f"expected chunk_entries >= 1, got {chunk_entries}")
        K, ids = space.n_labels, np.asarray(ids, dtype=np.int64)
        self.block, self.space, self.scaling, n = block, space, scaling, len(ids)
        self._by_label = np.argsort(ids % K, kind="stable")  # features of label 0, 1, ...
        self._preds, self._labels = ids[self._by_label] // K, ids[self._by_label] % K
        distinct, self._inverse = np.unique(self._preds, return_inverse=True)
        X = block.X
        self._Xd = COLUMNS.get("columns", X, (distinct,), lambda: gather_columns(X, distinct))
        self._scale = None if scaling is None else scaling.inv_scale[self._preds]
        self._H, self._ww, self._B = np.zeros((n + K, n + K)), np.empty((n, n)), np.zeros((n, K))
        repeats = np.bincount(self._inverse, minlength=len(distinct))
        self._bounds = _row_chunks(self._Xd, repeats, chunk_entries, K)
        self._rows = np.empty((int(np.diff(self._bounds).max(initial=0)), K))
        self._next = 0  # the chunk being filled

    def add_rows(self, a: int, b: int, P: np.ndarray) -> None:
        """Take the probabilities of rows a..b (``P``, shape (b - a, K)), the
        rows after those taken before; each chunk is summed once filled."""
        bounds = self._bounds
        while a < b:
            lo, hi = bounds[self._next], bounds[self._next + 1]
            take = min(b, hi) - a
            self._rows[a - lo : a - lo + take] = P[:take]
            a, P = a + take, P[take:]
            if a == hi:
                self._add_chunk(lo, hi, self._rows[: hi - lo])
                self._next += 1

    def _add_chunk(self, a: int, b: int, Pc: np.ndarray) -> None:
        """Add rows a..b, their probabilities ``Pc``."""
        n, K, labels = len(self._preds), self.space.n_labels, self._labels
        E = _expanded_chunk(self._Xd, a, b, self._inverse, self._scale)
        c = self.block.c[a:b]
        cP = c[:, None] * Pc
        # P_(i,k_b) of every entry, by a flat gather (cheaper than a 2-d fancy index)
        flat = E.indices.astype(np.int64) * K + np.repeat(labels, np.diff(E.indptr))
        P_entry = np.take(np.ascontiguousarray(Pc).reshape(-1), flat)
        del flat
        _label_blocks(E, labels, P_entry, cP, K, out=self._ww)
        self._H[:n, :n] += self._ww
        # bias rows: the always-on predicate with every label; V^T = E^T with
        # entries e_ib P_(i,k_b), the CSC columns read as rows
        Vt = sp.csr_matrix((E.data * P_entry, E.indices, E.indptr), shape=(n, b - a))
        self._B -= np.asarray(Vt @ cP)  # (n, K)
        self._B[np.arange(n), labels] += np.asarray(Vt @ c).ravel()
        self._H[n:, n:] += np.diag(cP.sum(axis=0)) - Pc.T @ cP

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(H, order) once every row was added: H of shape (N, N),
        N = n + n_bias, and ``H[np.ix_(order, order)]`` the Hessian over
        [w over ids, bias]. The permutation is left to the reader:
        ``Curvature.of`` packs the triangle through it, which is cheaper
        than a permuted copy."""
        if self._next != len(self._bounds) - 1:
            raise ValueError("expected the probabilities of every row of the block")
        n, K, labels, H, B = len(self._preds), self.space.n_labels, self._labels, self._H, self._B
        H[:n, n:] = B
        H[n:, :n] = B.T
        if self.scaling is not None:
            # uncentered (w, b') -> (w, b) with b' = b - M w, M[k, j] = [k_j = k] mean s
            mu = self.scaling.mean[self._preds] * self.scaling.inv_scale[self._preds]
            A, C = H[:n, :n], H[n:, n:]
            BM = B[:, labels] * mu[None, :]
            A = A - BM - BM.T + mu[:, None] * C[np.ix_(labels, labels)] * mu[None, :]
            Bt = B - mu[:, None] * C[labels, :]
            H[:n, :n], H[:n, n:], H[n:, :n] = A, Bt, Bt.T
        order = np.arange(n + K)
        order[self._by_label] = np.arange(n)
        if not self.space.bias:
            return H[:n, :n], order[:n]
        return H, order


def multiclass_hessian(
    block: MulticlassBlock,
    space: Space,
    P: np.ndarray,
    ids: np.ndarray,
    scaling: Scaling | None = None,
    chunk_entries: int = HESSIAN_CHUNK_ENTRIES,
) -> tuple[np.ndarray, np.ndarray]:
    """``MulticlassHessian``'s (H, order) of a block from its probabilities
    ``P`` (shape (m, K)) at once: ids are feature ids ``p * K + k``,
    ``chunk_entries`` feature entries per row chunk, about (``_row_chunks``)."""
    hessian = MulticlassHessian(block, space, ids, scaling, chunk_entries)
    hessian.add_rows(0, block.n_events, P)
    return hessian.result()


def candidate_hessian(
    block: CandidateBlock,
    space: Space,
    p: np.ndarray,
    ids: np.ndarray,
    scaling: Scaling | None = None,
) -> np.ndarray:
    """PSD curvature sum_i c_i Cov_p[f] of a candidate-set block over ``ids``.

    Parameters
    ----------
    p : ndarray, shape (n_candidates_total,)
        p(y | x_i) of every candidate within its event.

    Returns
    -------
    ndarray, shape (n, n)
    """
    ids = np.asarray(ids, dtype=np.int64)
    lengths = np.diff(block.event_ptr)
    F = _gather_columns(block.F, ids, None if scaling is None else scaling.inv_scale[ids])
    w = np.repeat(block.c, lengths) * p
    H = (F.T @ (sp.diags(w) @ F)).toarray()
    R = sp.csr_matrix(
        (p, (block.event_of_candidate, np.arange(len(p)))), shape=(block.n_events, len(p))
    )
    G = (R @ F).tocsr()  # (m, n): E_p[f | x_i]
    H -= (G.T @ (sp.diags(block.c) @ G)).toarray()
    return H


def curvature(
    block: Block,
    space: Space,
    weights: Weights,
    hess_ids: np.ndarray,
    scaling: Scaling | None = None,
    full_gradient: bool = False,
    *,
    chunk_entries: int | None = None,
) -> Curvature:
    """Loss, gradient and Hessian sums of one block.

    Parameters
    ----------
    weights : Weights
        Current weights (normally over ``hess_ids``).
    hess_ids : ndarray of int64, shape (n,)
        Features of the Hessian (and of the gradient unless ``full_gradient``).
    full_gradient : bool
        Return the gradient over all ``space.n_features`` features (the
        gradient test of the next round rides on this pass), computed by the
        same code as ``loss.full_loss_grad``.
    chunk_entries : int or None
        Feature entries per row chunk of a multiclass block's Hessian
        (``MulticlassHessian``).
    """
    hess_ids = np.asarray(hess_ids, dtype=np.int64)
    grad_ids = None if full_gradient else hess_ids
    if isinstance(block, MulticlassBlock):
        hessian = MulticlassHessian(block, space, hess_ids, scaling, chunk_entries)
        lg = loss_grad_feeding(block, space, weights, scaling, grad_ids, hessian.add_rows)
        return Curvature.of(lg, *hessian.result())
    lg, p = loss_grad_proba(block, space, weights, scaling, grad_ids)
    return Curvature.of(lg, candidate_hessian(block, space, p, hess_ids, scaling))


@dataclass(frozen=True)
class CurvatureTask:
    """A picklable second-order pass: ``curvature`` of every block, merged."""

    space: Space
    weights: Weights
    hess_ids: np.ndarray
    scaling: Scaling | None = None
    full_gradient: bool = False

    def __call__(self, block: Block) -> Curvature:
        return curvature(
            block, self.space, self.weights, self.hess_ids, self.scaling, self.full_gradient
        )
