"""The empirical feature collocation lattice (Mikheev 1998, section 2).

Reference nodes are the distinct observed configurations (sets of atomic
predicates) with their configuration frequencies xi^w per label, counted
by one pass over the events (``kernels.lattice_nodes.ConfigCountTask`` on the
backend's cached blocks, merged on the executors). Hidden nodes are added
by the paper's incremental rule: each new configuration adds its
intersections with the nodes already there, which keeps the node set closed
under pairwise intersection. The feature frequency of a node,
xi^chi(k) = sum of xi^w over its descendants (the nodes above it, which
contain it), and the partial order are kept as an index.

Direction: node i is *below* node j (more general) when i's atoms are a
subset of j's; j's *descendants* are the nodes above it (the paper's
usage: a feature's frequency sums its descendants' configuration
frequencies); its *children* are the nodes directly above it, its
*parents* those directly below.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ...backends import Backend
from ...errors import ConfigError
from ...hashing import GOLDEN, mix64
from ...kernels.lattice_nodes import (
    WORD,
    ConfigCounts,
    ConfigCountTask,
    LatticeArrays,
    is_subset,
    unique_rows,
)
from ...kernels.stats import FeatureCountTask

log = logging.getLogger(__name__)


def n_words(n_atoms: int) -> int:
    return max(1, -(-n_atoms // WORD))


def popcount(masks: np.ndarray) -> np.ndarray:
    """Number of set bits of every row of ``masks`` (n, words)."""
    as_bytes = masks.view(np.uint8).reshape(masks.shape[0], -1)
    return np.unpackbits(as_bytes, axis=1).sum(axis=1).astype(np.int64)


def mask_bits(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, bit) of every set bit of ``masks`` (n, words), row-major."""
    as_bytes = np.ascontiguousarray(masks, dtype="<u8").view(np.uint8)
    rows, bits = np.nonzero(np.unpackbits(as_bytes, axis=1, bitorder="little"))
    return rows, bits


def row_hash(masks: np.ndarray) -> np.ndarray:
    """A 64-bit hash of every mask row (equality is checked after a match)."""
    out = np.zeros(len(masks), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for w in range(masks.shape[1]):
            out = mix64(out ^ mix64(masks[:, w] + np.uint64(w + 1) * np.uint64(GOLDEN)))
    return out


def _find(sorted_h: np.ndarray, sorted_pos: np.ndarray, pool, rows, h) -> np.ndarray:
    """Which ``rows`` (hashes ``h``) equal a ``pool`` row, the pool's
    hashes sorted (``sorted_h``, row ``sorted_pos``): every pool row of an
    equal hash is compared word by word, so a hash collision never makes a
    row look absent."""
    found = np.zeros(len(rows), dtype=bool)
    if not len(sorted_h):
        return found
    lo = np.searchsorted(sorted_h, h, "left")
    hi = np.searchsorted(sorted_h, h, "right")
    for k in range(int((hi - lo).max(initial=0))):
        live = lo + k < hi
        j = sorted_pos[np.minimum(lo + k, len(sorted_pos) - 1)]
        found |= live & np.all(pool[j] == rows, axis=1)
    return found


@dataclass
class Lattice:
    """The empirical lattice <theta, subset, xi^w>.

    Attributes
    ----------
    atoms : ndarray of int64, (n_atoms,)
        Predicate id (training dictionary) of each atom bit.
    masks : ndarray of uint64, (n, words)
        Node atom sets; reference nodes first (observed configurations,
        lexicographic), then hidden nodes in the order they were created.
    counts : ndarray, (n, K)
        Configuration frequencies xi^w per label (0 for hidden nodes).
    desc : csr_matrix of bool, (n, n)
        desc[i, j]: node i is a subset of node j (j is a descendant of i, or i).
    """

    atoms: np.ndarray
    masks: np.ndarray
    counts: np.ndarray
    desc: sp.csr_matrix

    @property
    def n_nodes(self) -> int:
        return len(self.masks)

    @property
    def sizes(self) -> np.ndarray:
        return popcount(self.masks)

    @property
    def n_reference(self) -> int:
        return int((self.counts.sum(axis=1) > 0).sum())

    def feature_counts(self) -> np.ndarray:
        """xi^chi per label (n, K): sums of xi^w over each node's descendants."""
        return np.asarray(self.desc @ self.counts)

    def node_atoms(self, i: int) -> tuple[int, ...]:
        """Predicate ids of node i, increasing."""
        return tuple(sorted(int(self.atoms[b]) for b in _bits(self.masks[i])))

    def find(self, predicates) -> int:
        """The node with exactly these predicates, or -1."""
        bit = {int(p): b for b, p in enumerate(self.atoms)}
        m = np.zeros(self.masks.shape[1], dtype=np.uint64)
        for p in predicates:
            if int(p) not in bit:
                return -1
            b = bit[int(p)]
            m[b // 64] |= np.uint64(1) << np.uint64(b % 64)
        hit = np.flatnonzero(np.all(self.masks == m, axis=1))
        return int(hit[0]) if len(hit) else -1

    def descendants(self, i: int) -> np.ndarray:
        """Nodes above node i (containing it), i excluded."""
        row = self.desc.indices[self.desc.indptr[i] : self.desc.indptr[i + 1]]
        return np.sort(row[row != i])

    def ancestors(self, i: int) -> np.ndarray:
        """Nodes below node i (contained in it), i excluded."""
        col = self.desc.getcol(i).tocoo().row
        return np.sort(col[col != i])

    def children(self, i: int) -> np.ndarray:
        """Nodes directly above node i (no node between them)."""
        return _minimal(self, self.descendants(i))

    def parents(self, i: int) -> np.ndarray:
        """Nodes directly below node i."""
        return _maximal(self, self.ancestors(i))

    def arrays(self, threshold: float) -> LatticeArrays:
        """What executors need to score candidates (broadcast once)."""
        d = self.desc.tocsr()
        return LatticeArrays(
            self.masks,
            self.sizes,
            self.counts,
            d.indptr.astype(np.int64),
            d.indices.astype(np.int64),
            float(threshold),
        )


def _bits(mask: np.ndarray) -> list[int]:
    out = []
    for w, word in enumerate(mask.tolist()):
        b = 0
        while word:
            if word & 1:
                out.append(w * 64 + b)
            word >>= 1
            b += 1
    return out


def _minimal(lat: Lattice, ids: np.ndarray) -> np.ndarray:
    m = lat.masks[ids]
    inside = is_subset(m[:, None, :], m[None, :, :])  # inside[a, b]: a subset of b
    np.fill_diagonal(inside, False)
    return ids[~inside.any(axis=0)]


def _maximal(lat: Lattice, ids: np.ndarray) -> np.ndarray:
    m = lat.masks[ids]
    inside = is_subset(m[:, None, :], m[None, :, :])
    np.fill_diagonal(inside, False)
    return ids[~inside.any(axis=1)]


def choose_atoms(backend: Backend, max_atoms: int) -> np.ndarray:
    """Predicate ids of the atoms: every predicate seen in training, or the
    ``max_atoms`` most frequent (ties: lower id), as the paper's 238."""
    counts = backend.run(FeatureCountTask()).counts
    per_pred = counts.reshape(-1, backend.space.n_labels).sum(axis=1)
    seen = np.flatnonzero(per_pred > 0)
    if max_atoms and len(seen) > max_atoms:
        order = np.lexsort((seen, -per_pred[seen]))
        seen = np.sort(seen[order[:max_atoms]])
    return seen.astype(np.int64)


def count_configurations(backend: Backend, atoms: np.ndarray) -> ConfigCounts:
    """One pass: the distinct configurations over ``atoms`` and their weight
    per label (the empty configuration included)."""
    bit = np.full(backend.space.n_predicates, -1, dtype=np.int64)
    bit[atoms] = np.arange(len(atoms))
    return backend.run(ConfigCountTask(bit, n_words(len(atoms))))


def build_lattice(configs: ConfigCounts, atoms: np.ndarray, max_nodes: int) -> Lattice:
    """The empirical lattice of counted configurations (section 2).

    The empty configuration is no node (an event with none of the atoms has
    no feature to decide it; the model's bias covers it).

    Raises
    ------
    ConfigError
        When the closure passes ``max_nodes`` nodes: the message says how
        many it reached and how to restrict the atoms.
    """
    masks, counts = unique_rows(configs.masks, configs.counts)
    keep = masks.any(axis=1)
    masks, counts = masks[keep], counts[keep]
    if len(masks) > max_nodes:
        _too_many(len(masks), max_nodes, len(atoms), "observed configurations alone")
    nodes = _closure(masks, len(atoms), max_nodes)
    all_counts = np.zeros((len(nodes), counts.shape[1]))
    all_counts[: len(masks)] = counts
    desc = descendant_index(nodes)
    log.info(
        "lattice over %d atoms: %d nodes (%d reference, %d hidden)",
        len(atoms),
        len(nodes),
        len(masks),
        len(nodes) - len(masks),
    )
    return Lattice(np.asarray(atoms, dtype=np.int64), nodes, all_counts, desc)


def _closure(reference: np.ndarray, n_atoms: int, max_nodes: int) -> np.ndarray:
    """The reference masks and their intersections, added configuration by
    configuration (each new one adds its intersections with the nodes there,
    which keeps the set closed under pairwise intersection; a configuration
    already in the set adds nothing new, by that closure). A configuration's
    new nodes are kept in the order of their row hashes (ties: by words)."""
    words = reference.shape[1]
    cap = -(-2 * len(reference) // WORD) * WORD or WORD  # a whole number of bitset words
    nodes = np.zeros((cap, words), dtype=np.uint64)
    sizes = np.zeros(cap, dtype=np.int64)
    has = np.zeros((words * WORD, cap // WORD), dtype=np.uint64)  # atom -> bitset of nodes
    n = 0
    there: set[bytes] = set()  # the nodes' masks: a configuration already there adds nothing
    for s in reference:
        if s.tobytes() in there:
            continue
        new = _new_intersections(s, has, sizes[:n])
        if len(new) > 1:
            new = new[np.lexsort((*new.T[::-1], row_hash(new)))]
        there.update(row.tobytes() for row in new)
        if n + len(new) > max_nodes:
            _too_many(n + len(new), max_nodes, n_atoms, "the closure under intersection")
        if n + len(new) > cap:
            cap = max(2 * cap, -(-(n + len(new)) // WORD) * WORD)  # whole words
            nodes, sizes = np.resize(nodes, (cap, words)), np.resize(sizes, cap)
            has = np.hstack([has, np.zeros((len(has), cap // WORD - has.shape[1]), np.uint64)])
        nodes[n : n + len(new)] = new
        sizes[n : n + len(new)] = popcount(new)
        rows, bits = mask_bits(new)
        at = (rows + n).astype(np.uint64)
        np.bitwise_or.at(
            has,
            (bits, (at // np.uint64(WORD)).astype(np.int64)),
            np.uint64(1) << (at % np.uint64(WORD)),
        )
        n += len(new)
    nodes = nodes[:n]
    # reference nodes first, in the order of ``reference``; then hidden ones
    ref_h = row_hash(reference)
    is_ref = _present(nodes, row_hash(nodes), reference, ref_h)
    return np.vstack([reference, nodes[~is_ref]])


def _new_intersections(s: np.ndarray, has: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The non-empty intersections of mask ``s`` with the nodes (``sizes``:
    their atom counts), ``s`` included, that are not nodes yet (``s`` is
    not a node: ``_closure`` skips those).

    A node's intersection with ``s`` is told by which of s's atoms it has
    (those bits of ``has``, atom -> bitset of nodes), packed into a code;
    the intersections already there are the codes of the nodes inside
    ``s`` (as many of s's atoms as atoms). New codes are unpacked back
    into masks."""
    atoms = mask_bits(s[None, :])[1]
    on = np.unpackbits(has[atoms].view(np.uint8), axis=1, count=len(sizes), bitorder="little")
    if len(atoms) <= 16:  # few codes: formed by shifts, counted instead of sorted
        code = (on.astype(np.uint16) << np.arange(len(atoms), dtype=np.uint16)[:, None]).sum(
            axis=0, dtype=np.uint16
        )
        inside = np.bitwise_count(code) == sizes
        seen = np.bincount(code[code > 0], minlength=1 << len(atoms)) > 0
        seen[-1] = True  # s itself
        fresh = np.flatnonzero(
            seen & (np.bincount(code[inside], minlength=1 << len(atoms)) == 0)
        ).astype(np.uint64)
    else:
        fresh = _fresh_codes(on, sizes)
    present = np.unpackbits(
        fresh.view(np.uint8).reshape(len(fresh), -1), axis=1, count=len(atoms), bitorder="little"
    )
    bit = np.zeros((len(atoms), len(s)), dtype=np.uint64)
    bit[np.arange(len(atoms)), atoms // WORD] = np.uint64(1) << (atoms % WORD).astype(np.uint64)
    return present.astype(np.uint64) @ bit


def _fresh_codes(on: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The new codes of a configuration of many atoms (``on``: atom x node
    bits), packed bytes (one uint64 word for at most 64 atoms)."""
    shared = on.sum(axis=0)
    inside = shared == sizes
    on = np.hstack([on, np.ones((len(on), 1), np.uint8)])  # s itself
    packed = np.packbits(on, axis=0, bitorder="little")
    packed = np.vstack([packed, np.zeros((-len(packed) % 8, len(packed[0])), np.uint8)])
    key = (
        np.uint64 if len(packed) == 8 else np.dtype((np.void, len(packed)))
    )  # one word: sorts fast
    code = np.ascontiguousarray(packed.T).view(key)[:, 0]
    return np.setdiff1d(code[np.r_[shared > 0, True]], code[np.r_[inside, False]])


def _present(rows: np.ndarray, h: np.ndarray, pool: np.ndarray, pool_h: np.ndarray) -> np.ndarray:
    """Which ``rows`` (hashes ``h``) are rows of ``pool`` (hashes ``pool_h``)."""
    order = np.argsort(pool_h, kind="stable")
    return _find(pool_h[order], order, pool, rows, h)


def _too_many(reached: int, max_nodes: int, n_atoms: int, what: str) -> None:
    raise ConfigError(
        f"train.lattice.max_nodes: the feature lattice reached {reached} nodes "
        f"({what}, over {n_atoms} atomic predicates), more than max_nodes = "
        f"{max_nodes}; restrict the atoms to the k most frequent with "
        "train.lattice.max_atoms (the paper used 238) or raise train.lattice.max_nodes"
    )


def descendant_index(masks: np.ndarray, budget: int = 1 << 22) -> sp.csr_matrix:
    """desc[i, j] = node i is a subset of node j, as a boolean CSR matrix.

    Node i's supersets all hold its rarest atom, so each node is compared
    only with the holders of that atom (blocks of about ``budget`` pairs);
    node masks are non-empty."""
    n = len(masks)
    rows, bits = mask_bits(masks)
    holders = np.argsort(bits, kind="stable")  # by atom, then node
    start = np.searchsorted(bits[holders], np.arange(masks.shape[1] * WORD + 1))
    freq = np.diff(start)
    order = np.lexsort((bits, freq[bits], rows))
    lead = np.r_[True, rows[order][1:] != rows[order][:-1]] if n else np.zeros(0, bool)
    rarest = bits[order][lead]
    by_rarest = np.argsort(rarest, kind="stable")
    cut = np.searchsorted(rarest[by_rarest], np.arange(len(freq) + 1))
    found_r, found_c = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for b in np.flatnonzero(np.diff(cut)):
        mine = by_rarest[cut[b] : cut[b + 1]]
        cols = rows[holders[start[b] : start[b + 1]]]
        step = max(1, budget // max(len(cols), 1))
        for lo in range(0, len(mine), step):
            r = mine[lo : lo + step]
            inside = is_subset(masks[r][:, None, :], masks[cols][None, :, :])
            i, j = np.nonzero(inside)
            found_r.append(r[i])
            found_c.append(cols[j])
    r, c = np.concatenate(found_r), np.concatenate(found_c)
    order = np.lexsort((c, r))
    indptr = np.r_[0, np.cumsum(np.bincount(r, minlength=n))]
    return sp.csr_matrix(
        (np.ones(len(r), dtype=bool), c[order].astype(np.int32), indptr), shape=(n, n)
    )
