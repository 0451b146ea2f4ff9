"""The frame of the process's exact caches (``kernels/boundedcache.py``):
least recently used first beyond the bound, what a subclass holds besides
its entries counted against it, a value over half the bound never kept,
and the subclass told of every entry that goes."""

from __future__ import annotations

import numpy as np

from sparkmaxent.kernels.boundedcache import BoundedCache, _copied
from sparkmaxent.kernels.colcache import ColumnCache
from sparkmaxent.kernels.pointcache import PointCache


class Named(BoundedCache):
    """Entries named by a string, each of a given size; ``extra`` bytes held
    besides them; the evicted names recorded in order."""

    def __init__(self, max_bytes: int, extra: int = 0):
        super().__init__(max_bytes)
        self.extra, self.evicted, self.cleared = extra, [], 0

    def get(self, name: str, size: int) -> bool:
        """Whether ``name`` was held (a hit); else it is kept if it may be."""
        with self._lock:
            for slot, held in self._entries.items():
                if held == name:
                    self._hit(slot)
                    return True
            self.misses += 1
            if not self._too_large(size):
                self._keep(name, size)
        return False

    def _evicted(self, entry) -> None:
        self.evicted.append(entry)

    def _held_bytes(self) -> int:
        return self.extra

    def _cleared(self) -> None:
        self.cleared += 1

    def names(self) -> list[str]:
        return list(self._entries.values())


def test_entries_beyond_the_bound_go_least_recently_used_first():
    cache = Named(max_bytes=100)
    for name in "abc":
        assert not cache.get(name, 30)
    assert cache.nbytes == 90 and cache.names() == ["a", "b", "c"]
    assert cache.get("a", 30)  # a hit makes "a" the most recently used
    assert cache.names() == ["b", "c", "a"]
    cache.get("d", 30)  # 120 bytes: the least recently used ("b") goes
    assert cache.evicted == ["b"] and cache.names() == ["c", "a", "d"]
    cache.get("e", 50)  # 140 bytes: "c" and "a" go, in that order
    assert cache.evicted == ["b", "c", "a"] and cache.names() == ["d", "e"]
    assert cache.nbytes == 80 <= cache.max_bytes
    assert (cache.hits, cache.misses) == (1, 5) and len(cache) == 2


def test_a_value_over_half_the_bound_or_over_it_with_what_it_brings_is_not_kept():
    cache = Named(max_bytes=100)
    cache.get("small", 20)
    assert not cache.get("big", 51)  # over half the bound: built, not kept
    assert cache.names() == ["small"] and cache.evicted == []
    assert cache._too_large(50) is False and cache._too_large(40, held=61) is True
    cache.get("half", 50)  # exactly half: kept
    assert cache.names() == ["small", "half"]


def test_bytes_held_besides_the_entries_count_against_the_bound_and_clear_empties_it():
    cache = Named(max_bytes=100, extra=40)
    cache.get("a", 30)
    cache.get("b", 30)  # 60 + 40 held: within the bound
    assert cache.names() == ["a", "b"] and cache.nbytes == 100
    cache.get("c", 10)  # 110: the oldest goes
    assert cache.evicted == ["a"] and cache.nbytes == 80
    cache.clear()
    assert len(cache) == 0 and cache.cleared == 1 and cache.nbytes == 40
    assert (cache.hits, cache.misses) == (0, 3)  # the counts survive a clear


def test_slots_are_never_reused_and_keys_are_copied():
    cache = Named(max_bytes=10)
    cache.get("a", 5)
    cache.get("b", 5)
    cache.get("c", 5)  # evicts "a"
    assert list(cache._entries) == [1, 2]  # "a" had slot 0
    key = np.arange(3)
    copied = _copied(("kind", key, None))
    key[0] = 7
    assert copied[0] == "kind" and copied[2] is None and copied[1].tolist() == [0, 1, 2]


def test_both_caches_are_the_frame_with_their_own_policy():
    assert issubclass(ColumnCache, BoundedCache) and issubclass(PointCache, BoundedCache)
