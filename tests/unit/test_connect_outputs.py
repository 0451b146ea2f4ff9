"""Outputs on a remote file system under Spark Connect, with no server: the
server's DataFrame reader and writer stood in for by ``_Server``
(``test_connect_rules.py``). Deleting (an empty overwrite), creating a file
only if none is there (``mode("error")`` and read back), output locks as
generations of claims, outputs built in place and deleted whole when the
build fails, models replaced."""

from __future__ import annotations

import json
import os
import socket

import pytest

from sparkmaxent import storage
from sparkmaxent.errors import InputError
from sparkmaxent.storage import atomic, fs, lock
from sparkmaxent.storage.connect import ConnectFS
from sparkmaxent.storage.connect_lock import RELEASED, ClaimLog
from tests.unit.test_connect_rules import _Server


@pytest.fixture
def remote(monkeypatch):
    """A ConnectFS over a stand-in server, as ``storage.filesystem()``."""
    fs_ = ConnectFS(_Server({}), fs.LocalFS())
    for module in (storage, atomic, lock):
        monkeypatch.setattr(module, "filesystem", lambda: fs_)
    return fs_


def visible(remote: ConnectFS) -> list[str]:
    """The files the server holds, Spark's hidden ones left out, in the
    order they were written."""
    return [p for p in remote.spark.files if "/_" not in p]


def test_deleting_a_remote_tree_empties_it_and_deleting_nothing_writes_nothing(remote):
    remote.write_bytes("hdfs://nn/o/a.json", b"{}")
    remote.write_bytes("hdfs://nn/o/sub/b.json", b"[]")
    remote.delete("hdfs://nn/nothing")
    assert not [p for p in remote.spark.files if "/nothing" in p]
    remote.delete("hdfs://nn/o/sub")
    assert remote.list("hdfs://nn/o") == ["a.json"]
    assert not remote.exists("hdfs://nn/o/sub") and remote.exists("hdfs://nn/o/a.json")
    remote.delete("hdfs://nn/o")
    assert not remote.exists("hdfs://nn/o") and visible(remote) == []
    assert remote.spark.files == {"hdfs://nn/o/_SUCCESS": b""}  # Spark's marker only
    remote.write_bytes("hdfs://nn/o/a.json", b"{1}")  # written again where it was deleted
    assert remote.read_bytes("hdfs://nn/o/a.json") == b"{1}"


def test_a_file_is_created_only_where_nothing_is_and_read_back(remote):
    assert remote.create_new("s3a://b/x", b"mine")
    assert remote.read_bytes("s3a://b/x") == b"mine"
    assert not remote.create_new("s3a://b/x", b"theirs")  # mode("error") refused it
    assert remote.read_bytes("s3a://b/x") == b"mine"
    remote.spark.files["s3a://b/y/part-00001-1.snappy.parquet"] = b"PAR1"  # another's bytes
    assert not remote.create_new("s3a://b/y", b"mine")  # exists: not created
    remote.touch("s3a://b/x")
    assert remote.read_bytes("s3a://b/x") == b"mine"


def test_renaming_a_remote_path_is_refused_naming_it(remote, tmp_path):
    with pytest.raises(InputError, match="hdfs://nn/a: .*cannot rename"):
        remote.rename("hdfs://nn/a", "hdfs://nn/b")
    assert not remote.replace_file("hdfs://nn/a", "hdfs://nn/b")  # the caller publishes
    remote.write_bytes(str(tmp_path / "a"), b"1")  # local paths: the client's disk
    remote.rename(str(tmp_path / "a"), str(tmp_path / "b"))
    assert (tmp_path / "b").read_bytes() == b"1"


def test_an_output_lock_is_a_generation_of_claims(remote):
    out = "abfss://c@a.dfs.core.windows.net/runs/m"
    path = lock.lock_path(out)
    claims = ClaimLog(remote)
    with lock.output_lock(out, 0.0, "train"):
        assert remote.list(path) == ["1"]
        owner = json.loads(claims.read_bytes(path))
        assert owner["pid"] == os.getpid() and owner["command"] == "train"
        assert not claims.create_new(path, b'{"token": "other"}')  # held: refused
    assert json.loads(remote.read_bytes(path + "/1")) == {"released": True}
    with pytest.raises(FileNotFoundError):
        claims.read_bytes(path)
    with lock.output_lock(out, 0.0, "train"):  # taken again: the next generation
        assert remote.list(path) == ["2"]  # the released one deleted
    assert remote.read_bytes(path + "/2") == RELEASED


def test_a_live_claim_refuses_a_second_run_and_a_dead_one_is_recovered(remote):
    out = "hdfs://nn/runs/m"
    path = lock.lock_path(out)
    live = {"host": socket.gethostname(), "pid": os.getppid(), "token": "t1", "started": "x"}
    assert ClaimLog(remote).create_new(path, json.dumps(live).encode())
    with pytest.raises(InputError, match="being written by another run.*" + path):
        with lock.output_lock(out, 0.0, "train"):
            pass
    assert ClaimLog(remote).read_bytes(path) == json.dumps(live).encode()  # left alone
    dead = {**live, "pid": 2**22 + 12345, "token": "t2"}  # no such process on this host
    remote.write_bytes(path + "/1", json.dumps(dead).encode())
    with lock.output_lock(out, 0.0, "train"):
        mine = json.loads(ClaimLog(remote).read_bytes(path))
        assert mine["pid"] == os.getpid() and remote.list(path) == ["2"]


def test_an_output_built_in_place_is_deleted_whole_when_the_build_fails(remote):
    out = "dbfs:/runs/prepared"
    remote.write_bytes(out + "/dataset.json", b"old")
    with pytest.raises(RuntimeError, match="boom"):
        with storage.staged(out) as where:
            assert where == out  # in place: nothing renames there
            storage.write_bytes(storage.join(where, "features/part-0.parquet"), b"half")
            raise RuntimeError("boom")
    assert not remote.exists(out) and visible(remote) == []  # no half-written output
    with storage.staged(out) as where:
        storage.write_json(storage.join(where, "dataset.json"), {"n": 1})
    assert storage.read_json(out + "/dataset.json") == {"n": 1}
    assert not [p for p in remote.spark.files if ".tmp-" in p]


def test_a_model_saved_under_connect_on_a_remote_fs_loads_back_and_is_replaced(remote):
    from sparkmaxent.model import METADATA_FILE, MaxentModel
    from tests.unit.test_model_load import small_model

    model = small_model()
    model.save("s3a://bucket/models/m")
    written = [p.split("/models/m/")[1] for p in visible(remote)]
    assert not any(".tmp-" in p for p in written), written  # in place: nothing renamed
    assert METADATA_FILE in written[-1], written  # written last: it marks the model whole
    back = MaxentModel.load("s3a://bucket/models/m")
    assert back.weights.values.tolist() == model.weights.values.tolist()
    assert back.labels == model.labels
    with pytest.raises(FileExistsError, match="s3a://bucket/models/m exists"):
        model.save("s3a://bucket/models/m")
    model.weights.values[:] = 0.5
    model.save("s3a://bucket/models/m", overwrite=True)
    assert MaxentModel.load("s3a://bucket/models/m").weights.values.tolist() == [0.5] * len(
        model.weights.values
    )


def test_a_lock_is_refreshed_from_its_heartbeat_thread(remote, monkeypatch):
    """A Spark Connect session is active in the thread that made it only:
    the heartbeat keeps the owner's file system, not its own thread's."""
    import threading
    import time

    owner_thread = threading.current_thread()
    here = lambda: remote if threading.current_thread() is owner_thread else fs.LocalFS()  # noqa: E731
    for module in (storage, atomic, lock):
        monkeypatch.setattr(module, "filesystem", here)
    out = "hdfs://nn/runs/m"
    path = lock.lock_path(out)
    me = {"host": socket.gethostname(), "pid": os.getpid(), "token": "t"}
    assert ClaimLog(remote).create_new(path, json.dumps(me).encode())
    with lock.Heartbeat(path, "t", 0.05, out) as beat:
        deadline = time.monotonic() + 10
        while beat.refreshed < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert beat.refreshed >= 2
    atomic.refuse_taken_over(out + "/model")  # not taken over: writes go on


def test_a_packed_file_is_copied_as_the_file_it_packs(remote, tmp_path):
    """A model trained from a dataset on remote storage copies its
    vocabulary (packed files there) to its output: remote or local, each
    file copied whole, never a packed file packed again."""
    remote.write_bytes("hdfs://nn/d/features/part-00000.parquet", b"PAR1-dictionary")
    remote.write_bytes("hdfs://nn/d/dataset.json", b"{}")
    remote.copy("hdfs://nn/d", "hdfs://nn/run/model/vocabulary")
    assert remote.list("hdfs://nn/run/model/vocabulary") == ["dataset.json", "features"]
    copied = "hdfs://nn/run/model/vocabulary/features/part-00000.parquet"
    assert remote.read_bytes(copied) == b"PAR1-dictionary"
    remote.copy("hdfs://nn/d", str(tmp_path / "vocabulary"))
    local = tmp_path / "vocabulary" / "features" / "part-00000.parquet"
    assert local.read_bytes() == b"PAR1-dictionary"  # a plain file on the local disk
    remote.copy("hdfs://nn/d/dataset.json", "hdfs://nn/one.json")  # a packed file itself
    assert remote.read_bytes("hdfs://nn/one.json") == b"{}"
