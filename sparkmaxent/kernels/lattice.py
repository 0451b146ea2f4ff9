"""Executor-side pieces of the feature collocation lattice (Mikheev 1998):
atom sets as bitmasks, the per-block count of observed configurations, the
expansion of events with lattice nodes, and the scoring of candidate nodes
by frequency redistribution (section 3, Eq. 1-3).

A *configuration* is the set of atomic predicates an event has (only the
atoms the lattice was built over); it is held as a row of ``n_words``
uint64 words, bit b of the row set when atom b fires. A *node* is such a
set too; node i lies below node j (is more general) when i's bits are a
subset of j's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from .blocks import Block, MulticlassBlock

WORD = 64


def n_words(n_atoms: int) -> int:
    return max(1, -(-n_atoms // WORD))


def row_masks(X: sp.csr_matrix, atom_bit: np.ndarray, words: int) -> np.ndarray:
    """Bitmask rows (m, words) of the atoms each row of ``X`` has;
    ``atom_bit[p]`` is predicate p's bit, -1 for predicates left out."""
    X = X.tocsr()
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    bits = atom_bit[X.indices]
    keep = (bits >= 0) & (X.data != 0)
    rows, bits = rows[keep], bits[keep].astype(np.uint64)
    out = np.zeros((X.shape[0], words), dtype=np.uint64)
    np.bitwise_or.at(
        out,
        (rows, (bits // WORD).astype(np.int64)),
        np.left_shift(np.uint64(1), bits % np.uint64(WORD)),
    )
    return out


def popcount(masks: np.ndarray) -> np.ndarray:
    """Number of set bits of every row of ``masks`` (n, words)."""
    as_bytes = masks.view(np.uint8).reshape(masks.shape[0], -1)
    return np.unpackbits(as_bytes, axis=1).sum(axis=1).astype(np.int64)


def is_subset(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise (broadcast) test that mask ``a`` is a subset of mask ``b``."""
    return np.all((a & b) == a, axis=-1)


def unique_rows(masks: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of ``masks`` and the sums of ``values`` (rows aligned)
    over each, rows in lexicographic order."""
    if len(masks) == 0:
        return masks, values
    uniq, inverse = np.unique(masks, axis=0, return_inverse=True)
    sums = np.zeros((len(uniq),) + values.shape[1:], dtype=np.float64)
    np.add.at(sums, inverse.reshape(-1), values)
    return uniq, sums


@dataclass
class ConfigCounts:
    """Distinct configurations and their weight per label (xi^w of section 2).

    Attributes
    ----------
    masks : ndarray of uint64, shape (r, words)
    counts : ndarray, shape (r, K)
        Event weight of each configuration with each label.
    """

    masks: np.ndarray
    counts: np.ndarray

    def merge(self, other: ConfigCounts) -> ConfigCounts:
        m, c = unique_rows(
            np.concatenate([self.masks, other.masks]), np.concatenate([self.counts, other.counts])
        )
        return ConfigCounts(m, c)


@dataclass
class ConfigCountTask:
    """Counts the configurations of a block's events over the lattice's atoms.

    Atoms are binary: a value other than 0 or 1 on an atom raises InputError
    naming the predicate (a lattice node is a set of atoms that fire)."""

    atom_bit: np.ndarray
    words: int

    def __call__(self, block: Block) -> ConfigCounts:
        if not isinstance(block, MulticlassBlock):
            raise InputError("the feature lattice needs multiclass events, got candidate sets")
        X = block.X.tocsr()
        on_atom = self.atom_bit[X.indices] >= 0
        bad = on_atom & (X.data != 0) & (X.data != 1)
        if bad.any():
            p = int(X.indices[np.flatnonzero(bad)[0]])
            raise InputError(
                f"predicate {p} has the value {X.data[np.flatnonzero(bad)[0]]!r}: "
                "the feature lattice expects binary atomic predicates (0 or 1)"
            )
        if (block.y < 0).any():
            raise InputError("an event has a label unseen in training: cannot count it")
        masks = row_masks(X, self.atom_bit, self.words)
        onehot = np.zeros((block.n_events, block.n_labels))
        onehot[np.arange(block.n_events), block.y] = block.c
        m, c = unique_rows(masks, onehot)
        return ConfigCounts(m, c)


# ------------------------------------------------------------ selection


def smoothed_loglik(counts: np.ndarray, threshold: float) -> np.ndarray:
    """sum_y C_y log p''(y) for each row C of ``counts`` (g, K), p'' the
    group's relative frequencies smoothed towards uniform with
    L = T / (T + sum_y C_y) (Mikheev 1998, section 3)."""
    counts = np.atleast_2d(counts)
    k = counts.shape[1]
    total = counts.sum(axis=1, keepdims=True)
    lam = threshold / (threshold + total)
    p = lam / k + (1 - lam) * counts / np.where(total > 0, total, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(counts > 0, counts * np.log(p), 0.0)
    return terms.sum(axis=1)


@dataclass
class LatticeArrays:
    """What scoring a candidate reads of the empirical lattice (static for
    a run: broadcast once).

    Attributes
    ----------
    masks : ndarray of uint64, (n, words)
    sizes : ndarray of int64, (n,)
        Atoms per node.
    counts : ndarray, (n, K)
        Configuration frequencies xi^w per label.
    desc_ptr, desc_idx : ndarray of int64
        CSR rows: node a's descendants (supersets, a itself included).
    threshold : float
        T of the smoothing L = T / (T + xi').
    """

    masks: np.ndarray
    sizes: np.ndarray
    counts: np.ndarray
    desc_ptr: np.ndarray
    desc_idx: np.ndarray
    threshold: float

    def descendants(self, a: int) -> np.ndarray:
        return self.desc_idx[self.desc_ptr[a] : self.desc_ptr[a + 1]]


def redistribution(
    lat: LatticeArrays, decider: np.ndarray, a: int
) -> tuple[np.ndarray, np.ndarray]:
    """What adding node ``a`` to the optimized lattice changes (Eq. 1):
    the empirical nodes whose deciding node changes and their new deciders.

    The optimized lattice is closed under joins, so every empirical node i
    has one deciding node d(i), the most specific optimized node below it
    (-1: undecided). Adding ``a`` (with its collocations) gives every
    descendant i of ``a`` the new decider join(a, d(i)): the smallest
    lattice node above both, found among a's descendants as the one with
    fewest atoms containing both. Nodes already decided by a node above
    ``a`` do not change.
    """
    S = lat.descendants(a)
    d = decider[S]
    ma = lat.masks[a]
    moved = (d < 0) | ~is_subset(ma, lat.masks[np.maximum(d, 0)])
    S, d = S[moved], d[moved]
    new = np.empty(len(S), dtype=np.int64)
    if not len(S):
        return S, new
    sub_masks = lat.masks[lat.descendants(a)]
    sub_ids = lat.descendants(a)
    for old in np.unique(d):
        u = ma if old < 0 else ma | lat.masks[old]
        above = np.flatnonzero(is_subset(u, sub_masks))
        new[d == old] = sub_ids[above[np.argmin(lat.sizes[sub_ids[above]])]]
    return S, new


def candidate_gain(lat: LatticeArrays, decider: np.ndarray, groups: np.ndarray, a: int) -> float:
    """Increase of the smoothed training log-likelihood sum (that is,
    N times the decrease of D(p || p'')) when node ``a`` joins the optimized
    lattice; ``groups`` (n, K) holds xi'^w of the optimized nodes (Eq. 1)."""
    S, new = redistribution(lat, decider, a)
    if not len(S):
        return 0.0
    k = lat.counts.shape[1]
    moved = lat.counts[S]
    d = decider[S]
    gain = 0.0
    und = d < 0
    if und.any():  # undecided nodes leave the uniform prediction
        gain += float(moved[und].sum()) * np.log(k)
    targets, inv = np.unique(new, return_inverse=True)
    gained = np.zeros((len(targets), k))
    np.add.at(gained, inv.reshape(-1), moved)
    gain += float(smoothed_loglik(gained, lat.threshold).sum())
    if (~und).any():
        olds, oinv = np.unique(d[~und], return_inverse=True)
        lost = np.zeros((len(olds), k))
        np.add.at(lost, oinv.reshape(-1), moved[~und])
        before = groups[olds]
        gain += float(
            smoothed_loglik(np.maximum(before - lost, 0.0), lat.threshold).sum()
            - smoothed_loglik(before, lat.threshold).sum()
        )
    return gain


def score_batch(
    lat: LatticeArrays, decider: np.ndarray, groups: np.ndarray, candidates: np.ndarray
) -> np.ndarray:
    """The gains of a batch of candidates: one executor task of a step."""
    return np.array([candidate_gain(lat, decider, groups, int(a)) for a in candidates])
