"""The file system under a Spark Connect client: local paths through ``os``
(the client's disk, which the server shares when both run on one host or
mount the same disk), every other scheme (``hdfs://``, ``s3a://``,
``abfss://``, ``dbfs:/``, ``viewfs://``, ...) through the server, with
DataFrame readers and writers only.

A Connect client has no JVM and so no Hadoop FileSystem; the server has
one. Its ``binaryFile`` source lists and reads files through it; its
Parquet writer writes through it. So under Connect:

- **reading** a remote file is reading its bytes from the server's
  ``binaryFile`` listing. What the listing cannot show is not seen: names
  starting with ``.`` or ``_`` inside a listed directory (Spark's hidden
  files), and directories holding no file.
- **writing** a remote file ``path`` writes a *packed file*: the directory
  ``path`` holding one Parquet part file of one row, the file's bytes in
  the column :data:`COLUMN` (``storage.packed``, whose readers the classic
  and local file systems use too, so what a Connect client wrote reads
  anywhere). Spark's commit protocol publishes the part file whole or not
  at all, so a reader never sees part of a file; a failed write leaves no
  file (when it replaced one, the old one is gone too).
- **deleting** a remote path overwrites it with an empty partitioned
  write: Spark deletes the path, then commits no file (an empty
  partitioned write opens none), leaving a directory holding only
  Spark's hidden ``_SUCCESS``, which the listing shows as nothing.
- **creating a file only if it does not exist** writes it with
  ``mode("error")`` (Spark refuses an existing path) and reads it back: it
  is this client's only when it holds this client's bytes alone. Output
  locks are built on it (``connect_lock.py``).
- what no DataFrame writer does is refused naming the path: renaming. So
  an all-or-nothing output is built in place there instead of in a
  temporary sibling renamed in (``atomic.staged``): deleted whole if the
  build fails.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from .packed import COLUMN, SCHEMA, is_packed, unpack
from .uri import scheme

#: the listing and reading source, whose Hadoop FileSystem is the server's
SOURCE = "binaryFile"
#: what deleting writes: no row, partitioned, so Spark commits no file
EMPTY_PARTITION = "sparkmaxent_deleted"
EMPTY_SCHEMA = f"{COLUMN} binary, {EMPTY_PARTITION} int"


def is_remote(path: str) -> bool:
    """Whether ``path`` is on a file system only the server reaches."""
    return scheme(path) not in ("", "file")


class ConnectFS:
    """Local paths as :class:`LocalFS`; other schemes through the Spark
    Connect ``session``'s server: read, written as packed files, deleted
    by an empty overwrite, never renamed."""

    name = "connect"

    def __init__(self, session: Any, local: Any) -> None:
        self.spark = session
        self.local = local

    # ---- reading through the server -----------------------------------------
    def _rows(self, path: str, content: bool = False, recursive: bool = False) -> list | None:
        """The server's ``binaryFile`` rows (path, length, modificationTime[,
        content]) for ``path``: the file itself, or a directory's files;
        None when it does not exist."""
        reader = self.spark.read.format(SOURCE)
        if recursive:
            reader = reader.option("recursiveFileLookup", "true")
        columns = ["path", "length", "modificationTime"] + (["content"] if content else [])
        try:
            return reader.load(path).select(*columns).collect()
        except Exception as e:  # pyspark's AnalysisException, from the server
            if "PATH_NOT_FOUND" in str(e) or "does not exist" in str(e):
                return None
            raise OSError(f"{path}: the Spark Connect server could not list it: {e}") from None

    def _kind(self, path: str) -> tuple[str, Any]:
        """("file", row), ("packed", row of its part file), ("dir", rows)
        or ("", None) when nothing is there (a directory holding no file,
        as a failed write leaves, is nothing)."""
        rows = self._rows(path, recursive=True)
        if not rows:
            return "", None
        if len(rows) == 1 and _same(rows[0]["path"], path):
            return "file", rows[0]
        if len(rows) == 1 and self._packed(path, rows[0]["path"]):
            return "packed", rows[0]
        return "dir", rows

    def _packed(self, path: str, part: str) -> bool:
        """Whether the one file ``part`` under ``path`` makes it a packed file:
        a Parquet part file right under it whose only column is :data:`COLUMN`."""
        name = _path_of(part)[len(_path_of(path)) + 1 :]
        if "/" in name or not is_packed([name]):
            return False
        try:
            return list(self.spark.read.parquet(path).columns) == [COLUMN]
        except Exception:  # not Parquet: a file of another kind, so a directory
            return False

    def _file(self, path: str, content: bool = False):
        """The one row of the file ``path`` (a packed file's: its part
        file's), with ``packed`` telling which; FileNotFoundError naming it
        (IsADirectoryError for a directory)."""
        kind, row = self._kind(path)
        if not kind:
            raise FileNotFoundError(f"{path}: no such file (listed by the Spark Connect server)")
        if kind == "dir":
            raise IsADirectoryError(f"{path}: a directory, expected a file")
        if content:  # the one file again, its bytes with it
            rows = self._rows(path, content=True, recursive=True) or []
            if len(rows) != 1:
                raise FileNotFoundError(f"{path}: changed while it was read")
            row = rows[0]
        return kind == "packed", row

    def qualify(self, path: str) -> str:
        return path if is_remote(path) else self.local.qualify(path)

    def exists(self, path: str) -> bool:
        if not is_remote(path):
            return self.local.exists(path)
        return bool(self._kind(path)[0])

    def is_dir(self, path: str) -> bool:
        if not is_remote(path):
            return self.local.is_dir(path)
        return self._kind(path)[0] == "dir"

    def list(self, path: str) -> list[str]:
        if not is_remote(path):
            return self.local.list(path)
        rows = self._rows(path, recursive=True)
        if rows is None:
            raise FileNotFoundError(f"{path}: no such directory (the Spark Connect server's)")
        base = _path_of(path) + "/"
        under = [_path_of(r["path"]) for r in rows]
        return sorted({p[len(base) :].split("/")[0] for p in under if p.startswith(base)})

    def read_bytes(self, path: str) -> bytes:
        if not is_remote(path):
            return self.local.read_bytes(path)
        packed, row = self._file(path, content=True)
        return unpack(bytes(row["content"]), path) if packed else bytes(row["content"])

    def read_tail(self, path: str, n: int) -> bytes:
        return self.local.read_tail(path, n) if not is_remote(path) else self.read_bytes(path)[-n:]

    def size(self, path: str) -> int:
        if not is_remote(path):
            return self.local.size(path)
        packed, row = self._file(path)
        return len(self.read_bytes(path)) if packed else int(row["length"])

    def mtime(self, path: str) -> float:
        if not is_remote(path):
            return self.local.mtime(path)
        return self._file(path)[1]["modificationTime"].timestamp()

    # ---- writing: packed files through the server's Parquet writer ------------
    def renames(self, path: str) -> bool:
        """Whether ``path`` can be renamed and deleted (local paths only)."""
        return not is_remote(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        """A local file, or a remote packed file replacing any file there
        (never a directory: IsADirectoryError)."""
        if not is_remote(path):
            self.local.write_bytes(path, data)
            return
        if self._kind(path)[0] == "dir":
            raise IsADirectoryError(f"{path}: a directory, cannot write a file over it")
        frame = self.spark.createDataFrame([(bytearray(data),)], SCHEMA)
        try:
            frame.coalesce(1).write.mode("overwrite").parquet(path)
        except Exception as e:  # pyspark's exceptions, from the server
            raise OSError(f"{path}: the Spark Connect server could not write it: {e}") from None

    def mkdirs(self, path: str) -> None:
        """Local directories; a remote one appears with its first file."""
        if not is_remote(path):
            self.local.mkdirs(path)

    def delete(self, path: str) -> None:
        """A local file or tree; a remote one emptied by Spark's overwrite
        (an empty partitioned write: no file committed), after which the
        server lists nothing there. Nothing to do where nothing is."""
        if not is_remote(path):
            self.local.delete(path)
            return
        if not self._rows(path, recursive=True):
            return
        nothing = self.spark.createDataFrame([], EMPTY_SCHEMA)
        try:
            nothing.write.mode("overwrite").partitionBy(EMPTY_PARTITION).parquet(path)
        except Exception as e:  # pyspark's exceptions, from the server
            raise OSError(f"{path}: the Spark Connect server could not delete it: {e}") from None

    def create_new(self, path: str, data: bytes) -> bool:
        """Create the file ``path`` holding ``data`` unless something is
        there (False): remotely a packed file written with ``mode("error")``
        and read back, so of two clients racing for it neither gets it
        unless its bytes alone are there."""
        if not is_remote(path):
            return self.local.create_new(path, data)
        frame = self.spark.createDataFrame([(bytearray(data),)], SCHEMA)
        try:
            frame.coalesce(1).write.mode("error").parquet(path)
        except Exception as e:  # pyspark's AnalysisException, from the server
            if "PATH_ALREADY_EXISTS" in str(e) or "already exists" in str(e):
                return False
            raise OSError(f"{path}: the Spark Connect server could not write it: {e}") from None
        try:
            return self.read_bytes(path) == data
        except (OSError, InputError):  # two clients' rows, or gone again: not ours
            return False

    def touch(self, path: str) -> None:
        """Refresh a file's modification time: remotely by writing its
        bytes back (a packed file replaced whole)."""
        if not is_remote(path):
            self.local.touch(path)
            return
        self.write_bytes(path, self.read_bytes(path))

    def rename(self, src: str, dst: str) -> None:
        for path in (src, dst):
            if is_remote(path):
                raise InputError(
                    f"{path}: under Spark Connect sparkmaxent writes {scheme(path)}:// files "
                    "through the server's DataFrame writers, which cannot rename a file or "
                    "directory (outputs there are built in place: docs/connect.md)"
                )
        self.local.rename(src, dst)

    def replace_file(self, src: str, dst: str) -> bool:
        if is_remote(src) or is_remote(dst):
            return False
        return self.local.replace_file(src, dst)

    def copy(self, src: str, dst: str) -> None:
        """Copy a file or a directory tree; files of a remote ``src`` come
        through the server (Spark's hidden files, ``_SUCCESS`` and the like,
        are not listed, so not copied), to a remote ``dst`` as packed files."""
        if not is_remote(src) and not is_remote(dst):
            self.local.copy(src, dst)
            return
        if not is_remote(src):
            self._copy_local_tree(src, dst)
            return
        rows = self._rows(src, content=True, recursive=True)
        if rows is None:
            raise FileNotFoundError(f"{src}: no such file (listed by the Spark Connect server)")
        if len(rows) == 1 and _same(rows[0]["path"], src):
            self.write_bytes(dst, bytes(rows[0]["content"]))
            return
        base = _path_of(src) + "/"
        files = {_path_of(r["path"])[len(base) :]: bytes(r["content"]) for r in rows}
        self.mkdirs(dst)
        for rel, data in _unpacked(files).items():
            self.write_bytes(dst.rstrip("/") + ("/" + rel if rel else ""), data)

    def _copy_local_tree(self, src: str, dst: str) -> None:
        """A local file or tree to a remote ``dst``, file by file."""
        if not self.local.is_dir(src):
            self.write_bytes(dst, self.local.read_bytes(src))
            return
        for name in self.local.list(src):
            self.copy(src.rstrip("/") + "/" + name, dst.rstrip("/") + "/" + name)


def _unpacked(files: dict[str, bytes]) -> dict[str, bytes]:
    """Files by relative path, each packed file's part (the one file of its
    directory, a row of :data:`COLUMN`) as the file it packs, at the
    directory's path ("" for the copied path itself): a packed file is
    copied as the file it is, packed again only where the copy is remote."""
    per_dir: dict[str, int] = {}
    for rel in files:
        parent = rel.rpartition("/")[0]
        per_dir[parent] = per_dir.get(parent, 0) + 1
    out = {}
    for rel, data in files.items():
        parent, _, name = rel.rpartition("/")
        if per_dir[parent] == 1 and is_packed([name]):
            try:
                out[parent] = unpack(data, rel)
                continue
            except InputError:  # a Parquet file of its own, not a packed one
                pass
        out[rel] = data
    return out


def _path_of(uri: str) -> str:
    """The path of a URI without its scheme, authority and trailing slash
    (``hdfs://nn:8020/a/b/`` -> ``/a/b``): the server may qualify a path
    with another authority (a default port) than the one it was given."""
    rest = uri[len(scheme(uri)) + 1 :] if scheme(uri) else uri
    if rest.startswith("//"):
        slash = rest.find("/", 2)
        rest = rest[slash:] if slash >= 0 else "/"
    return rest.rstrip("/") or "/"


def _same(a: str, b: str) -> bool:
    return _path_of(a) == _path_of(b)
