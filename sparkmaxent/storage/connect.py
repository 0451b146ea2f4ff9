"""The file system under a Spark Connect client: local paths through ``os``
(the client's disk, which the server shares when both run on one host or
mount the same disk), every other scheme (``hdfs://``, ``s3a://``,
``abfss://``, ``dbfs:/``, ``viewfs://``, ...) read through the server.

A Connect client has no JVM and so no Hadoop FileSystem; the server has
one, and its ``binaryFile`` source lists and reads files through it. So a
prepared dataset (``dataset.json``, its dictionary) and a saved model on
any file system the server reaches can be read under Connect: ``train
--train hdfs://...``, ``MaxEntClassificationModel.load("s3a://...")``,
``evaluate --model abfss://...``. What the server's listing cannot show is
not seen: names starting with ``.`` or ``_`` inside a listed directory
(Spark's hidden files), and empty directories.

Copying from there to a local path works (a model's vocabulary is copied
from its training dataset). Writing there is refused (InputError naming
the path): the DataFrame
writers only make directories of ``part-*`` files, and nothing a client
can send creates a file of a given name, renames, deletes or creates one
exclusively, which the all-or-nothing outputs and the output locks of
``storage`` are built on. Outputs go to local paths (a disk the server
shares) or a classic session writes them (docs/connect.md).
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from .uri import scheme

#: the listing and reading source, whose Hadoop FileSystem is the server's
SOURCE = "binaryFile"


def is_remote(path: str) -> bool:
    """Whether ``path`` is on a file system only the server reaches."""
    return scheme(path) not in ("", "file")


class ConnectFS:
    """Local paths as :class:`LocalFS`; other schemes read through the Spark
    Connect ``session``'s server, never written."""

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

    def _file(self, path: str, content: bool = False):
        """The one row of the file ``path``; FileNotFoundError naming it
        (IsADirectoryError for a directory)."""
        rows = self._rows(path, content)
        if rows is None:
            raise FileNotFoundError(f"{path}: no such file (listed by the Spark Connect server)")
        mine = [r for r in rows if _same(r["path"], path)]
        if len(mine) != 1:
            raise IsADirectoryError(f"{path}: a directory, expected a file")
        return mine[0]

    def qualify(self, path: str) -> str:
        return path if is_remote(path) else self.local.qualify(path)

    def exists(self, path: str) -> bool:
        if not is_remote(path):
            return self.local.exists(path)
        return self._rows(path) is not None

    def is_dir(self, path: str) -> bool:
        if not is_remote(path):
            return self.local.is_dir(path)
        rows = self._rows(path)
        return rows is not None and not (len(rows) == 1 and _same(rows[0]["path"], path))

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
        return bytes(self._file(path, content=True)["content"])

    def read_tail(self, path: str, n: int) -> bytes:
        return self.local.read_tail(path, n) if not is_remote(path) else self.read_bytes(path)[-n:]

    def size(self, path: str) -> int:
        return self.local.size(path) if not is_remote(path) else int(self._file(path)["length"])

    def mtime(self, path: str) -> float:
        if not is_remote(path):
            return self.local.mtime(path)
        return self._file(path)["modificationTime"].timestamp()

    # ---- writing: local paths only -------------------------------------------
    def _writable(self, path: str) -> str:
        if is_remote(path):
            raise InputError(
                f"{path}: under Spark Connect sparkmaxent reads {scheme(path)}:// files "
                "through the server, but cannot write its own files there (models, "
                "reports, checkpoints, locks, datasets' dataset.json): a Connect client "
                "cannot create, rename or delete a named file on the server's file "
                "systems. Write to a local or file: path the server shares, or run a "
                "classic session (docs/connect.md)"
            )
        return path

    def mkdirs(self, path: str) -> None:
        self.local.mkdirs(self._writable(path))

    def delete(self, path: str) -> None:
        self.local.delete(self._writable(path))

    def rename(self, src: str, dst: str) -> None:
        self.local.rename(self._writable(src), self._writable(dst))

    def replace_file(self, src: str, dst: str) -> bool:
        return self.local.replace_file(self._writable(src), self._writable(dst))

    def write_bytes(self, path: str, data: bytes) -> None:
        self.local.write_bytes(self._writable(path), data)

    def create_new(self, path: str, data: bytes) -> bool:
        return self.local.create_new(self._writable(path), data)

    def copy(self, src: str, dst: str) -> None:
        """Copy a file or a directory tree to a local ``dst``; from a remote
        ``src`` its files come through the server (Spark's hidden files,
        ``_SUCCESS`` and the like, are not listed, so not copied)."""
        self._writable(dst)
        if not is_remote(src):
            self.local.copy(src, dst)
            return
        rows = self._rows(src, content=True, recursive=True)
        if rows is None:
            raise FileNotFoundError(f"{src}: no such file (listed by the Spark Connect server)")
        if len(rows) == 1 and _same(rows[0]["path"], src):
            self.local.write_bytes(dst, bytes(rows[0]["content"]))
            return
        base = _path_of(src) + "/"
        self.local.mkdirs(dst)
        for row in rows:
            rel = _path_of(row["path"])[len(base) :]
            self.local.write_bytes(dst.rstrip("/") + "/" + rel, bytes(row["content"]))

    def touch(self, path: str) -> None:
        self.local.touch(self._writable(path))


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
