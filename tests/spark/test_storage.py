"""The storage layer on bare paths and ``file://`` URIs through a real local
Spark session's Hadoop FileSystem, and on bare paths through ``os`` with no
session: reads and writes, atomic publish with a failure between the
renames, the sweep after killed runs, and the output lock."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from sparkmaxent import storage
from sparkmaxent.errors import InputError
from sparkmaxent.storage import atomic as atomic_module
from sparkmaxent.storage import fs as fs_module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KINDS = ["hadoop-bare", "hadoop-file-uri", "os-bare"]


@pytest.fixture(params=KINDS)
def base(request, spark, tmp_path, monkeypatch):
    """A directory as the kind of path under test, with the file system it
    must resolve to."""
    if request.param == "os-bare":
        from pyspark import SparkContext

        monkeypatch.setattr(SparkContext, "_active_spark_context", None)
        assert storage.filesystem().name == "local"
    else:
        assert storage.filesystem().name == "hadoop"
    if request.param == "hadoop-file-uri":
        return f"file://{tmp_path}"
    return str(tmp_path)


def test_read_write_list_delete_rename_copy(base, tmp_path):
    p = storage.join(base, "a", "b.json")
    storage.write_json(p, {"x": 1})
    storage.write_json(p, {"x": 2})  # replaced
    assert storage.read_json(p) == {"x": 2}
    assert json.loads((tmp_path / "a" / "b.json").read_text()) == {"x": 2}
    assert storage.listdir(storage.join(base, "a")) == ["b.json"]  # no .crc, no temporaries
    assert storage.is_dir(storage.join(base, "a")) and not storage.is_dir(p)
    storage.write_bytes(storage.join(base, "a", "c.bin"), b"\x00\xff" * 1000, atomic=False)
    assert storage.read_bytes(storage.join(base, "a", "c.bin")) == b"\x00\xff" * 1000
    storage.copy(storage.join(base, "a"), storage.join(base, "copy"))
    assert sorted(os.listdir(tmp_path / "copy")) == ["b.json", "c.bin"]
    with pytest.raises(FileExistsError):
        storage.rename(storage.join(base, "a"), storage.join(base, "copy"))  # never *into* it
    storage.rename(storage.join(base, "a"), storage.join(base, "moved"))
    assert not storage.exists(storage.join(base, "a")) and (tmp_path / "moved" / "c.bin").exists()
    storage.delete(storage.join(base, "moved"))
    storage.delete(storage.join(base, "moved"))  # nothing to delete: no error
    assert sorted(os.listdir(tmp_path)) == ["copy"]
    with pytest.raises(FileNotFoundError, match="nope"):
        storage.read_bytes(storage.join(base, "nope"))


def test_qualify_is_absolute_and_relative_paths_are_the_working_directory(
    base, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    storage.write_text("rel/x.txt", "hi")
    assert (tmp_path / "rel" / "x.txt").read_text() == "hi"
    q = storage.qualify("rel/x.txt")
    assert q.endswith(f"{tmp_path}/rel/x.txt") and storage.read_text(q) == "hi"


def test_without_a_session_only_local_paths(spark, monkeypatch):
    from pyspark import SparkContext

    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    with pytest.raises(InputError, match="hdfs:// path needs the Hadoop FileSystem"):
        storage.exists("hdfs://namenode:8020/data/train")


def _failing_second_rename(monkeypatch):
    """Make the file system's second rename fail: publish's 'new one in'."""
    fs = storage.filesystem()
    real = fs.rename
    calls = []

    def rename(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:
            raise OSError("injected failure between the renames")
        real(src, dst)

    monkeypatch.setattr(fs, "rename", rename)
    return calls


def test_publish_moves_the_old_aside_and_a_failure_between_renames_puts_it_back(
    base, tmp_path, monkeypatch
):
    target = storage.join(base, "out")
    storage.write_text(storage.join(target, "v"), "old")
    tmp = storage.sibling(target, "tmp")
    storage.write_text(storage.join(tmp, "v"), "new")
    calls = _failing_second_rename(monkeypatch)
    with pytest.raises(OSError, match="injected"):
        storage.publish(tmp, target, overwrite=True)
    assert calls[0][1].split("/")[-1].startswith(".out.old-")  # the old one was moved aside
    assert (tmp_path / "out" / "v").read_text() == "old"  # and put back
    monkeypatch.undo()
    with pytest.raises(InputError, match="exists"):
        storage.publish(tmp, target, overwrite=False)
    storage.publish(tmp, target, overwrite=True)
    assert (tmp_path / "out" / "v").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["out"]  # nothing left beside it


def test_sweep_restores_an_orphaned_old_and_removes_temporaries(base, tmp_path):
    # a kill between the renames: the model is only in its .old- sibling
    storage.write_text(storage.join(base, ".model.old-0123abcd", "m"), "good")
    storage.write_text(storage.join(base, ".model.tmp-89abcdef", "m"), "partial")
    storage.write_text(storage.join(base, ".report.json.tmp-00000000"), "{")
    storage.write_text(storage.join(base, ".preds.tmp-11111111-work", "x"), "scratch")
    # an output present and an .old- left beside it: the .old- goes
    storage.write_text(storage.join(base, "data", "d"), "current")
    storage.write_text(storage.join(base, ".data.old-22222222", "d"), "older")
    storage.write_text(storage.join(base, ".unrelated"), "keep")
    done = storage.sweep(base)
    assert len(done) == 5, done
    assert sorted(os.listdir(tmp_path)) == [".unrelated", "data", "model"]
    assert (tmp_path / "model" / "m").read_text() == "good"
    assert (tmp_path / "data" / "d").read_text() == "current"
    storage.write_text(storage.join(base, ".other.tmp-33333333"), "x")
    assert storage.sweep(base, names={"model"}) == []  # only the outputs asked for
    assert storage.sweep(storage.join(base, "missing")) == []


def test_a_second_writer_is_refused_naming_path_and_owner(base, tmp_path):
    target = storage.join(base, "run")
    with storage.output_lock(target, command="train") as lock:
        assert lock.endswith("/.run.lock")
        owner = json.loads((tmp_path / ".run.lock").read_text())
        assert owner["host"] == socket.gethostname() and owner["pid"] == os.getpid()
        with storage.output_lock(target):  # the same process re-enters (pipeline -> fit)
            pass
        assert (tmp_path / ".run.lock").exists()
        # another process: refused, naming the output and the owner
        code = (
            "import sys; from sparkmaxent import storage\n"
            "try:\n"
            f"    with storage.output_lock({str(tmp_path / 'run')!r}): pass\n"
            "except Exception as e:\n"
            "    print(type(e).__name__, e); sys.exit(2)\n"
        )
        r = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": ROOT},
        )
        assert r.returncode == 2, r.stderr
        assert "InputError" in r.stdout and f"{tmp_path}/run" in r.stdout
        assert f"pid {os.getpid()} on {socket.gethostname()}" in r.stdout and "train" in r.stdout
    assert not (tmp_path / ".run.lock").exists()  # released


def test_a_lock_of_a_dead_process_or_too_old_is_recovered(base, tmp_path, caplog):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(dead.stdout)
    lock = tmp_path / ".run.lock"
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": pid, "started": "x"}))
    with caplog.at_level("WARNING"), storage.output_lock(storage.join(base, "run")):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert f"process {pid} on this host is gone" in caplog.text
    # another host's lock: held, unless older than lock_stale_s
    lock.write_text(json.dumps({"host": "elsewhere", "pid": 1, "started": "x"}))
    with pytest.raises(InputError, match="pid 1 on elsewhere"):
        with storage.output_lock(storage.join(base, "run"), stale_s=3600):
            pass
    old = os.path.getmtime(lock) - 7200
    os.utime(lock, (old, old))
    with storage.output_lock(storage.join(base, "run"), stale_s=3600):
        pass
    assert not lock.exists()


def _try_lock_elsewhere(target: str, stale_s: float) -> subprocess.CompletedProcess:
    """Another process taking ``target``'s lock with ``stale_s``: exit 2 and
    the message when refused, exit 0 when it got it."""
    code = (
        "import sys; from sparkmaxent import storage\n"
        "try:\n"
        f"    with storage.output_lock({target!r}, stale_s={stale_s}): pass\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e); sys.exit(2)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ROOT},
    )


def test_a_live_run_refreshes_its_lock_so_it_never_turns_stale(base, tmp_path):
    from sparkmaxent.storage import lock as lock_module

    assert lock_module.refresh_interval(600) == 60 and lock_module.refresh_interval(2) == 0.5
    assert lock_module.refresh_interval(0) == 60  # judged by others' lock_stale_s too
    lock = tmp_path / ".run.lock"
    with storage.output_lock(storage.join(base, "run"), stale_s=2):
        old = time.time() - 3600
        os.utime(lock, (old, old))  # as if the run had not refreshed it for an hour
        deadline = time.time() + 30
        while os.path.getmtime(lock) < time.time() - 60 and time.time() < deadline:
            time.sleep(0.05)
        assert time.time() - os.path.getmtime(lock) < 30, "the lock was not refreshed"
        # another process judging it by the same lock_stale_s: refused (a live run)
        r = _try_lock_elsewhere(str(tmp_path / "run"), stale_s=2)
        assert r.returncode == 2, r.stderr
        assert f"pid {os.getpid()}" in r.stdout and "output.lock_stale_s 2 s" in r.stdout
        assert json.loads(lock.read_text())["pid"] == os.getpid()  # still ours
    assert not lock.exists()


def test_a_foreign_lock_is_refused_while_fresh_and_taken_once_not_refreshed(base, tmp_path, caplog):
    lock = tmp_path / ".run.lock"
    lock.write_text(json.dumps({"host": "elsewhere", "pid": 1, "started": "x", "token": "t"}))
    with pytest.raises(InputError, match="pid 1 on elsewhere.*lock_stale_s 5 s"):
        with storage.output_lock(storage.join(base, "run"), stale_s=5):
            pass
    old = time.time() - 6  # its owner stopped refreshing it 6 s ago
    os.utime(lock, (old, old))
    with caplog.at_level("WARNING"), storage.output_lock(storage.join(base, "run"), stale_s=5):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert "recovering the stale lock" in caplog.text and "pid 1 on elsewhere" in caplog.text
    assert "last refreshed 6 s ago, more than output.lock_stale_s 5" in caplog.text
    assert not lock.exists()


def test_a_heartbeat_stops_on_a_lock_taken_over(base, tmp_path, caplog):
    from sparkmaxent.storage.lock import Heartbeat

    lock = tmp_path / ".run.lock"
    lock.write_text(json.dumps({"token": "mine"}))
    with caplog.at_level("ERROR"), Heartbeat(str(lock), "mine", 0.02) as beat:
        deadline = time.time() + 30
        while beat.refreshed < 2 and time.time() < deadline:
            time.sleep(0.02)
        assert beat.refreshed >= 2
        lock.write_text(json.dumps({"token": "theirs"}))  # taken over as stale
        deadline = time.time() + 30
        while "no longer this run's" not in caplog.text and time.time() < deadline:
            time.sleep(0.02)
        assert "no longer this run's" in caplog.text
        old = time.time() - 3600
        os.utime(lock, (old, old))
        time.sleep(0.2)  # ten intervals: a heartbeat still running would touch it
        assert os.path.getmtime(lock) < time.time() - 3000  # theirs, not refreshed by us


class _HalfWritten:
    """A lock's file system on which every other read finds the file empty,
    as a reader does between a writer's truncate and its write."""

    def __init__(self, fs):
        self.fs, self.reads = fs, 0

    def read_bytes(self, path):
        self.reads += 1
        return b"" if self.reads % 2 else self.fs.read_bytes(path)

    def touch(self, path):
        self.fs.touch(path)


def test_a_heartbeat_reads_a_half_written_lock_again_before_giving_it_up(tmp_path, caplog):
    from sparkmaxent.storage.lock import Heartbeat

    lock = tmp_path / ".run.lock"
    lock.write_text(json.dumps({"token": "mine"}))
    beat = Heartbeat(str(lock), "mine", 0.02)
    beat.fs = _HalfWritten(beat.fs)
    with caplog.at_level("ERROR"), beat:
        deadline = time.time() + 30
        while beat.refreshed < 3 and time.time() < deadline and not caplog.text:
            time.sleep(0.02)
    assert beat.refreshed >= 3 and beat.fs.reads >= 6
    assert "no longer this run's" not in caplog.text


def test_a_damaged_parquet_file_is_bad_input_naming_it(base, tmp_path):
    import pyarrow as pa

    path = storage.join(base, "t", "part-0.parquet")
    storage.write_parquet(path, pa.table({"x": [1.0, 2.0]}))
    assert storage.read_parquet(storage.join(base, "t")).column("x").to_pylist() == [1.0, 2.0]
    f = tmp_path / "t" / "part-0.parquet"
    f.write_bytes(f.read_bytes()[:20])  # truncated, as by a full disk or a killed copy
    with pytest.raises(InputError, match=f"{path}: cannot read it as Parquet"):
        storage.read_parquet(storage.join(base, "t"))


def test_check_writable_names_the_directory(base, tmp_path):
    storage.check_writable(storage.join(base, "new", "dir"))
    assert os.listdir(tmp_path / "new" / "dir") == []
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(InputError, match=f"output .*{tmp_path}/file/x is not writable"):
        storage.check_writable(storage.join(base, "file", "x"))
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: permissions are not enforced")
        with pytest.raises(InputError, match=f"output .*{ro}/x is not writable"):
            storage.check_writable(storage.join(base, "ro", "x"))
    finally:
        ro.chmod(0o700)


def test_write_atomic_leaves_nothing_on_failure(base, tmp_path, monkeypatch):
    storage.write_text(storage.join(base, "f.json"), "old")
    fs = storage.filesystem()

    def fail(src, dst):
        raise OSError("injected")

    monkeypatch.setattr(fs, "replace_file", fail)
    with pytest.raises(OSError, match="injected"):
        storage.write_text(storage.join(base, "f.json"), "new")
    assert os.listdir(tmp_path) == ["f.json"] and (tmp_path / "f.json").read_text() == "old"


def test_siblings_and_join_of_uris():
    assert storage.split("hdfs://nn:8020/a/b") == ("hdfs://nn:8020/a", "b")
    assert storage.split("file:///b") == ("file:///", "b")
    assert storage.join("s3a://bucket/x/", "y", "z") == "s3a://bucket/x/y/z"
    s = storage.sibling("abfss://c@acct.dfs.core.windows.net/runs/m", "tmp")
    assert s.startswith("abfss://c@acct.dfs.core.windows.net/runs/.m.tmp-")
    assert atomic_module._SIBLING.match(s.rsplit("/", 1)[1])
    assert fs_module.scheme("hdfs:///x") == "hdfs" and fs_module.scheme("/x:y") == ""


def test_a_run_whose_lock_was_taken_over_writes_nothing_more(base, tmp_path, caplog):
    run = storage.join(base, "run")
    lock = tmp_path / ".run.lock"
    with caplog.at_level("ERROR"), storage.output_lock(run, stale_s=0.08):
        storage.write_atomic(storage.join(run, "before.json"), b"1")  # ours: written
        theirs = {"host": "elsewhere", "pid": 7, "started": "x", "token": "theirs"}
        lock.write_text(json.dumps(theirs))  # taken over as stale by another run
        deadline = time.time() + 30
        while "no longer this run's" not in caplog.text and time.time() < deadline:
            time.sleep(0.02)
        with pytest.raises(InputError, match="taken over by pid 7 on elsewhere"):
            storage.write_atomic(storage.join(run, "checkpoint", "state.json"), b"2")
        tmp = storage.join(base, "run.tmp-x")
        storage.write_atomic(storage.join(tmp, "model.json"), b"3")  # not under the output
        with pytest.raises(InputError, match="stops without writing"):
            storage.publish(tmp, run, overwrite=True)
    assert json.loads(lock.read_text())["token"] == "theirs"  # left to its new owner
    assert not (tmp_path / "run" / "checkpoint").exists()
    storage.write_atomic(storage.join(run, "after.json"), b"4")  # the mark ends with the run
