"""``train --resume`` through the CLI against the training data (issue 23,
item 4): a run interrupted on one prepared dataset does not resume on
another prepared with the same vocabulary, and resumes on its own to the
model of an uninterrupted run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sparkmaxent.cli import job_main
from sparkmaxent.model import MaxentModel

prepare_main = job_main("prepare")
train_main = job_main("train")

GRAFT = [
    "--set",
    "train.method=grafting",
    "--set",
    "train.grafting.l1=1e-3",
    "--set",
    "train.grafting.n_best=1",
    "--set",
    "train.backend=local",
]


def write_events(path, seed: int, n: int = 400) -> None:
    """Three labels, each announced by a cue predicate, among 30 noise words."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        y = int(rng.integers(3))
        feats = {f"w{int(k)}" for k in rng.integers(0, 30, size=4)}
        if rng.random() < 0.8:
            feats.add(f"cue{y}")
        lines.append(" ".join([f"L{y}", *sorted(feats)]))
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def prepared(spark, tmp_path_factory):
    """Datasets ``a`` and ``b`` (other events, ``a``'s vocabulary) and a run
    on ``a`` stopped after 2 rounds."""
    tmp = tmp_path_factory.mktemp("resume-data")
    write_events(tmp / "a.txt", seed=0)
    write_events(tmp / "b.txt", seed=1)
    a, b, run = str(tmp / "a"), str(tmp / "b"), tmp / "run"
    assert prepare_main(["--input", str(tmp / "a.txt"), "--format", "maxent", "--output", a]) == 0
    assert (
        prepare_main(
            ["--input", str(tmp / "b.txt"), "--format", "maxent", "--vocabulary", a, "--output", b]
        )
        == 0
    )
    assert (
        train_main(
            ["--train", a, *GRAFT, "--set", "train.selection.max_rounds=2", "--output", str(run)]
        )
        == 0
    )
    return a, b, run


def info(directory: str) -> dict:
    return json.load(open(f"{directory}/dataset.json"))


def test_prepare_writes_fingerprints_of_events_and_vocabulary(prepared):
    a, b, run = prepared
    ia, ib = info(a), info(b)
    assert ia["events_fingerprint"]["rows"] == ia["n_events"]
    assert ia["events_fingerprint"]["weight"] == pytest.approx(ia["total_weight"])
    assert ia["events_fingerprint"]["id"] != ib["events_fingerprint"]["id"]
    assert ia["vocabulary_fingerprint"] == ib["vocabulary_fingerprint"]
    assert ia["vocabulary_fingerprint"]["features"] == ia["n_features"]
    state = json.load(open(run / "checkpoint" / "state.json"))
    assert state["round"] == 2
    assert state["data"]["events"] == ia["events_fingerprint"]
    assert state["data"]["vocabulary"] == ia["vocabulary_fingerprint"]


def test_resume_on_other_data_with_the_same_vocabulary_exits_2_naming_both(prepared, capsys):
    a, b, run = prepared
    fa, fb = info(a)["events_fingerprint"], info(b)["events_fingerprint"]
    capsys.readouterr()
    assert train_main(["--train", b, *GRAFT, "--output", str(run), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "cannot resume on other training data" in err
    assert f"made on data {fa['id']} ({fa['rows']} events, weight {fa['weight']:.10g})" in err
    assert f"(--train) {b} has data {fb['id']} ({fb['rows']} events" in err
    assert json.load(open(run / "checkpoint" / "state.json"))["round"] == 2


def test_resume_on_the_same_data_gives_the_uninterrupted_model(prepared, tmp_path):
    a, b, run = prepared
    assert train_main(["--train", a, *GRAFT, "--output", str(run), "--resume"]) == 0
    whole = tmp_path / "whole"
    assert train_main(["--train", a, *GRAFT, "--output", str(whole)]) == 0
    resumed = json.load(open(run / "train_report.json"))
    assert resumed["rounds_run"] > 2
    assert resumed["objective"] == json.load(open(whole / "train_report.json"))["objective"]
    m1, m2 = MaxentModel.load(str(run / "model")), MaxentModel.load(str(whole / "model"))
    assert m1.weights.ids.tolist() == m2.weights.ids.tolist()
    np.testing.assert_array_equal(m1.weights.values, m2.weights.values)
