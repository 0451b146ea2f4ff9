"""A block's Hessian operator at one point as plain arrays: v -> H v over
theta = [w over ids, bias] and H's diagonal (sums over the block's events),
built from the block's model probabilities alone.

* ``MulticlassOperator``: the score change ds_ik = x_i . v_(., k) + v_b,k,
  then u_ik = c_i P_ik (ds_ik - P_i . ds_i) and H v = X^T u over the
  gathered active columns (centering as in ``loss.py``: its shift of the
  scores, and of the column sums).
* ``CandidateOperator``: the PSD part sum_i c_i Cov_p[f] of
  ``curvature.candidate_hessian`` over the gathered active columns.

A product needs the probabilities P (and the diagonal), never the block's
loss gradient, so the build scores the block and takes its softmax without
the gradient's product X^T R a loss pass adds (``model_proba``): P is the
same bits ``loss.loss_grad_proba`` gives (the same scoring columns, the
same row-chunk kernel, the same per-row softmax), about a product less.

Every field is an array or a number, so an operator leaves its process as
``parts`` (numbers, arrays) and comes back with ``from_parts`` over other
memory holding the same bytes (a file another Python worker mapped,
``pointcache.PointCache``'s shared store): the same arithmetic on the same
bits, so the products are the same bits. A build takes its arrays from a
``Sink``: in memory (``MEMORY``), or a shared store's file being written,
so the probabilities are computed in place there and never copied.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from .blocks import Block, CandidateBlock, MulticlassBlock
from .curvature import _gather_columns
from .loss import _checked, _columns, _scoring, candidate_scores
from .params import Scaling, Space, Weights
from .softmax import row_softmax, segment_logsumexp
from .sweep import _chunkable, _dense, _linear_scores, scored_chunks

#: scores per row chunk of the probabilities' sweep: ``loss.CHUNK_ENTRIES``,
#: whose chunks give the same bits (each row's arithmetic is the same)
CHUNK_ENTRIES = 1 << 17

Parts = tuple[dict[str, Any], dict[str, np.ndarray]]
Specs = dict[str, tuple[str, tuple[int, ...]]]


class Sink(Protocol):
    """Where a build's arrays live."""

    def allocate(self, specs: Specs, placed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Writable arrays of the dtypes and shapes ``specs`` names (contents
        undefined), and ``placed``'s arrays (copied where the sink keeps its
        own)."""
        ...


class _Memory:
    """The process's memory: new arrays, placed ones as they are."""

    def allocate(self, specs: Specs, placed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**placed, **{k: np.empty(shape, dtype) for k, (dtype, shape) in specs.items()}}


MEMORY = _Memory()


def _csr(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, shape) -> sp.csr_matrix:
    """A CSR matrix over the given arrays themselves (no copy, no check:
    they are a CSR matrix's own, or the same bytes mapped back)."""
    X = sp.csr_matrix(shape, dtype=data.dtype)
    X.indptr, X.indices, X.data = indptr, indices, data
    return X


class _Arrays:
    """``parts`` and ``from_parts`` of an operator dataclass: a sparse field
    as its CSR arrays and shape, a number as a number, None as None."""

    def parts(self) -> Parts:
        """(numbers, arrays): what rebuilds the operator (``from_parts``)."""
        numbers: dict[str, Any] = {"kind": type(self).__name__}
        arrays: dict[str, np.ndarray] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if sp.issparse(value):
                numbers[f"{f.name}.shape"] = [int(s) for s in value.shape]
                for name in ("indptr", "indices", "data"):
                    arrays[f"{f.name}.{name}"] = getattr(value, name)
            elif isinstance(value, np.ndarray):
                arrays[f.name] = value
            else:
                numbers[f.name] = value
        return numbers, arrays

    @classmethod
    def from_parts(cls, numbers: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
        values = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f"{f.name}.shape" in numbers:
                indptr, indices, data = (
                    arrays[f"{f.name}.{n}"] for n in ("indptr", "indices", "data")
                )
                values[f.name] = _csr(indptr, indices, data, tuple(numbers[f"{f.name}.shape"]))
            elif f.name in arrays:
                values[f.name] = arrays[f.name]
            else:
                values[f.name] = numbers[f.name]
        return cls(**values)


@dataclass(frozen=True)
class MulticlassOperator(_Arrays):
    """v -> H v (sums over the block's events) over [w over the ids, bias]
    and H's diagonal ``diag``; ``Xs`` the gathered columns of the ids'
    predicates, ``rows``/``labels`` each id's column and label, ``P`` the
    probabilities, ``c`` the events' weights c_i, ``weight`` their sum.
    c_i P_ik is formed a chunk of rows at a time where it is used
    (``times_cP``), not kept beside P: an operator holds one (m, K) matrix."""

    Xs: sp.csr_matrix
    mean: np.ndarray | None
    inv: np.ndarray | None
    P: np.ndarray
    c: np.ndarray
    rows: np.ndarray
    labels: np.ndarray
    bias: bool
    weight: float
    diag: np.ndarray

    def back(self, U: np.ndarray) -> np.ndarray:
        """sum_i x_ij U_(i, k_j) over the features, then the bias: the
        gradient kernel's product, centering and all."""
        mean, inv = self.mean, self.inv
        G, colsum = _dense(self.Xs.T @ U), U.sum(axis=0)
        if mean is not None and inv is not None:
            G = inv[:, None] * (G - mean[:, None] * colsum[None, :])
        out = G[self.rows, self.labels]
        return np.concatenate([out, colsum]) if self.bias else out

    def __call__(self, v: np.ndarray) -> np.ndarray:
        n, K = len(self.rows), self.P.shape[1]
        W = np.zeros((self.Xs.shape[1], K))
        W[self.rows, self.labels] = v[:n]
        S = _linear_scores(self.Xs, W, v[n:] if self.bias else None, self.mean, self.inv)
        S -= np.einsum("ik,ik->i", self.P, S)[:, None]  # in place: S is the product's own
        return self.back(times_cP(S, self.c, self.P))


@dataclass(frozen=True)
class CandidateOperator(_Arrays):
    """v -> H v and H's diagonal for a candidate-set block (the PSD part
    sum_i c_i Cov_p[f] over the ids): ``F`` the ids' gathered (scaled)
    columns, ``event`` each candidate's event, ``p`` the candidates'
    probabilities, ``cp`` c_i p."""

    F: sp.csr_matrix
    event: np.ndarray
    n_events: int
    p: np.ndarray
    cp: np.ndarray
    weight: float
    diag: np.ndarray

    def __call__(self, v: np.ndarray) -> np.ndarray:
        s = self.F @ v
        mean = np.bincount(self.event, weights=self.p * s, minlength=self.n_events)
        return np.asarray(self.F.T @ (self.cp * (s - mean[self.event])))


Operator = MulticlassOperator | CandidateOperator
KINDS = {cls.__name__: cls for cls in (MulticlassOperator, CandidateOperator)}


def times_cP(
    S: np.ndarray, c: np.ndarray, P: np.ndarray, chunk_entries: int = CHUNK_ENTRIES
) -> np.ndarray:
    """``S *= c_i P_ik`` in place, returned: c_i P_ik formed in row chunks of
    about ``chunk_entries`` entries, the same bits as multiplying by the
    whole (m, K) matrix ``c[:, None] * P`` (each entry's two products are
    the same), without it."""
    rows = max(1, chunk_entries // max(1, P.shape[1]))
    for a in range(0, len(S), rows):
        S[a : a + rows] *= c[a : a + rows, None] * P[a : a + rows]
    return S


def operator_from_parts(numbers: dict[str, Any], arrays: dict[str, np.ndarray]) -> Operator:
    """The operator ``parts`` gave, over the arrays handed in (not copied)."""
    return KINDS[numbers["kind"]].from_parts(numbers, arrays)


def model_proba(
    block: MulticlassBlock,
    space: Space,
    weights: Weights,
    scaling: Scaling | None,
    ids: np.ndarray,
    chunk_entries: int = CHUNK_ENTRIES,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """p(k | x_i), shape (m, K) (in ``out`` when given), scored as
    ``loss.loss_grad_proba`` scores with the gradient at ``ids`` (sparse
    weights over their columns and those of ``ids``, dense weights over the
    block), in row chunks through scipy's own kernel where ``_sweep`` does
    so: the same bits, without the gradient's product."""
    (Xs, W, mean, inv), _ = _scoring(_checked(block), space, weights, scaling, also=ids)
    m, K = Xs.shape[0], space.n_labels
    P = np.empty((m, K)) if out is None else out
    if not _chunkable(Xs, W, Xs):
        S = np.ascontiguousarray(_linear_scores(Xs, W, weights.bias, mean, inv))
        P[...] = row_softmax(S, overwrite=True)[1]
        return P
    for _, _, S in scored_chunks(Xs, W, weights.bias, mean, inv, chunk_entries, out=P):
        row_softmax(S, overwrite=True)
    return P


def squared(X: sp.csr_matrix) -> sp.csr_matrix:
    """X with every entry squared, ``X.multiply(X)``: for a matrix in
    canonical form (sorted indices, no duplicate entries: the gathered
    columns of both operators) a copy with its data squared, the same
    entries and the same bits (an entry squared to 0 stays stored, adding
    0) without the element-wise product's merge of two index lists;
    otherwise the product itself, which sums duplicates before squaring."""
    if not X.has_canonical_format:
        return X.multiply(X).tocsr()
    return sp.csr_matrix((X.data * X.data, X.indices.copy(), X.indptr.copy()), shape=X.shape)


def multiclass_operator(
    block: MulticlassBlock,
    space: Space,
    weights: Weights,
    ids: np.ndarray,
    scaling: Scaling | None = None,
    sink: Sink = MEMORY,
) -> MulticlassOperator:
    """The block's operator at ``weights`` over [w over ``ids``, bias], its
    arrays from ``sink``."""
    K, m = space.n_labels, block.n_events
    preds, rows = np.unique(ids // K, return_inverse=True)
    Xs, mean, inv = _columns(_checked(block), preds, scaling)
    placed = {"Xs.indptr": Xs.indptr, "Xs.indices": Xs.indices, "Xs.data": Xs.data}
    placed.update(rows=rows, labels=ids % K, **({} if mean is None else {"mean": mean, "inv": inv}))
    placed.update(c=np.asarray(block.c, dtype=np.float64))
    n_diag = len(ids) + (K if space.bias else 0)
    f8 = np.dtype(np.float64).str
    specs = {"P": (f8, (m, K)), "diag": (f8, (n_diag,))}
    out = sink.allocate(specs, placed)
    P = model_proba(block, space, weights, scaling, ids, out=out["P"])
    A = times_cP(np.subtract(1.0, P), out["c"], P)  # c_i P_ik (1 - P_ik)
    D = _dense(squared(Xs).T @ A)
    if mean is not None and inv is not None:
        XA, total = _dense(Xs.T @ A), A.sum(axis=0)
        D = inv[:, None] ** 2 * (D - 2 * mean[:, None] * XA + mean[:, None] ** 2 * total[None, :])
    out["diag"][: len(ids)] = D[rows, ids % K]
    if space.bias:
        out["diag"][len(ids) :] = A.sum(axis=0)
    Xs = _csr(out["Xs.indptr"], out["Xs.indices"], out["Xs.data"], Xs.shape)
    return MulticlassOperator(
        Xs, out.get("mean"), out.get("inv"), P, out["c"], out["rows"], out["labels"], space.bias,
        float(block.c.sum()), out["diag"],
    )  # fmt: skip


def candidate_proba_checked(
    block: CandidateBlock, space: Space, weights: Weights, scaling: Scaling | None
) -> np.ndarray:
    """p(y | x_i) of every candidate, the bits ``loss.loss_grad_proba``
    gives; an event without a correct candidate raises as a loss pass does."""
    has_correct = np.bitwise_or.reduceat(block.correct.astype(np.int8), block.event_ptr[:-1])
    if len(has_correct) and not np.all(has_correct):
        raise ValueError("cannot train on candidate-set events without a correct candidate")
    s = candidate_scores(block, space, weights, scaling)
    lse = segment_logsumexp(s, block.event_ptr)
    return np.exp(s - np.repeat(lse, np.diff(block.event_ptr)))


def candidate_operator(
    block: CandidateBlock,
    space: Space,
    weights: Weights,
    ids: np.ndarray,
    scaling: Scaling | None = None,
    sink: Sink = MEMORY,
) -> CandidateOperator:
    """The candidate-set block's operator at ``weights`` over ``ids``, its
    arrays from ``sink``."""
    p = candidate_proba_checked(block, space, weights, scaling)
    F = _gather_columns(block.F, ids, None if scaling is None else scaling.inv_scale[ids])
    event, m = block.event_of_candidate, block.n_events
    cp = np.repeat(block.c, np.diff(block.event_ptr)) * p
    R = sp.csr_matrix((p, (event, np.arange(len(p)))), shape=(m, len(p)))
    G = (R @ F).tocsr()  # E_p[f | x_i]
    diag = np.asarray(squared(F).T @ cp).ravel() - np.asarray(squared(G).T @ block.c).ravel()
    placed = {"F.indptr": F.indptr, "F.indices": F.indices, "F.data": F.data, "event": event}
    out = sink.allocate({}, {**placed, "p": p, "cp": cp, "diag": diag})
    F = _csr(out["F.indptr"], out["F.indices"], out["F.data"], F.shape)
    return CandidateOperator(
        F, out["event"], m, out["p"], out["cp"], float(block.c.sum()), out["diag"]
    )


def build_operator(
    block: Block,
    space: Space,
    weights: Weights,
    ids: np.ndarray,
    scaling: Scaling | None,
    sink: Sink | None = None,
) -> Operator:
    """The block's Hessian operator at ``weights`` over [w over ``ids``,
    bias], its arrays from ``sink`` (the process's memory by default)."""
    ids = np.asarray(ids, dtype=np.int64)
    sink = MEMORY if sink is None else sink
    if isinstance(block, MulticlassBlock):
        return multiclass_operator(block, space, weights, ids, scaling, sink)
    return candidate_operator(block, space, weights, ids, scaling, sink)
