"""The frame shared by the process's exact caches (``colcache.ColumnCache``,
``pointcache.PointCache``): entries in least-recently-used order under a
byte bound, a lock, hit and miss counts, and slot numbers.

A cache here is a memo, never state: an entry serves a lookup only when
what it was built from equals what the lookup brings (the block's arrays
compared element by element, the keys too), so no pass's result depends
on what the cache held. How entries are matched and what one holds is the
policy of each subclass (one point per block; several kinds of matrix
sharing one copy of their block's arrays); the frame keeps the bound the
same way for both: a value larger than half the bound is never kept (it
would evict every other entry), and beyond the bound the least recently
used entry goes first, the subclass told of each (``_evicted``) so it can
let go of what only that entry used.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

Arrays = tuple[np.ndarray | None, ...]


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Whether two arrays are one object or equal in dtype, shape and every
    element (``None`` equals only ``None``)."""
    if a is None or b is None:
        return a is b
    return a is b or (a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b))


def _nbytes(arrays: Arrays) -> int:
    return sum(a.nbytes for a in arrays if a is not None)


def _read_only(arrays: Arrays) -> None:
    for a in arrays:
        if a is not None:
            a.flags.writeable = False


def _copied(keys: tuple) -> tuple:
    """The keys with every array copied: a caller's array may change after
    the call, the entry's key must not."""
    return tuple(k.copy() if isinstance(k, np.ndarray) else k for k in keys)


class BoundedCache:
    """Entries (whatever a subclass keeps) in least-recently-used order,
    each with its bytes, within ``max_bytes`` together with what the
    subclass holds besides them (``_held_bytes``).

    A subclass finds an entry under ``_lock`` in ``_entries`` (oldest first),
    marks it used with ``_hit``, counts ``misses`` itself where a lookup
    builds, and keeps a built value with ``_keep`` (under the lock), after
    asking ``_too_large`` whether it may.

    Attributes
    ----------
    hits, misses : int
        Lookups served from the cache, and built afresh.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.hits = self.misses = 0
        self._entries: OrderedDict[int, Any] = OrderedDict()  # slot -> the subclass's entry
        self._bytes: dict[int, int] = {}  # slot -> the bytes its entry counts
        self._next = 0
        self._lock = threading.Lock()

    def _slot(self) -> int:
        """A slot number never given before (entries and whatever else a
        subclass numbers share the sequence)."""
        slot = self._next
        self._next += 1
        return slot

    def _hit(self, slot: int) -> None:
        """Count a lookup served by ``slot``'s entry, now the most recently used."""
        self._entries.move_to_end(slot)
        self.hits += 1

    def _too_large(self, size: int, held: int = 0) -> bool:
        """Whether a value of ``size`` bytes is not to be kept: over half the
        bound, or over the bound with ``held`` bytes it would bring along."""
        return 2 * size > self.max_bytes or size + held > self.max_bytes

    def _keep(self, entry: Any, size: int) -> None:
        """Add ``entry`` (``size`` bytes) as the most recently used, then
        evict least recently used first while beyond the bound. Under the lock."""
        slot = self._slot()
        self._entries[slot] = entry
        self._bytes[slot] = size
        while self.nbytes > self.max_bytes:
            old, evicted = self._entries.popitem(last=False)
            del self._bytes[old]
            self._evicted(evicted)

    def _drop(self, slot: int) -> None:
        """Remove ``slot``'s entry (a subclass's policy replaces it). Under the lock."""
        del self._entries[slot]
        del self._bytes[slot]

    def _evicted(self, entry: Any) -> None:
        """Called under the lock for each entry the bound evicted."""

    def _held_bytes(self) -> int:
        """Bytes the subclass holds besides its entries' own."""
        return 0

    def _cleared(self) -> None:
        """Called under the lock when the cache is cleared."""

    def clear(self) -> None:
        """Drop every entry (a backend that closes frees its blocks)."""
        with self._lock:
            self._entries.clear()
            self._bytes.clear()
            self._cleared()

    @property
    def nbytes(self) -> int:
        """Bytes the cache counts against its bound."""
        return sum(self._bytes.values()) + self._held_bytes()

    def __len__(self) -> int:
        return len(self._entries)
