"""The held-out split at prepare time (data/split.py) on local[2], and the
model-choice flags end to end through the jobs: prepare --heldout-fraction,
train with a path, pipeline --heldout-fraction."""

from __future__ import annotations

import json
import os
from collections import Counter

import pyarrow.parquet as pq
import pytest

from sparkmaxent.cli import job_main
from sparkmaxent.data import synthetic
from sparkmaxent.data.inputs import resolve_options
from sparkmaxent.data.raw import read_files
from sparkmaxent.data.readers import InputError
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.data.split import prepare_split, split_raw

from .test_prepare import features, rows

LABEL_COUNTS = {"A": 200, "B": 100, "C": 50}


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """350 distinct events of three unbalanced labels; every event has a
    predicate of its own (``u<i>``), so held-out events carry predicates the
    training part never saw."""
    path = tmp_path_factory.mktemp("split") / "train.txt"
    lines, i = [], 0
    for label, n in LABEL_COUNTS.items():
        for _ in range(n):
            lines.append(f"{label} common f{i % 7}{label} u{i}")
            i += 1
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def split(spark, text, out, seed=1, fraction=0.2):
    return prepare_split(
        spark,
        [text],
        str(out / "train"),
        str(out / "held"),
        "maxent",
        fraction=fraction,
        seed=seed,
        overwrite=True,
    )


def event_ids(directory) -> list[int]:
    return sorted(r["event_id"] for r in rows(directory))


def test_split_is_stratified_disjoint_and_shares_the_vocabulary(spark, text, tmp_path):
    train_info, held_info = split(spark, text, tmp_path)
    train_dir, held_dir = str(tmp_path / "train"), str(tmp_path / "held")
    held_rows = rows(held_dir)
    by_label = Counter(held_info.labels[r["label"]] for r in held_rows)
    assert by_label == {k: round(0.2 * n) for k, n in LABEL_COUNTS.items()}
    train_ids, held_ids = event_ids(train_dir), event_ids(held_dir)
    assert not set(train_ids) & set(held_ids)
    assert len(train_ids) + len(held_ids) == sum(LABEL_COUNTS.values())
    # one vocabulary: the sub-train dictionary; held-out-only predicates unknown
    assert held_info.labels == train_info.labels
    assert held_info.n_features == train_info.n_features
    assert features(held_dir) == features(train_dir)
    names = {f for f, _, _ in features(train_dir)}
    assert "common" in names and len(names) == 1 + 21 + len(train_ids)
    assert held_info.unknown_features == len(held_ids)  # each held-out u<i>
    assert DatasetInfo.load(held_dir).source["split"] == {
        "fraction": 0.2,
        "seed": 1,
        "part": "heldout",
    }


def held_out_rows(spark, path: str, fmt: str, seed: int, fraction: float) -> list[tuple]:
    """(event_id, group) of the held-out part, sorted (no prepare: the split alone)."""
    src = read_files(spark, [path], fmt, resolve_options(fmt, {}), False)
    held = split_raw(src.raw, fraction, seed, src.shape)[1]
    return sorted((r["event_id"], r["group"]) for r in held.select("event_id", "group").collect())


def test_split_is_deterministic_and_seeded(spark, text):
    a, b, c = (held_out_rows(spark, text, "maxent", seed, 0.2) for seed in (1, 1, 2))
    assert a == b
    assert a != c and len(a) == len(c) == 70


def test_split_keeps_sentences_whole(spark, tmp_path):
    sentence = "The DT B-NP\ncat NN I-NP\nsat VBD B-VP\n"
    path = tmp_path / "chunks.conll"
    path.write_text("\n".join(sentence for _ in range(20)))
    groups = Counter(g for _, g in held_out_rows(spark, str(path), "conll", 0, 0.25))
    assert len(groups) == 5 and set(groups.values()) == {3}


def test_bad_fraction_is_an_input_error(spark, text, tmp_path):
    with pytest.raises(InputError, match="held-out fraction"):
        split(spark, text, tmp_path, fraction=1.0)


@pytest.fixture(scope="module")
def planted_text(tmp_path_factory):
    spec = synthetic.SyntheticSpec(
        n_events=2500,
        n_predicates=200,
        n_labels=3,
        n_support=8,
        n_copies=0,
        n_conjunctions=0,
        min_support_count=40,
        seed=5,
    )
    return synthetic.write_splits(spec, tmp_path_factory.mktemp("planted"), (0.75, 0.05, 0.2))


def test_prepare_and_train_flags_choose_a_point(spark, planted_text, tmp_path):
    data = str(tmp_path / "data")
    prepare = ["--input", planted_text["train"], "--format", "maxent", "--output", data]
    assert job_main("prepare")([*prepare, "--heldout-fraction", "0.25"]) == 0
    assert os.path.exists(os.path.join(data + "-heldout", "dataset.json"))
    out = tmp_path / "run"
    args = ["--train", data, "--heldout", data + "-heldout", "--output", str(out)]
    settings = ["--set", "train.method=grafting", "--set", "train.choice.path=true"]
    assert job_main("train")([*args, *settings, "--set", "train.choice.points=5"]) == 0
    report = json.load(open(out / "train_report.json"))
    points = report["path"]["points"]
    chosen = [p for p in points if p["chosen"]]
    assert len(chosen) == 1 and report["l1"] == chosen[0]["l1"]
    assert report["nonzero_weights"] == chosen[0]["features"]
    assert chosen[0]["heldout_score"] == max(p["heldout_score"] for p in points)
    assert all(p["kkt_passed"] for p in points)
    weights = pq.read_table(str(out / "model" / "weights")).num_rows
    assert weights == chosen[0]["features"]
    with open(out / "plots" / "path.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_pipeline_heldout_fraction_keeps_the_best_stage(spark, planted_text, tmp_path):
    out = tmp_path / "pipe"
    args = [
        "--set",
        "data.format=maxent",
        "--set",
        f"data.train_inputs=[{json.dumps(planted_text['train'])}]",
        "--set",
        f"data.test_inputs=[{json.dumps(planted_text['test'])}]",
        "--set",
        "train.method=sgc",
        "--set",
        "train.selection.max_features=40",
        "--heldout-fraction",
        "0.2",
        "--output",
        str(out),
    ]
    assert job_main("pipeline")(args) == 0
    report = json.load(open(out / "report.json"))
    assert report["datasets"]["heldout"].endswith(os.path.join("data", "heldout"))
    train = report["train"]
    rounds = train["rounds"]
    best = max(rounds, key=lambda r: r["heldout_score"])
    assert train["choice"]["chosen_round"] == best["round"]
    assert train["nonzero_weights"] == best["active"]
    assert os.path.exists(out / "plots" / "path.png")
