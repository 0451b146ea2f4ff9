"""What killed runs leave is swept at the next start (issue 40 items 4
and 6): a killed prepare's temporaries and lock even by a prepare that is
refused (no --overwrite); a killed evaluate's scratch in the driver's
temporary directory or beside its --report; output.lock_stale_s = 0."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile

import pytest

from sparkmaxent import storage
from sparkmaxent.cli import EXIT_BAD_INPUT, job_main
from sparkmaxent.data.prepare import prepare
from sparkmaxent.errors import InputError

from .faulting import fit, leftovers, make_data

prepare_main = job_main("prepare")
evaluate_main = job_main("evaluate")


@pytest.fixture(scope="module")
def data(spark, tmp_path_factory):
    return make_data(spark, tmp_path_factory.mktemp("leftovers"))


def _dead_pid() -> int:
    r = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return int(r.stdout)


def _killed_run_beside(target, pid: int) -> None:
    """What a run killed while writing ``target`` leaves: a temporary
    sibling with a file in it, and its lock."""
    tmp = target.parent / f".{target.name}.tmp-0123abcd"
    tmp.mkdir()
    (tmp / "dataset.json").write_text("{")
    lock = target.parent / f".{target.name}.lock"
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": pid, "started": "x"}))


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_killed_prepares_leftovers_are_swept_by_the_next_prepare(
    spark, data, tmp_path, capsys, overwrite
):
    ds = tmp_path / "ds"
    prepare(spark, [str(data / "a.txt")], str(ds), "maxent")
    _killed_run_beside(ds, _dead_pid())
    assert len(leftovers(ds)) == 2
    args = ["--input", str(data / "a.txt"), "--format", "maxent", "--output", str(ds)]
    capsys.readouterr()
    assert prepare_main(args + (["--overwrite"] if overwrite else [])) == (
        0 if overwrite else EXIT_BAD_INPUT
    )
    if not overwrite:
        assert f"output directory {ds} exists" in capsys.readouterr().err
    assert leftovers(ds) == []
    assert (ds / "dataset.json").exists()


def test_a_refused_prepare_leaves_a_live_runs_files_alone(spark, data, tmp_path):
    ds = tmp_path / "ds"
    prepare(spark, [str(data / "a.txt")], str(ds), "maxent")
    _killed_run_beside(ds, os.getpid())  # "another" run, alive
    args = ["--input", str(data / "a.txt"), "--format", "maxent", "--output", str(ds)]
    assert prepare_main(args) == EXIT_BAD_INPUT
    assert len(leftovers(ds)) == 2


def test_a_killed_evaluates_scratch_is_swept_at_the_next_evaluate(data, tmp_path, caplog):
    """Scratch in the driver's temporary directory (a local master, no
    --report), named by host and pid: a dead run's is removed, a live
    one's kept; scratch beside a --report is swept under its lock."""
    run = tmp_path / "run"
    fit(data, "l2", run)
    host, base = socket.gethostname(), tempfile.gettempdir()
    dead = os.path.join(base, f"sparkmaxent-eval-{host}-{_dead_pid()}-abc")
    alive = os.path.join(base, f"sparkmaxent-eval-{host}-{os.getpid()}-abc")
    for d in (dead, alive):
        os.makedirs(os.path.join(d, ".prepared.tmp-0123abcd"))
        open(os.path.join(d, ".prepared.lock"), "w").write("{}")
    args = ["--model", str(run / "model"), "--input", str(data / "b.txt"), "--format", "maxent"]
    try:
        with caplog.at_level("WARNING"):
            assert evaluate_main(args) == 0
        assert not os.path.exists(dead) and f"removed {dead}" in caplog.text
        assert os.path.exists(alive)
    finally:
        storage.delete(alive)
        storage.delete(dead)
    assert not [
        n for n in os.listdir(base) if n.startswith(f"sparkmaxent-eval-{host}-{os.getpid()}-")
    ]
    # beside a --report: the killed run's scratch sibling and lock
    report = tmp_path / "eval" / "report.json"
    report.parent.mkdir()
    (report.parent / ".report.json.tmp-0123abcd-work").mkdir()
    (report.parent / ".report.json.lock").write_text(
        json.dumps({"host": host, "pid": _dead_pid(), "started": "x"})
    )
    assert evaluate_main(args + ["--report", str(report)]) == 0
    written = json.load(open(report))
    assert written["accuracy"] > 0
    # the report records where evaluate ran: a small dataset, in this process
    assert written["plan"] == {"evaluate": {"engine": "in-process"}}
    assert sorted(os.listdir(report.parent)) == ["report.json"]


def test_a_killed_runs_scratch_under_output_scratch_dir_is_swept_at_the_next_start(
    data, tmp_path, caplog
):
    """output.scratch_dir is shared by concurrent runs: each run's scratch
    is named by host and pid, and the next start removes this host's whose
    process is gone; a live run's and another host's stay."""
    run, scratch = tmp_path / "run", tmp_path / "scratch"
    fit(data, "l2", run)
    host = socket.gethostname()
    dead = scratch / f"sparkmaxent-scratch-{host}-{_dead_pid()}-0123abcd"
    alive = scratch / f"sparkmaxent-scratch-{host}-{os.getpid()}-0123abcd"
    other = scratch / f"sparkmaxent-scratch-{host}x-{_dead_pid()}-0123abcd"
    for d in (dead, alive, other):
        (d / ".prepared.tmp-0123abcd").mkdir(parents=True)
        (d / ".prepared.lock").write_text("{}")
    args = ["--model", str(run / "model"), "--input", str(data / "b.txt"), "--format", "maxent"]
    with caplog.at_level("WARNING"):
        assert evaluate_main([*args, "--set", f"output.scratch_dir={scratch}"]) == 0
    assert f"removed {dead}, left by a killed run" in caplog.text
    assert sorted(os.listdir(scratch)) == sorted([alive.name, other.name])


def test_lock_stale_s_0_never_takes_a_lock_by_its_age(tmp_path):
    """output.lock_stale_s = 0 means what docs/configuration.md says: never
    stale by age (another host's lock, however old, is refused, naming the
    key); a lock whose process on this host is gone is still taken."""
    target = str(tmp_path / "run")
    lock = tmp_path / ".run.lock"
    lock.write_text(json.dumps({"host": "elsewhere", "pid": 1, "started": "x"}))
    old = os.path.getmtime(lock) - 10 * 86400
    os.utime(lock, (old, old))
    with pytest.raises(InputError, match="lock_stale_s = 0: a lock is never taken over"):
        with storage.output_lock(target, stale_s=0):
            pass
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": _dead_pid(), "started": "x"}))
    with storage.output_lock(target, stale_s=0):
        pass
    assert not lock.exists()
