"""The one place the driver touches files: every dataset, model, report,
checkpoint, plot and scratch path goes through here.

Paths are URIs (``hdfs://``, ``s3a://``, ``abfss://``, ``file:``) or bare
paths, resolved through the Hadoop FileSystem of the running Spark session
(a bare path is in ``fs.defaultFS``, as for Spark itself); with no session,
local paths through ``os`` (``fs.py``). Small files (JSON, small numpy
arrays) cross the driver as bytes; large tables are read and written by
Spark on the executors, never through the driver's disk. Publishing,
clean-up and locking: ``atomic.py``, ``lock.py``.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import InputError
from .atomic import (
    absolute,
    check_writable,
    join,
    publish,
    refuse_existing,
    sibling,
    split,
    staged,
    sweep,
    write_atomic,
)
from .fs import filesystem, local_path, scheme
from .lock import describe_owner, lock_path, output_lock
from .packed import is_packed, unpack

log = logging.getLogger(__name__)


def exists(path: str) -> bool:
    return filesystem().exists(path)


def is_dir(path: str) -> bool:
    return filesystem().is_dir(path)


def mkdirs(path: str) -> None:
    filesystem().mkdirs(path)


def listdir(path: str) -> list[str]:
    """Names in a directory, sorted."""
    return filesystem().list(path)


def delete(path: str) -> None:
    """Delete a file or a whole directory; nothing if it does not exist."""
    filesystem().delete(path)


def rename(src: str, dst: str) -> None:
    """Rename ``src`` to a ``dst`` that does not exist (FileExistsError if it does)."""
    filesystem().rename(src, dst)


def copy(src: str, dst: str) -> None:
    """Copy a file or a directory tree (on Hadoop, streamed by the driver's JVM)."""
    filesystem().copy(src, dst)


def qualify(path: str) -> str:
    """An absolute path or fully qualified URI for ``path``."""
    return filesystem().qualify(path)


def read_bytes(path: str) -> bytes:
    """A file's bytes; a packed file's (``packed.py``, written under Spark
    Connect) as the file it packs, on every file system."""
    fs = filesystem()
    if fs.name != "connect" and fs.is_dir(path):  # ConnectFS unpacks by itself
        names = fs.list(path)
        if not is_packed(names):
            raise IsADirectoryError(f"{path}: a directory, expected a file")
        part = next(n for n in names if not n.startswith((".", "_")))
        return unpack(fs.read_bytes(join(path, part)), path)
    return fs.read_bytes(path)


def renames(path: str) -> bool:
    """Whether outputs at ``path`` can be renamed (not on a remote file
    system under Spark Connect: ``connect.py``), so built in a temporary
    sibling and published (``atomic.staged``), not in place."""
    return filesystem().renames(path)


def size(path: str) -> int:
    """A file's size in bytes."""
    return filesystem().size(path)


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8")


def write_bytes(path: str, data: bytes, atomic: bool = True) -> None:
    """Write a file (parents created); ``atomic``: through a temporary sibling."""
    if atomic:
        write_atomic(path, data)
    else:
        filesystem().write_bytes(path, data)


def write_text(path: str, text: str, atomic: bool = True) -> None:
    write_bytes(path, text.encode("utf-8"), atomic)


def read_json(path: str):
    return json.loads(read_bytes(path))


def write_json(path: str, obj, default=None) -> None:
    write_text(path, json.dumps(obj, indent=2, default=default))


def parquet_files(directory: str) -> list[str]:
    """The ``*.parquet`` files of a directory in name order (Spark's
    ``_SUCCESS`` and ``.crc`` side files skipped)."""
    return [
        join(directory, name)
        for name in listdir(directory)
        if name.endswith(".parquet") and not name.startswith((".", "_"))
    ]


def read_parquet(directory: str, columns: list[str] | None = None):
    """A small Parquet directory (a model's weights, a dictionary for feature
    names) as one Arrow table, its files read as bytes into the driver's
    memory; large tables are Spark's to read."""
    import pyarrow as pa

    files = parquet_files(directory)
    if not files:
        raise FileNotFoundError(f"expected *.parquet files in {directory}, found none")
    tables = [read_parquet_file(f, columns) for f in files]
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def read_parquet_file(path: str, columns: list[str] | None = None):
    """One Parquet file as an Arrow table, read as bytes into memory;
    InputError naming the file when it is not Parquet (truncated, damaged)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = read_bytes(path)
    try:
        return pq.read_table(
            pa.BufferReader(data), columns=columns, page_checksum_verification=True
        )
    except (pa.ArrowException, ValueError, OSError) as e:
        raise InputError(f"{path}: cannot read it as Parquet: {e}") from None


def refuse_existing_output(
    path: str, overwrite: bool, what: str = "output", stale_s: float = 0.0
) -> None:
    """:func:`refuse_existing` before a run takes its lock; when it refuses,
    a killed run's leftovers beside ``path`` (its ``.tmp-`` siblings, its
    dead lock) are swept first, so a refused run still cleans up. A lock a
    live run holds is left alone (and so are its temporaries)."""
    if overwrite or not exists(path):
        return
    parent, name = split(qualify(path))
    try:
        with output_lock(path, stale_s, "sweep"):
            sweep(parent, {name})
    except InputError:
        pass  # held by a live run: its temporaries are its own
    refuse_existing(path, overwrite, what)


def check_parquet_files(directory: str) -> None:
    """Every Parquet file of ``directory`` whole: it ends in a footer (the
    ``PAR1`` magic after a length that fits the file: truncated, e.g. by a
    full disk or a copy cut short) and every page decodes and matches its
    CRC (damage anywhere in the data; Spark and :func:`write_parquet` write
    page checksums, which Spark's readers do not verify by default: a
    damaged page would be read as wrong values). InputError naming the
    first file that is not whole. Reads each file once, a row group at a
    time, in the driver."""
    files = parquet_files(directory)
    if not files:
        raise InputError(f"{directory}: expected *.parquet files, found none")
    for path in files:
        _check_parquet_file(path, read_bytes(path))


def _check_parquet_file(path: str, data: bytes) -> None:
    """One Parquet file whole: a footer at its end, every row group
    decoded with its page checksums verified; InputError naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    footer = int.from_bytes(data[-8:-4], "little") if len(data) >= 8 else -1
    if data[-4:] != b"PAR1" or not 0 < footer <= len(data) - 12:
        raise InputError(
            f"{path}: cannot read it as Parquet: no footer at its end "
            f"({len(data)} bytes; truncated or damaged)"
        )
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True)
        for group in range(parquet.num_row_groups):
            parquet.read_row_group(group)
    except (pa.ArrowException, ValueError, OSError) as e:
        raise InputError(f"{path}: cannot read it as Parquet: {e} (damaged)") from None


def write_parquet(path: str, table) -> None:
    """One Parquet file from an Arrow table held by the driver."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, write_page_checksum=True)  # as Spark does: damage is found
    write_bytes(path, sink.getvalue().to_pybytes(), atomic=False)


@contextmanager
def scratch(near: str, scratch_dir: str = "") -> Iterator[str]:
    """A scratch directory path (not created) removed afterwards: under
    ``scratch_dir`` when given, named by owner like :func:`local_temp_dir`
    (this host's whose process is gone are removed first: the directory is
    shared by concurrent runs, so only an owner can be judged), else a
    temporary sibling of the output ``near`` (swept like one if a run is
    killed)."""
    import os
    import socket
    import uuid

    if scratch_dir:
        prefix = "sparkmaxent-scratch-"
        sweep_orphans(scratch_dir, prefix)
        own = f"{prefix}{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        path = join(qualify(scratch_dir), own)
    else:
        path = sibling(near, "tmp") + "-work"
    try:
        yield path
    finally:
        delete(path)


def sweep_orphans(base: str, prefix: str, fs=None) -> list[str]:
    """Remove the entries of ``base`` named ``<prefix><host>-<pid>-...``
    for this host whose process is gone (left by killed runs); those of
    other hosts and of live processes stay. ``fs``: the file system of
    ``base`` (default: :func:`filesystem`'s). Returns the paths removed."""
    import re
    import socket

    from .lock import _alive

    fs = fs or filesystem()
    base = fs.qualify(base)
    if not fs.is_dir(base):
        return []
    mine = re.compile(re.escape(f"{prefix}{socket.gethostname()}-") + r"(\d+)-")
    removed = []
    for name in fs.list(base):
        m = mine.match(name)
        if m and not _alive(int(m.group(1))):
            fs.delete(join(base, name))
            removed.append(join(base, name))
            log.warning("removed %s, left by a killed run (process %s)", join(base, name), m[1])
    return removed


def local_temp_dir(prefix: str) -> str:
    """A new directory on the driver's disk: only for a local Spark master,
    whose executors share that disk. Named ``<prefix><host>-<pid>-...`` in
    the temporary directory, like an output registered by its owner: those
    of this prefix whose process on this host is gone (killed runs) are
    removed first (:func:`sweep_orphans`)."""
    import os
    import socket

    from .fs import _LOCAL

    sweep_orphans(tempfile.gettempdir(), prefix, _LOCAL)
    return tempfile.mkdtemp(prefix=f"{prefix}{socket.gethostname()}-{os.getpid()}-")


__all__ = [
    "absolute",
    "check_parquet_files",
    "check_writable",
    "copy",
    "delete",
    "describe_owner",
    "exists",
    "filesystem",
    "is_dir",
    "join",
    "listdir",
    "local_path",
    "local_temp_dir",
    "sweep_orphans",
    "lock_path",
    "mkdirs",
    "parquet_files",
    "read_parquet",
    "read_parquet_file",
    "write_parquet",
    "output_lock",
    "publish",
    "qualify",
    "read_bytes",
    "size",
    "read_json",
    "read_text",
    "refuse_existing",
    "refuse_existing_output",
    "rename",
    "renames",
    "scheme",
    "sibling",
    "split",
    "staged",
    "sweep",
    "write_atomic",
    "write_bytes",
    "write_json",
    "write_text",
]
