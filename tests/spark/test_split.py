"""The held-out split at prepare time (data/split.py) on local[2], and the
model-choice flags end to end through the jobs: prepare --heldout-fraction,
train with a path, pipeline --heldout-fraction."""

from __future__ import annotations

import glob
import json
import math
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


@pytest.fixture(scope="module")
def text_split(spark, text, tmp_path_factory):
    """``text`` split at seed 1, fraction 0.2, by the Spark stages and in
    this process (``_split_both``: the same datasets); both engines' output
    directories, the equality test's and the split tests' (one split of each
    engine for the module)."""
    out = tmp_path_factory.mktemp("text-split")
    with pytest.MonkeyPatch.context() as monkeypatch:
        got = _split_both(spark, out, [text], "maxent", monkeypatch, fraction=0.2, seed=1)
    return out, got


@pytest.mark.parametrize("engine", ["spark", "in-process"])
def test_split_is_stratified_disjoint_and_shares_the_vocabulary(text_split, engine):
    from .test_local_prepare import IN_PROCESS, SPARK_ONLY

    out, _ = text_split
    limit = SPARK_ONLY if engine == "spark" else IN_PROCESS
    train_dir, held_dir = str(out / f"train-{limit}"), str(out / f"held-{limit}")
    train_info, held_info = DatasetInfo.load(train_dir), DatasetInfo.load(held_dir)
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
    written = json.load(open(out / "train_report.json"))  # the JSON file
    points = written["path"]["points"]
    chosen = [p for p in points if p["chosen"]]
    assert len(chosen) == 1 and written["l1"] == chosen[0]["l1"]
    assert chosen[0]["heldout_score"] == max(p["heldout_score"] for p in points)
    assert all(p["kkt_passed"] for p in points)
    # the model is the chosen gamma1 refitted on training + held-out events (on Spark)
    refit = written["refit"]
    assert refit["l1"] == chosen[0]["l1"] and refit["kkt_passed"]
    assert refit["chosen_fit"]["features"] == chosen[0]["features"]
    assert written["nonzero_weights"] == refit["features"]
    weights = pq.read_table(str(out / "model" / "weights")).num_rows
    assert weights == refit["features"]
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


# ---- in-process split and quarantine (small inputs) against the Spark stages ----------


def _split_both(spark, tmp_path, inputs, fmt, monkeypatch, **kw) -> dict:
    """Both parts prepared by the Spark stages and in this process, checked
    to be the same dataset; the in-process run really split here."""
    from sparkmaxent.data import split as split_module

    from .test_local_prepare import IN_PROCESS, SPARK_ONLY, _dataset

    calls: list = []
    real = split_module.split_local
    monkeypatch.setattr(split_module, "split_local", lambda *a: calls.append(1) or real(*a))
    got = {}
    for limit in (SPARK_ONLY, IN_PROCESS):
        out = {p: str(tmp_path / f"{p}-{limit}") for p in ("train", "held")}
        prepare_split(spark, inputs, out["train"], out["held"], fmt, partitions=3,
                      overwrite=True, in_process_max_events=limit, **kw)  # fmt: skip
        got[limit] = {p: _dataset(d, "multiclass") for p, d in out.items()}
    assert len(calls) == 1
    for part in ("train", "held"):
        (ev_s, f_s, info_s), (ev_l, f_l, info_l) = got[SPARK_ONLY][part], got[IN_PROCESS][part]
        for limit, info in ((SPARK_ONLY, info_s), (IN_PROCESS, info_l)):
            vocabulary = info["source"].pop("vocabulary")  # the part's own training dir
            assert (vocabulary is None) == (part == "train")
            assert part == "train" or vocabulary.endswith(f"train-{limit}")
        assert ev_l.num_rows > 0
        assert ev_l.to_pylist() == ev_s.to_pylist()
        assert f_l.to_pylist() == f_s.to_pylist()
        assert info_l == info_s
    return got[IN_PROCESS]


@pytest.mark.parametrize("seed,fraction", [(1, 0.2), (2**31, 0.33)])
def test_in_process_split_equals_spark_split(
    spark, text, text_split, tmp_path, monkeypatch, seed, fraction
):
    if (seed, fraction) == (1, 0.2):  # the module's split, compared when it was made
        got = text_split[1]
    else:
        got = _split_both(spark, tmp_path, [text], "maxent", monkeypatch, fraction=fraction,
                          seed=seed)  # fmt: skip
    held = got["held"][0].to_pylist()
    by_label = Counter(r["label"] for r in held)
    # floor(f n + 1/2) per label: 0.33 x 50 = 16.5 rounds up
    want = [math.floor(fraction * n + 0.5) for n in LABEL_COUNTS.values()]
    assert sorted(by_label.values()) == sorted(want)


def test_in_process_split_keeps_sentences_and_the_cutoff(spark, tmp_path, monkeypatch):
    sentences = [f"w{i} NN B-NP\nsat VBD B-VP\nx{i % 3} DT B-NP\n" for i in range(30)]
    path = tmp_path / "chunks.conll"
    path.write_text("\n".join(sentences))
    got = _split_both(
        spark, tmp_path, [str(path)], "conll", monkeypatch, fraction=0.3, seed=4, cutoff=2
    )
    groups = Counter(r["group"] for r in got["held"][0].to_pylist())
    assert len(groups) == 9 and set(groups.values()) == {3}


QUARANTINE_TXT = "A x\nB y:nan\nA z\nB \xff\xfe w\nB y\nA \x01x:1e999\nA \x01 y\nB \x01\n"


def test_in_process_quarantine_equals_spark_quarantine(spark, tmp_path, monkeypatch):
    """The same quarantined-lines file (content), counts and events, for
    prepare and for a split."""
    from sparkmaxent.data import local_prepare
    from sparkmaxent.data import prepare as prep
    from sparkmaxent.data.checks import QUARANTINE_DIR
    from sparkmaxent.data.prepare import prepare

    from .test_local_prepare import IN_PROCESS, SPARK_ONLY, _dataset

    path = tmp_path / "q.txt"
    path.write_bytes(QUARANTINE_TXT.replace("\xff\xfe", "@@").encode().replace(b"@@", b"\xff\xfe"))
    calls: list = []
    real = local_prepare.write_quarantine
    monkeypatch.setattr(prep, "build_local", prep.build_local)
    monkeypatch.setattr(local_prepare, "write_quarantine", lambda *a: calls.append(1) or real(*a))

    def quarantined(out: str) -> str:
        parts = sorted(glob.glob(os.path.join(out, QUARANTINE_DIR, "part-*.json")))
        return "".join(open(p, encoding="utf-8").read() for p in parts)

    got = {}
    for limit in (SPARK_ONLY, IN_PROCESS):
        out = str(tmp_path / f"o{limit}")
        info = prepare(spark, [str(path)], out, "maxent", quarantine=True,
                       in_process_max_events=limit)  # fmt: skip
        split_out = {p: str(tmp_path / f"s{p}{limit}") for p in ("train", "held")}
        prepare_split(spark, [str(path)], split_out["train"], split_out["held"], "maxent",
                      fraction=0.34, quarantine=True, in_process_max_events=limit)  # fmt: skip
        got[limit] = (
            info.quarantined,
            quarantined(out),
            _dataset(out, "multiclass"),
            quarantined(split_out["train"]),
            _dataset(split_out["train"], "multiclass"),
            _dataset(split_out["held"], "multiclass"),
        )
    assert len(calls) == 2  # prepare and the split's training part, in this process
    spark_run, local_run = got[SPARK_ONLY], got[IN_PROCESS]
    assert local_run[0] == spark_run[0] == 3
    assert local_run[1] == spark_run[1] and local_run[1].count("\n") == 3
    assert local_run[3] == local_run[1]
    for a, b in zip(local_run[2:], spark_run[2:]):
        if isinstance(a, str):
            continue
        assert a[0].to_pylist() == b[0].to_pylist()
        assert a[1].to_pylist() == b[1].to_pylist()
        vocabularies = [x[2]["source"].pop("vocabulary") for x in (a, b)]
        assert a[2] == b[2]
        assert vocabularies[0] is None or vocabularies[0] != vocabularies[1]
