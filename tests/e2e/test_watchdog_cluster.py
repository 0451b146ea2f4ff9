"""Issue 23 item 3, hang-free runs, on a real standalone cluster: a grafting
run whose only worker dies mid-run stops with exit code 6 and a message
(spark.no_executor_timeout_s) instead of waiting forever, and resumes on a
new worker to the model of an uninterrupted run.

The cluster's own worker offers too little memory for the job's executors
(512m < spark.executor.memory = 768m), so the job runs on an extra worker
that the test kills (SIGKILL, with its executors) after the first round's
checkpoint, and a second extra worker serves the resumed run.

Marked slow: about 6.5 minutes on a busy 2-core machine (a cluster, two
spark-submit runs, 20 s of waiting, two in-process runs); run it with
``-m slow`` or ``-m cluster``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

from sparkmaxent.cli import EXIT_STALLED, job_main
from sparkmaxent.model import MaxentModel
from tests.e2e.cluster import extra_worker, standalone_cluster
from tests.e2e.test_cluster import ROOT, SUBMIT, run_submit, submit_env

train_main = job_main("train")
pipeline_main = job_main("pipeline")

NO_EXECUTOR_TIMEOUT_S = 20
DATA = (
    "data.synthetic = {n_events = 4000, n_predicates = 400, n_labels = 4, n_support = 16, "
    "n_copies = 2, n_conjunctions = 1, min_support_count = 40, seed = 5}"
)
TRAIN = [
    "--set",
    "train.method=grafting",
    "--set",
    "train.grafting.l1=2e-3",
    "--set",
    "train.grafting.n_best=1",
    "--set",
    "train.selection.max_rounds=4",
    "--set",
    "train.selection.plots=false",
    "--set",
    "data.partitions=2",
    "--set",
    "train.backend=spark",
    "--set",
    "data.in_process_max_events=0",  # small data too: the passes run on the executors
]
EXECUTOR = ["--conf", "spark.executor.memory=768m"]
RUN_TIMEOUT = 240.0  # seconds for a job to reach its first checkpoint, or to finish


def _round(out) -> int:
    try:
        with open(os.path.join(out, "checkpoint", "state.json")) as f:
            return json.load(f)["round"]
    except (OSError, ValueError, KeyError):
        return 0


def _weights(run_dir):
    return MaxentModel.load(os.path.join(run_dir, "model")).weights


@pytest.mark.slow
@pytest.mark.cluster
def test_a_run_whose_only_worker_dies_exits_6_then_resumes_to_the_same_model(spark, tmp_path):
    started = time.monotonic()
    # a prepared dataset and the uninterrupted run's model, in this process (local[2])
    prep = str(tmp_path / "prep")
    assert (
        pipeline_main(
            [
                "--set",
                DATA,
                *TRAIN,
                "--set",
                "train.backend=local",
                "--set",
                "train.selection.max_rounds=1",
                "--output",
                prep,
            ]
        )
        == 0
    )
    with open(os.path.join(prep, "report.json")) as f:
        train_dir = json.load(f)["datasets"]["train"]
    whole = str(tmp_path / "whole")
    assert train_main(["--train", train_dir, *TRAIN, "--output", whole]) == 0

    out = str(tmp_path / "run")
    job = [
        "train",
        "--train",
        train_dir,
        *TRAIN,
        "--output",
        out,
        "--set",
        f"spark.no_executor_timeout_s={NO_EXECUTOR_TIMEOUT_S}",
    ]
    log_path = str(tmp_path / "driver.log")
    with standalone_cluster(cores=1, memory="512m", timeout=120) as cluster:
        with (
            extra_worker(cluster, cores=2, memory="2g", timeout=120) as worker,
            open(log_path, "w") as log,
        ):
            driver = subprocess.Popen(
                [SUBMIT, "--master", cluster.master_url, *EXECUTOR, *job],
                cwd=ROOT,
                env=submit_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                start_new_session=True,
            )
            try:
                deadline = time.monotonic() + RUN_TIMEOUT
                while _round(out) < 1 and driver.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert driver.poll() is None and _round(out) == 1, (
                    f"no first-round checkpoint while running:\n{open(log_path).read()[-4000:]}"
                )
                os.killpg(worker.pid, signal.SIGKILL)  # the only worker dies, executors too
                killed = time.monotonic()
                try:
                    code = driver.wait(timeout=NO_EXECUTOR_TIMEOUT_S + 60)
                except subprocess.TimeoutExpired:
                    pytest.fail(
                        f"the run still waits {NO_EXECUTOR_TIMEOUT_S + 60} s after its "
                        f"only worker died:\n{open(log_path).read()[-4000:]}"
                    )
                stopped_after = time.monotonic() - killed
            finally:
                if driver.poll() is None:
                    os.killpg(driver.pid, signal.SIGKILL)
                    driver.wait()
        text = open(log_path).read()
        assert code == EXIT_STALLED, text[-4000:]
        assert stopped_after >= NO_EXECUTOR_TIMEOUT_S - 2, stopped_after
        assert "cancelled: no executors for" in text, text[-4000:]
        assert f"spark.no_executor_timeout_s = {NO_EXECUTOR_TIMEOUT_S}" in text
        assert f"{os.path.join(out, 'checkpoint')} after round 1" in text
        assert "sparkmaxent train --resume" in text
        assert not os.path.exists(os.path.join(out, "model"))

        with extra_worker(cluster, cores=2, memory="2g", timeout=120):
            r = run_submit(
                ["--master", cluster.master_url, *EXECUTOR, *job, "--resume"], timeout=RUN_TIMEOUT
            )
        assert r.returncode == 0, r.stdout[-4000:]
        assert "resuming grafting after round 1" in r.stdout

    a, b = _weights(out), _weights(whole)
    assert a.ids.tolist() == b.ids.tolist()
    scale = np.max(np.abs(b.values), initial=0.0)
    np.testing.assert_allclose(a.values, b.values, rtol=1e-9, atol=1e-9 * scale)
    if b.bias is not None:
        np.testing.assert_allclose(a.bias, b.bias, rtol=1e-9, atol=1e-9 * scale)
    with open(os.path.join(out, "train_report.json")) as f:
        assert json.load(f)["rounds_run"] == 4
    print(
        "\n"
        + "\n".join(
            line
            for line in text.splitlines()
            if "error:" in line or line.startswith(("last checkpoint", "no checkpoint"))
        )
    )
    print(
        f"watchdog cluster test: stopped {stopped_after:.1f} s after the worker died "
        f"(timeout {NO_EXECUTOR_TIMEOUT_S} s); whole test {time.monotonic() - started:.0f} s"
    )
