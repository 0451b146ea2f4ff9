"""Conjunctions of atomic predicates as derived predicates (executor side).

A conjunction is a sorted tuple of 2 or 3 distinct atomic predicate ids
(any number from 2 for the nodes of a feature lattice, sparkmaxent/methods/lattice:
rows are then padded with -1 to the longest, and have no int64 key). Its
value in an event is the product of its atoms' values, and it is present
only when all of them fire (Okanohara & Tsujii 2009, section 3: combination
features). A set of conjunctions extends a predicate space of ``n_atoms``
atoms: conjunction j is the derived predicate ``n_atoms + j``, so atom ids
(and the feature ids ``p * K + k`` built on them) never change, and
multiclass features (conjunction, label) work with every existing kernel on
a block whose matrix has been widened by :meth:`Conjunctions.expand`.

Keys: a conjunction (a, b) or (a, b, c) is also numbered by one int64,
``a * n + b`` or ``n**2 + (a * n + b) * n + c`` with n = n_atoms
(:func:`conjunction_keys`): what search results are aggregated by.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .blocks import Block, CandidateBlock, MulticlassBlock

#: the largest conjunction degree
MAX_DEGREE = 3
#: the separator of atom names in a conjunction's name
SEPARATOR = " & "


def conjunction_keys(atoms: np.ndarray, n_atoms: int) -> np.ndarray:
    """One int64 per row of ``atoms`` (n, 3), padded with -1 after the last
    atom: ``a*n + b`` for pairs (< n**2), ``n**2 + (a*n + b)*n + c`` for
    triples (>= n**2), so the two never collide."""
    atoms = np.asarray(atoms, dtype=np.int64).reshape(-1, MAX_DEGREE)
    key = atoms[:, 0] * n_atoms + atoms[:, 1]
    triple = atoms[:, 2] >= 0
    key[triple] = n_atoms * n_atoms + key[triple] * n_atoms + atoms[triple, 2]
    return key


def later_entries(entries: np.ndarray, row_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (e, e') with e in ``entries`` and e < e' < row_end[e] (CSR
    entry positions; ``row_end[e]`` ends e's row): the entries after e in
    its row, as (index into ``entries``, e') arrays."""
    n_after = row_end[entries] - entries - 1
    first = np.repeat(np.arange(len(entries)), n_after)
    start = np.cumsum(n_after) - n_after
    second = entries[first] + 1 + (np.arange(len(first)) - np.repeat(start, n_after))
    return first, second


def _entries_of(X: sp.csr_matrix, keep: np.ndarray) -> sp.csr_matrix:
    """The CSR matrix ``X`` with only the entries ``keep`` (order kept)."""
    if keep.all():
        return X
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[keep]
    indptr = np.zeros(X.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=X.shape[0]), out=indptr[1:])
    return sp.csr_matrix((X.data[keep], X.indices[keep], indptr), shape=X.shape)


@dataclass(frozen=True)
class Conjunctions:
    """An ordered set of conjunctions over ``n_atoms`` atomic predicates.

    Attributes
    ----------
    n_atoms : int
        Atomic predicates 0..n_atoms-1; conjunction j is predicate n_atoms + j.
    atoms : ndarray of int64, shape (n, 3)
        Each row a conjunction's atom ids, strictly increasing, padded with
        -1 (a pair has atoms[j, 2] = -1).
    """

    n_atoms: int
    atoms: np.ndarray

    @staticmethod
    def empty(n_atoms: int) -> Conjunctions:
        return Conjunctions(n_atoms, np.zeros((0, MAX_DEGREE), dtype=np.int64))

    @staticmethod
    def from_tuples(n_atoms: int, tuples, max_degree: int = MAX_DEGREE) -> Conjunctions:
        """From a list of atom tuples (each of 2 to ``max_degree`` distinct
        ids, any order; ``max_degree`` 0: any number, as the nodes of a
        feature lattice); ValueError on a bad tuple or one given twice.
        Rows are padded with -1 to the longest tuple (at least MAX_DEGREE)."""
        width = max([MAX_DEGREE] + [len(t) for t in tuples])
        rows = np.full((len(tuples), width), -1, dtype=np.int64)
        for j, t in enumerate(tuples):
            a = sorted(int(x) for x in t)
            if len(a) < 2 or (max_degree and len(a) > max_degree) or len(set(a)) != len(a):
                most = max_degree or "any number of"
                raise ValueError(
                    f"conjunction {j}: expected 2-{most} distinct atoms, got {list(t)}"
                )
            if a[0] < 0 or a[-1] >= n_atoms:
                raise ValueError(f"conjunction {j}: atom ids {a} outside [0, {n_atoms})")
            rows[j, : len(a)] = a
        out = Conjunctions(n_atoms, rows)
        if len(np.unique(rows, axis=0)) != len(rows):
            raise ValueError("a conjunction is given twice")
        return out

    def __len__(self) -> int:
        return len(self.atoms)

    @property
    def n_predicates(self) -> int:
        """Atoms plus derived predicates."""
        return self.n_atoms + len(self.atoms)

    @property
    def degree(self) -> np.ndarray:
        return (self.atoms >= 0).sum(axis=1)

    def tuples(self) -> list[tuple[int, ...]]:
        return [tuple(int(a) for a in row if a >= 0) for row in self.atoms]

    def keys(self) -> np.ndarray:
        """The int64 keys (conjunctions of at most MAX_DEGREE atoms only)."""
        if self.atoms.shape[1] > MAX_DEGREE:
            raise ValueError(f"int64 keys number conjunctions of at most {MAX_DEGREE} atoms")
        return conjunction_keys(self.atoms, self.n_atoms)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Derived predicate id of each key, -1 where the key is not in the set."""
        keys = np.asarray(keys, dtype=np.int64)
        own = self.keys()
        if len(own) == 0:
            return np.full(len(keys), -1, dtype=np.int64)
        order = np.argsort(own, kind="stable")
        pos = np.minimum(np.searchsorted(own[order], keys), len(own) - 1)
        found = own[order][pos] == keys
        return np.where(found, self.n_atoms + order[pos], -1)

    def extend(self, atoms: np.ndarray) -> Conjunctions:
        """This set with the rows of ``atoms`` (n, 3) not yet in it appended
        (in their order), so existing derived ids are unchanged."""
        atoms = np.asarray(atoms, dtype=np.int64).reshape(-1, MAX_DEGREE)
        keys = conjunction_keys(atoms, self.n_atoms)
        _, first = np.unique(keys, return_index=True)
        fresh = np.sort(first)
        fresh = fresh[self.lookup(keys[fresh]) < 0]
        return Conjunctions(self.n_atoms, np.concatenate([self.atoms, atoms[fresh]]))

    def subset(self, keep: np.ndarray) -> tuple[Conjunctions, np.ndarray]:
        """The conjunctions at positions ``keep`` (in order), and the map
        old predicate id -> new one (-1 for a dropped conjunction)."""
        keep = np.asarray(keep, dtype=np.int64)
        remap = np.full(self.n_predicates, -1, dtype=np.int64)
        remap[: self.n_atoms] = np.arange(self.n_atoms)
        remap[self.n_atoms + keep] = self.n_atoms + np.arange(len(keep))
        return Conjunctions(self.n_atoms, self.atoms[keep]), remap

    def name(self, j: int, atom_names) -> str:
        """``v=join & p=as``: the atoms' names in id order."""
        return SEPARATOR.join(str(atom_names[int(a)]) for a in self.atoms[j] if a >= 0)

    # ---- forming conjunctions inside events ------------------------------
    def values(self, X: sp.csr_matrix) -> sp.csr_matrix:
        """The conjunctions' values in the rows of ``X`` (m, >= n_atoms):
        a CSR matrix (m, n) holding the product of the atoms' values where
        all of them fire. Vectorised, by the cheaper of two exact ways:
        every pair (and triple) of an event's firing atoms looked up among
        the conjunctions' keys (cost: the events' own pairs and triples), or
        the firing atoms counted per (row, conjunction) with one sparse
        product (cost: the conjunctions each firing atom belongs to). Wider
        conjunctions (lattice nodes) have no keys: always the second way."""
        m, n = X.shape[0], len(self.atoms)
        if n == 0 or m == 0:
            return sp.csr_matrix((m, n))
        X = X[:, : self.n_atoms].tocsr()
        X.eliminate_zeros()
        X.sort_indices()
        member = np.bincount(self.atoms[self.atoms >= 0], minlength=self.n_atoms)
        X = _entries_of(X, member[X.indices] > 0)  # atoms in no conjunction form none
        r = np.diff(X.indptr).astype(np.int64)
        own = int((r * (r - 1) // 2).sum())
        if self._has_triples:
            own += int((r * (r - 1) * (r - 2) // 6).sum())
        narrow = self.atoms.shape[1] <= MAX_DEGREE
        if narrow and own < int(member[X.indices].sum()):
            return self._values_by_lookup(X)
        deg = self.degree
        col = np.repeat(np.arange(n), deg)
        S = sp.csr_matrix(
            (np.ones(len(col)), (self.atoms[self.atoms >= 0], col)), shape=(self.n_atoms, n)
        )
        fires = sp.csr_matrix((np.ones(X.nnz), X.indices, X.indptr), shape=X.shape)
        C = (fires @ S).tocoo()
        full = C.data == deg[C.col]
        rows, cols = C.row[full].astype(np.int64), C.col[full].astype(np.int64)
        row_of = np.repeat(np.arange(m, dtype=np.int64), np.diff(X.indptr))
        entry_keys = row_of * self.n_atoms + X.indices
        value = np.ones(len(rows))
        for d in range(self.atoms.shape[1]):
            a = self.atoms[cols, d]
            has = a >= 0
            pos = np.searchsorted(entry_keys, rows[has] * self.n_atoms + a[has])
            value[has] *= X.data[pos]
        return sp.csr_matrix((value, (rows, cols)), shape=(m, n))

    @property
    def _has_triples(self) -> bool:
        return bool(self.atoms.shape[1] > 2 and (self.atoms[:, 2] >= 0).any())

    def _values_by_lookup(self, X: sp.csr_matrix) -> sp.csr_matrix:
        """``values`` by forming every pair (and triple, if the set has
        any) of each event's firing atoms (X canonical: sorted indices, no
        explicit zeros) and keeping those that are conjunctions of this set."""
        m, n_atoms = X.shape[0], self.n_atoms
        cols = X.indices.astype(np.int64)
        row_end = np.repeat(X.indptr[1:], np.diff(X.indptr)).astype(np.int64)
        row_of = np.repeat(np.arange(m, dtype=np.int64), np.diff(X.indptr))
        e1, e2 = later_entries(np.arange(len(cols)), row_end)
        keys, value, rows = [cols[e1] * n_atoms + cols[e2]], [X.data[e1] * X.data[e2]], [row_of[e1]]
        if self._has_triples:
            which, e3 = later_entries(e2, row_end)
            triples = np.stack([cols[e1[which]], cols[e2[which]], cols[e3]], axis=1)
            keys.append(conjunction_keys(triples, n_atoms))
            value.append(X.data[e1[which]] * X.data[e2[which]] * X.data[e3])
            rows.append(row_of[e3])
        pred = self.lookup(np.concatenate(keys))
        hit = pred >= 0
        return sp.csr_matrix(
            (np.concatenate(value)[hit], (np.concatenate(rows)[hit], pred[hit] - n_atoms)),
            shape=(m, len(self.atoms)),
        )

    def expand_matrix(self, X: sp.csr_matrix) -> sp.csr_matrix:
        """``X`` (atoms only) widened by the conjunctions' columns."""
        if len(self.atoms) == 0:
            return X
        if X.shape[1] != self.n_atoms:
            raise ValueError(
                f"expected events over {self.n_atoms} atomic predicates, got {X.shape[1]}"
            )
        return sp.hstack([X, self.values(X)], format="csr")

    def expand(self, block: Block) -> Block:
        """The block with the conjunctions formed in every event (multiclass)
        or candidate (candidate sets)."""
        if len(self.atoms) == 0:
            return block
        if isinstance(block, MulticlassBlock):
            return MulticlassBlock(
                self.expand_matrix(block.X),
                block.y,
                block.c,
                block.n_labels,
                block.event_id,
                block.group,
            )
        assert isinstance(block, CandidateBlock), "a block is multiclass or candidate-set"
        return CandidateBlock(
            self.expand_matrix(block.F),
            block.event_ptr,
            block.correct,
            block.c,
            block.event_id,
            block.group,
        )


@dataclass(frozen=True)
class Expanding:
    """A task run on blocks widened by ``conjunctions`` (picklable)."""

    task: object
    conjunctions: Conjunctions

    def __call__(self, block: Block):
        return self.task(self.conjunctions.expand(block))  # type: ignore[operator]
