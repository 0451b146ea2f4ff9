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
passes neither in no triple. The passes here form, inside each event, only
the conjunctions all of whose parts survive, and return their exact v (and
their own t+, t- for the next degree) summed by key; the driver merges
them across blocks (``ConjunctionSums.merge``) and never sees the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .blocks import Block, MulticlassBlock
from .conjunctions import MAX_DEGREE, Conjunctions, conjunction_keys
from .conjunctions import later_entries as _later
from .loss import multiclass_proba
from .params import Space, Weights


def residuals(block: MulticlassBlock, space: Space, weights: Weights, conj: Conjunctions):
    """alpha_ik = c_i ([y_i = k] - p(k | x_i)) under ``weights`` over the
    atoms and ``conj`` (formed in the block first), shape (m, K)."""
    P = multiclass_proba(conj.expand(block), space, weights)  # type: ignore[arg-type]
    alpha = -P
    alpha[np.arange(block.n_events), block.y] += 1.0
    return alpha * block.c[:, None]


def _multiclass(block: Block) -> MulticlassBlock:
    if not isinstance(block, MulticlassBlock):
        raise TypeError("combination features are for multiclass events")
    return block


@dataclass
class AtomSums:
    """Per-atom bound sums t+ and t- (n_atoms, K), and the events' weight."""

    tplus: np.ndarray
    tminus: np.ndarray
    weight: float

    def merge(self, other: AtomSums) -> AtomSums:
        return AtomSums(
            self.tplus + other.tplus, self.tminus + other.tminus, self.weight + other.weight
        )


@dataclass(frozen=True)
class AtomBoundTask:
    """One pass: t+ and t- of every atomic feature (Algorithm 2's first lines)."""

    space: Space
    weights: Weights
    conjunctions: Conjunctions

    def __call__(self, block: Block) -> AtomSums:
        b = _multiclass(block)
        alpha = residuals(b, self.space, self.weights, self.conjunctions)
        XT = b.X.T.tocsr()
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
        and negative parts of a contribution are those of alpha)."""
        uniq, inv = np.unique(keys, return_inverse=True)
        n = len(uniq)
        return ConjunctionSums(
            uniq,
            np.bincount(inv, contrib, n),
            np.bincount(inv, np.maximum(contrib, 0.0), n),
            np.bincount(inv, np.minimum(contrib, 0.0), n),
        )

    def merge(self, other: ConjunctionSums) -> ConjunctionSums:
        keys = np.concatenate([self.keys, other.keys])
        uniq, inv = np.unique(keys, return_inverse=True)
        n = len(uniq)

        def add(a, b):
            return np.bincount(inv, np.concatenate([a, b]), n)

        return ConjunctionSums(
            uniq,
            add(self.v, other.v),
            add(self.tplus, other.tplus),
            add(self.tminus, other.tminus),
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
        n_atoms, K = self.conjunctions.n_atoms, self.space.n_labels
        alpha = residuals(b, self.space, self.weights, self.conjunctions)
        X = b.X[:, :n_atoms].tocsr()
        X.eliminate_zeros()
        X.sort_indices()
        keep = np.isin(X.indices, self.atoms)
        rows = _rows(X.indptr)[keep]
        cols = X.indices[keep].astype(np.int64)
        vals = X.data[keep]
        counts = np.bincount(rows, minlength=b.n_events)
        row_end = np.repeat(np.cumsum(counts), counts)
        e1, e2 = _later(np.arange(len(cols)), row_end)
        if self.degree == 2:
            ma = self._mask(cols[e1])
            ok = ma & self._mask(cols[e2])
            key = cols[e1] * n_atoms + cols[e2]
            value, row = vals[e1] * vals[e2], rows[e1]
        else:
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
            atoms = np.stack([a, bb, c], axis=1)
            key = conjunction_keys(atoms, n_atoms)
            value = vals[e1[which]] * vals[e2[which]] * vals[e3]
            row = rows[e3]
        i, k = np.nonzero(ok.any(axis=2))
        contrib = value[i] * alpha[row[i], k]
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
class KeySet:
    """Distinct conjunction keys (sorted), for counting the conjunctions
    that exist in the data (tests and benchmarks, never training)."""

    keys: np.ndarray

    def merge(self, other: KeySet) -> KeySet:
        return KeySet(np.union1d(self.keys, other.keys))


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
