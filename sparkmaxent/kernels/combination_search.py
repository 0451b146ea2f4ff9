"""The search for combination features without enumerating them
(Okanohara & Tsujii 2009, section 3, Eq. 4-5, Algorithm 2), per block.

With alpha_ik = c_i ([y_i = k] - p(k | x_i)) the exact gradient sum of a
candidate feature (f, k) is v = sum_i x_if alpha_ik (dL/dw = -v / W), and
the per-feature bound sums are t+ = sum_i x_if max(alpha_ik, 0) and
t- = sum_i x_if min(alpha_ik, 0). When values are in [0, 1] a conjunction's
value is at most each of its parts' values, so for a conjunction of atoms
(or pairs) f1..fd (Eq. 5, with t = 0: one pass over all events)

    max_d t-(f_d, k) <= v(conj, k) <= min_d t+(f_d, k).

So (conj, k) can pass the gradient test |v| / W > bound only if every part
has t+ / W > bound, or every part has -t- / W > bound: an atom that passes
neither for label k takes part in no conjunction with label k, a pair that
passes neither in no triple. The passes here form only the conjunctions
all of whose parts survive (pairs: by one sparse product per label over
the surviving atoms' columns; triples: inside each event), and return
their exact v (and their own t+, t- for the next degree) summed by key;
the driver merges them across blocks (``ConjunctionSums.merge``) and never
sees the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .blocks import Block, MulticlassBlock
from .conjunctions import MAX_DEGREE, Conjunctions, conjunction_keys
from .conjunctions import later_entries as _later
from .loss import multiclass_proba
from .mergeable import Summed, merged_by
from .params import Space, Weights


def residuals(block: MulticlassBlock, space: Space, weights: Weights, conj: Conjunctions):
    """alpha_ik = c_i ([y_i = k] - p(k | x_i)) under ``weights`` over the
    atoms and ``conj``, shape (m, K). The conjunctions are formed in the
    block first unless it already holds them (the passes of a round's
    backend that keeps its events widened, backends/expanded.py)."""
    widened = block if block.X.shape[1] == conj.n_predicates else conj.expand(block)
    P = multiclass_proba(widened, space, weights)  # type: ignore[arg-type]
    alpha = -P
    alpha[np.arange(block.n_events), block.y] += 1.0
    return alpha * block.c[:, None]


def _multiclass(block: Block) -> MulticlassBlock:
    if not isinstance(block, MulticlassBlock):
        raise TypeError("combination features are for multiclass events")
    return block


@dataclass
class AtomSums(Summed):
    """Per-atom bound sums t+ and t- (n_atoms, K), and the events' weight."""

    tplus: np.ndarray
    tminus: np.ndarray
    weight: float


@dataclass(frozen=True)
class AtomBoundTask:
    """One pass: t+ and t- of every atomic feature (Algorithm 2's first lines)."""

    space: Space
    weights: Weights
    conjunctions: Conjunctions

    def __call__(self, block: Block) -> AtomSums:
        b = _multiclass(block)
        alpha = residuals(b, self.space, self.weights, self.conjunctions)
        XT = b.X[:, : self.conjunctions.n_atoms].T.tocsr()
        return AtomSums(
            np.asarray(XT @ np.maximum(alpha, 0.0)),
            np.asarray(XT @ np.minimum(alpha, 0.0)),
            float(b.c.sum()),
        )


@dataclass
class ConjunctionSums:
    """Exact sums of (conjunction, label) features formed in some event:
    ``keys`` = conjunction key * K + k (sorted, distinct), v, t+ and t-."""

    keys: np.ndarray
    v: np.ndarray
    tplus: np.ndarray
    tminus: np.ndarray

    @staticmethod
    def of(keys: np.ndarray, contrib: np.ndarray) -> ConjunctionSums:
        """Contributions x alpha summed by key (values >= 0, so the positive
        and negative parts of a contribution are those of alpha); v = t+ +
        t-, as the pairs' product gives it, so that conjunctions firing in
        the same events tie exactly whatever their degree."""
        order = np.argsort(keys, kind="stable")
        c = contrib[order]
        s = ConjunctionSums.summed(keys[order], c, np.maximum(c, 0.0), np.minimum(c, 0.0))
        return ConjunctionSums(s.keys, s.tplus + s.tminus, s.tplus, s.tminus)

    @staticmethod
    def summed(keys: np.ndarray, v, tplus, tminus) -> ConjunctionSums:
        """The sums by key of entries whose ``keys`` are sorted (repeats
        adjacent): a linear pass, no hashing or second sort."""
        if not len(keys):
            return ConjunctionSums(keys, v, tplus, tminus)
        start = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        if len(start) == len(keys):
            return ConjunctionSums(keys, v, tplus, tminus)
        return ConjunctionSums(
            keys[start],
            np.add.reduceat(v, start),
            np.add.reduceat(tplus, start),
            np.add.reduceat(tminus, start),
        )

    def merge(self, other: ConjunctionSums) -> ConjunctionSums:
        """Sums by key of two blocks' (or partial merges') sums: both are
        sorted, so a stable sort of the two runs is a linear merge."""
        order = np.argsort(np.concatenate([self.keys, other.keys]), kind="stable")

        def joined(a, b):
            return np.concatenate([a, b])[order]

        return ConjunctionSums.summed(
            joined(self.keys, other.keys),
            joined(self.v, other.v),
            joined(self.tplus, other.tplus),
            joined(self.tminus, other.tminus),
        )


def _rows(indptr: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))


@dataclass(frozen=True)
class FormTask:
    """One pass forming the surviving conjunctions of one ``degree`` in
    every event and summing their exact v, t+, t- by key.

    Attributes
    ----------
    space, weights, conjunctions
        The current model (atoms + formed conjunctions), for alpha.
    degree : 2 or 3
    parts : ndarray of int64
        Sorted keys of the surviving parts: atom ids (degree 2) or pair
        keys (degree 3).
    mask : ndarray of bool, shape (len(parts), K, 2)
        Whether a part survives for label k with sign + (0) or - (1).
    atoms : ndarray of int64
        Sorted ids of the atoms in some surviving part.
    """

    space: Space
    weights: Weights
    conjunctions: Conjunctions
    degree: int
    parts: np.ndarray
    mask: np.ndarray
    atoms: np.ndarray

    def __call__(self, block: Block) -> ConjunctionSums:
        b = _multiclass(block)
        alpha = residuals(b, self.space, self.weights, self.conjunctions)
        X = b.X[:, : self.conjunctions.n_atoms].tocsr()
        X.eliminate_zeros()
        X.sort_indices()
        if self.degree == 2:
            return self._pairs(X, alpha)
        return self._triples(X, alpha)

    def _pairs(self, X: sp.csr_matrix, alpha: np.ndarray) -> ConjunctionSums:
        """Degree 2, one sparse product per label k: with X_k the events'
        values of the atoms surviving for k (either sign), the product
        X_k^T diag(max(alpha_k, 0) + i min(alpha_k, 0)) X_k holds t+ (real
        part) and t- (imaginary part) of every pair of them that fires in
        some event, summed by pair inside the product (compiled code)
        instead of forming each event's pairs; only pairs whose two atoms
        survive for k with the same sign are kept. A pair whose every event
        has alpha_k = 0 (v = t+ = t- = 0) is left out by the product: it
        can pass no test."""
        n_atoms, K = self.conjunctions.n_atoms, self.space.n_labels
        keys, tplus, tminus = [], [], []
        for k in range(K):
            alive = np.flatnonzero(self.mask[:, k, :].any(axis=1))
            if len(alive) < 2:
                continue
            Xk = X[:, self.parts[alive]].tocsr()
            a = alpha[:, k]
            scaled = Xk.astype(np.complex128)
            scaled.data *= (np.maximum(a, 0.0) + 1j * np.minimum(a, 0.0))[_rows(Xk.indptr)]
            T = (Xk.T.tocsr() @ scaled).tocoo()
            r, c = T.row.astype(np.int64), T.col.astype(np.int64)
            pos, neg = self.mask[alive, k, 0], self.mask[alive, k, 1]
            ok = (r < c) & ((pos[r] & pos[c]) | (neg[r] & neg[c]))
            first, second = self.parts[alive][r[ok]], self.parts[alive][c[ok]]
            keys.append((first * n_atoms + second) * K + k)
            tplus.append(T.data.real[ok])
            tminus.append(T.data.imag[ok])
        if not keys:
            return ConjunctionSums.of(np.zeros(0, dtype=np.int64), np.zeros(0))
        key = np.concatenate(keys)
        order = np.argsort(key)
        tp, tm = np.concatenate(tplus)[order], np.concatenate(tminus)[order]
        return ConjunctionSums(key[order], tp + tm, tp, tm)

    def _triples(self, X: sp.csr_matrix, alpha: np.ndarray) -> ConjunctionSums:
        """Degree 3: inside each event, the triples of atoms whose three
        pairs survive for the same (k, s), their exact v, t+, t- by key."""
        n_atoms, K = self.conjunctions.n_atoms, self.space.n_labels
        keep = np.isin(X.indices, self.atoms)
        rows = _rows(X.indptr)[keep]
        cols = X.indices[keep].astype(np.int64)
        vals = X.data[keep]
        counts = np.bincount(rows, minlength=X.shape[0])
        row_end = np.repeat(np.cumsum(counts), counts)
        e1, e2 = _later(np.arange(len(cols)), row_end)
        pair = cols[e1] * n_atoms + cols[e2]
        alive = self._mask(pair).any(axis=(1, 2))
        e1, e2 = e1[alive], e2[alive]
        which, e3 = _later(e2, row_end)
        a, bb, c = cols[e1[which]], cols[e2[which]], cols[e3]
        ok = (
            self._mask(a * n_atoms + bb)
            & self._mask(a * n_atoms + c)
            & self._mask(bb * n_atoms + c)
        )
        key = conjunction_keys(np.stack([a, bb, c], axis=1), n_atoms)
        value = vals[e1[which]] * vals[e2[which]] * vals[e3]
        i, k = np.nonzero(ok.any(axis=2))
        contrib = value[i] * alpha[rows[e3][i], k]
        return ConjunctionSums.of(key[i] * K + k, contrib)

    def _mask(self, keys: np.ndarray) -> np.ndarray:
        """The survival mask (n, K, 2) of parts by key; all False for a part
        that does not survive."""
        K = self.space.n_labels
        pos = np.minimum(np.searchsorted(self.parts, keys), max(len(self.parts) - 1, 0))
        if not len(self.parts):
            return np.zeros((len(keys), K, 2), dtype=bool)
        found = self.parts[pos] == keys
        return self.mask[pos] & found[:, None, None]


@dataclass
class KeySet(Summed):
    """Distinct conjunction keys (sorted), for counting the conjunctions
    that exist in the data (tests and benchmarks, never training)."""

    keys: np.ndarray = field(metadata=merged_by(np.union1d))


@dataclass(frozen=True)
class EnumerateTask:
    """Every conjunction of degree 2..``degree`` that fires in some event
    (brute force: what the search avoids; for counting and baselines)."""

    n_atoms: int
    degree: int

    def __call__(self, block: Block) -> KeySet:
        X = block.X if isinstance(block, MulticlassBlock) else block.F
        X = X[:, : self.n_atoms].tocsr()
        X.eliminate_zeros()
        X.sort_indices()
        cols = X.indices.astype(np.int64)
        counts = np.diff(X.indptr)
        row_end = np.repeat(X.indptr[1:], counts)
        e1, e2 = _later(np.arange(len(cols)), row_end)
        keys = [cols[e1] * self.n_atoms + cols[e2]]
        if self.degree >= MAX_DEGREE:
            which, e3 = _later(e2, row_end)
            atoms = np.stack([cols[e1[which]], cols[e2[which]], cols[e3]], axis=1)
            keys.append(conjunction_keys(atoms, self.n_atoms))
        return KeySet(np.unique(np.concatenate(keys)))


@dataclass
class ValueRange:
    """The smallest and largest predicate value (and a predicate holding it)."""

    low: float
    low_predicate: int
    high: float
    high_predicate: int

    def merge(self, other: ValueRange) -> ValueRange:
        lo = self if self.low <= other.low else other
        hi = self if self.high >= other.high else other
        return ValueRange(lo.low, lo.low_predicate, hi.high, hi.high_predicate)


@dataclass(frozen=True)
class ValueRangeTask:
    """The range of predicate values (the search needs them in [0, 1])."""

    def __call__(self, block: Block) -> ValueRange:
        X: sp.csr_matrix = block.X if isinstance(block, MulticlassBlock) else block.F
        if X.nnz == 0:
            return ValueRange(0.0, -1, 0.0, -1)
        lo, hi = int(np.argmin(X.data)), int(np.argmax(X.data))
        return ValueRange(
            float(X.data[lo]), int(X.indices[lo]), float(X.data[hi]), int(X.indices[hi])
        )
