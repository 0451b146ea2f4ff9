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

import dataclasses
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from .blocks import Block, MulticlassBlock

WORD = 64
# (candidate, descendant) pairs scored at once: bounds a scoring task's memory
CHUNK_PAIRS = 1 << 20


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


@dataclass
class Moves:
    """What adding each of a set of candidates changes (Eq. 1): row r says
    that node ``node[r]``, a descendant of candidate ``cand[r]`` (a
    position in the candidates), leaves decider ``old[r]`` (-1: undecided)
    for ``new[r]``. Rows are by candidate, then node id. The rows leaving a
    decider are grouped by (candidate, old decider): ``group[r]`` (-1 for
    undecided rows), each group's ``group_cand`` and ``group_old``, in the
    order of (candidate, old decider)."""

    cand: np.ndarray
    node: np.ndarray
    old: np.ndarray
    new: np.ndarray
    group: np.ndarray
    group_cand: np.ndarray
    group_old: np.ndarray

    def rows(self, keep: np.ndarray) -> Moves:
        """The rows ``keep`` (a mask), with every group."""
        return dataclasses.replace(
            self,
            cand=self.cand[keep],
            node=self.node[keep],
            old=self.old[keep],
            new=self.new[keep],
            group=self.group[keep],
        )


def moves(lat: LatticeArrays, decider: np.ndarray, candidates: np.ndarray) -> Moves:
    """The redistribution of Eq. 1 for every candidate at once.

    The optimized lattice is closed under joins, so every empirical node i
    has one deciding node d(i), the most specific optimized node below it
    (-1: undecided). Adding ``a`` (with its collocations) gives every
    descendant i of ``a`` the new decider join(a, d(i)), the smallest
    lattice node above both (``_joins``); nodes already decided by a node
    above ``a`` do not change.
    """
    cand = np.asarray(candidates, dtype=np.int64)
    lo = lat.desc_ptr[cand]
    lens = lat.desc_ptr[cand + 1] - lo
    pos = np.repeat(np.arange(len(cand)), lens)
    at = np.repeat(lo - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
    node = lat.desc_idx[at]
    old = decider[node]
    decided = old >= 0
    # groups (candidate, old decider), in that order: a group stays when
    # its decider contains the candidate (one subset test per group)
    n = np.int64(len(lat.masks))
    keys, group = np.unique(pos[decided] * n + old[decided], return_inverse=True)
    go = ~is_subset(lat.masks[cand[keys // n]], lat.masks[keys % n])
    group = group.reshape(-1)
    leave = np.asarray(go)[group]
    moved = ~decided
    moved[decided] = leave
    pos, node, old = pos[moved], node[moved], old[moved]
    new = cand[pos]
    on = old >= 0
    keys, group = keys[go], (np.cumsum(go) - 1)[group[leave]]  # the groups that move
    new[on] = _joins(lat, keys // n, keys % n, group, node[on])
    rows = np.full(len(pos), -1, dtype=np.int64)
    rows[on] = group
    return Moves(pos, node, old, new, rows, keys // n, keys % n)


def _joins(
    lat: LatticeArrays, g_pos: np.ndarray, g_old: np.ndarray, group: np.ndarray, node: np.ndarray
) -> np.ndarray:
    """join(a, d) for moved decided nodes ``node``, in groups (candidate
    position ``g_pos``, old decider d = ``g_old``; ``group``: each node's),
    without a search of the lattice.

    The join t is a moved node itself (its own decider lies between d and
    t and cannot contain a, or t would be optimized and decide the node),
    and a moved node j contains d exactly when its decider d(j) does (both
    are optimized nodes below j, and the optimized lattice is closed under
    joins). So t is the smallest of the moved nodes whose decider contains
    d: per candidate, the smallest node of each old decider's group,
    then the smallest of those over the groups whose decider contains d.
    """
    if not len(node):
        return np.zeros(0, dtype=np.int64)
    n = np.int64(len(lat.masks))
    # each group's smallest node (fewest atoms, then lowest id)
    smallest = np.full(len(g_pos), np.iinfo(np.int64).max)
    np.minimum.at(smallest, group, lat.sizes[node] * n + node)
    g_min = smallest % n
    # every pair of groups of one candidate
    start = np.flatnonzero(np.r_[True, g_pos[1:] != g_pos[:-1]])
    width = np.diff(np.r_[start, len(g_pos)])
    per = np.repeat(width, width)
    g1 = np.repeat(np.arange(len(g_pos)), per)
    g2 = (
        np.repeat(np.repeat(start, width), per)
        + np.arange(len(g1))
        - np.repeat(np.cumsum(per) - per, per)
    )
    keep = is_subset(lat.masks[g_old[g1]], lat.masks[g_old[g2]])
    g1, g2 = g1[keep], g2[keep]
    pick = np.lexsort((lat.sizes[g_min[g2]], g1))
    g1, g2 = g1[pick], g2[pick]
    lead = np.r_[True, g1[1:] != g1[:-1]]
    join = np.empty(len(g_pos), dtype=np.int64)
    join[g1[lead]] = g_min[g2[lead]]
    return join[group]


def _group_sums(cand: np.ndarray, key: np.ndarray, values: np.ndarray, n: int):
    """Sums of ``values`` rows per distinct (cand, key) pair (key < n),
    each summed in row order, and each group's cand and key."""
    pair = cand * np.int64(n) + key
    groups, inv = np.unique(pair, return_inverse=True)
    return _sums_by(inv.reshape(-1), values, len(groups)), groups // n, groups % n


def _sums_by(index: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Sums of ``values`` rows (r, K) per group ``index`` (n_groups, K), in row order."""
    return np.stack(
        [np.bincount(index, values[:, y], minlength=n_groups) for y in range(values.shape[1])],
        axis=1,
    ).reshape(n_groups, values.shape[1])


def candidate_gains(
    lat: LatticeArrays, decider: np.ndarray, groups: np.ndarray, candidates: np.ndarray
) -> np.ndarray:
    """Increase of the smoothed training log-likelihood sum (that is,
    N times the decrease of D(p || p'')) when each candidate joins the
    optimized lattice; ``groups`` (n, K) holds xi'^w of the optimized nodes
    (Eq. 1). Nodes leaving the uniform prediction gain their weight times
    log |Y|; every new decider's group scores its moved frequencies, and
    every old decider's group is rescored without them."""
    m = len(candidates)
    mv = moves(lat, decider, candidates)
    # hidden nodes (no observed configuration) move no frequency: their rows
    # would add exactly 0 to every sum below, so they are left out
    mv = mv.rows(np.asarray(lat.counts.any(axis=1))[mv.node])
    moved = lat.counts[mv.node]
    und = mv.old < 0
    gain = np.bincount(mv.cand[und], weights=moved[und].sum(axis=1), minlength=m)
    gain = gain * np.log(lat.counts.shape[1])
    gained, cand, _ = _group_sums(mv.cand, mv.new, moved, len(lat.masks))
    gain = gain + np.bincount(cand, smoothed_loglik(gained, lat.threshold), minlength=m)
    lost = _sums_by(mv.group[~und], moved[~und], len(mv.group_cand))
    before = groups[mv.group_old]
    after = smoothed_loglik(np.maximum(before - lost, 0.0), lat.threshold)
    change = after - smoothed_loglik(before, lat.threshold)
    return gain + np.bincount(mv.group_cand, change, minlength=m)


def score_batch(
    lat: LatticeArrays,
    decider: np.ndarray,
    groups: np.ndarray,
    candidates: np.ndarray,
    chunk_pairs: int = CHUNK_PAIRS,
) -> np.ndarray:
    """The gains of a batch of candidates (one executor task of a step),
    scored about ``chunk_pairs`` (candidate, descendant) pairs at a time."""
    candidates = np.asarray(candidates, dtype=np.int64)
    pairs = np.cumsum(lat.desc_ptr[candidates + 1] - lat.desc_ptr[candidates])
    total = int(pairs[-1]) if len(pairs) else 0
    cuts = np.searchsorted(pairs, np.arange(1, -(-total // chunk_pairs)) * chunk_pairs)
    parts = [c for c in np.split(candidates, cuts) if len(c)]
    return np.concatenate(
        [candidate_gains(lat, decider, groups, c) for c in parts] or [np.zeros(0)]
    )
