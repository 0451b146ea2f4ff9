"""The fault-injection hook (sparkmaxent/storage/faults.py): SIGKILL at
exactly the n-th pass through the named point, nothing when unset."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from sparkmaxent.storage import faults

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PASSES = (
    "from sparkmaxent.storage import faults\n"
    "for i in range(1, 6):\n"
    "    faults.reach('publish')\n"
    "    faults.reach('write')\n"
    "    print(i, flush=True)\n"
)


def run(spec: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != faults.ENV}
    if spec is not None:
        env[faults.ENV] = spec
    return subprocess.run(
        [sys.executable, "-c", PASSES],
        env={**env, "PYTHONPATH": ROOT},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_nth_pass_through_the_point_kills_the_process():
    r = run("write:3")
    assert r.returncode == -signal.SIGKILL
    assert r.stdout.split() == ["1", "2"]  # killed in the third pass, before printing 3
    assert "killing pid" in r.stderr and "at write #3" in r.stderr


def test_unset_or_never_reached_runs_through():
    assert run(None).stdout.split() == ["1", "2", "3", "4", "5"]
    r = run("swap:1")  # a point this run never reaches
    assert r.returncode == 0 and r.stdout.split() == ["1", "2", "3", "4", "5"]


@pytest.mark.parametrize("spec", ["write", "write:0", "write:x", "nowhere:1"])
def test_a_bad_spec_names_the_variable(spec):
    with pytest.raises(ValueError, match=f"{faults.ENV}=.*expected <point>:<n>"):
        faults.parse(spec)
    r = run(spec)
    assert r.returncode == 1 and faults.ENV in r.stderr
