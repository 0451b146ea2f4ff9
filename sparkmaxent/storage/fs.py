"""The file systems behind ``storage``: Hadoop's, through the running
Spark session, and plain ``os`` for local paths when no session exists; a
Spark Connect client (no JVM) uses ``os`` for local paths and reads other
schemes through the server (``connect.py``).

A path is a URI (``hdfs://``, ``s3a://``, ``abfss://``, ``file:``) or a
bare path. With a Spark session a bare path is in Hadoop's default file
system (``fs.defaultFS``, the local disk unless configured), exactly as
Spark's own readers and writers take it, so what the driver writes and
what the executors write land side by side. Without a session only local
paths work. ``file:`` paths through Hadoop use its raw local file system
(no ``.crc`` side files), and exclusive creation and file replacement on
them use the same local disk through ``os``, where both are atomic.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import InputError
from .uri import local_path, scheme

T = TypeVar("T")


def connect_session() -> Any:
    """This process's active Spark Connect client session, else None (it has
    no JVM, so no Hadoop FileSystem: ``storage.connect``)."""
    module = sys.modules.get("pyspark.sql.connect.session")
    if module is None:
        return None
    try:
        return module.SparkSession.getActiveSession()
    except Exception:  # the client's dependencies missing: no session either
        return None


class LocalFS:
    """Local paths through ``os``: the in-process backend and unit tests,
    when no Spark session runs."""

    name = "local"

    def _p(self, path: str) -> str:
        s = scheme(path)
        if s and s != "file":
            raise InputError(
                f"{path}: a {s}:// path needs the Hadoop FileSystem of a running Spark "
                "session; without one only local paths can be read or written"
            )
        return local_path(path)

    def qualify(self, path: str) -> str:
        return self._p(path) if not scheme(path) else path

    def exists(self, path: str) -> bool:
        return os.path.exists(self._p(path))

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(self._p(path))

    def mkdirs(self, path: str) -> None:
        os.makedirs(self._p(path), exist_ok=True)

    def list(self, path: str) -> list[str]:
        return sorted(os.listdir(self._p(path)))

    def delete(self, path: str) -> None:
        p = self._p(path)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        elif os.path.lexists(p):
            os.remove(p)

    def rename(self, src: str, dst: str) -> None:
        d = self._p(dst)
        if os.path.lexists(d):
            raise FileExistsError(f"cannot rename {src} to {dst}: it exists")
        os.rename(self._p(src), d)

    def renames(self, path: str) -> bool:
        return True

    def replace_file(self, src: str, dst: str) -> bool:
        """Replace the file ``dst`` by ``src`` in one step (True: done)."""
        os.replace(self._p(src), self._p(dst))
        return True

    def read_bytes(self, path: str) -> bytes:
        with open(self._p(path), "rb") as f:
            return f.read()

    def write_bytes(self, path: str, data: bytes) -> None:
        p = self._p(path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)

    def create_new(self, path: str, data: bytes) -> bool:
        return _create_new_local(self._p(path), data)

    def copy(self, src: str, dst: str) -> None:
        s, d = self._p(src), self._p(dst)
        if os.path.isdir(s):
            shutil.copytree(s, d)
        else:
            shutil.copyfile(s, d)

    def mtime(self, path: str) -> float:
        return os.path.getmtime(self._p(path))

    def size(self, path: str) -> int:
        return os.path.getsize(self._p(path))

    def touch(self, path: str) -> None:
        """Set the modification time of the file ``path`` to now."""
        os.utime(self._p(path))

    def read_tail(self, path: str, n: int) -> bytes:
        """The last ``n`` bytes of a file (all of it when shorter)."""
        with open(self._p(path), "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - n))
            return f.read()


def _create_new_local(path: str, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists (O_EXCL: atomic)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return True


class HadoopFS:
    """Any path through the Hadoop FileSystem of a running SparkContext."""

    name = "hadoop"

    def __init__(self, sc) -> None:
        self.jvm = sc._jvm
        self.conf = sc._jsc.hadoopConfiguration()
        self.default_local = str(self.conf.get("fs.defaultFS", "file:///")).startswith("file:")

    def _abs(self, path: str) -> str:
        if not scheme(path) and self.default_local:
            return os.path.abspath(os.path.expanduser(path))
        return path

    def _fs(self, path: str):
        hpath = self.jvm.org.apache.hadoop.fs.Path(self._abs(path))
        fs = _java(lambda: hpath.getFileSystem(self.conf), path)
        if fs.getUri().getScheme() == "file":
            fs = fs.getRawFileSystem()
        return fs, hpath

    def _local(self, path: str) -> str | None:
        """The driver-local path of a path on the local file system, else None."""
        fs, hpath = self._fs(path)
        return str(hpath.toUri().getPath()) if fs.getUri().getScheme() == "file" else None

    def qualify(self, path: str) -> str:
        if not scheme(path) and self.default_local:
            return self._abs(path)
        fs, hpath = self._fs(path)
        return str(fs.makeQualified(hpath).toString())

    def exists(self, path: str) -> bool:
        fs, p = self._fs(path)
        return bool(_java(lambda: fs.exists(p), path))

    def is_dir(self, path: str) -> bool:
        fs, p = self._fs(path)
        return bool(_java(lambda: fs.exists(p) and fs.getFileStatus(p).isDirectory(), path))

    def mkdirs(self, path: str) -> None:
        fs, p = self._fs(path)
        if not _java(lambda: fs.mkdirs(p), path):
            raise OSError(f"could not create the directory {path}")

    def list(self, path: str) -> list[str]:
        fs, p = self._fs(path)
        return sorted(str(st.getPath().getName()) for st in _java(lambda: fs.listStatus(p), path))

    def delete(self, path: str) -> None:
        fs, p = self._fs(path)
        _java(lambda: fs.delete(p, True), path)

    def rename(self, src: str, dst: str) -> None:
        fs, s = self._fs(src)
        _, d = self._fs(dst)
        # Hadoop moves src *into* an existing directory dst: refuse instead
        if _java(lambda: fs.exists(d), dst):
            raise FileExistsError(f"cannot rename {src} to {dst}: it exists")
        if not _java(lambda: fs.rename(s, d), src):
            raise OSError(f"could not rename {src} to {dst}")

    def renames(self, path: str) -> bool:
        return True

    def replace_file(self, src: str, dst: str) -> bool:
        """On the local disk, replace ``dst`` by ``src`` in one step (True);
        elsewhere False: the caller moves the old file aside instead."""
        a, b = self._local(src), self._local(dst)
        if a is None or b is None:
            return False
        os.replace(a, b)
        return True

    def size(self, path: str) -> int:
        fs, p = self._fs(path)
        return int(_java(lambda: fs.getFileStatus(p).getLen(), path))

    def read_bytes(self, path: str) -> bytes:
        local = self._local(path)
        if local is not None:  # the driver's own disk: no need to cross py4j
            return _LOCAL.read_bytes(local)
        fs, p = self._fs(path)
        stream = _java(lambda: fs.open(p), path)
        try:
            return bytes(self.jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def read_tail(self, path: str, n: int) -> bytes:
        local = self._local(path)
        if local is not None:
            return _LOCAL.read_tail(local, n)
        fs, p = self._fs(path)
        size = self.size(path)
        stream = _java(lambda: fs.open(p), path)
        try:
            stream.seek(max(0, size - n))
            return bytes(self.jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write_bytes(self, path: str, data: bytes) -> None:
        fs, p = self._fs(path)
        out = _java(lambda: fs.create(p, True), path)
        try:
            _java(lambda: out.write(bytearray(data)), path)
        finally:
            out.close()

    def create_new(self, path: str, data: bytes) -> bool:
        local = self._local(path)
        if local is not None:
            return _create_new_local(local, data)
        fs, p = self._fs(path)
        try:
            out = _java(lambda: fs.create(p, False), path)
        except FileExistsError:
            return False
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        return True

    def copy(self, src: str, dst: str) -> None:
        """Stream ``src`` (a file or a whole directory) to ``dst`` through
        the driver's memory (no local disk), Hadoop's ``FileUtil.copy``."""
        sfs, s = self._fs(src)
        dfs, d = self._fs(dst)
        util = self.jvm.org.apache.hadoop.fs.FileUtil
        if not _java(lambda: util.copy(sfs, s, dfs, d, False, self.conf), src):
            raise OSError(f"could not copy {src} to {dst}")

    def mtime(self, path: str) -> float:
        fs, p = self._fs(path)
        return _java(lambda: fs.getFileStatus(p), path).getModificationTime() / 1000.0

    def touch(self, path: str) -> None:
        """Set the modification time of the file ``path`` to now: on the
        local disk directly; elsewhere by writing its bytes back in one
        create (object stores have no settable modification time)."""
        local = self._local(path)
        if local is not None:
            _LOCAL.touch(local)
        else:
            self.write_bytes(path, self.read_bytes(path))


def _java(call: Callable[[], T], path: str) -> T:
    """``call()``, with Java's file exceptions as Python's (naming ``path``)."""
    try:
        return call()
    except Exception as e:  # py4j's Py4JJavaError, or pyspark's conversion of it
        java = getattr(e, "java_exception", None) or getattr(e, "_origin", None)
        if java is None:
            raise
        cls = str(java.getClass().getName())
        msg = f"{path}: {java.getMessage()}"
        if cls.endswith(("FileNotFoundException", "NoSuchFileException")):
            raise FileNotFoundError(msg) from None
        if cls.endswith("FileAlreadyExistsException"):
            raise FileExistsError(msg) from None
        if "AccessControl" in cls or "AccessDenied" in cls or "Permission" in cls:
            raise PermissionError(msg) from None
        raise OSError(f"{msg} ({cls})") from None


_HADOOP: list = [None, None]  # the SparkContext and its HadoopFS
_CONNECT: list = [None, None]  # the Spark Connect session and its ConnectFS
_LOCAL = LocalFS()


def filesystem() -> Any:
    """Hadoop's file system when a SparkContext runs in this process; under
    a Spark Connect client the server's for remote schemes (read only) and
    ``os`` for local paths (``storage.connect``); else ``os``."""
    if "pyspark" not in sys.modules:  # no pyspark imported: no session either
        return _LOCAL
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None or getattr(sc, "_jsc", None) is None:
        session = connect_session()
        if session is None:
            return _LOCAL
        from .connect import ConnectFS

        if _CONNECT[0] is not session:
            _CONNECT[:] = [session, ConnectFS(session, _LOCAL)]
        return _CONNECT[1]
    if _HADOOP[0] is not sc:
        _HADOOP[:] = [sc, HadoopFS(sc)]
    return _HADOOP[1]
