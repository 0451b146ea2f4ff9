"""Kills inside predict, evaluate and pipeline (issue 40 item 4): the real command
(``python -m sparkmaxent``, with its JVM) SIGKILLed at a seeded pass
through each storage step it reaches (``SPARKMAXENT_FAULT``,
sparkmaxent/storage/faults.py): ``write`` (the scratch dataset's files,
evaluate's report, pipeline's datasets, model and reports) and
``publish`` (the scratch dataset, the predictions, pipeline's datasets and model).
Then: no half-written output is visible, and the next run sweeps what the
killed one left (its scratch, temporaries and lock) and gives the
uninterrupted run's result. Slow: each kill starts a JVM."""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile

import pytest

from sparkmaxent import storage
from sparkmaxent.cli import job_main

from .faulting import counting, fit, leftovers, make_data, run_killed, seeded

pytestmark = pytest.mark.slow

predict_main = job_main("predict")
evaluate_main = job_main("evaluate")
CLI = [sys.executable, "-m", "sparkmaxent"]
SMALL = ["--set", "data.in_process_max_events=100000"]


@pytest.fixture(scope="module")
def data(spark, tmp_path_factory):
    data = make_data(spark, tmp_path_factory.mktemp("scoring"))
    fit(data, "l2", data / "run")
    return data


def scoring_args(data, *more: str) -> list[str]:
    model = str(data / "run" / "model")
    return ["--model", model, "--input", str(data / "b.txt"), "--format", "maxent", *SMALL, *more]


def _rows(path) -> list:
    return sorted(map(str, storage.read_parquet(str(path)).to_pylist()))


@pytest.mark.parametrize("point", ["write", "publish"])
def test_predict_killed_at_a_storage_step_leaves_nothing_and_the_next_run_succeeds(
    data, point, tmp_path
):
    ref, out = tmp_path / "ref", tmp_path / "preds"
    seen = counting(lambda: predict_main(scoring_args(data, "--output", str(ref))))
    n = seeded(f"predict:{point}", seen[point])
    run_killed([*CLI, "predict", *scoring_args(data, "--output", str(out))], f"{point}:{n}")
    assert not out.exists()  # never half-written: published whole or not at all
    assert leftovers(out)  # the killed run's lock (and scratch)
    assert predict_main(scoring_args(data, "--output", str(out))) == 0
    assert _rows(out) == _rows(ref)
    assert leftovers(out) == []
    assert sorted(os.listdir(tmp_path)) == ["preds", "ref"]


@pytest.mark.parametrize("point", ["write", "publish"])
def test_evaluate_killed_at_a_storage_step_leaves_nothing_and_the_next_run_succeeds(
    data, point, tmp_path
):
    """With --report: scratch beside the report, swept under its lock."""
    ref, report = tmp_path / "ref.json", tmp_path / "report.json"
    seen = counting(lambda: evaluate_main(scoring_args(data, "--report", str(ref))))
    n = seeded(f"evaluate:{point}", seen[point])
    run_killed([*CLI, "evaluate", *scoring_args(data, "--report", str(report))], f"{point}:{n}")
    assert not report.exists()  # the report is written last, atomically
    assert leftovers(report)
    assert evaluate_main(scoring_args(data, "--report", str(report))) == 0
    assert json.load(open(report)) == json.load(open(ref))
    assert leftovers(report) == []
    assert sorted(os.listdir(tmp_path)) == ["ref.json", "report.json"]


def test_evaluate_killed_with_driver_temp_scratch_is_swept_by_the_next_evaluate(data, caplog):
    """Without --report (a local master): scratch in the driver's temporary
    directory, named by host and pid; the next evaluate removes it."""
    base, host = tempfile.gettempdir(), socket.gethostname()

    def scratch_dirs() -> set[str]:
        return {n for n in os.listdir(base) if n.startswith(f"sparkmaxent-eval-{host}-")}

    before = scratch_dirs()
    n = seeded(
        "evaluate-temp:publish", counting(lambda: evaluate_main(scoring_args(data)))["publish"]
    )
    run_killed([*CLI, "evaluate", *scoring_args(data)], f"publish:{n}")
    left = scratch_dirs() - before
    assert len(left) == 1  # the killed run's, with its half-prepared dataset
    with caplog.at_level("WARNING"):
        assert evaluate_main(scoring_args(data)) == 0
    assert f"removed {os.path.join(base, left.pop())}, left by a killed run" in caplog.text
    assert scratch_dirs() - before == set()


pipeline_main = job_main("pipeline")


def pipeline_args(data, out, *more: str) -> list[str]:
    sets = [
        f"data.train_inputs=['{data / 'a.txt'}']",
        f"data.test_inputs=['{data / 'b.txt'}']",
        "data.format='maxent'",
        "train.method='l2'",
        "train.l2=1e-3",
        "data.in_process_max_events=100000",
        *more,
    ]
    return [*(a for s in sets for a in ("--set", s)), "--output", str(out)]


@pytest.mark.parametrize("point", ["write", "publish"])
def test_pipeline_killed_at_a_storage_step_leaves_nothing_half_written_and_a_rerun_succeeds(
    data, point, tmp_path
):
    """Kill points among its prepared datasets, model and reports: the
    report (written last) is absent, the model absent or complete; a rerun
    with output.overwrite sweeps the leftovers and equals an uninterrupted run."""
    ref, out = tmp_path / "ref", tmp_path / "run"
    seen = counting(lambda: pipeline_main(pipeline_args(data, ref)))
    n = seeded(f"pipeline:{point}", seen[point])
    run_killed([*CLI, "pipeline", *pipeline_args(data, out)], f"{point}:{n}")
    assert not (out / "report.json").exists()
    if (out / "model").exists():  # published whole before the kill
        assert (out / "model" / "metadata.json").exists()
    assert pipeline_main(pipeline_args(data, out, "output.overwrite=true")) == 0
    got, want = json.load(open(out / "report.json")), json.load(open(ref / "report.json"))
    assert got["train"]["objective"] == pytest.approx(want["train"]["objective"], rel=1e-12)
    assert got["test"]["accuracy"] == want["test"]["accuracy"]
    assert leftovers(out) == []


def test_predict_overwrite_killed_while_replacing_its_predictions_keeps_the_old_ones(
    data, tmp_path, capsys
):
    """``predict --overwrite`` killed between publish's renames (``swap``:
    the old predictions moved aside, the new ones not yet in): the next
    predict puts the old ones back and, without --overwrite, refuses them
    (exit 2, naming them) with their rows intact; with it, the predictions
    of an uninterrupted run."""
    out, ref = tmp_path / "preds", tmp_path / "ref"
    old_input = scoring_args(data, "--output", str(out))
    old_input[old_input.index(str(data / "b.txt"))] = str(data / "a.txt")
    assert predict_main(old_input) == 0
    old = _rows(out)
    assert predict_main(scoring_args(data, "--output", str(ref))) == 0
    assert _rows(ref) != old
    new = scoring_args(data, "--output", str(out), "--overwrite")
    run_killed([*CLI, "predict", *new], "swap:1")
    assert not out.exists()  # only in its .old- sibling now
    assert [p for p in os.listdir(tmp_path) if p.startswith(".preds.old-")]
    capsys.readouterr()
    assert predict_main(scoring_args(data, "--output", str(out))) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(out) in err and "exists" in err, err
    assert _rows(out) == old  # nothing lost
    assert predict_main(new) == 0
    assert _rows(out) == _rows(ref)
    assert leftovers(out) == []
    assert sorted(os.listdir(tmp_path)) == ["preds", "ref"]
