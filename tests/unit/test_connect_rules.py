"""Spark Connect rules that need no server: which URL a run connects to,
how a Connect session is told apart, its default parallelism, the storage
of remote URIs (read through the server, written as packed files), and the backend
the factory refuses."""

from __future__ import annotations

import pytest

from sparkmaxent.backends import factory
from sparkmaxent.backends.session import REMOTE_ENV, remote_url
from sparkmaxent.errors import ConfigError
from sparkmaxent.session_kind import default_parallelism, is_connect
from sparkmaxent.storage import fs
from sparkmaxent.storage.connect import EMPTY_SCHEMA
from sparkmaxent.storage.packed import COLUMN, SCHEMA


class _Conf:
    def __init__(self, values: dict):
        self.values = values

    def get(self, key, default=None):
        return self.values.get(key, default)


def _connect_like(conf: dict):
    """An object whose class lives in pyspark.sql.connect, as a Connect
    session's does."""
    cls = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})
    session = cls()
    session.conf = _Conf(conf)
    return session


def test_remote_url_prefers_the_given_url_over_the_environment(monkeypatch):
    monkeypatch.delenv(REMOTE_ENV, raising=False)
    assert remote_url(None) is None and remote_url("") is None
    monkeypatch.setenv(REMOTE_ENV, "sc://127.0.0.1:15002")
    assert remote_url(None) == "sc://127.0.0.1:15002"
    assert remote_url("sc://127.0.0.1:16000") == "sc://127.0.0.1:16000"


def test_a_connect_session_is_told_by_its_class():
    assert is_connect(_connect_like({}))
    assert not is_connect(object())


def test_connect_default_parallelism_comes_from_the_settings():
    assert default_parallelism(_connect_like({"spark.default.parallelism": "6"})) == 6
    assert default_parallelism(_connect_like({"spark.sql.shuffle.partitions": "3"})) == 3
    assert default_parallelism(_connect_like({})) == 8


class _Server:
    """What a Connect session's ``read.format("binaryFile")`` gives for the
    files ``{uri: bytes}`` (directories implied), as the server lists them:
    qualified paths, hidden names skipped; and what its Parquet writer does
    (``mode("error")`` refusing an existing path, ``overwrite`` deleting it
    first, an empty partitioned write committing no file)."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.rows: list = []
        self.writing, self.save_mode, self.partitioned = False, "error", False

    # ---- what the server's Parquet reader and writer do ----------------------
    def createDataFrame(self, rows, schema):  # noqa: N802 (pyspark's name)
        assert schema in (SCHEMA, EMPTY_SCHEMA)
        self.rows = rows
        return self

    def coalesce(self, n):
        return self

    @property
    def read(self):
        self.writing = False
        return self

    @property
    def write(self):
        self.writing, self.save_mode, self.partitioned = True, "error", False
        return self

    def mode(self, mode):
        assert mode in ("overwrite", "error")
        self.save_mode = mode
        return self

    def partitionBy(self, column):  # noqa: N802 (pyspark's name)
        self.partitioned = True
        return self

    def parquet(self, path):
        """The writer: replace ``path`` by one part file of the rows (none
        for an empty partitioned write); the reader: the columns of the
        part files under ``path``."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = path.rstrip("/")
        under = [p for p in self.files if p == path or p.startswith(path + "/")]
        if self.writing:
            if self.save_mode == "error" and under:
                raise RuntimeError(f"[PATH_ALREADY_EXISTS] Path {path} already exists.")
            for p in under:
                del self.files[p]
            if self.rows:
                sink = pa.BufferOutputStream()
                pq.write_table(pa.table({COLUMN: [bytes(r[0]) for r in self.rows]}), sink)
                self.files[f"{path}/part-00000-0.snappy.parquet"] = sink.getvalue().to_pybytes()
            self.files[f"{path}/_SUCCESS"] = b""
            self.rows = []
            return None
        part = next(p for p in self.files if p.startswith(path + "/part-"))
        names = pq.read_schema(pa.BufferReader(self.files[part])).names
        return type("Frame", (), {"columns": names})

    def format(self, source):
        assert source == "binaryFile"
        return self

    def option(self, key, value):
        return self

    def load(self, path):
        import datetime

        path = path.rstrip("/")
        if path in self.files:
            found = [path]
        else:
            found = [p for p in self.files if p.startswith(path + "/")]
            if not found:
                raise RuntimeError(f"[PATH_NOT_FOUND] Path does not exist: {path}.")
            hidden = ("/.", "/_")
            found = [p for p in found if not any(h in p[len(path) :] for h in hidden)]
        stamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        rows = [
            {"path": p.replace("viewfs://c/", "viewfs://c:1/"), "length": len(self.files[p]),
             "modificationTime": stamp, "content": self.files[p]}
            for p in found
        ]  # fmt: skip

        class _Frame:
            def select(self, *columns):
                return self

            def collect(self):
                return rows

        return _Frame()


def test_connect_storage_reads_remote_uris_through_the_server():
    from sparkmaxent.storage.connect import ConnectFS

    server = _Server(
        {
            "viewfs://c/d/dataset.json": b'{"a": 1}',
            "viewfs://c/d/features/part-0.parquet": b"PAR1",
            "viewfs://c/d/.hidden.lock": b"x",
        }
    )
    remote = ConnectFS(server, fs.LocalFS())
    assert remote.exists("viewfs://c/d") and remote.exists("viewfs://c/d/dataset.json")
    assert not remote.exists("viewfs://c/nothing")
    assert remote.is_dir("viewfs://c/d/") and not remote.is_dir("viewfs://c/d/dataset.json")
    assert remote.list("viewfs://c/d") == ["dataset.json", "features"]  # hidden: not listed
    assert remote.read_bytes("viewfs://c/d/dataset.json") == b'{"a": 1}'
    assert remote.size("viewfs://c/d/features/part-0.parquet") == 4
    assert remote.read_tail("viewfs://c/d/dataset.json", 2) == b"1}"
    with pytest.raises(FileNotFoundError, match="viewfs://c/gone"):
        remote.read_bytes("viewfs://c/gone")
    with pytest.raises(IsADirectoryError):
        remote.read_bytes("viewfs://c/d")


def test_connect_storage_copies_a_remote_tree_to_a_local_path(tmp_path):
    from sparkmaxent.storage.connect import ConnectFS

    server = _Server({"viewfs://c/d/f/part-0.parquet": b"P0", "viewfs://c/d/f/x/part-1": b"P1"})
    remote = ConnectFS(server, fs.LocalFS())
    remote.copy("viewfs://c/d/f", str(tmp_path / "f"))
    assert (tmp_path / "f" / "part-0.parquet").read_bytes() == b"P0"
    assert (tmp_path / "f" / "x" / "part-1").read_bytes() == b"P1"
    remote.copy("viewfs://c/d/f/part-0.parquet", str(tmp_path / "one"))
    assert (tmp_path / "one").read_bytes() == b"P0"


def test_connect_storage_writes_remote_files_packed_and_reads_them_back_anywhere(
    tmp_path, monkeypatch
):
    from sparkmaxent import storage
    from sparkmaxent.storage.connect import ConnectFS

    server = _Server({"hdfs://nn/d/events/part-0.parquet": b"PAR1"})
    remote = ConnectFS(server, fs.LocalFS())
    remote.mkdirs("hdfs://nn/m")  # nothing to do: a directory appears with its first file
    assert not remote.exists("hdfs://nn/m")
    remote.write_bytes("hdfs://nn/m/metadata.json", b'{"a": 1}')
    assert "hdfs://nn/m/metadata.json/part-00000-0.snappy.parquet" in server.files
    assert remote.exists("hdfs://nn/m/metadata.json") and remote.exists("hdfs://nn/m")
    assert not remote.is_dir("hdfs://nn/m/metadata.json") and remote.is_dir("hdfs://nn/m")
    assert remote.read_bytes("hdfs://nn/m/metadata.json") == b'{"a": 1}'
    assert remote.size("hdfs://nn/m/metadata.json") == 8
    remote.write_bytes("hdfs://nn/m/metadata.json", b"{}")  # replaced whole
    assert remote.read_bytes("hdfs://nn/m/metadata.json") == b"{}"
    assert remote.list("hdfs://nn/m") == ["metadata.json"]
    with pytest.raises(IsADirectoryError, match="hdfs://nn/d/events"):
        remote.write_bytes("hdfs://nn/d/events", b"x")  # never a directory written over
    assert remote.read_bytes("hdfs://nn/d/events/part-0.parquet") == b"PAR1"  # a plain file

    # the server's disk, seen by a classic or local session: the packed file reads as its bytes
    for uri, data in server.files.items():
        local = tmp_path / uri[len("hdfs://nn/") :]
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(data)
    monkeypatch.setattr(storage, "filesystem", fs.LocalFS)
    assert storage.read_bytes(str(tmp_path / "m" / "metadata.json")) == b"{}"
    with pytest.raises(IsADirectoryError, match="expected a file"):
        storage.read_bytes(str(tmp_path / "d"))


def test_connect_storage_copies_a_local_tree_to_a_remote_path_file_by_file(tmp_path):
    from sparkmaxent.storage.connect import ConnectFS

    (tmp_path / "f" / "x").mkdir(parents=True)
    (tmp_path / "f" / "part-0.parquet").write_bytes(b"P0")
    (tmp_path / "f" / "x" / "part-1").write_bytes(b"P1")
    server = _Server({})
    remote = ConnectFS(server, fs.LocalFS())
    remote.copy(str(tmp_path / "f"), "hdfs://nn/v/f")
    assert remote.list("hdfs://nn/v/f") == ["part-0.parquet", "x"]
    assert remote.read_bytes("hdfs://nn/v/f/part-0.parquet") == b"P0"
    assert remote.read_bytes("hdfs://nn/v/f/x/part-1") == b"P1"


def test_the_rdd_backend_is_refused_under_connect():
    with pytest.raises(ConfigError, match="spark-rdd needs a classic Spark session"):
        factory.make_backend("spark-rdd", "/nonexistent", spark=_connect_like({}))


def test_a_model_is_not_saved_over_an_existing_path_without_overwrite(tmp_path, monkeypatch):
    from pyspark.errors import AnalysisException

    from sparkmaxent import storage
    from sparkmaxent.ml import MaxEntClassificationModel

    monkeypatch.setattr(storage, "filesystem", fs.LocalFS)
    (tmp_path / "m").mkdir()
    with pytest.raises(AnalysisException, match="PATH_ALREADY_EXISTS.*write\\(\\).overwrite\\(\\)"):
        MaxEntClassificationModel().write().save(str(tmp_path / "m"))
