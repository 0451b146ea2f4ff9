"""Small inputs prepared in the driver's process (data/local_prepare.py)
against the Spark stages: the same events, dictionary and dataset.json for
every input format, training data and data prepared with a vocabulary, and
the same errors."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from sparkmaxent import storage
from sparkmaxent.data import local_prepare
from sparkmaxent.data import prepare as prep
from sparkmaxent.data.prepare import prepare
from sparkmaxent.data.readers import InputError
from sparkmaxent.data.schema import FEATURES_DIR, FEATURES_SCHEMA, events_schema
from sparkmaxent.plan import Limits

SPARK_ONLY, IN_PROCESS = 0, 10**6

CONLL = (
    "He PRP B-NP\nreckons VBZ B-VP\nthe DT B-NP\ndeficit NN I-NP\n. . O\n\n"
    "Rockwell NNP B-NP\nsaid VBD B-VP\nthe DT B-NP\ndeficit NN I-NP\n\n"
    "He PRP B-NP\nreckons VBZ B-VP\n"
)
# per format: (training files, test file, options, cutoff); the training
# files repeat events (merged) and a feature within an event (summed), the
# test file has unseen features and labels
FORMATS = {
    "maxent": (
        ["# c\nA x y:2 x\nB z w:-1\n\nA x y:2 x\nB q\nC é:0.5\n", "C x:0.5 y\nA y:2 x:2\nB\n"],
        "A x y:2 x\nD x new\nB new other z\nA x y:2 x\nE x\n",
        {},
        0,
    ),
    "svmlight": (
        ["+1 qid:3 1:0.5 7:2 # c\n-1 3:1 7:1\n+1 qid:3 1:0.5 7:2\n2 10:-1e-3\n", "-1 1:1\n"],
        "+1 1:1 99:2\n5 3:1\n",
        {},
        0,
    ),
    "tadm": (
        [
            "2\n1 2 10 1.0 11 0.5\n0 1 10 2.0\n3\n0 0\n1 2 11 1 11 2\n0 1 12 1\n"
            "3\n0 0\n1 2 11 1 11 2\n0 1 12 1\n"
        ],
        "2\n1 1 10 1.0\n0 2 13 1 11 1\n",
        {},
        2,
    ),
    "conll": ([CONLL, CONLL.replace("He", "She")], "It PRP B-NP\nsaid VBD B-VP\n", {}, 0),
    "ppattach": (
        [
            "0 Join board as director V\n1 is chairman of N.V. N\n",
            "4 named director of x N\n7 Join board as director V\n",
        ],
        "9 join board as director V\n10 new verb of it N\n",
        {"lowercase": False},
        0,
    ),
}


def _dataset(out: str, shape: str) -> tuple[pa.Table, pa.Table, dict]:
    """(events, dictionary, dataset.json) of a prepared dataset."""
    events = storage.read_parquet(storage.join(out, "events"))
    events = events.select(events_schema(shape).names).cast(events_schema(shape))
    features = storage.read_parquet(storage.join(out, FEATURES_DIR)).cast(FEATURES_SCHEMA)
    with open(os.path.join(out, "dataset.json")) as f:
        return events, features, json.load(f)


def _both(spark, tmp_path, name: str, inputs: list[str], fmt: str, **kw):
    """The dataset prepared on Spark and in this process, checked to be the same."""
    got = {}
    for limit in (SPARK_ONLY, IN_PROCESS):
        out = str(tmp_path / f"{name}-{limit}")
        prepare(spark, inputs, out, fmt, in_process_max_events=limit, partitions=3, **kw)
        got[limit] = _dataset(out, events_schema_shape(fmt))
    (ev_s, f_s, info_s), (ev_l, f_l, info_l) = got[SPARK_ONLY], got[IN_PROCESS]
    assert ev_l.num_rows > 0
    assert ev_l.to_pylist() == ev_s.to_pylist()
    assert f_l.to_pylist() == f_s.to_pylist()
    assert info_l == info_s
    return info_l


def events_schema_shape(fmt: str) -> str:
    return "candidates" if fmt == "tadm" else "multiclass"


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_in_process_prepare_equals_spark_prepare(spark, tmp_path, fmt, monkeypatch):
    texts, test_text, options, cutoff = FORMATS[fmt]
    inputs = []
    for i, text in enumerate(texts):
        path = tmp_path / "in" / f"part{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        inputs.append(str(path))
    test = tmp_path / "test.txt"
    test.write_text(test_text)
    # the in-process run really runs here, once per dataset
    calls: list = []
    monkeypatch.setattr(prep, "build_local", _spy(prep.build_local, calls))
    train = _both(spark, tmp_path, "train", inputs, fmt, options=options, cutoff=cutoff)
    assert len(calls) == 1
    vocab = str(tmp_path / f"train-{SPARK_ONLY}")
    info = _both(
        spark,
        tmp_path,
        "test",
        [str(test)],
        fmt,
        options=options,
        vocabulary=vocab,
        merge_duplicates=False,
        require_labels=False,
    )
    assert len(calls) == 2
    assert info.get("unknown_features") or fmt == "tadm"
    assert train["n_events"] < sum(t.count("\n") for t in texts)  # merged


def _quarantined(out: str) -> bytes:
    """The quarantine's records (its JSON-lines files, in name order)."""
    directory = os.path.join(out, "_quarantine")
    names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
    return b"".join(open(os.path.join(directory, n), "rb").read() for n in names)


@pytest.mark.parametrize("merge", [True, False])
def test_every_stage_gives_the_same_output_on_both_engines(spark, tmp_path, merge, monkeypatch):
    """One input through every stage both engines run (stages.build):
    quarantine of malformed records, the dictionary's count cutoff, binary
    values, merging (or not), the events cut into partitions, and
    dataset.json; then (once) held-out data through the vocabulary
    (unknown features and labels)."""
    text = (
        "A x y:2 x z\nB z w:-1\nA x y:2 x z\nC x:nan\nB q z\nA y:3 z\n"
        "B x z w:-1\nA x:inf\nA x y:2 x z\nC y z:0.5\n"
    )
    path = tmp_path / "train.txt"
    path.write_text(text)
    calls: list = []
    monkeypatch.setattr(prep, "build_local", _spy(prep.build_local, calls))
    kw = dict(cutoff=2, binary=True, quarantine=True, merge_duplicates=merge)
    train = _both(spark, tmp_path, f"train{merge}", [str(path)], "maxent", **kw)
    assert calls == ["build_local"]
    assert train["quarantined"] == 2 and train["cutoff"] == 2
    assert (train["n_events"] < 8) == merge  # 8 events pass the checks; 3 repeat
    spark_out, here_out = (str(tmp_path / f"train{merge}-{n}") for n in (SPARK_ONLY, IN_PROCESS))
    assert _quarantined(here_out) == _quarantined(spark_out)
    assert b"train.txt" in _quarantined(here_out)
    events, dictionary, _ = _dataset(here_out, "multiclass")
    assert {v for row in events.column("values").to_pylist() for v in row} == {1.0}  # binary
    features = {r["feature"] for r in dictionary.to_pylist()}
    assert "q" not in features and {"x", "z"} <= features  # q's count 1 < cutoff
    if not merge:
        # the held-out part reads the dictionary, counted before merging
        # (stages.build): the same as with merging, so it runs once
        return
    held = tmp_path / "held.txt"
    held.write_text("A x new\nD z q\nB y w:-1\n")
    info = _both(
        spark,
        tmp_path,
        f"held{merge}",
        [str(held)],
        "maxent",
        vocabulary=spark_out,
        merge_duplicates=False,
        require_labels=False,
    )
    assert info["unknown_features"] == 2 and info["unknown_labels"] == 1


def _spy(fn, calls):
    def spy(*args, **kw):
        calls.append(fn.__name__)
        return fn(*args, **kw)

    return spy


def test_in_process_prepare_only_below_its_size_bound(spark, tmp_path, monkeypatch):
    path = tmp_path / "a.txt"
    path.write_text("A x\nB y\n" * 100)  # 800 bytes
    per_event = Limits().bytes_per_event  # data.in_process_bytes_per_event's default
    assert 800 > per_event  # one event's worth of bytes is too little
    assert local_prepare.read_small(spark, [str(path)], "maxent", {}, Limits(1)) is None
    assert local_prepare.read_small(spark, [str(path)], "maxent", {}, Limits(0)) is None
    assert local_prepare.read_small(spark, [str(path)], "maxent", {}, Limits(2, 399)) is None
    src = local_prepare.read_small(spark, [str(path)], "maxent", {}, Limits(-(-800 // per_event)))
    assert src is not None and local_prepare.is_local(src) and src.raw.num_rows == 200
    src = local_prepare.read_small(spark, [str(path)], "maxent", {}, Limits(2, 400))
    assert src is not None and local_prepare.is_local(src) and src.raw.num_rows == 200


def test_in_process_prepare_reports_errors_as_spark_does(spark, tmp_path):
    bad = tmp_path / "in" / "b.txt"
    bad.parent.mkdir(parents=True)
    (tmp_path / "in" / "a.txt").write_text("A x\nB y\n")
    bad.write_text("A x\nB y:nan\n")
    one = tmp_path / "one.txt"
    one.write_text("A x\nA y\n")
    for inputs in ([str(tmp_path / "in")], [str(one)]):
        messages = []
        for limit in (SPARK_ONLY, IN_PROCESS):
            with pytest.raises(InputError) as err:
                prepare(
                    spark,
                    inputs,
                    str(tmp_path / f"o{limit}"),
                    "maxent",
                    in_process_max_events=limit,
                )
            messages.append(str(err.value))
            assert not os.path.exists(tmp_path / f"o{limit}")
        assert messages[0] == messages[1]
    assert "b.txt:2" in messages[0] or "2 distinct labels" in messages[0]
