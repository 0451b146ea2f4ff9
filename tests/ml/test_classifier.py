"""MaxEntClassifier / MaxEntClassificationModel: fit, transform, evaluators,
and the same model as ``sparkmaxent prepare`` + ``sparkmaxent train``."""

from __future__ import annotations

import numpy as np
import pytest
from chispa import assert_df_equality

from sparkmaxent import cli
from sparkmaxent.errors import InputError
from sparkmaxent.ml import MaxEntClassifier
from sparkmaxent.model import MaxentModel

from .conftest import GRAFTING
from .data import events, frame


def schema_of(ddl: str):
    """A StructType from DDL with ``{}`` standing for the Vector type (which
    DDL cannot name)."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    parts = _parse_datatype_string(ddl.format("binary"))
    return StructType(
        [
            StructField(f.name, VectorUDT()) if f.dataType.simpleString() == "binary" else f
            for f in parts.fields
        ]
    )


def test_transform_keeps_every_input_column_and_value(spark, model):
    from pyspark.ml.linalg import Vectors

    rows = [
        (1, {"a": 1.0}, (2, "x"), Vectors.dense([1.0, 2.0]), ["c1", "w3"], None),
        (2, {}, (3, "y"), Vectors.sparse(2, [1], [4.0]), ["c0", "unseen"], 1.5),
        (3, None, None, None, [], -2.0),
    ]
    df = spark.createDataFrame(
        rows,
        schema_of(
            "id int, m map<string,double>, s struct<a:int,b:string>, v {}, "
            "features array<string>, x double"
        ),
    )
    out = model.transform(df)
    assert out.columns == [*df.columns, "rawPrediction", "probability", "prediction"]
    assert_df_equality(out.select(*df.columns).orderBy("id"), df.orderBy("id"))
    first = out.orderBy("id").first()
    assert first is not None and first.prediction == 1.0  # the cue c1


def test_prediction_columns_have_mllib_types_and_agree(model, df):
    from pyspark.ml.linalg import VectorUDT

    out = model.transform(df)
    types = {f.name: f.dataType for f in out.schema.fields}
    assert isinstance(types["probability"], VectorUDT)
    assert isinstance(types["rawPrediction"], VectorUDT)
    assert types["prediction"].simpleString() == "double"
    for r in out.collect():
        p, raw = r.probability.toArray(), r.rawPrediction.toArray()
        assert p.sum() == pytest.approx(1.0)
        assert np.argmax(p) == np.argmax(raw) == r.prediction
        np.testing.assert_allclose(p, np.exp(raw - raw.max()) / np.exp(raw - raw.max()).sum())


def test_mllib_evaluators_work_on_the_output(spark, model, df):
    from pyspark.ml.evaluation import (
        BinaryClassificationEvaluator,
        MulticlassClassificationEvaluator,
    )
    from sklearn.metrics import roc_auc_score

    out = model.transform(df)
    rows = out.select("label", "prediction").collect()
    expected = np.mean([r.label == r.prediction for r in rows])
    accuracy = MulticlassClassificationEvaluator(metricName="accuracy").evaluate(out)
    assert accuracy == pytest.approx(expected) and accuracy > 0.6

    binary = frame(spark, n_labels=2, seed=1)
    scored = MaxEntClassifier(**GRAFTING).fit(binary).transform(binary)
    auc = BinaryClassificationEvaluator().evaluate(scored)
    got = scored.select("label", "probability").collect()
    truth = roc_auc_score([r.label for r in got], [r.probability[1] for r in got])
    assert auc == pytest.approx(truth) and auc > 0.7


def test_numeric_labels_are_class_indices_and_string_labels_sorted(spark):
    rows = [(float(2 * y), f) for _, y, f in events(120, 2)]  # classes 0 and 2
    gappy = spark.createDataFrame(rows, "label double, features array<string>")
    m = MaxEntClassifier(**GRAFTING).fit(gappy)
    assert m.numClasses == 3 and m.labels == ["0.0", "", "2.0"]
    preds = {r.prediction for r in m.transform(gappy).collect()}
    assert preds <= {0.0, 2.0}
    assert all(r.probability[1] == 0.0 for r in m.transform(gappy).collect())

    named = frame(spark, string_labels=True)
    m = MaxEntClassifier(**GRAFTING).fit(named)
    assert m.labels == ["L0", "L1", "L2"] and not m.numericLabels
    out = m.transform(named).collect()
    hits = np.mean([m.labels[int(r.prediction)] == r.label for r in out])
    assert hits > 0.6


@pytest.mark.parametrize("bad", [-1.0, 1.5])
def test_numeric_labels_must_be_class_indices(spark, bad):
    rows = [(bad if i == 0 else float(y), f) for i, y, f in events(60, 2)]
    df = spark.createDataFrame(rows, "label double, features array<string>")
    with pytest.raises(InputError, match=r"labelCol 'label'.*integers >= 0.*StringIndexer"):
        MaxEntClassifier(**GRAFTING).fit(df)


def test_model_exposes_features_report_and_certificate(model):
    sel = model.selectedFeatures.collect()
    m = model.maxentModel
    assert len(sel) == m.nonzero > 0
    assert {r.feature for r in sel} >= {"c0", "c1", "c2"}
    weights = dict(zip(m.selected_features(), m.weights.values[m.weights.values != 0]))
    for r in sel:
        assert r.weight == weights[(r.feature, r.label)]
    assert model.report["method"] == "grafting" and model.report["passes"] > 0
    assert model.certificate is not None and model.certificate == model.report["kkt"]


def test_map_and_vector_features_score_like_arrays(spark, model):
    from pyspark.ml.linalg import Vectors

    arrays = spark.createDataFrame(
        [(0, ["c2", "w1"]), (1, ["c0", "c0"])], "id int, features array<string>"
    )
    maps = spark.createDataFrame(
        [(0, {"c2": 1.0, "w1": 1.0}), (1, {"c0": 2.0})], "id int, features map<string,double>"
    )
    want = [r.probability for r in model.transform(arrays).orderBy("id").collect()]
    got = [r.probability for r in model.transform(maps).orderBy("id").collect()]
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12)

    vec = spark.createDataFrame(
        [(0, Vectors.sparse(5, [1, 3], [1.0, 2.0]), 1.0), (1, Vectors.dense([0, 0, 1.0]), 0.0)]
        * 20,
        schema_of("id int, features {}, label double"),
    )
    m = MaxEntClassifier(method="l2", l2=0.01).fit(vec)
    assert m.numFeatures == 3  # Vectors of two sizes: no size recorded; atoms 1, 2, 3
    out = m.transform(vec).collect()
    assert all(r.prediction == r.label for r in out)


def test_estimator_and_cli_fit_the_same_model(spark, tmp_path):
    """The same events as a DataFrame (Estimator) and as a maxent text file
    (prepare + train on the command line): the same weights to 1e-9."""
    rows = events(200, 3, seed=4)
    text = tmp_path / "train.txt"
    text.write_text("".join(f"L{y} {' '.join(f)}\n" for _, y, f in rows))
    df = spark.createDataFrame(
        [(f"L{y}", f) for _, y, f in rows], "label string, features array<string>"
    )
    est = MaxEntClassifier(method="grafting", l1=0.005, nBest=3)
    got = est.fit(df).maxentModel

    prepared, out = str(tmp_path / "prepared"), str(tmp_path / "run")
    code = cli.main(["prepare", "--input", str(text), "--format", "maxent", "--output", prepared])
    assert code == 0
    sets = ["train.method=grafting", "train.grafting.l1=0.005", "train.grafting.n_best=3"]
    argv = ["train", "--train", prepared, "--output", out]
    assert cli.main([*argv, *(x for s in sets for x in ("--set", s))]) == 0
    want = MaxentModel.load(f"{out}/model")

    def by_name(m: MaxentModel) -> dict:
        return dict(zip(m.selected_features(), m.weights.values[m.weights.values != 0]))

    assert got.labels == want.labels
    g, w = by_name(got), by_name(want)
    assert set(g) == set(w)
    np.testing.assert_allclose([g[k] for k in w], list(w.values()), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.weights.bias, want.weights.bias, rtol=1e-9, atol=1e-12)


def test_weight_column_counts_like_repeated_rows(spark):
    rows = events(90, 2, seed=2)
    weighted = spark.createDataFrame(
        [(float(y), f, 2.0) for _, y, f in rows], "label double, features array<string>, w double"
    )
    doubled = spark.createDataFrame(
        [(float(y), f) for _, y, f in rows + rows], "label double, features array<string>"
    )
    a = MaxEntClassifier(method="l2", l2=0.01, weightCol="w").fit(weighted).maxentModel
    b = MaxEntClassifier(method="l2", l2=0.01).fit(doubled).maxentModel
    np.testing.assert_allclose(a.weights.values, b.weights.values, rtol=1e-6, atol=1e-9)
