"""Gathered predicate columns kept between passes in one process.

Every pass over the active set gathers the same predicate columns of its
block (``X[:, preds]``, a sweep of the block) until the active set changes.
Spark reuses its Python workers between tasks (``spark.python.worker.reuse``),
so a module-level cache lets the passes of a round after the first skip the
gather; the in-process backend keeps its blocks anyway.

The cache is exact: an entry serves a lookup only when the block's CSR
arrays equal the entry's (the same objects, or equal element by element: a
block unpickled afresh every pass holds new arrays) and so do the lookup's
keys (the predicates, the scaling). Comparing costs a fraction of the
gather, and no block identity or version has to be trusted, so a changed
dataset, re-partitioned or re-cached blocks, or a changed active set can
never be served a stale entry. The block arrays an entry holds are made
read-only, so that a block cannot change in place under its entry either
(blocks never do: they are built once and cached), and so are the cached
matrices. Entries are evicted least recently used first beyond
``max_bytes`` (the block arrays held count too, once per block). A matrix
larger than half the bound is not kept: it would evict every other entry
(the curvature's columns of a large block would evict the active set's,
which every pass of a round reads).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from .boundedcache import Arrays, BoundedCache, _copied, _nbytes, _read_only, _same

# Bound of one process's cache (Spark runs a Python worker per core, and
# more for shuffles): room for the active set's columns of a few blocks. A
# bound large enough for the curvature's columns of large blocks made later
# passes slower in the benchmark (docs/benchmarks.md, "Pass overhead").
MAX_BYTES = 128 << 20


def _csr_arrays(X: sp.csr_matrix | sp.csc_matrix) -> Arrays:
    return X.indptr, X.indices, X.data


class ColumnCache(BoundedCache):
    """Matrices derived from a block's compressed matrix (column gathers),
    keyed by what they were built from (see the module docstring); the
    bound, eviction and counts are ``BoundedCache``'s.

    The block arrays are held once per block, however many entries were
    built from it (the active set's columns, a fetch pass's, curvature's):
    an entry names its block, and a hit holds the pass's arrays for all of
    that block's entries, so the bound is spent on derived matrices rather
    than on copies of the same block.

    Attributes
    ----------
    hits, misses : int
        Lookups served from the cache, and built afresh.
    """

    def __init__(self, max_bytes: int = MAX_BYTES):
        super().__init__(max_bytes)
        # entry slot -> (kind, block slot, keys, value); block slot -> (shape, arrays)
        self._blocks: dict[int, tuple[tuple, Arrays]] = {}

    def get(
        self,
        kind: str,
        X: sp.csr_matrix | sp.csc_matrix,
        keys: Arrays,
        build: Callable[[], sp.csr_matrix | sp.csc_matrix],
    ) -> sp.csr_matrix | sp.csc_matrix:
        """``build()``, or the equal matrix built earlier from a block matrix
        equal to ``X`` and keys equal to ``keys``. A matrix kept is
        read-only; matrices other than CSR and CSC are not cached."""
        if not (sp.issparse(X) and X.format in ("csr", "csc")):
            return build()
        block = _csr_arrays(X)
        with self._lock:
            for slot, (k, b, held_keys, value) in self._entries.items():
                if k != kind or len(held_keys) != len(keys) or not all(map(_same, held_keys, keys)):
                    continue
                if self._holds(b, X.shape, block):
                    self._hit(slot)
                    return value
        value = build()
        self._insert(kind, X.shape, block, keys, value)
        return value

    def _holds(self, b: int, shape: tuple, block: Arrays) -> bool:
        """Whether block slot ``b`` holds arrays equal to ``block``; if so it
        holds ``block`` itself from now on (the previous copy can go)."""
        held_shape, held = self._blocks[b]
        if held_shape != shape or not all(map(_same, held, block)):
            return False
        if any(a is not h for a, h in zip(block, held)):
            _read_only(block)
            self._blocks[b] = (shape, block)
        return True

    def _insert(self, kind: str, shape: tuple, block: Arrays, keys: Arrays, value) -> None:
        size = _nbytes(keys) + _nbytes(_csr_arrays(value))
        with self._lock:
            self.misses += 1
            b = next((b for b in self._blocks if self._holds(b, shape, block)), None)
            if self._too_large(size, 0 if b is not None else _nbytes(block)):
                return
            if b is None:
                b = self._slot()
                _read_only(block)
                self._blocks[b] = (shape, block)
            _read_only(_csr_arrays(value))
            self._keep((kind, b, _copied(keys), value), size)

    def _evicted(self, entry: Any) -> None:
        """The block goes with its last entry."""
        old = entry[1]
        if all(e[1] != old for e in self._entries.values()):
            del self._blocks[old]

    def _cleared(self) -> None:
        self._blocks.clear()

    def _held_bytes(self) -> int:
        """Each block's arrays, counted once."""
        return sum(_nbytes(a) for _, a in self._blocks.values())


#: the process's cache, shared by the kernels (loss.py, curvature.py)
COLUMNS = ColumnCache()


#: stored entries of a block looked up at a time by ``gather_columns``: its
#: temporaries (a position and a flag an entry) follow this, not the block
GATHER_CHUNK_ENTRIES = 1 << 20


def gather_columns(
    X: sp.csr_matrix, preds: np.ndarray, chunk_entries: int = GATHER_CHUNK_ENTRIES
) -> sp.csr_matrix:
    """``X[:, preds]`` for increasing distinct ``preds``, the same arrays as
    scipy's gather, which allocates a table over all of X's columns (an
    index per predicate, whenever the active set changes) and temporaries
    over all of the block's entries. Here the table is built only where it
    is no larger than the block (else each stored entry is looked up among
    ``preds`` by binary search), and entries are looked up
    ``chunk_entries`` at a time, so memory beyond the result follows the
    slice, never the block or the candidate space."""
    idx = np.int32 if X.indices.dtype == X.indptr.dtype == np.int32 else np.int64
    table = None
    if X.shape[1] <= len(X.indices):
        table = np.full(X.shape[1], -1, dtype=idx)
        table[preds] = np.arange(len(preds), dtype=idx)
    nnz, starts = int(X.indptr[-1]), X.indptr
    indptr = np.empty(len(starts), dtype=idx)
    data, indices = [X.data[:0]], [np.empty(0, dtype=idx)]
    kept = row = 0
    for lo in range(0, nnz, chunk_entries):
        hi = min(lo + chunk_entries, nnz)
        where = _positions(X.indices[lo:hi], preds, table, idx)
        keep = where >= 0
        # rows that start within the slice start after the entries kept before them
        end = int(np.searchsorted(starts, hi, side="left"))
        before = np.concatenate([[0], np.cumsum(keep, dtype=idx)])
        indptr[row:end] = kept + before[starts[row:end] - lo]
        data.append(X.data[lo:hi][keep])
        indices.append(where[keep])
        kept, row = kept + int(before[-1]), end
    indptr[row:] = kept  # rows that start at the end: empty trailing rows and the end
    return sp.csr_matrix(
        (np.concatenate(data), np.concatenate(indices), indptr),
        shape=(X.shape[0], len(preds)),
        copy=False,
    )


def _positions(
    cols: np.ndarray, preds: np.ndarray, table: np.ndarray | None, idx: type
) -> np.ndarray:
    """Each column's position among ``preds``, -1 where it is not one."""
    if table is not None:
        return table[cols]
    if not len(preds):
        return np.full(len(cols), -1, dtype=idx)
    pos: np.ndarray = np.minimum(np.searchsorted(preds, cols), len(preds) - 1).astype(idx)
    return np.where(preds[pos] == cols, pos, -1).astype(idx, copy=False)
