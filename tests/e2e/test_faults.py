"""Fault injection (issue 23): jobs SIGKILLed at seeded points of every
training method's rounds, checkpoint writes and model publishing, and of
prepare's publishing (``SPARKMAXENT_FAULT``, sparkmaxent/storage/faults.py);
corrupted checkpoints and models. Each is followed by the documented
recovery (``--resume``, a re-run, ``--overwrite``) and checked: no earlier
good output is lost, nothing is left behind, and the result equals an
uninterrupted run's (weights to 1e-9).

The killed training jobs run ``api.fit`` in a fresh Python process without
a JVM (small data trains in-process, ``data.in_process_max_events``), so
every method fits in the default suite; the same kills through
``python -m sparkmaxent`` and ``jobs/*.py`` are in test_faults_jobs.py
(slow). ``SPARKMAXENT_FAULT_SEED`` picks other kill points."""

from __future__ import annotations

import json
import os
import sys

import pytest

from sparkmaxent.cli import job_main
from sparkmaxent.data.prepare import prepare
from sparkmaxent.errors import InputError

from .faulting import (
    SETTINGS,
    assert_same_model,
    cli_args,
    dataset_identity,
    fit,
    kill_fit,
    leftovers,
    make_data,
    model_of,
    run_killed,
    seeded,
)

train_main = job_main("train")
evaluate_main = job_main("evaluate")


@pytest.fixture(scope="module")
def data(spark, tmp_path_factory):
    return make_data(spark, tmp_path_factory.mktemp("faults"))


#: methods whose kill-and-resume test runs only in CI's slow step: each
#: shares its checkpoint writer with a family kept in the default suite
CI_ONLY = {"combination", "mle-ifs", "l2-ifs", "ifs", "sgc-lookahead"}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=[pytest.mark.slow, pytest.mark.ci]) if n in CI_ONLY else n
        for n in SETTINGS
    ],
)
def test_a_training_job_killed_at_a_seeded_write_resumes_to_the_uninterrupted_model(
    data, name, tmp_path, caplog
):
    """SIGKILL at the n-th file write of the run (a round's checkpoint
    weights or state, a plot, the model's files or the report), then
    ``--resume``: the uninterrupted run's model."""
    whole = tmp_path / "whole"
    n = seeded(f"{name}:write", fit(data, name, whole)["write"])
    out = tmp_path / "run"
    kill_fit(data, name, out, f"write:{n}")
    assert (tmp_path / ".run.lock").exists()  # the killed run's
    if (out / "model").exists():  # killed after publishing it: complete, never partial
        assert_same_model(model_of(out), model_of(whole))
    with caplog.at_level("WARNING"):
        fit(data, name, out, resume=True)
    assert "recovering the stale lock" in caplog.text
    assert_same_model(model_of(out), model_of(whole))
    report = json.load(open(out / "train_report.json"))
    assert report["objective"] == pytest.approx(
        json.load(open(whole / "train_report.json"))["objective"], rel=1e-12, abs=1e-12
    )
    assert leftovers(out) == []


@pytest.mark.parametrize(
    "point",
    [
        "write:1",  # inside the first checkpoint's weights
        "write:2",  # inside the first checkpoint's state.json
        pytest.param(  # inside the second round's state.json (the first round's stays good)
            "write:4", marks=[pytest.mark.slow, pytest.mark.ci]
        ),
        pytest.param(  # the model complete, about to be renamed in
            "publish:1", marks=[pytest.mark.slow, pytest.mark.ci]
        ),
    ],
)
def test_grafting_killed_inside_checkpoint_writes_and_model_publish_resumes(data, point, tmp_path):
    whole = tmp_path / "whole"
    fit(data, "grafting", whole)
    out = tmp_path / "run"
    kill_fit(data, "grafting", out, point)
    assert not (out / "model").exists()
    state = out / "checkpoint" / "state.json"
    rounds = {"write:1": None, "write:2": None, "write:4": 1}  # checkpointed round
    if point in rounds:
        assert (json.load(open(state))["round"] if state.exists() else None) == rounds[point]
    if state.exists():  # the last complete round, never a partial one
        done = json.load(open(state))
        assert (out / "checkpoint" / done["weights_file"]).exists()
    fit(data, "grafting", out, resume=True)
    assert_same_model(model_of(out), model_of(whole))
    assert leftovers(out) == []


@pytest.mark.parametrize("point", ["publish:1", "swap:1"])
def test_a_kill_while_replacing_a_model_keeps_the_old_one(data, point, tmp_path):
    """``--overwrite`` killed before or between publish's renames: the next
    run finds the old model (put back from its ``.old-`` sibling) and
    refuses it without overwrite; with overwrite, the new run's model."""
    out, ref = tmp_path / "run", tmp_path / "ref"
    fit(data, "l2", out)
    old = model_of(out)
    new = ("train.l2=1e-2", "output.overwrite=true")
    fit(data, "l2", ref, *new)
    kill_fit(data, "l2", out, point, *new)
    if point == "swap:1":
        assert not (out / "model").exists()  # only in its .old- sibling now
        assert [p for p in os.listdir(out) if p.startswith(".model.old-")]
    with pytest.raises(InputError, match="model output .* exists"):
        fit(data, "l2", out, "train.l2=1e-2", "output.overwrite=false")
    assert_same_model(model_of(out), old)  # nothing lost
    fit(data, "l2", out, *new)
    assert_same_model(model_of(out), model_of(ref))
    assert leftovers(out) == []


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_prepare_killed_while_replacing_a_dataset_keeps_the_old_one(spark, data, tmp_path):
    """``prepare --overwrite`` (Spark) killed between publish's renames: the
    next prepare puts the old dataset back and refuses it without
    ``--overwrite``; with it, the dataset of an uninterrupted run."""
    out, ref = tmp_path / "ds", tmp_path / "ref"
    prepare(spark, [str(data / "a.txt")], str(out), "maxent")
    old = dataset_identity(out)
    prepare(spark, [str(data / "b.txt")], str(ref), "maxent")
    argv = [sys.executable, "-m", "sparkmaxent", "prepare", "--input", str(data / "b.txt")]
    run_killed([*argv, "--format", "maxent", "--output", str(out), "--overwrite"], "swap:1")
    assert not out.exists() and (tmp_path / ".ds.lock").exists()
    with pytest.raises(InputError, match="exists"):
        prepare(spark, [str(data / "b.txt")], str(out), "maxent")
    assert dataset_identity(out) == old
    prepare(spark, [str(data / "b.txt")], str(out), "maxent", overwrite=True)
    assert dataset_identity(out) == dataset_identity(ref) != old
    assert leftovers(out) == []


@pytest.mark.parametrize("damage", ["truncated npz", "garbage state.json"])
def test_a_corrupted_checkpoint_exits_2_naming_it_and_a_fresh_run_recovers(
    data, damage, tmp_path, capsys
):
    whole = tmp_path / "whole"
    fit(data, "grafting", whole)
    out = tmp_path / "run"
    fit(data, "grafting", out, "train.selection.max_rounds=3")
    state = out / "checkpoint" / "state.json"
    if damage == "truncated npz":
        bad = out / "checkpoint" / json.load(open(state))["weights_file"]
        bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    else:
        bad = state
        bad.write_text('{"format_version": 1, "round": ')
    capsys.readouterr()
    assert train_main([*cli_args(data, "grafting", out), "--resume"]) == 2
    assert str(bad) in capsys.readouterr().err
    # the documented recovery: start over without --resume (the checkpoint is replaced)
    assert train_main(cli_args(data, "grafting", out)) == 0
    assert_same_model(model_of(out), model_of(whole))
    assert (
        json.load(open(state))["round"] == json.load(open(whole / "checkpoint/state.json"))["round"]
    )
    assert leftovers(out) == []


@pytest.mark.parametrize("damage", ["truncated weights", "bad metadata.json"])
def test_a_corrupted_model_exits_2_naming_it_and_resume_republishes_it(
    data, damage, tmp_path, capsys
):
    out = tmp_path / "run"
    fit(data, "grafting", out)
    good = model_of(out)
    if damage == "truncated weights":
        bad = out / "model" / "weights" / "part-0.parquet"
        bad.write_bytes(bad.read_bytes()[:100])
    else:
        bad = out / "model" / "metadata.json"
        bad.write_text('{"format_version": 1, "labels": ["L0", ')
    capsys.readouterr()
    args = ["--model", str(out / "model"), "--input", str(data / "heldout")]
    assert evaluate_main(args) == 2
    assert str(bad) in capsys.readouterr().err
    # --resume of the finished run: no round trained again, the model published anew
    assert train_main([*cli_args(data, "grafting", out), "--resume"]) == 0
    assert_same_model(model_of(out), good)
    assert evaluate_main(args) == 0
    assert leftovers(out) == []


def test_a_damaged_dataset_exits_2_naming_the_file_and_prepare_overwrite_recovers(
    spark, data, tmp_path, capsys
):
    whole = tmp_path / "whole"
    fit(data, "l2", whole)
    ds, out = tmp_path / "ds", tmp_path / "run"
    prepare(spark, [str(data / "a.txt")], str(ds), "maxent")
    bad = sorted((ds / "events").glob("*.parquet"))[0]
    bad.write_bytes(bad.read_bytes()[:200])
    args = [a if a != str(data / "train") else str(ds) for a in cli_args(data, "l2", out)]
    capsys.readouterr()
    assert train_main(args) == 2
    assert f"{bad}: cannot read it as Parquet" in capsys.readouterr().err
    assert not (out / "model").exists()
    prepare(spark, [str(data / "a.txt")], str(ds), "maxent", overwrite=True)
    assert train_main(args) == 0
    assert_same_model(model_of(out), model_of(whole))
    assert leftovers(out) == []
