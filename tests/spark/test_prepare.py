"""prepare() on local[2]: round trips, cutoff, merging, vocabulary reuse, bad
input, quarantine and atomic output, on small files the tests write."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from sparkmaxent.data import prepare as prep
from sparkmaxent.data.checks import QUARANTINE_DIR
from sparkmaxent.data.prepare import prepare, prepare_table
from sparkmaxent.data.raw import FILE_SHIFT
from sparkmaxent.data.readers import FORMATS, InputError
from sparkmaxent.data.schema import FEATURES_SCHEMA, DatasetInfo, block_from_arrow, events_schema

B = FILE_SHIFT  # event ids of the second input file start here

# a.txt: line 2 repeats x (values summed), line 5 duplicates line 2.
A_TXT = "# comment\nA x y:2 x\nB z w:-1\n\nA x y:2 x\nB q\n"
# b.txt: line 2 is line 2 of a.txt with features in another order: same event.
B_TXT = "C x:0.5 y\nA y:2 x:2\n"


def write(path, text: str | bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


def read_events(out: str, shape: str = "multiclass") -> pa.Table:
    files = sorted(glob.glob(os.path.join(out, "events", "*.parquet")))
    table = pq.read_table(files)
    return table.select(events_schema(shape).names).cast(events_schema(shape))


def rows(out: str, shape: str = "multiclass") -> list[dict]:
    return read_events(out, shape).to_pylist()


def features(out: str) -> list[tuple]:
    t = pq.read_table(os.path.join(out, "features"))
    assert t.schema.field("id").type == pa.int32() and t.schema.field("count").type == pa.float64()
    return [(r["feature"], r["id"], r["count"]) for r in t.to_pylist()]


def leftovers(parent) -> list[str]:
    """Temporary or backup siblings prepare might leave behind."""
    return [n for n in os.listdir(parent) if n.startswith(".") and ("tmp-" in n or "old-" in n)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    write(d / "in" / "a.txt", A_TXT)
    write(d / "in" / "b.txt", B_TXT)
    write(d / "in" / "_SUCCESS", "not data\n")  # hidden: skipped in directories
    return d


@pytest.fixture(scope="module")
def train_dir(spark, corpus):
    out = str(corpus / "train")
    info = prepare(spark, [str(corpus / "in")], out, "maxent", partitions=2)
    return out, info


# ---------------------------------------------------------------- round trip


def test_round_trip_ids_values_labels_weights(train_dir, corpus):
    out, info = train_dir
    assert features(out) == [
        ("q", 0, 1.0),
        ("w", 1, 1.0),
        ("x", 2, 4.0),
        ("y", 3, 4.0),
        ("z", 4, 1.0),
    ]
    assert info.labels == ["A", "B", "C"] and info.n_features == 5
    assert rows(out) == [
        # a.txt line 2 + line 5 + b.txt line 2: merged, x's values summed
        {
            "label": 0,
            "weight": 3.0,
            "indices": [2, 3],
            "values": [2.0, 2.0],
            "event_id": 0,
            "group": 0,
        },
        {
            "label": 1,
            "weight": 1.0,
            "indices": [1, 4],
            "values": [-1.0, 1.0],
            "event_id": 1,
            "group": 1,
        },
        {"label": 1, "weight": 1.0, "indices": [0], "values": [1.0], "event_id": 3, "group": 3},
        {
            "label": 2,
            "weight": 1.0,
            "indices": [2, 3],
            "values": [0.5, 1.0],
            "event_id": B,
            "group": B,
        },
    ]
    assert (info.n_events, info.total_weight, info.quarantined) == (4, 6.0, 0)
    assert info.source["format"] == "maxent"
    assert info.source["inputs"] == [str(corpus / "in" / "a.txt"), str(corpus / "in" / "b.txt")]
    assert DatasetInfo.load(out) == info
    # partitions: one Parquet file per requested partition at most, events in order
    assert 1 <= len(glob.glob(os.path.join(out, "events", "*.parquet"))) <= 2


def test_round_trip_block(train_dir):
    out, info = train_dir
    block = block_from_arrow(read_events(out), info)
    expected = np.zeros((4, 5))
    expected[0, [2, 3]] = 2.0
    expected[1, [1, 4]] = [-1.0, 1.0]
    expected[2, 0] = 1.0
    expected[3, [2, 3]] = [0.5, 1.0]
    np.testing.assert_array_equal(block.X.toarray(), expected)
    np.testing.assert_array_equal(block.y, [0, 1, 1, 2])
    np.testing.assert_array_equal(block.c, [3.0, 1.0, 1.0, 1.0])


def test_cutoff_keeps_emptied_events_and_overwrites(spark, corpus):
    out = corpus / "cut"
    write(out / "stale.txt", "replaced\n")
    info = prepare(
        spark, [str(corpus / "in" / "*.txt")], str(out), "maxent", cutoff=2, overwrite=True
    )
    assert not (out / "stale.txt").exists()
    assert features(str(out)) == [("x", 0, 4.0), ("y", 1, 4.0)]
    assert info.cutoff == 2 and info.n_features == 2 and info.labels == ["A", "B", "C"]
    # both B events lost all their features: kept, and then merged as identical
    assert rows(str(out)) == [
        {
            "label": 0,
            "weight": 3.0,
            "indices": [0, 1],
            "values": [2.0, 2.0],
            "event_id": 0,
            "group": 0,
        },
        {"label": 1, "weight": 2.0, "indices": [], "values": [], "event_id": 1, "group": 1},
        {
            "label": 2,
            "weight": 1.0,
            "indices": [0, 1],
            "values": [0.5, 1.0],
            "event_id": B,
            "group": B,
        },
    ]
    assert leftovers(corpus) == []


def test_vocabulary_reuse_counts_unknowns_and_keeps_order(spark, train_dir, tmp_path):
    train, train_info = train_dir
    test = write(tmp_path / "test.txt", "A x y:2 x\nD x new\nB new other z\nA x y:2 x\nE x\n")
    out = str(tmp_path / "test")
    info = prepare(
        spark, [test], out, "maxent", vocabulary=train, merge_duplicates=False, partitions=3
    )
    assert info.labels == train_info.labels and info.n_features == train_info.n_features
    assert features(out) == features(train)
    assert (info.unknown_features, info.unknown_labels) == (3, 2)
    assert info.feature_occurrences == 12  # every (event, feature) occurrence, known or not
    assert info.unseen_labels == ["D", "E"]  # unseen label j is stored as -(j + 1)
    assert info.source["vocabulary"] == train
    assert rows(out) == [
        {
            "label": 0,
            "weight": 1.0,
            "indices": [2, 3],
            "values": [2.0, 2.0],
            "event_id": 0,
            "group": 0,
        },
        {"label": -1, "weight": 1.0, "indices": [2], "values": [1.0], "event_id": 1, "group": 1},
        {"label": 1, "weight": 1.0, "indices": [4], "values": [1.0], "event_id": 2, "group": 2},
        {
            "label": 0,
            "weight": 1.0,
            "indices": [2, 3],
            "values": [2.0, 2.0],
            "event_id": 3,
            "group": 3,
        },
        {"label": -2, "weight": 1.0, "indices": [2], "values": [1.0], "event_id": 4, "group": 4},
    ]
    assert [info.label_name(i) for i in (0, -1, -2)] == ["A", "D", "E"]


# ---------------------------------------------------------------- bad input


def test_parse_error_names_first_file_and_line_and_leaves_nothing(spark, tmp_path):
    write(tmp_path / "in" / "a.txt", "A x\nB y\nA x:nan\n")
    write(tmp_path / "in" / "b.txt", "A x:inf\n")
    out = tmp_path / "out"
    with pytest.raises(InputError) as e:
        prepare(spark, [str(tmp_path / "in")], str(out), "maxent")
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'in' / 'a.txt'}:3: ") and "'x:nan'" in msg
    assert not out.exists() and leftovers(tmp_path) == []


def test_value_over_the_bound_names_file_and_line(spark, tmp_path):
    """A value the model's arithmetic would overflow on (issue 23: 1e300
    trained to a NaN model) is refused at prepare, text or table."""
    write(tmp_path / "in" / "a.txt", "A x\nB y:1e12\nA x:1e300\n")
    out = tmp_path / "out"
    with pytest.raises(InputError) as e:
        prepare(spark, [str(tmp_path / "in")], str(out), "maxent")
    assert str(e.value).startswith(
        f"{tmp_path / 'in' / 'a.txt'}:3: expected a feature value "
        f"with |value| <= 1e+12, got 'x:1e300'"
    )
    huge = spark.createDataFrame(
        [("A", ["x", "y"], [1.0, -2e12]), ("B", ["y"], [1.0])],
        "label string, features array<string>, v array<double>",
    )
    with pytest.raises(
        InputError,
        match=r"column 'v': expected no rows with a value of "
        r"magnitude > 1e\+12, got 1",
    ):
        prepare_table(spark, huge, str(out), values_col="v")
    assert not out.exists() and leftovers(tmp_path) == []


def test_unknown_format_and_unmatched_pattern(spark, tmp_path):
    with pytest.raises(InputError, match=r"unknown input format 'megam'.*'maxent'"):
        prepare(spark, [str(tmp_path)], str(tmp_path / "o"), "megam")
    with pytest.raises(InputError, match=r"nothing matching '.*nope\*\.txt'"):
        prepare(spark, [str(tmp_path / "nope*.txt")], str(tmp_path / "o"), "maxent")
    assert not (tmp_path / "o").exists() and leftovers(tmp_path) == []


def test_empty_dataset(spark, tmp_path):
    f = write(tmp_path / "empty.txt", "# nothing\n\n")
    with pytest.raises(InputError, match=r"expected events in .*empty\.txt, got none"):
        prepare(spark, [f], str(tmp_path / "o"), "maxent")
    assert not (tmp_path / "o").exists() and leftovers(tmp_path) == []


def test_single_label_training_data(spark, tmp_path):
    f = write(tmp_path / "one.txt", "A x\nA y\n")
    with pytest.raises(InputError, match=r"at least 2 distinct labels.*\['A'\].*one\.txt"):
        prepare(spark, [f], str(tmp_path / "o"), "maxent")


def test_existing_output_is_refused_and_untouched(spark, tmp_path):
    out = tmp_path / "o"
    write(out / "keep.txt", "mine\n")
    with pytest.raises(InputError, match=r"exists.*overwrite"):
        prepare(spark, [str(out / "keep.txt")], str(out), "maxent")
    assert (out / "keep.txt").read_text() == "mine\n"


def test_failure_during_write_keeps_old_output(spark, corpus, tmp_path, monkeypatch):
    out = tmp_path / "o"
    write(out / "dataset.json", '{"old": true}\n')

    def boom(self, directory):
        raise RuntimeError("disk full")

    monkeypatch.setattr(prep.DatasetInfo, "save", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        prepare(spark, [str(corpus / "in")], str(out), "maxent", overwrite=True)
    assert os.listdir(out) == ["dataset.json"]
    assert json.loads((out / "dataset.json").read_text()) == {"old": True}
    assert leftovers(tmp_path) == []


def test_quarantine_sets_bad_records_aside(spark, tmp_path):
    f = write(tmp_path / "q.txt", b"A x\nB y:nan\nA z\nB \xff\xfe w\nB y\n")
    out = tmp_path / "o"
    info = prepare(spark, [f], str(out), "maxent", quarantine=True)
    assert info.quarantined == 2 and info.n_events == 3
    recs = [
        json.loads(line)
        for p in sorted(glob.glob(str(out / QUARANTINE_DIR / "*.json")))
        for line in open(p)
    ]
    assert [(r["path"], r["line"]) for r in recs] == [(f, 2), (f, 4)]
    assert recs[0]["text"] == "B y:nan" and "'y:nan'" in recs[0]["reason"]
    assert "UTF-8" in recs[1]["reason"] and recs[1]["text"].startswith("B ")
    # the undecodable line reaches the parser as blank, so it takes no event id
    assert [r["event_id"] for r in rows(str(out))] == [0, 2, 3]


# ---------------------------------------------------------------- tables


def test_table_round_trip(spark, tmp_path):
    df = spark.createDataFrame(
        [(2, ["b", "a", "a"], 2.0), (1, ["c"], 1.0), (2, ["a", "b", "a"], 0.5)],
        "y int, feats array<string>, w double",
    )
    out = str(tmp_path / "t")
    info = prepare_table(spark, df, out, label_col="y", features_col="feats", weight_col="w")
    assert info.labels == ["1", "2"] and info.source["format"] == "table"
    assert features(out) == [("a", 0, 2.5), ("b", 1, 2.5), ("c", 2, 1.0)]
    got = rows(out)
    # rows 1 and 3 are one event once sorted and summed; event ids follow row order
    assert [(r["label"], r["weight"], r["indices"], r["values"]) for r in got] == [
        (1, 2.5, [0, 1], [2.0, 1.0]),
        (0, 1.0, [2], [1.0]),
    ]
    assert got[0]["event_id"] < got[1]["event_id"]
    assert (info.n_events, info.total_weight) == (2, 3.5)


def test_table_map_and_vector_features_read_as_names_and_values(spark, tmp_path):
    """map<string,double> and Vector feature columns give the same events as
    the array<string> + values columns they stand for (a Vector's names are
    its indices; a dense vector's zeros are not features)."""
    from pyspark.ml.linalg import Vectors

    arrays = spark.createDataFrame(
        [("A", ["0", "2"], [1.5, 1.0]), ("B", ["1"], [2.0])],
        "label string, features array<string>, v array<double>",
    )
    maps = spark.createDataFrame(
        [("A", {"0": 1.5, "2": 1.0}), ("B", {"1": 2.0})],
        "label string, features map<string,double>",
    )
    vectors = spark.createDataFrame(
        [("A", Vectors.sparse(3, [0, 2], [1.5, 1.0])), ("B", Vectors.dense([0.0, 2.0, 0.0]))],
        ["label", "features"],
    )
    want = str(tmp_path / "arrays")
    prepare_table(spark, arrays, want, values_col="v")
    for name, df in (("maps", maps), ("vectors", vectors)):
        out = str(tmp_path / name)
        prepare_table(spark, df, out)
        assert features(out) == features(want)
        assert [(r["label"], r["indices"], r["values"]) for r in rows(out)] == [
            (r["label"], r["indices"], r["values"]) for r in rows(want)
        ]
    with pytest.raises(InputError, match=r"values column \('v'\) goes with an array<string>"):
        prepare_table(
            spark, maps.withColumn("v", F.array(F.lit(1.0))), str(tmp_path / "x"), values_col="v"
        )
    nan_map = spark.createDataFrame(
        [("A", {"a": float("nan")})], "label string, features map<string,double>"
    )
    with pytest.raises(InputError, match=r"column 'features': expected no rows with null, NaN"):
        prepare_table(spark, nan_map, str(tmp_path / "y"))


def test_table_bad_columns(spark, tmp_path):
    df = spark.createDataFrame(
        [("A", ["x"], float("nan"), [1.0]), ("B", ["y"], 1.0, [1.0])],
        "label string, features array<string>, w double, v array<double>",
    )
    out = str(tmp_path / "t")
    with pytest.raises(InputError, match=r"column named 'lab'.*\['label', 'features', 'w', 'v'\]"):
        prepare_table(spark, df, out, label_col="lab")
    with pytest.raises(InputError, match=r"'v' of type array<string>, map<string,double> or"):
        prepare_table(spark, df, out, features_col="v")
    with pytest.raises(InputError, match=r"column 'w': expected no null, NaN or infinite"):
        prepare_table(spark, df, out, weight_col="w")
    inf_values = spark.createDataFrame(
        [("A", ["x"], [float("inf")])], "label string, features array<string>, v array<double>"
    )
    with pytest.raises(InputError, match=r"column 'v': expected no rows with null, NaN"):
        prepare_table(spark, inf_values, out, values_col="v")
    assert not os.path.exists(out) and leftovers(tmp_path) == []


# ---------------------------------------------------------------- candidate sets

needs_tadm = pytest.mark.skipif(
    "tadm" not in FORMATS, reason="readers.FORMATS has no 'tadm' parser yet"
)

# Event at line 1: candidates (correct, 10 11) and (10). Event at line 4:
# candidates (), (correct, 11 twice: summed), (12). Event at line 8: the same
# as line 4 (merged).
TADM = (
    "2\n1 2 10 1.0 11 0.5\n0 1 10 2.0\n"
    "3\n0 0\n1 2 11 1 11 2\n0 1 12 1\n"
    "3\n0 0\n1 2 11 1 11 2\n0 1 12 1\n"
)


@needs_tadm
def test_candidate_sets_round_trip_with_cutoff(spark, tmp_path):
    f = write(tmp_path / "ev.tadm", TADM)
    out = str(tmp_path / "c")
    info = prepare(spark, [f], out, "tadm", cutoff=2)
    assert info.shape == "candidates" and info.labels == []
    # "10" occurs in 1 event and is cut; "11" in 3, "12" in 2
    assert features(out) == [("11", 0, 3.0), ("12", 1, 2.0)]
    assert rows(out, "candidates") == [
        {
            "weight": 1.0,
            "correct": [True, False],
            "cand_nnz": [1, 0],
            "indices": [0],
            "values": [0.5],
            "event_id": 0,
            "group": 0,
        },
        {
            "weight": 2.0,
            "correct": [False, True, False],
            "cand_nnz": [0, 1, 1],
            "indices": [0, 1],
            "values": [3.0, 1.0],
            "event_id": 1,
            "group": 1,
        },
    ]
    block = block_from_arrow(read_events(out, "candidates"), info)
    np.testing.assert_array_equal(block.event_ptr, [0, 2, 5])
    np.testing.assert_array_equal(block.F.toarray(), [[0.5, 0], [0, 0], [0, 0], [3.0, 0], [0, 1.0]])
    np.testing.assert_array_equal(block.correct, [1, 0, 0, 1, 0])


@needs_tadm
def test_candidate_event_without_correct_candidate(spark, tmp_path):
    f = write(tmp_path / "ev.tadm", "1\n1 1 7 1\n\n2\n0 1 7 1\n0 1 8 1\n")
    with pytest.raises(InputError, match=r"ev\.tadm:4: expected at least one correct candidate"):
        prepare(spark, [f], str(tmp_path / "c"), "tadm")
    assert leftovers(tmp_path) == [] and not (tmp_path / "c").exists()


# ---------------------------------------------------------------- options


def test_options_are_checked_and_converted():
    if "conll" not in FORMATS:
        pytest.skip("readers.FORMATS has no 'conll' parser yet")
    assert prep.resolve_options("conll", {"mode": "basenp", "lowercase": "false"}) == {
        "mode": "basenp",
        "lowercase": False,
        "templates": "chunk",  # the default filled in
    }
    with pytest.raises(InputError, match=r"unknown option\(s\) \['window'\].*'lowercase'"):
        prep.resolve_options("conll", {"window": "3"})
    with pytest.raises(InputError, match=r"expected true or false, got 'maybe'"):
        prep.resolve_options("conll", {"lowercase": "maybe"})


@pytest.mark.slow
def test_shared_conll_train_prepares(spark, shared_data, tmp_path):
    if "conll" not in FORMATS:
        pytest.skip("readers.FORMATS has no 'conll' parser yet")
    info = prepare(
        spark,
        [os.path.join(shared_data, "conll2000", "train.txt")],
        str(tmp_path / "conll"),
        "conll",
        cutoff=2,
    )
    assert info.total_weight == 211727  # one event per token
    assert 190_000 < info.n_events < 211727 and len(info.labels) == 22
    assert 90_000 < info.n_features < 110_000
    t = read_events(str(tmp_path / "conll"))
    assert t.num_rows == info.n_events and float(np.sum(t.column("weight"))) == 211727
    assert (
        pq.read_schema(glob.glob(str(tmp_path / "conll" / "features" / "*.parquet"))[0])
        .field("feature")
        .type
        == FEATURES_SCHEMA.field("feature").type
    )
