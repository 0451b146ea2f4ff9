"""Each block's Hessian operator at one Newton point, kept between the
product passes at that point.

CG across passes (``solvers/global_cg.py``) runs up to
``SolverOptions.global_cg`` Hessian-vector product passes at one point, and
every one needs the block's model probabilities there (a loss pass:
scores, softmax) and the Hessian's diagonal, about as much work as the
product itself. Spark reuses its Python workers between tasks
(``spark.python.worker.reuse``), so a module-level cache lets every product
pass at a point after the first start from the operator the first built,
on the executors as in-process, wherever a block's task runs on the worker
that built its operator there. Spark hands a task whichever of the
executor's idle workers comes first, not the one that ran the block's last
task, so with several workers an executor builds a block's operator at a
point up to once per worker its tasks land on (each builds it once, then
holds it as well).

The cache is exact, like ``colcache.ColumnCache``: an entry serves a lookup
only when the block's arrays equal the entry's (the same objects, or equal
element by element: Spark unpickles a block afresh every pass) and so do
the point's keys (the feature space, the ids, the weights, the bias, the
scaling). A changed point, active set, dataset or partitioning is never
served a stale operator, and a hit returns what a miss would have built,
bit for bit: no pass's result depends on what the cache held. The point
is its own version: every pass carries its weights, and comparing them
costs a vector's length, no driver counter to trust across backends.

Spark hands a task whichever of the executor's idle Python workers comes
first, not the one that built the block's operator at the point, so with
several workers a pass may land where the operator is not. Given a store
shared by the executor's workers (``store``: on Spark,
``backends/opstore.py``, files the workers map read-only), a lookup this
process cannot serve looks there before it builds, and a build is put there
for the others: each block's operator is built once per point on the
executor, whichever worker its tasks land on. A stored operator is named by
SHA-256 digests (128 bits of each) of the block's arrays and of the keys
(dtype, shape and bytes of each); the build computes its arrays in the
store's file, and the value handed back is the stored one (the bytes the
other workers map), so a lookup served from the store gets the bits its
build would have given. The digest of a block is taken once a
process and kept with its entry from point to point (a point's lookup
compares the block's arrays element by element anyway).

Memory: at most one point per block (a lookup at another point drops the
block's entry; a round's weights move on and never return), beyond
``max_bytes`` the least recently used block's entry goes, and an operator
larger than half the bound is not kept. The arrays an entry holds are made
read-only, so no caller can change them under it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from .boundedcache import Arrays, BoundedCache, _copied, _nbytes, _read_only, _same

#: bound of one process's cache: the operators (probabilities, their
#: products with the event weights, the gathered active columns, the
#: diagonal) of a few blocks
MAX_BYTES = 256 << 20


Parts = tuple[dict[str, Any], dict[str, np.ndarray]]


class Writer(Protocol):
    """One entry of a shared store being written: a build's ``Sink``
    (``operator.py``: its arrays are the entry's own), then ``commit`` with
    the value's numbers (the entry as stored, or None when not kept) or
    ``abort``."""

    def allocate(self, specs: dict, placed: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def commit(self, numbers: dict[str, Any]) -> Parts | None: ...

    def abort(self) -> None: ...


class SharedStore(Protocol):
    """Operators shared by the processes of one host (``backends/opstore.py``):
    ``fetch`` the parts stored under a name (None when there are none),
    ``writer`` a new entry under a name; ``group`` names the block: an
    entry written drops the group's other names (the block's earlier
    points)."""

    def fetch(self, name: str) -> Parts | None: ...

    def writer(self, name: str, group: str) -> Writer: ...


def digest(values: tuple) -> str:
    """SHA-256 of ``values`` (arrays by dtype, shape and bytes, None as
    such, anything else by its repr) as hex: a block's or a point's name
    in the shared store."""
    h = hashlib.sha256()
    for v in values:
        if isinstance(v, np.ndarray):
            h.update(f"array {v.dtype.str} {v.shape}:".encode())
            h.update(np.ascontiguousarray(v).reshape(-1).view(np.uint8).data)
        else:
            h.update(f"{type(v).__name__} {v!r}:".encode())
    return h.hexdigest()


def block_arrays(block: Any) -> Arrays:
    """A block's fields as arrays, in field order (a sparse matrix as its
    format, shape and compressed arrays, a number as a 0-d array): what a
    cached entry is matched against."""
    out: list[np.ndarray | None] = []
    for f in dataclasses.fields(block):
        value = getattr(block, f.name)
        if sp.issparse(value):
            value = value.tocsr()
            out += [np.asarray(value.shape), value.indptr, value.indices, value.data]
        else:
            out.append(value if value is None else np.asarray(value))
    return tuple(out)


def held_arrays(value: Any) -> list[np.ndarray]:
    """The distinct arrays ``value`` holds (arrays, sparse matrices,
    dataclasses, tuples and lists of them, a closure's cells), for the
    bound and to make them read-only."""
    seen: dict[int, np.ndarray] = {}

    def visit(v: Any) -> None:
        if isinstance(v, np.ndarray):
            seen.setdefault(id(v), v)
        elif sp.issparse(v):
            for name in ("indptr", "indices", "data"):
                visit(getattr(v, name, None))
        elif isinstance(v, (tuple, list)):
            for item in v:
                visit(item)
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            for f in dataclasses.fields(v):
                visit(getattr(v, f.name))
        elif callable(v) and getattr(v, "__closure__", None):
            for cell in v.__closure__:
                visit(cell.cell_contents)

    visit(value)
    return list(seen.values())


class PointCache(BoundedCache):
    """Values built from a block at a point (its Hessian operator), one
    point per block, matched exactly (see the module docstring); the bound,
    eviction and counts are ``BoundedCache``'s; ``store``, when set, the
    store shared with the host's other processes.

    Attributes
    ----------
    hits, misses : int
        Lookups served from the process's own entries, and built afresh.
    shared : int
        Lookups served from the shared store (another process built them).
    store : SharedStore or None
    """

    def __init__(self, max_bytes: int = MAX_BYTES, store: SharedStore | None = None):
        super().__init__(max_bytes)
        self.store = store
        self.shared = 0
        # slot -> (block's arrays, keys, value, block's digest or None); its
        # bytes (value and keys) in _bytes

    def get(
        self,
        block: Any,
        keys: tuple,
        build: Callable[[], Any],
        decode: Callable[[dict[str, Any], dict[str, np.ndarray]], Any] | None = None,
    ) -> Any:
        """``build()``, or the value built earlier from a block equal to
        ``block`` with keys equal to ``keys`` (arrays compared element by
        element, anything else by ``==``). With a ``store`` and ``decode``
        (parts -> value; a value then has ``parts()``), the store's value
        when this process holds none, else ``build(sink)`` into a new entry
        of the store (its arrays the entry's own), read back as stored."""
        arrays = block_arrays(block)
        named = None
        with self._lock:
            for slot, (held, held_keys, value, held_name) in self._entries.items():
                if len(held) != len(arrays) or not all(map(_same, held, arrays)):
                    continue
                if _same_keys(held_keys, keys):
                    self._hit(slot)
                    return value
                named = held_name
                self._drop(slot)  # the block's old point: the round moved on
                break
        if self.store is None or decode is None:
            with self._lock:
                self.misses += 1
            value, named = build(), None
        else:
            value, named = self._shared(arrays, keys, build, decode, named)
        self._insert(arrays, keys, value, named)
        return value

    def _shared(self, arrays: Arrays, keys: tuple, build, decode, named: str | None):
        """The store's value for the block and keys, or ``build(sink)`` into
        a new entry there, read back as stored; and the block's digest."""
        assert self.store is not None
        named = named or digest(arrays)
        name = f"{named[:32]}-{digest(keys)[:32]}"
        found = self.store.fetch(name)
        if found is not None:
            with self._lock:
                self.shared += 1
            return decode(*found), named
        with self._lock:
            self.misses += 1
        writer = self.store.writer(name, named[:32])
        try:
            value = build(writer)
        except BaseException:
            writer.abort()
            raise
        stored = writer.commit(value.parts()[0])
        return (value if stored is None else decode(*stored)), named

    def _insert(self, arrays: Arrays, keys: tuple, value: Any, named: str | None = None) -> None:
        held = held_arrays(value)
        keys = _copied(keys)
        size = sum(a.nbytes for a in held) + _nbytes(tuple(k for k in keys if _is_array(k)))
        if self._too_large(size):
            return
        _read_only(tuple(held))
        _read_only(arrays)
        with self._lock:
            self._keep((arrays, keys, value, named), size)


def _is_array(value: Any) -> bool:
    return isinstance(value, np.ndarray)


def _same_keys(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if _is_array(x) or _is_array(y):
            if not (_is_array(x) and _is_array(y) and _same(x, y)):
                return False
        elif x != y:
            return False
    return True


#: the process's cache of Hessian operators (kernels/direction.py)
OPERATORS = PointCache()
