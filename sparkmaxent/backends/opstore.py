"""The Hessian operators an executor's Python workers share
(``kernels/pointcache.py``'s ``store``): files under the executor's local
directory that every worker maps read-only.

Spark hands a pass's task whichever idle Python worker comes first, so the
product passes at one point (CG across passes, ``solvers/global_cg.py``)
land on workers that did not build the block's operator there; each would
build it again (scores, softmax and diagonal: several products' work). The
first to build it writes it here; the others map its arrays (no copy: the
pages are the host's page cache, one copy for every worker).

A file is written under a temporary name and renamed into place: a worker
that dies mid-write leaves a temporary file, never a half-written entry
another reads (a reader opens final names only, and checks the file's
length against its header). Temporary files of processes that are gone are
removed by the next put.

Bounded: a put drops the block's other points (a round's weights move on
and never return), and beyond ``max_bytes`` the least recently used files
go (a fetch marks its file used); an entry larger than half the bound is
not kept. A file removed while workers map it stays readable to them until
they let go. The directory lives under the executor's own local directory
(``SPARK_LOCAL_DIRS`` of its Python workers), which Spark removes when the
application ends.

A build computes its arrays in the file itself (``Writer``: the
probabilities are written once, where the other workers read them), and
the builder's product reads them back from the file as the others do.

Layout of a file: 8 bytes of magic, the header's offset and length (8 bytes
each, little endian), each array at an offset that is a multiple of 64
from byte 64 on, then the header (JSON: the name, the operator's numbers,
each array's dtype, shape and offset, the file's length).
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import struct
import uuid
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

Parts = tuple[dict[str, Any], dict[str, np.ndarray]]

MAGIC = b"SMXOP001"
ALIGN = 64
DATA = 64  # where the arrays start: after the magic, the header's offset and length
HEADER_ROOM = 4096  # what a header is counted as before it is written
SUFFIX = ".op"
#: bound of one executor's store: the operators of its blocks at their points
STORE_BYTES = 1 << 30


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class OperatorStore:
    """Operators by name in ``directory`` (made when missing), at most
    ``max_bytes`` of files.

    Attributes
    ----------
    fetched, stored : int
        Fetches that found their file, puts that kept theirs (this process).
    """

    def __init__(self, directory: str, max_bytes: int = STORE_BYTES):
        self.directory = directory
        self.max_bytes = max_bytes
        self.fetched = self.stored = 0
        os.makedirs(directory, exist_ok=True)

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name + SUFFIX)

    def fetch(self, name: str) -> Parts | None:
        """The parts stored under ``name``, their arrays read-only views of
        the mapped file; None when there is none (or it is not whole)."""
        path = self._path(name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:  # none, or the directory is gone: build afresh
            return None
        try:
            size = os.fstat(fd).st_size
            if size < DATA:
                return None
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        parts = _read(mapped, name, size)
        if parts is None:
            return None
        try:
            os.utime(path)  # the least recently used go first
        except FileNotFoundError:
            pass
        self.fetched += 1
        return parts

    def writer(self, name: str, group: str) -> Writer:
        """A sink (``kernels/operator.py``'s ``Sink``) whose arrays are those of
        the entry ``name`` being written: a build computes into the file
        itself; ``commit`` puts it in place."""
        return Writer(self, name, group)

    def put(self, name: str, group: str, parts: Parts) -> Parts | None:
        """Store ``parts`` under ``name`` (dropping ``group``'s other names)
        and return them as stored (``fetch``); None when larger than half
        the bound, or gone before they were read back."""
        numbers, arrays = parts
        writer = self.writer(name, group)
        writer.allocate({}, arrays)
        return writer.commit(numbers)

    def _make_room(self, size: int, group: str, name: str) -> None:
        """Drop ``group``'s names but ``name``, temporary files of processes
        that are gone, then the least recently used files until ``size``
        more bytes fit the bound."""
        files = []
        for entry in os.scandir(self.directory):
            if entry.name.endswith(".tmp"):
                pid = entry.name.rsplit(".", 3)[-3]
                if not (pid.isdigit() and _alive(int(pid))):
                    _remove(entry.path)
                    continue
            elif entry.name.startswith(group + "-") and entry.name != name + SUFFIX:
                _remove(entry.path)
                continue
            try:
                stat = entry.stat()
            except FileNotFoundError:
                continue
            files.append((stat.st_mtime, stat.st_size, entry.path, entry.name.endswith(".tmp")))
        used = sum(f[1] for f in files)
        for _, nbytes, path, temporary in sorted(files):
            if used + size <= self.max_bytes:
                break
            if not temporary:  # another live worker's write in progress stays
                _remove(path)
                used -= nbytes

    def clear(self) -> None:
        """Remove every stored operator (temporary files of live writers stay)."""
        for entry in os.scandir(self.directory):
            if entry.name.endswith(SUFFIX):
                _remove(entry.path)

    def __repr__(self) -> str:
        return f"OperatorStore({self.directory!r}, max_bytes={self.max_bytes})"

    def __len__(self) -> int:
        return sum(1 for e in os.scandir(self.directory) if e.name.endswith(SUFFIX))


class Writer:
    """One entry being written: ``allocate`` lays out its arrays in a
    temporary file and hands them out mapped writable (or, when the entry
    would be larger than half the store's bound, in memory: not stored);
    ``commit`` appends the header and renames the file into place;
    ``abort`` removes it."""

    def __init__(self, store: OperatorStore, name: str, group: str):
        self.store, self.name, self.group = store, name, group
        self.temporary: str | None = None
        self.layout: dict[str, list] = {}
        self.end = DATA

    def allocate(self, specs: dict, placed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``specs``' arrays (name -> (dtype, shape)) new and ``placed``'s
        copied, all in the file."""
        wanted = {k: (a.dtype.str, a.shape) for k, a in placed.items()} | specs
        offset = DATA
        for key, (dtype, shape) in wanted.items():
            self.layout[key] = [np.dtype(dtype).str, [int(s) for s in shape], offset]
            offset = _aligned(offset + np.dtype(dtype).itemsize * int(np.prod(shape)))
        self.end = offset
        in_memory = {**placed, **{k: np.empty(shape, dtype) for k, (dtype, shape) in specs.items()}}
        if 2 * (offset + HEADER_ROOM) > self.store.max_bytes:
            return in_memory
        try:
            mapped = self._mapped(offset)
        except OSError as e:  # no room on the disk, the directory gone: not stored
            logger.warning("operator store %s: %s; the operator stays in memory", self.store, e)
            self.abort()
            return in_memory
        out = {}
        for key, (dtype, shape, at) in self.layout.items():
            count = int(np.prod(shape))
            view = (
                np.frombuffer(mapped, np.dtype(dtype), count, at) if count else np.empty(0, dtype)
            )
            out[key] = view.reshape(shape)
        for key, a in placed.items():
            _write_array(out[key], a)
        return out

    def _mapped(self, size: int) -> mmap.mmap:
        """A new temporary file of ``size`` bytes, its blocks allocated now
        (a full disk fails here, not as a fault while the build writes into
        the mapping), mapped writable."""
        self.store._make_room(size + HEADER_ROOM, self.group, self.name)
        self.temporary = os.path.join(
            self.store.directory, f".{self.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        )
        with open(self.temporary, "wb+") as f:
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(f.fileno(), 0, size)
            else:
                f.truncate(size)
            return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_WRITE)

    def commit(self, numbers: dict[str, Any]) -> Parts | None:
        """Append the header (the entry's ``numbers``, its arrays' layout and
        its length), rename the file into place and return the entry as
        stored (``fetch``: read-only); None when it was not stored."""
        if self.temporary is None:
            return None
        header: dict[str, Any] = {"name": self.name, "numbers": numbers, "arrays": self.layout}
        total = self.end + len(json.dumps({**header, "total": 0}).encode()) + 24  # its digits
        head = json.dumps({**header, "total": total}).encode().ljust(total - self.end)
        try:
            with open(self.temporary, "r+b") as f:
                f.seek(self.end)
                f.write(head)
                f.seek(0)
                f.write(MAGIC + struct.pack("<QQ", self.end, len(head)))
            os.replace(self.temporary, self.store._path(self.name))
        except OSError as e:  # the build's own arrays serve this process
            logger.warning("operator store %s: %s; the operator is not stored", self.store, e)
            self.abort()
            return None
        except BaseException:
            self.abort()
            raise
        self.temporary = None
        self.store.stored += 1
        return self.store.fetch(self.name)

    def abort(self) -> None:
        """Remove the temporary file (a build that failed)."""
        if self.temporary is not None:
            _remove(self.temporary)
            self.temporary = None


def _read(mapped: mmap.mmap, name: str, size: int) -> Parts | None:
    """The parts a mapped file holds, or None unless it is a whole entry
    named ``name``."""
    if size < DATA or mapped[:8] != MAGIC:
        return None
    at, length = struct.unpack("<QQ", mapped[8:24])
    if at + length != size:
        return None
    try:
        header = json.loads(bytes(mapped[at : at + length]))
    except ValueError:
        return None
    if header.get("name") != name or header.get("total") != size:
        return None
    arrays = {}
    for key, (dtype, shape, offset) in header["arrays"].items():
        dtype = np.dtype(dtype)
        count = int(np.prod(shape))
        if offset + count * dtype.itemsize > at:
            return None
        if count == 0:
            arrays[key] = np.empty(shape, dtype)
            arrays[key].flags.writeable = False
            continue
        arrays[key] = np.frombuffer(mapped, dtype, count, offset).reshape(shape)
    return header["numbers"], arrays


def _write_array(out: np.ndarray, a: np.ndarray) -> None:
    """Copy one array into the entry being written."""
    out[...] = a


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:  # gone already (another worker removed it), or its directory
        pass
