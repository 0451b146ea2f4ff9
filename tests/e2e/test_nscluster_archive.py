"""Issue 40 item 1 acceptance: executors that cannot start end the run.

On the isolated cluster (tests/e2e/cluster.py: the worker in its own mount
namespace with a 256 MB tmpfs over /tmp), ``--env-archive`` ships the slim
test environment (``scripts/pack_env.py``: pyspark and py4j left out) with
a padding file of random bytes that makes it larger than the executors'
/tmp, where Spark downloads an archive before unpacking it (the slim
archive alone now fits): each executor registers, fails and is replaced. ``train``
must end with exit 6 within the configured limit
(``spark.max_executor_losses``), the message naming the cause as Spark
reports it and the checkpoint, instead of running until killed. Marked
slow: venv-pack of the venv, a cluster start and a run of several minutes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import time

import pytest

from scripts import pack_env
from sparkmaxent.cli import EXIT_STALLED, job_main
from tests.e2e.cluster import isolated_cluster, isolation_unavailable
from tests.e2e.test_cluster import ROOT, SUBMIT, submit_env, write_maxent_text

pytestmark = [
    pytest.mark.slow,
    pytest.mark.cluster,
    pytest.mark.skipif(bool(isolation_unavailable()), reason=isolation_unavailable() or "ok"),
]

prepare_main = job_main("prepare")
LOSSES = 3
LIMIT_S = 900.0  # the whole run, packing the archive included
TMPFS_BYTES = 256 << 20  # the executors' /tmp (tests/e2e/cluster.py)


def too_large_archive(build: str) -> str:
    """The slim environment of this Python's venv plus a member of random
    (incompressible) bytes: a .tar.gz larger than the executors' /tmp."""
    os.makedirs(build)
    slim = os.path.join(build, "slim.tar.gz")
    pack_env.pack(sys.prefix, slim, [], False)
    padding = os.path.join(build, "padding.bin")
    with open(padding, "wb") as f:
        for _ in range(TMPFS_BYTES // (16 << 20) + 1):
            f.write(os.urandom(16 << 20))
    out = os.path.join(build, "env.tar.gz")
    with tarfile.open(slim) as src, tarfile.open(out, "w:gz", compresslevel=1) as dst:
        for member in src:
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        dst.add(padding, arcname="padding.bin")
    assert os.path.getsize(out) > TMPFS_BYTES
    return out


def test_executors_that_cannot_unpack_the_archive_end_the_run_with_exit_6(tmp_path):
    pytest.importorskip("venv_pack")
    with isolated_cluster(cores=1, memory="1g", timeout=180, hide=[ROOT]) as iso:
        text = os.path.join(iso.store, "train.txt")
        write_maxent_text(text, n_events=300)
        prepared = os.path.join(iso.store, "prepared")
        assert prepare_main(["--input", text, "--format", "maxent", "--output", prepared]) == 0
        out = os.path.join(iso.store, "run")
        archive = too_large_archive(str(tmp_path / "build"))  # outside the store
        env = submit_env()
        sets = [
            "train.method=grafting",
            "train.backend=spark",
            "data.in_process_max_events=0",
            f"spark.max_executor_losses={LOSSES}",
            "spark.no_executor_timeout_s=60",
        ]
        cmd = [
            SUBMIT,
            *("--master", iso.master_url, "--conf", "spark.executor.memory=768m"),
            *("--env-archive", archive, "train", "--train", "file://" + prepared),
            *("--output", "file://" + out),
            *[a for s in sets for a in ("--set", s)],
        ]
        t0 = time.monotonic()
        r = subprocess.run(
            cmd, cwd=iso.driver_dir, env=env, capture_output=True, text=True, timeout=LIMIT_S
        )
        took = time.monotonic() - t0
    assert r.returncode == EXIT_STALLED, (r.returncode, r.stderr[-6000:])
    with tarfile.open(archive) as tar:  # the slim environment
        assert not [n for n in tar.getnames() if "/site-packages/pyspark/" in n]
    error = r.stderr[r.stderr.index("error: ") :]
    print(f"exit {r.returncode} after {took:.0f} s: {error}")  # shown with pytest -rP
    assert f"spark.max_executor_losses = {LOSSES}" in error, error
    assert "No space left on device" in error, error
    assert os.path.join(out, "checkpoint") in error, error
    assert took < LIMIT_S
