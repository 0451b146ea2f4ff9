"""Candidate-set tables (prepare_candidate_table) on local[2]: the same
prepared data as the same events in TADM text, and bad columns named."""

from __future__ import annotations

import os

import pytest

from sparkmaxent.data.prepare import prepare, prepare_candidate_table
from sparkmaxent.data.readers import InputError

from .test_prepare import TADM, features, leftovers, rows, write

# The events of test_prepare.TADM, one row per candidate: (group, features,
# values, score), in the order of the TADM lines.
TADM_ROWS = [
    (0, ["10", "11"], [1.0, 0.5], 1.0),
    (0, ["10"], [2.0], 0.0),
    (1, [], [], 0.0),
    (1, ["11", "11"], [1.0, 2.0], 1.0),
    (1, ["12"], [1.0], 0.0),
    (2, [], [], 0.0),
    (2, ["11", "11"], [1.0, 2.0], 1.0),
    (2, ["12"], [1.0], 0.0),
]
DDL = "g long, f array<string>, v array<double>, score double"


@pytest.mark.parametrize("cutoff", [0, 2])
def test_candidate_table_prepares_as_tadm_text(spark, tmp_path, cutoff):
    text = str(tmp_path / "text")
    prepare(spark, [write(tmp_path / "ev.tadm", TADM)], text, "tadm", cutoff=cutoff)
    df = spark.createDataFrame(TADM_ROWS, DDL)  # in 2 partitions: row ids follow row order
    table = str(tmp_path / "table")
    info = prepare_candidate_table(
        spark,
        df,
        table,
        group_col="g",
        features_col="f",
        values_col="v",
        correct_col="score",
        cutoff=cutoff,
    )
    assert info.shape == "candidates" and info.source["format"] == "table"
    assert features(table) == features(text)
    assert rows(table, "candidates") == rows(text, "candidates")
    assert len(rows(table, "candidates")) == 2  # groups 1 and 2 merged


def test_candidate_table_map_features_string_groups_and_weights(spark, tmp_path):
    """map features, boolean correct flags, string group ids (event ids are
    then the groups' first rows, in row order) and a weight per group."""
    df = spark.createDataFrame(
        [
            ("s1", {"a": 1.0, "b": 2.0}, True, 2.0),
            ("s1", {"a": 3.0}, False, 2.0),
            ("s0", {}, False, 0.5),
            ("s0", {"b": 1.0}, True, 0.5),
        ],
        "sent string, feats map<string,double>, ok boolean, w double",
    )
    out = str(tmp_path / "c")
    info = prepare_candidate_table(
        spark,
        df,
        out,
        group_col="sent",
        features_col="feats",
        correct_col="ok",
        weight_col="w",
        merge_duplicates=False,
    )
    assert features(out) == [("a", 0, 2.0), ("b", 1, 2.5)]
    got = rows(out, "candidates")
    assert [(r["weight"], r["correct"], r["cand_nnz"], r["indices"], r["values"]) for r in got] == [
        (2.0, [True, False], [2, 1], [0, 1, 0], [1.0, 2.0, 3.0]),
        (0.5, [False, True], [0, 1], [1], [1.0]),
    ]
    assert got[0]["event_id"] < got[1]["event_id"] and info.total_weight == 2.5


def test_candidate_table_bad_columns(spark, tmp_path):
    df = spark.createDataFrame(
        [(0, ["x"], True, "yes", 1.0), (0, ["y"], False, "no", 2.0), (1, ["x"], True, "no", 1.0)],
        "g int, f array<string>, ok boolean, label string, w double",
    )
    out = str(tmp_path / "c")

    def run(**kw):
        cols = {"group_col": "g", "features_col": "f", "correct_col": "ok", **kw}
        prepare_candidate_table(spark, df, out, **cols)

    with pytest.raises(InputError, match=r"group column named 'grp'.*\['g', 'f', 'ok'"):
        run(group_col="grp")
    with pytest.raises(InputError, match=r"column 'label' of type boolean or numeric"):
        run(correct_col="label")
    with pytest.raises(InputError, match=r"column 'w': expected one weight per group of 'g'.*0"):
        run(weight_col="w")
    with pytest.raises(InputError, match=r"column 'ok' of type array<string>, map<string,double>"):
        run(features_col="ok")
    nulls = spark.createDataFrame([(None, ["x"], True)], "g int, f array<string>, ok boolean")
    with pytest.raises(InputError, match=r"column 'g': expected no null group ids, got 1"):
        prepare_candidate_table(
            spark, nulls, out, group_col="g", features_col="f", correct_col="ok"
        )
    nan = spark.createDataFrame([(0, ["x"], float("nan"))], "g int, f array<string>, s double")
    with pytest.raises(InputError, match=r"column 's': expected no null or NaN correct flags"):
        prepare_candidate_table(spark, nan, out, group_col="g", features_col="f", correct_col="s")
    none_correct = spark.createDataFrame([(0, ["x"], False)], "g int, f array<string>, ok boolean")
    with pytest.raises(InputError, match=r"<DataFrame>, event 0: expected at least one correct"):
        prepare_candidate_table(
            spark, none_correct, out, group_col="g", features_col="f", correct_col="ok"
        )
    assert not os.path.exists(out) and leftovers(tmp_path) == []
