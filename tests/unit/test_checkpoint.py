"""Checkpoints and --resume against the training data: dataset fingerprints
(data/fingerprint.py), a resume on other data refused, and state.json /
.npz damage reported as InputErrors naming the file (issue 23, items 4, 7)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import numpy as np
import pytest

from sparkmaxent.backends import make_backend
from sparkmaxent.config import TrainConfig, train_config
from sparkmaxent.data.fingerprint import events_fingerprint_table
from sparkmaxent.data.load import read_events_table, write_events
from sparkmaxent.data.schema import INFO_FILE, DatasetInfo
from sparkmaxent.errors import InputError
from sparkmaxent.kernels import MULTICLASS
from sparkmaxent.selection.checkpoint import CHECKPOINT_DIR, STATE_FILE
from sparkmaxent.train import train

from .helpers import Interrupted, interrupt_and_resume, random_multiclass

P, K = 12, 3
VOCAB = {"id": "0123456789abcdef", "features": P, "labels": K, "scheme": 1}


def grafting_config(**kw) -> TrainConfig:
    return train_config(
        **{"method": "grafting", "l1": 1e-3, "n_best": 1, "gtol": 1e-9, "kkt_tol": 1e-6, **kw}
    )


def dataset(tmp_path, name: str, seed: int, n_files: int = 1, vocab: dict | None = VOCAB) -> str:
    """A prepared dataset of random multiclass events, P predicates, K labels,
    all sharing one vocabulary fingerprint."""
    block = random_multiclass(np.random.default_rng(seed), m=80, P=P, K=K)
    info = DatasetInfo(
        MULTICLASS, P, [f"y{k}" for k in range(K)], vocabulary_fingerprint=dict(vocab or {})
    )
    directory = str(tmp_path / name)
    write_events(block, directory, info, n_files=n_files)
    return directory


def local(directory: str):
    return make_backend("local", directory)


def stop_after(rounds: int):
    def stop(state):
        if state.round == rounds:
            raise Interrupted

    return stop


def interrupted_run(directory: str, out: str, after: int = 2) -> str:
    """A run on ``directory`` stopped after round ``after``; its state.json path."""
    with pytest.raises(Interrupted):
        train(local(directory), grafting_config(), output_dir=out, on_round=stop_after(after))
    return os.path.join(out, CHECKPOINT_DIR, STATE_FILE)


# ---- fingerprints -------------------------------------------------------------


def test_events_fingerprint_is_of_the_content_not_the_file_split(tmp_path):
    one = DatasetInfo.load(dataset(tmp_path, "one", seed=1, n_files=1))
    three = DatasetInfo.load(dataset(tmp_path, "three", seed=1, n_files=3))
    other = DatasetInfo.load(dataset(tmp_path, "other", seed=2))
    assert one.events_fingerprint == three.events_fingerprint
    assert one.events_fingerprint["rows"] == 80 and one.events_fingerprint["scheme"] == 1
    assert one.events_fingerprint["weight"] == pytest.approx(one.total_weight, rel=1e-12)
    assert other.events_fingerprint["id"] != one.events_fingerprint["id"]
    # the id is the rows' content: one changed value changes it
    table = read_events_table(str(tmp_path / "one"))
    w = table.column("weight").to_numpy().copy()
    w[17] += 1.0
    changed = table.set_column(table.schema.get_field_index("weight"), "weight", [w])
    assert events_fingerprint_table(changed, MULTICLASS)["id"] != one.events_fingerprint["id"]
    # and the row order (event ids) within the set does not (the weight is
    # informative: a float sum, exact only up to summation order)
    reordered = events_fingerprint_table(table.take(np.arange(79, -1, -1)), MULTICLASS)
    assert (reordered["id"], reordered["rows"]) == (one.events_fingerprint["id"], 80)


def test_a_dataset_json_without_fingerprints_loads_as_unknown(tmp_path):
    directory = dataset(tmp_path, "old", seed=1)
    path = os.path.join(directory, INFO_FILE)
    raw = json.load(open(path))
    del raw["events_fingerprint"], raw["vocabulary_fingerprint"]
    json.dump(raw, open(path, "w"))
    info = DatasetInfo.load(directory)
    assert info.events_fingerprint == {} and info.vocabulary_fingerprint == {}


# ---- resume and the training data ---------------------------------------------


def test_resume_on_the_same_data_ends_with_the_model_of_an_uninterrupted_run(tmp_path):
    directory = dataset(tmp_path, "train", seed=1)
    whole, resumed, left = interrupt_and_resume(
        lambda: local(directory), grafting_config(), tmp_path, after=2
    )
    info = DatasetInfo.load(directory)
    assert left["data"] == {
        "dataset": directory,
        "events": info.events_fingerprint,
        "vocabulary": info.vocabulary_fingerprint,
    }
    assert left["round"] == 2 and whole.report["rounds_run"] > 2
    assert resumed.weights.ids.tolist() == whole.weights.ids.tolist()
    np.testing.assert_array_equal(resumed.weights.values, whole.weights.values)
    assert resumed.report.objective == whole.report.objective


def test_resume_on_other_data_with_the_same_vocabulary_is_refused(tmp_path):
    a, b = dataset(tmp_path, "a", seed=1), dataset(tmp_path, "b", seed=2)
    fa, fb = (DatasetInfo.load(d).events_fingerprint for d in (a, b))
    out = str(tmp_path / "run")
    state_path = interrupted_run(a, out)
    before = open(state_path).read()
    with pytest.raises(InputError) as e:
        train(local(b), grafting_config(), output_dir=out, resume=True)
    msg = str(e.value)
    assert msg.startswith(f"{state_path}: cannot resume on other training data")
    assert (
        f"the checkpoint was made on data {fa['id']} ({fa['rows']} events, weight "
        f"{fa['weight']:.10g}) from {a}"
    ) in msg
    assert (
        f"this run's training data (--train) {b} has data {fb['id']} ({fb['rows']} "
        f"events, weight {fb['weight']:.10g})"
    ) in msg
    assert "vocabulary" not in msg.split("(resume with")[0]  # the vocabulary is the same
    assert open(state_path).read() == before  # the checkpoint is left as it was
    # the checkpoint still resumes on its own data
    train(local(a), grafting_config(), output_dir=out, resume=True)


def test_resume_on_another_vocabulary_names_both(tmp_path):
    a = dataset(tmp_path, "a", seed=1)
    b = dataset(tmp_path, "b", seed=1, vocab={**VOCAB, "id": "fedcba9876543210"})
    out = str(tmp_path / "run")
    interrupted_run(a, out)
    with pytest.raises(
        InputError,
        match=r"made on vocabulary 0123456789abcdef \(12 features, "
        r"3 labels\) from .*has vocabulary fedcba9876543210",
    ):
        train(local(b), grafting_config(), output_dir=out, resume=True)


def test_without_fingerprints_resume_warns_instead_of_refusing(tmp_path, caplog):
    a = dataset(tmp_path, "a", seed=1)
    out = str(tmp_path / "run")
    state_path = interrupted_run(a, out)
    doc = json.load(open(state_path))
    del doc["data"]  # a checkpoint of an older version
    json.dump(doc, open(state_path, "w"))
    with caplog.at_level(logging.WARNING, logger="sparkmaxent"):
        train(local(a), grafting_config(), output_dir=out, resume=True)
    assert any(
        "records no training data fingerprint" in r.getMessage() and state_path in r.getMessage()
        for r in caplog.records
    )
    # a dataset of an older version (no fingerprints) against a checkpoint with them
    old = dataset(tmp_path, "old", seed=2, vocab=None)
    path = os.path.join(old, INFO_FILE)
    raw = json.load(open(path))
    del raw["events_fingerprint"], raw["vocabulary_fingerprint"]
    json.dump(raw, open(path, "w"))
    out2 = str(tmp_path / "run2")
    interrupted_run(a, out2)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sparkmaxent"):
        train(local(old), grafting_config(), output_dir=out2, resume=True)
    assert any(
        "no events or vocabulary fingerprint to compare" in r.getMessage() for r in caplog.records
    )


# ---- damaged checkpoints ---------------------------------------------------------


@pytest.fixture
def checkpointed(tmp_path):
    """(dataset, output directory, state.json path) of a run stopped after round 2."""
    directory = dataset(tmp_path, "train", seed=1)
    out = str(tmp_path / "run")
    return directory, out, interrupted_run(directory, out)


@pytest.mark.parametrize(
    "content", ["not json at all", '{"format_version": 2, "rou', "", "[1, 2]", "\xff\xfe"]
)
def test_a_garbage_or_truncated_state_json_names_the_file(checkpointed, content):
    directory, out, state_path = checkpointed
    with open(state_path, "w", encoding="latin-1") as f:
        f.write(content)
    with pytest.raises(InputError, match=f"^{state_path}: expected "):
        train(local(directory), grafting_config(), output_dir=out, resume=True)


def test_a_state_json_missing_keys_names_them(checkpointed):
    directory, out, state_path = checkpointed
    doc = json.load(open(state_path))
    del doc["weights_file"]
    json.dump(doc, open(state_path, "w"))
    with pytest.raises(InputError, match=f"^{state_path}: .*missing key weights_file"):
        train(local(directory), grafting_config(), output_dir=out, resume=True)


@pytest.mark.parametrize(
    "name",
    [
        "../../round-00002.npz",
        "../round-00002.npz",
        "/tmp/round-00002.npz",
        "sub/round-00002.npz",
        "round-2.npz",
        "weights.npz",
        "round-00002.npz/..",
        7,
        None,
    ],
)
def test_a_weights_file_outside_the_checkpoint_directory_is_refused(checkpointed, name):
    directory, out, state_path = checkpointed
    doc = json.load(open(state_path))
    doc["weights_file"] = name
    json.dump(doc, open(state_path, "w"))
    with pytest.raises(
        InputError,
        match=f"^{state_path}: expected weights_file to be a file "
        r"name round-NNNNN\.npz",
    ):
        train(local(directory), grafting_config(), output_dir=out, resume=True)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "missing", "no_ids"])
def test_a_corrupt_weights_npz_names_the_file(checkpointed, damage):
    directory, out, state_path = checkpointed
    npz = os.path.join(out, CHECKPOINT_DIR, json.load(open(state_path))["weights_file"])
    data = open(npz, "rb").read()
    if damage == "truncate":
        open(npz, "wb").write(data[: len(data) // 2])
    elif damage == "garbage":
        open(npz, "wb").write(b"\x00garbage" * 20)
    elif damage == "missing":
        os.remove(npz)
    else:
        with np.load(npz) as z:
            kept = {k: z[k] for k in z.files if k != "ids"}
        np.savez(open(npz, "wb"), **kept)
    with pytest.raises(InputError, match=f"^{npz}: cannot read the checkpoint's weights"):
        train(local(directory), grafting_config(), output_dir=out, resume=True)


def test_an_in_memory_backend_resumes_without_a_data_check(tmp_path, caplog):
    """No DatasetInfo: nothing to compare and nothing recorded, no warning."""
    from sparkmaxent.backends.local import LocalBackend

    block = random_multiclass(np.random.default_rng(3), m=60, P=P, K=K)
    space = dataclasses.replace(DatasetInfo(MULTICLASS, P, ["a", "b", "c"]).space())
    out = str(tmp_path / "run")
    with pytest.raises(Interrupted):
        train(
            LocalBackend([block], space), grafting_config(), output_dir=out, on_round=stop_after(1)
        )
    assert "data" not in json.load(open(os.path.join(out, CHECKPOINT_DIR, STATE_FILE)))
    with caplog.at_level(logging.WARNING, logger="sparkmaxent"):
        train(LocalBackend([block], space), grafting_config(), output_dir=out, resume=True)
    assert not [r for r in caplog.records if "fingerprint" in r.getMessage()]


# ---- the stop a checkpoint keeps --------------------------------------------------


def test_a_finished_runs_checkpoint_keeps_its_typed_stop(tmp_path):
    """A finished run resumed from its checkpoint reports the same typed stop
    (no pass); a checkpoint of a finished run without ``stop`` (written
    before stops were typed) goes on for a round, which stops it again."""
    from sparkmaxent.selection.stops import StopReason

    directory, out = dataset(tmp_path, "train", seed=1), str(tmp_path / "out")
    whole = train(local(directory), grafting_config(), output_dir=out)
    path = os.path.join(out, CHECKPOINT_DIR, STATE_FILE)
    doc = json.load(open(path))
    assert doc["done"] and doc["stop"] == {"reason": "no_candidate_passes"}
    assert whole.stop is not None and whole.stop.reason is StopReason.NO_CANDIDATE_PASSES
    # the certificate is kept as JSON and read back typed: the resumed run's is the same
    assert doc["info"]["kkt"] == whole.report.certificate.to_json()
    again = train(local(directory), grafting_config(), output_dir=out, resume=True)
    assert again.stop == whole.stop and again.report.stop.message == whole.report.stop.message
    assert again.report.certificate == whole.report.certificate and again.report.certificate.passed
    assert again.report["rounds_run"] == whole.report["rounds_run"]
    del doc["stop"]
    json.dump(doc, open(path, "w"))
    legacy = train(local(directory), grafting_config(), output_dir=out, resume=True)
    assert legacy.stop == whole.stop and legacy.report.stop.reason.value == "no_candidate_passes"
    np.testing.assert_array_equal(legacy.weights.values, whole.weights.values)
    doc["stop"] = {"reason": "no such reason"}
    json.dump(doc, open(path, "w"))
    with pytest.raises(InputError, match=r"state\.json: 'stop': not a stop reason"):
        train(local(directory), grafting_config(), output_dir=out, resume=True)
    doc["stop"] = {"reason": "no_candidate_passes"}
    doc["info"]["kkt"] = {"passed": True}
    json.dump(doc, open(path, "w"))
    with pytest.raises(InputError, match=r"state\.json: 'info\.kkt': not a KKT certificate"):
        train(local(directory), grafting_config(), output_dir=out, resume=True)


# ---- the best held-out stage a checkpoint keeps -------------------------------------


def test_a_stage_runs_best_stage_resumes_typed_and_older_info_keys_are_ignored(tmp_path):
    """A stage run keeping its best held-out stage checkpoints it as
    ``info.choice_round`` / ``info.choice_score`` and reads it back
    (``LoopState.best``): the resumed run keeps the uninterrupted run's
    stage and model. Keys an earlier version wrote into info and nothing
    reads (a stop's ``final_beta_0``, ``final_loss``, search counts) do not
    stop a resume; a malformed best stage is refused naming the file."""
    directory, held = dataset(tmp_path, "train", seed=1), dataset(tmp_path, "held", seed=2)
    config = train_config(method="sgc", max_rounds=6, patience=0)
    whole = train(local(directory), config, local(held), output_dir=str(tmp_path / "whole"))
    out = str(tmp_path / "cut")
    with pytest.raises(Interrupted):
        train(local(directory), config, local(held), output_dir=out, on_round=stop_after(3))
    path = os.path.join(out, CHECKPOINT_DIR, STATE_FILE)
    doc = json.load(open(path))
    assert doc["info"]["choice_round"] in (1, 2, 3) and "choice_score" in doc["info"]
    doc["info"].update(final_beta_0=-1.5, final_loss=0.7, phase="combination", search_passes=2)
    json.dump(doc, open(path, "w"))
    resumed = train(local(directory), config, local(held), output_dir=out, resume=True)
    assert resumed.report.stage_choice == whole.report.stage_choice
    assert whole.report.stage_choice.chosen_round <= 6
    np.testing.assert_array_equal(resumed.weights.values, whole.weights.values)
    done = json.load(open(path))
    assert not {"final_beta_0", "final_loss", "phase"} & set(done["info"])
    done["info"]["choice_score"] = "high"
    json.dump(done, open(path, "w"))
    with pytest.raises(
        InputError, match=r"state\.json: 'info\.choice_round', 'info\.choice_score'"
    ):
        train(local(directory), config, local(held), output_dir=out, resume=True)
