"""The fault suite through the real job processes (slow: a JVM per job):
``python -m sparkmaxent`` and ``jobs/*.py`` SIGKILLed at seeded points of
prepare and train (in-process and on Spark executors), then recovered as
documented. The default subset, with the helpers: test_faults.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from sparkmaxent.cli import job_main
from sparkmaxent.data.prepare import prepare

from .faulting import (
    ENV,
    ROOT,
    assert_same_model,
    cli_args,
    counting,
    dataset_identity,
    fit,
    leftovers,
    make_data,
    model_of,
    run_killed,
    seeded,
)

pytestmark = pytest.mark.slow

prepare_main = job_main("prepare")
train_main = job_main("train")


@pytest.fixture(scope="module")
def data(spark, tmp_path_factory):
    return make_data(spark, tmp_path_factory.mktemp("faults-jobs"))


@pytest.mark.parametrize("point", ["write", "publish"])
def test_a_prepare_job_killed_at_a_seeded_point_reruns_to_the_same_dataset(
    spark,
    data,
    point,
    tmp_path,
):
    """``python -m sparkmaxent prepare`` killed writing dataset.json or
    about to publish; a re-run (the lock and temporaries of the killed
    run recovered) gives the uninterrupted run's dataset."""
    seen = counting(
        lambda: prepare(spark, [str(data / "a.txt")], str(tmp_path / "whole"), "maxent")
    )
    n = seeded(f"prepare:{point}", seen[point])
    out = tmp_path / "ds"
    args = ["--input", str(data / "a.txt"), "--format", "maxent", "--output", str(out)]
    run_killed([sys.executable, "-m", "sparkmaxent", "prepare", *args], f"{point}:{n}")
    assert not out.exists()
    assert prepare_main(args) == 0
    assert dataset_identity(out) == dataset_identity(tmp_path / "whole")
    assert leftovers(out) == []


@pytest.mark.parametrize(
    "name, entry",
    [("grafting", "module"), ("sgc", "jobs"), ("bayes-factor", "module"), ("l2", "jobs")],
)
def test_a_train_job_killed_at_a_seeded_write_resumes_to_the_same_model(
    data,
    name,
    entry,
    tmp_path,
):
    whole = tmp_path / "whole"
    n = seeded(f"job:{name}:write", fit(data, name, whole)["write"])
    out = tmp_path / "run"
    args = cli_args(data, name, out)
    cmd = (
        [sys.executable, "-m", "sparkmaxent", "train"]
        if entry == "module"
        else [sys.executable, os.path.join(ROOT, "jobs", "train.py")]
    )
    run_killed([*cmd, *args], f"write:{n}")
    r = subprocess.run(
        [*cmd, *args, "--resume"],
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert_same_model(model_of(out), model_of(whole))
    assert leftovers(out) == []


def test_a_spark_train_job_killed_mid_pass_resumes_to_the_same_model(
    data,
    tmp_path,
):
    """Grafting on the Spark executors (data.in_process_max_events = 0)
    SIGKILLed a seeded time after its second checkpoint, wherever it is
    (a pass, a Newton step, a checkpoint write); ``--resume`` in this
    process gives the model of an uninterrupted run on Spark: the same
    features and weights to 1e-9; the unpenalized bias to 1e-7, as Spark
    merges the partitions' partial sums in no fixed order and the solver
    fixes the bias only to its tolerance."""
    on_spark = ("data.in_process_max_events=0", "data.partitions=2")  # the same blocks everywhere
    whole = tmp_path / "whole"
    assert train_main(cli_args(data, "grafting", whole, *on_spark)) == 0
    out = tmp_path / "run"
    args = cli_args(data, "grafting", out, *on_spark)
    env = {**os.environ, **ENV}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparkmaxent", "train", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state = out / "checkpoint" / "state.json"
    delay = (seeded("spark:delay", 20) - 1) / 10  # 0 to 1.9 s
    deadline = time.time() + 600
    try:
        while time.time() < deadline and proc.poll() is None:
            if state.exists() and json.load(open(state))["round"] >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the job ended before it could be killed"
        time.sleep(delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert train_main([*args, "--resume"]) == 0
    assert_same_model(model_of(out), model_of(whole), bias_atol=1e-7)
    assert leftovers(out) == []
