"""Small tables prepared in the driver's process (rawtable.read_table with
in_process_max_events: one Arrow collect, then local_prepare.build_local)
against the Spark stages: the same events, dictionary and dataset.json for
every feature column type, the same errors, and the same trained model."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.ml.linalg import Vectors

from sparkmaxent import api
from sparkmaxent.config.load import load_config
from sparkmaxent.data import prepare as prep
from sparkmaxent.data.prepare import prepare_candidate_table, prepare_table
from sparkmaxent.data.readers import InputError

from .test_local_prepare import IN_PROCESS, SPARK_ONLY, _dataset, _spy

ROWS = [
    (
        "A",
        1.0,
        ["x", "y", "x"],
        [1.0, 2.0, 0.5],
        {"x": 1.0, "y": 2.0},
        Vectors.sparse(5, [0, 3], [1.0, 2.0]),
    ),
    ("B", 2.0, ["z"], [-1.0], {"z": -1.0}, Vectors.dense([0.0, 0.5, 0.0, 0.0, 1.0])),
    (
        "A",
        1.0,
        ["x", "y", "x"],
        [1.0, 2.0, 0.5],
        {"x": 1.0, "y": 2.0},
        Vectors.sparse(5, [0, 3], [1.0, 2.0]),
    ),
    (
        "C",
        0.5,
        ["q", "x"],
        [0.25, 1.0],
        {"q": 0.25, "x": 1.0},
        Vectors.sparse(5, [1, 2], [1.0, 3.0]),
    ),
    ("B", 1.0, [], [], {}, Vectors.sparse(5, [], [])),
    ("C", 3.0, ["y"], [4.0], {"y": 4.0}, Vectors.sparse(5, [2], [1.0])),
]
SCHEMA = "label string, w double, names array<string>, v array<double>, m map<string,double>"
KINDS = {
    "array": {"features_col": "names"},
    "array+values": {"features_col": "names", "values_col": "v"},
    "map": {"features_col": "m"},
    "vector": {"features_col": "vec"},
}


def _table(spark):
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import StructField, StructType

    ddl = StructType.fromDDL(SCHEMA)
    schema = StructType([*ddl.fields, StructField("vec", VectorUDT())])
    return spark.createDataFrame(ROWS * 3, schema).repartition(3)


def _both(spark, tmp_path, fn, table, name: str, shape: str = "multiclass", **kw):
    """The dataset prepared on Spark and in this process, checked to be the same."""
    got = {}
    for limit in (SPARK_ONLY, IN_PROCESS):
        out = str(tmp_path / f"{name}-{limit}")
        fn(spark, table, out, in_process_max_events=limit, partitions=2, **kw)
        got[limit] = _dataset(out, shape)
    (ev_s, f_s, info_s), (ev_l, f_l, info_l) = got[SPARK_ONLY], got[IN_PROCESS]
    assert ev_l.num_rows > 0
    assert ev_l.to_pylist() == ev_s.to_pylist()
    assert f_l.to_pylist() == f_s.to_pylist()
    assert info_l == info_s
    return info_l


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_in_process_table_equals_spark_table(spark, tmp_path, kind, monkeypatch):
    df = _table(spark).cache()
    calls: list = []
    monkeypatch.setattr(prep, "build_local", _spy(prep.build_local, calls))
    info = _both(spark, tmp_path, prepare_table, df, "train", weight_col="w", **KINDS[kind])
    assert len(calls) == 1
    assert info["n_events"] < df.count()  # merged
    test = df.where("label != 'A'").union(df.limit(1).selectExpr("'D'", *df.columns[1:]))
    vocab = str(tmp_path / f"train-{SPARK_ONLY}")
    info = _both(
        spark,
        tmp_path,
        prepare_table,
        test,
        "test",
        vocabulary=vocab,
        merge_duplicates=False,
        require_labels=False,
        **KINDS[kind],
    )
    assert len(calls) == 2
    assert info["unseen_labels"] == ["D"]


def test_in_process_candidate_table_equals_spark_table(spark, tmp_path):
    rows = [
        (g, c, names, 1.0 + g % 2)
        for g in range(6)
        for c, names in ((1, ["a", f"b{g % 3}"]), (0, ["a", "c"]), (0, []))
    ]
    df = spark.createDataFrame(rows, "g long, ok int, f array<string>, w double")
    info = _both(
        spark,
        tmp_path,
        prepare_candidate_table,
        df,
        "cands",
        group_col="g",
        correct_col="ok",
        features_col="f",
        weight_col="w",
        shape="candidates",
    )
    assert info["n_events"] == 3  # six groups, three distinct events: merged


def test_in_process_table_only_below_its_row_bound(spark, tmp_path, monkeypatch):
    df = _table(spark)
    n = df.count()
    calls: list = []
    monkeypatch.setattr(prep, "build_local", _spy(prep.build_local, calls))
    prepare_table(spark, df, str(tmp_path / "a"), features_col="names", in_process_max_events=n - 1)
    assert calls == []
    prepare_table(spark, df, str(tmp_path / "b"), features_col="names", in_process_max_events=n)
    assert len(calls) == 1


def test_in_process_table_reports_errors_as_spark_does(spark, tmp_path):
    df = _table(spark)
    bad = {
        "negative weight": (df.withColumn("w", df.w - 2.0), {"weight_col": "w"}),
        "nan value": (
            df.selectExpr("label", "names", "transform(v, x -> if(x > 1, double('NaN'), x)) as v"),
            {"values_col": "v"},
        ),
        "null label": (df.selectExpr("if(w > 2, null, label) as label", "names"), {}),
    }
    for case, (table, kw) in bad.items():
        messages = []
        for limit in (SPARK_ONLY, IN_PROCESS):
            with pytest.raises(InputError) as err:
                prepare_table(
                    spark,
                    table,
                    str(tmp_path / f"{limit}"),
                    features_col="names",
                    in_process_max_events=limit,
                    **kw,
                )
            messages.append(str(err.value))
        assert messages[0] == messages[1], case
        assert "expected no" in messages[0], case


def test_in_process_table_trains_the_same_model(spark, tmp_path):
    """The in-process table's dataset trains to the Spark table's model (to 1e-9)."""
    from ..ml.data import frame

    df = frame(spark, n=300)
    cfg = load_config(
        None,
        [
            "train.method=grafting",
            "train.grafting.l1=0.01",
            f"data.in_process_max_events={IN_PROCESS}",
        ],
    )
    weights = []
    for limit in (SPARK_ONLY, IN_PROCESS):
        out = str(tmp_path / f"d{limit}")
        prepare_table(spark, df, out, in_process_max_events=limit, partitions=2)
        model, _ = api.train_model(spark, cfg, out)
        weights.append(model.weights.values)
    assert np.count_nonzero(weights[0]) > 0
    np.testing.assert_allclose(weights[1], weights[0], rtol=0, atol=1e-9)
