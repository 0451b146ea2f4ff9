"""Grafting through the jobs: run report, plots, checkpoints and --resume,
including a run killed mid-way (slow)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from sparkmaxent.cli import job_main
from sparkmaxent.model import MaxentModel

train_main = job_main("train")
pipeline_main = job_main("pipeline")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = (
    "data.synthetic = {n_events = 4000, n_predicates = 400, n_labels = 4, n_support = 16, "
    "n_copies = 2, n_conjunctions = 1, min_support_count = 40, seed = 5}"
)
GRAFT = [
    "--set",
    "train.method=grafting",
    "--set",
    "train.grafting.l1=2e-3",
    "--set",
    "train.grafting.n_best=3",
    "--set",
    "data.partitions=2",
    "--set",
    "train.backend=local",
]


@pytest.fixture(scope="module")
def interrupted(spark, tmp_path_factory):
    """A pipeline stopped after 2 rounds (max_rounds), as an interrupted run."""
    out = tmp_path_factory.mktemp("graft-pipeline")
    assert (
        pipeline_main(
            ["--set", DATA, *GRAFT, "--set", "train.selection.max_rounds=2", "--output", str(out)]
        )
        == 0
    )
    return out


def test_pipeline_report_has_rounds_certificate_and_plots(interrupted):
    report = json.load(open(interrupted / "report.json"))["train"]
    assert report["method"] == "grafting" and report["rounds_run"] == 2
    assert len(report["rounds"]) == 2 and not report["converged"]
    assert "kkt" in report and report["stopped"] == "max_rounds = 2"
    state = json.load(open(interrupted / "checkpoint" / "state.json"))
    assert state["round"] == 2 and state["method"] == "grafting"
    assert os.path.exists(interrupted / "plots" / "objective.png")


def test_resume_continues_to_the_model_of_an_uninterrupted_run(spark, interrupted, tmp_path):
    train_dir = json.load(open(interrupted / "report.json"))["datasets"]["train"]
    assert train_main(["--train", train_dir, *GRAFT, "--output", str(interrupted), "--resume"]) == 0
    resumed = json.load(open(interrupted / "train_report.json"))
    assert resumed["rounds"][:2] == json.load(open(interrupted / "report.json"))["train"]["rounds"]
    assert resumed["converged"] and resumed["kkt"]["passed"] and resumed["rounds_run"] > 2
    whole_dir = tmp_path / "whole"
    assert train_main(["--train", train_dir, *GRAFT, "--output", str(whole_dir)]) == 0
    whole = json.load(open(whole_dir / "train_report.json"))
    assert resumed["objective"] == whole["objective"]
    a, b = MaxentModel.load(str(interrupted / "model")), MaxentModel.load(str(whole_dir / "model"))
    assert a.weights.ids.tolist() == b.weights.ids.tolist()
    np.testing.assert_array_equal(a.weights.values, b.weights.values)
    # a different l1 does not resume this checkpoint
    assert (
        train_main(
            [
                "--train",
                train_dir,
                *GRAFT,
                "--set",
                "train.grafting.l1=1e-3",
                "--output",
                str(interrupted),
                "--resume",
            ]
        )
        == 2
    )


@pytest.mark.slow
def test_a_killed_training_job_resumes_to_the_same_model(spark, interrupted, tmp_path):
    """SIGKILL a jobs/train.py process once it has checkpointed round 3, then
    resume it in this process."""
    train_dir = json.load(open(interrupted / "report.json"))["datasets"]["train"]
    args = ["--train", train_dir, *GRAFT, "--set", "train.grafting.n_best=1"]
    out = tmp_path / "killed"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": ROOT}
    proc = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "jobs", "train.py"), *args, "--output", str(out)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state_path = out / "checkpoint" / "state.json"
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None:
            if state_path.exists() and json.load(open(state_path))["round"] >= 3:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the job ended before it could be killed"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    killed_at = json.load(open(state_path))["round"]
    assert killed_at >= 3 and not (out / "model").exists()
    assert train_main([*args, "--output", str(out), "--resume"]) == 0
    whole = tmp_path / "whole"
    assert train_main([*args, "--output", str(whole)]) == 0
    a, b = MaxentModel.load(str(out / "model")), MaxentModel.load(str(whole / "model"))
    assert a.weights.ids.tolist() == b.weights.ids.tolist()
    np.testing.assert_array_equal(a.weights.values, b.weights.values)
    assert json.load(open(out / "train_report.json"))["rounds_run"] > killed_at
