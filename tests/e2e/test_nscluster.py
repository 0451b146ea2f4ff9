"""Issue 17 acceptance, as it fails in production: a standalone cluster
whose worker runs in its own mount namespace (tests/e2e/cluster.py,
``isolated_cluster``), with a private tmpfs over ``/tmp``, over the
driver's working directory and over this repository, so that the only
directory the driver and the executors share is the store, passed to the
jobs as ``file:///...``.

The executors get the Python environment the way spark-submit ships it:
scripts/submit.sh with the venv's real path when the worker can see it
(``--python-env local``; kept visible to the worker).

``test_executors_do_not_see_the_drivers_disk`` proves the harness and is in
the default suite (one cluster start and one short application).
``test_jobs_on_the_isolated_cluster_match_local_mode`` runs prepare, a
grafting train killed mid-run and resumed, predict and evaluate through
submit.sh, on the cluster and in local mode: marked slow (a dozen
spark-submit runs, several minutes on a shared 2-core machine); .ci/run
runs it.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import numpy as np
import pyarrow.parquet as pq
import pytest

from sparkmaxent.model import MaxentModel
from tests.e2e.cluster import (
    IsolatedCluster,
    isolated_cluster,
    isolation_unavailable,
    namespace_pids,
    run_isolated,
)
from tests.e2e.test_cluster import ROOT, SUBMIT, run_submit, submit_env, write_maxent_text

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.ci,  # its slow tests run in .ci/run
    pytest.mark.skipif(bool(isolation_unavailable()), reason=isolation_unavailable() or "ok"),
]

EXECUTOR = ["--conf", "spark.executor.memory=768m"]


def venv_python() -> str:
    """The venv's interpreter by its real path (``.venv`` in a worktree may
    be a symlink into a directory the worker can see)."""
    return os.path.join(os.path.realpath(sys.prefix), "bin", "python")


def python_env(iso: IsolatedCluster) -> tuple[dict[str, str], list[str]]:
    """submit.sh's environment and options that get the executors a Python:
    the venv's own path, which ``isolated`` keeps visible to the worker even
    inside the hidden checkout (archive mode would unpack the whole venv
    into the worker's small private /tmp)."""
    env = submit_env()
    env["PYTHON"] = venv_python()
    env["BUILD_DIR"] = os.path.join(iso.driver_dir, "build")
    return env, ["--python-env", "local"]


@pytest.fixture(scope="module")
def iso() -> Iterator[IsolatedCluster]:
    with isolated_cluster(cores=2, memory="2g", timeout=120, hide=[ROOT]) as c:
        namespace = os.readlink(f"/proc/{c.cluster.worker_pid}/ns/mnt")
        yield c
    # torn down: no process is left in the worker's namespace (so no mounts)
    assert namespace_pids(namespace) == []
    assert not os.path.exists(c.store)


def submit(iso: IsolatedCluster, args: list[str], master: str = "", timeout: float = 300.0):
    """scripts/submit.sh from the driver directory, on the cluster (or on
    ``master``)."""
    env, pyenv = python_env(iso)
    master = master or iso.master_url
    return run_submit(
        ["--master", master, *EXECUTOR, *pyenv, *args], timeout=timeout, env=env, cwd=iso.driver_dir
    )


def test_executors_do_not_see_the_drivers_disk(iso, tmp_path):
    """A file the driver wrote in its /tmp, one in its working directory and
    this repository are invisible to the executors; the store is shared."""
    secret = tmp_path / "driver-only.txt"  # under the driver's /tmp
    secret.write_text("driver")
    in_cwd = os.path.join(iso.driver_dir, "cwd-only.txt")
    with open(in_cwd, "w") as f:
        f.write("driver")
    shared = os.path.join(iso.store, "shared.txt")
    with open(shared, "w") as f:
        f.write("store")
    out = os.path.join(iso.store, "seen.json")
    script = os.path.join(iso.store, "probe.py")
    paths = [str(secret), in_cwd, os.path.join(ROOT, "pyproject.toml"), shared]
    with open(script, "w") as f:
        f.write(
            "import json, sys\n"
            "from pyspark.sql import SparkSession\n"
            "spark = SparkSession.builder.appName('probe').getOrCreate()\n"
            f"paths = {paths!r}\n"
            "def probe(_):\n"
            "    import os, sys\n"
            "    yield [os.path.exists(p) for p in paths] + [sys.executable]\n"
            "seen = spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()\n"
            f"json.dump(seen, open({out!r}, 'w'))\n"
            "spark.stop()\n"
        )
    r = submit(iso, [script])
    assert r.returncode == 0, r.stdout[-4000:]
    with open(out) as f:
        ((*exists, executable),) = json.load(f)
    os.remove(in_cwd)
    assert exists == [False, False, False, True], dict(zip(paths, exists))
    # the executor ran on the cluster's worker, in its work directory's namespace
    assert iso.cluster.app_dirs(), iso.cluster.logs()
    assert os.path.realpath(executable) == os.path.realpath(venv_python()) or executable.endswith(
        os.path.join("env", "bin", "python")
    )


# ---- the acceptance test -----------------------------------------------------

GRAFTING = [
    "--set",
    "train.method=grafting",
    "--set",
    "train.grafting.l1=1e-3",
    "--set",
    "train.grafting.n_best=1",
    "--set",
    "train.selection.max_rounds=6",
    "--set",
    "train.selection.plots=false",
    "--set",
    "train.backend=spark",
    "--set",
    "data.in_process_max_events=0",  # small data too: the passes run on the executors
    "--set",
    "data.partitions=2",
]


def _round(run: str) -> int:
    try:
        with open(os.path.join(run, "checkpoint", "state.json")) as f:
            return int(json.load(f)["round"])
    except (OSError, ValueError, KeyError):
        return 0


def _kill_after_first_checkpoint(iso: IsolatedCluster, args: list[str], run: str) -> str:
    """Start submit.sh train, SIGKILL its process group once the checkpoint
    in ``run`` (a local path) has a round; returns its output."""
    env, pyenv = python_env(iso)
    proc = subprocess.Popen(
        [SUBMIT, "--master", iso.master_url, *EXECUTOR, *pyenv, *args],
        cwd=iso.driver_dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    try:
        while _round(run) < 1 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        alive = proc.poll() is None
        if alive:
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    assert alive, f"train ended (exit {proc.returncode}) before it could be killed:\n{out[-6000:]}"
    assert _round(run) >= 1, f"no checkpoint in {run} within 300 s:\n{out[-6000:]}"
    return out


def _jobs(iso: IsolatedCluster, master: str, base_uri: str, base: str, kill: bool) -> dict:
    """prepare, train (killed and resumed if ``kill``), predict, evaluate;
    outputs under ``base_uri`` (``base`` is the same place as a local path)."""
    text = os.path.join(iso.store, "input", "train.txt")
    run_uri, prep_uri = f"{base_uri}/run", f"{base_uri}/prepared"
    r = submit(
        iso,
        [
            "prepare",
            *("--input", "file://" + text, "--format", "maxent", "--output", prep_uri),
            *("--set", "data.in_process_max_events=0"),  # small input too: parsed on executors
        ],
        master,
    )
    assert r.returncode == 0, f"prepare failed:\n{r.stdout[-6000:]}"
    assert os.path.isfile(os.path.join(base, "prepared", "dataset.json")), (
        f"prepare exited 0 but wrote no {prep_uri}/dataset.json"
    )
    train = ["train", "--train", prep_uri, "--output", run_uri, *GRAFTING]
    if kill:
        out = _kill_after_first_checkpoint(iso, train, os.path.join(base, "run"))
        assert 1 <= _round(os.path.join(base, "run")) < 6, out[-3000:]
        train = [*train, "--resume"]
    r = submit(iso, train, master)
    assert r.returncode == 0, f"train failed:\n{r.stdout[-6000:]}"
    model = f"{run_uri}/model"
    r = submit(
        iso,
        ["predict", "--model", model, "--input", prep_uri, "--output", f"{base_uri}/pred"],
        master,
    )
    assert r.returncode == 0, f"predict failed:\n{r.stdout[-6000:]}"
    report = f"{base_uri}/eval.json"
    r = submit(iso, ["evaluate", "--model", model, "--input", prep_uri, "--report", report], master)
    assert r.returncode == 0, f"evaluate failed:\n{r.stdout[-6000:]}"
    with open(os.path.join(base, "eval.json")) as f:
        figures = json.load(f)
    pred = pq.read_table(os.path.join(base, "pred")).to_pandas().sort_values("event_id")
    return {
        "model": MaxentModel.load(os.path.join(base, "run", "model")),
        "figures": figures,
        "predicted": list(pred["predicted"]),
    }


@pytest.mark.slow
def test_jobs_on_the_isolated_cluster_match_local_mode(iso):
    os.makedirs(os.path.join(iso.store, "input"))
    write_maxent_text(os.path.join(iso.store, "input", "train.txt"), n_events=600, seed=3)
    cluster = _jobs(iso, iso.master_url, f"{iso.store_uri}/cluster", f"{iso.store}/cluster", True)
    local = _jobs(iso, "local[2]", f"{iso.store_uri}/local", f"{iso.store}/local", False)
    a, b = cluster["model"].weights, local["model"].weights
    assert np.array_equal(a.active_ids(), b.active_ids())
    np.testing.assert_allclose(a.values, b.values, rtol=0, atol=1e-9)
    assert a.bias is not None and b.bias is not None
    np.testing.assert_allclose(a.bias, b.bias, rtol=0, atol=1e-9)
    assert cluster["figures"]["accuracy"] == local["figures"]["accuracy"]
    assert cluster["figures"]["per_label"] == local["figures"]["per_label"]
    assert cluster["predicted"] == local["predicted"]
    # nothing reached the driver's working directory but the package build
    assert sorted(os.listdir(iso.driver_dir)) == ["build"]


# ---- the driver writes nothing on its own disk --------------------------------

SCRATCH = "/tmp/sparkmaxent-scratch"  # inside the driver's private /tmp


def test_run_isolated_lists_what_is_left_in_the_private_mounts(tmp_path):
    """The harness of the test below: what a command leaves in the private
    /tmp and working directory is listed, and never reaches the real ones."""
    top = tempfile.mkdtemp(prefix="sparkmaxent-isolated-run-", dir="/var/tmp")
    try:
        cwd = os.path.join(top, "cwd")
        os.makedirs(cwd)
        marker = tmp_path / "hidden-from-the-namespace"
        marker.write_text("x")
        commands = [
            ["test", "!", "-e", str(marker)],
            ["touch", "/tmp/left-behind"],
            ["mkdir", "sub"],
        ]
        rc, out, left = run_isolated(
            commands, ["/tmp", cwd], cwd, os.path.join(top, "listing.txt"), timeout=60
        )
        assert rc == 0, out
        assert sorted(left) == ["/tmp/left-behind", os.path.join(cwd, "sub")]
        assert not os.path.exists("/tmp/left-behind") and os.listdir(cwd) == []
        rc, out, left = run_isolated(
            [["false"], ["touch", "never"]], ["/tmp", cwd], cwd, os.path.join(top, "l2.txt")
        )
        assert rc == 1 and left == []
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["uri", "path"])
def test_driver_writes_nothing_outside_its_paths_and_scratch(form):
    """prepare, grafting train, predict and evaluate through submit.sh
    (local[2]), the driver in its own mount namespace with a private tmpfs
    over /tmp and over its working directory: afterwards those hold nothing
    but the configured scratch directory (spark.local.dir, the JVM's and
    Python's temporary directory, submit.sh's build) and the JVMs' own
    ``/tmp/hsperfdata_<user>`` (HotSpot puts it there whatever
    java.io.tmpdir says). Inputs and outputs are
    in a store outside both, as ``file://`` URIs or as plain paths."""
    top = tempfile.mkdtemp(prefix="sparkmaxent-driverdisk-", dir="/var/tmp")
    try:
        store, cwd = os.path.join(top, "store"), os.path.join(top, "cwd")
        os.makedirs(os.path.join(store, "input"))
        os.makedirs(cwd)
        write_maxent_text(os.path.join(store, "input", "train.txt"), n_events=300, seed=4)
        uri = "file://" + store if form == "uri" else store
        env = submit_env()
        env.update(PYTHON=venv_python(), BUILD_DIR=f"{SCRATCH}/build", TMPDIR=SCRATCH)
        spark = [
            "--master",
            "local[2]",
            "--conf",
            f"spark.local.dir={SCRATCH}",
            "--driver-java-options",
            f"-Djava.io.tmpdir={SCRATCH}",
        ]
        job = [SUBMIT, *spark]
        prep, model = f"{uri}/prepared", f"{uri}/run/model"
        commands = [
            ["mkdir", "-p", SCRATCH],
            [*job, "prepare", "--input", f"{uri}/input/train.txt", "--format", "maxent"]
            + ["--output", prep],
            [*job, "train", "--train", prep, "--output", f"{uri}/run", *GRAFTING],
            [*job, "predict", "--model", model, "--input", prep, "--output", f"{uri}/pred"],
            [*job, "evaluate", "--model", model, "--input", prep, "--report", f"{uri}/eval.json"],
        ]
        rc, out, left = run_isolated(
            commands, ["/tmp", cwd], cwd, os.path.join(top, "listing.txt"), env, timeout=900
        )
        jvm = f"/tmp/hsperfdata_{pwd.getpwuid(os.getuid()).pw_name}"
        outside = [
            p for p in left if not any(p == d or p.startswith(d + "/") for d in (SCRATCH, jvm))
        ]
        assert rc == 0, f"{out[-6000:]}\nwritten on the driver's disk: {outside[:40]}"
        assert outside == [], f"written on the driver's disk: {outside[:40]}"
        # the outputs went to the store, and the scratch was used
        for name in ("prepared/dataset.json", "run/model/metadata.json", "eval.json"):
            assert os.path.isfile(os.path.join(store, name)), name
        assert os.path.isdir(os.path.join(store, "pred"))
        assert f"{SCRATCH}/build/sparkmaxent.zip" in left
    finally:
        shutil.rmtree(top, ignore_errors=True)
