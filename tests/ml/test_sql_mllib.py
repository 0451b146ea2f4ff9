"""Vectors scored by MLlib's own LogisticRegressionModel (ml/mllib.py):
transform's default given a Vector column with its size in the metadata
gives the Arrow scorer's rawPrediction, probability and prediction to
1e-12 (planted models: l1, l2 standardized, classes absent in training,
two classes, thresholds, null and empty Vectors), with no Python worker;
what does not map falls back with a log line or is refused; toMLlib and
saveMLlib give MLlib users the same model."""

from __future__ import annotations

import logging

import pytest
from chispa import assert_approx_df_equality
from pyspark.sql import functions as F

from sparkmaxent.ml import MaxEntClassifier
from sparkmaxent.ml.mllib import NotMLlib

from .data import events

PRECISION = 1e-12


def _vectors(spark, n_labels=3, seed=0, label=lambda y: float(y)):
    """(training rows, rows to score, Vector size): (id, label, features) of
    planted events as the CountVectorizer's Vectors (the size in the
    column's metadata); the rows to score add a null Vector and an empty one."""
    from pyspark.ml.feature import CountVectorizer

    rows = [(i, label(y), f) for i, y, f in events(200, n_labels, seed)]
    words = spark.createDataFrame(rows, "id long, label double, features array<string>")
    vectorizer = CountVectorizer(inputCol="features", outputCol="v").fit(words)
    extra = spark.createDataFrame([(1000, 0.0, []), (1001, 0.0, [])], words.schema)
    vectors = vectorizer.transform(words.unionByName(extra))
    meta = vectors.schema["v"].metadata
    null = F.when(F.col("id") == 1000, F.lit(None)).otherwise(F.col("v"))
    vectors = vectors.select("id", "label", null.alias("features"))
    vectors = vectors.withMetadata("features", meta)
    return vectors.where("id < 1000"), vectors, len(vectorizer.vocabulary)


def _columns(model):
    """id, prediction and one column per vector entry (-inf as a finite
    stand-in), so chispa compares each float to PRECISION."""
    from pyspark.ml.functions import vector_to_array

    cols = [F.col("id"), F.coalesce("prediction", F.lit(-1.0)).alias("prediction")]
    for vector in ("probability", "rawPrediction"):
        for k in range(model.numClasses):
            entry = F.greatest(vector_to_array(vector)[k], F.lit(-1e300))
            cols.append(entry.alias(f"{vector}{k}"))
    return cols


def _equal_to_arrow(model, df, got=None):
    """MLlib's scores (``got``, else the default transform) equal the Arrow UDF's."""
    arrow = model.copy()
    arrow.scoring = "arrow"
    want = arrow.transform(df)
    got = model.transform(df) if got is None else got
    assert got.columns == want.columns
    cols = _columns(model)
    assert_approx_df_equality(
        got.select(*cols).orderBy("id"),
        want.select(*cols).orderBy("id"),
        precision=PRECISION,
        ignore_nullable=True,
    )
    return got


def _no_python(df) -> None:
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "EvalPython" not in plan and "UDF(" in plan  # MLlib's JVM UDFs


@pytest.fixture(scope="module")
def planted(spark):
    """(training rows, rows to score, Vector size, model: l2, standardized)."""
    train, vectors, size = _vectors(spark)
    return train, vectors, size, MaxEntClassifier(l2=0.01, standardization=True).fit(train)


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_transform_delegates_vectors_to_mllib(planted, caplog):
    train, vectors, size, model = planted
    with caplog.at_level(logging.INFO, logger="sparkmaxent.ml.mllib"):
        got = _equal_to_arrow(model, vectors)
    assert not caplog.records, "MLlib's model applies: no fallback"
    _no_python(got)
    assert got.columns == [*vectors.columns, "rawPrediction", "probability", "prediction"]
    assert got.schema["prediction"].metadata["ml_attr"]["vals"] == model.labels
    assert got.select("prediction").distinct().count() > 1
    null = got.where("id = 1000").first()
    assert null.probability == got.where("id = 1001").first().probability  # null: empty
    _equal_to_arrow(model.copy({model.thresholds: [1.0, 2.0, 0.5]}), vectors)
    lr = model.toMLlib(size)
    assert (lr.numClasses, lr.numFeatures) == (3, size)
    present = vectors.where("features IS NOT NULL")  # MLlib alone fails on a null Vector
    _equal_to_arrow(model, present, lr.transform(present))


@pytest.mark.slow
def test_absent_classes(spark):
    train, vectors, _ = _vectors(spark, 2, seed=5, label=lambda y: float(2 * y))  # classes 0, 2
    model = MaxEntClassifier(method="grafting", l1=0.005).fit(train)
    assert model.numClasses == 3
    got = _equal_to_arrow(model, vectors)
    assert {r.probability[1] for r in got.select("probability").collect()} == {0.0}


@pytest.mark.slow
def test_what_does_not_map_falls_back_or_is_refused(planted, caplog):
    train, vectors, size, model = planted
    binary = MaxEntClassifier(l2=0.01, binary=True).fit(train)
    with caplog.at_level(logging.INFO, logger="sparkmaxent.ml.mllib"):
        got = _equal_to_arrow(binary, vectors)
    assert "binary predicates" in caplog.text
    assert "EvalPython" in got._jdf.queryExecution().executedPlan().toString()
    with pytest.raises(NotMLlib, match="binary predicates"):
        binary.toMLlib(size)
    strict = binary.copy()
    strict.scoring = "mllib"
    with pytest.raises(NotMLlib, match="binary predicates"):
        strict.transform(vectors)
    old = model.copy()
    old._vector_size = None  # a model saved before fit recorded the Vector size
    bare = vectors.withMetadata("features", {})  # hand-made Vectors: size unknown
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sparkmaxent.ml.mllib"):
        _equal_to_arrow(old, bare)
    assert "no ml_attr metadata" in caplog.text
    with pytest.raises(NotMLlib, match="threshold is 0"):
        model.copy({model.thresholds: [0.0, 1.0, 1.0]}).toMLlib(size)


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_fit_records_the_vector_size(spark, planted, tmp_path, caplog):
    """fit records the Vectors' size (metadata, else every row's one size):
    hand-made Vectors with no metadata are scored by MLlib's model, a column
    whose metadata gives another size is refused naming the column, by every
    scorer; the size is saved with the model (numFeatures, as MLlib's)."""
    from sparkmaxent.errors import InputError
    from sparkmaxent.ml import MaxEntClassificationModel

    train, vectors, size, model = planted
    assert model.numFeatures == size
    bare = vectors.withMetadata("features", {})
    with caplog.at_level(logging.INFO, logger="sparkmaxent.ml.mllib"):
        _no_python(_equal_to_arrow(model, bare))
    assert not caplog.records, "the recorded size: no fallback"
    other = vectors.withMetadata("features", {"ml_attr": {"num_attrs": size + 5}})
    for scoring in ("auto", "arrow", "sql"):
        scorer = model.copy()
        scorer.scoring = scoring
        with pytest.raises(InputError, match=f"featuresCol 'features'.* size {size + 5} .*{size}"):
            scorer.transform(other)
    path = str(tmp_path / "model")
    model.write().save(path)
    loaded = MaxEntClassificationModel.load(path)
    assert loaded.numFeatures == size
    _no_python(_equal_to_arrow(loaded, bare))
    hand_made = MaxEntClassifier(l2=0.01).fit(train.withMetadata("features", {}))
    assert hand_made.numFeatures == size  # the one Vector size of every row
    _no_python(_equal_to_arrow(hand_made, bare))


def test_saved_in_mllibs_format_loads_as_mllibs_model(planted, tmp_path):
    from pyspark.errors import AnalysisException
    from pyspark.ml.classification import LogisticRegressionModel

    train, vectors, size, model = planted
    model = model.copy({model.thresholds: [1.0, 2.0, 0.5]})
    path = str(tmp_path / "mllib")
    model.saveMLlib(path, size)
    with pytest.raises(AnalysisException, match="PATH_ALREADY_EXISTS"):
        model.saveMLlib(path, size)
    model.saveMLlib(path, size, overwrite=True)
    lr = LogisticRegressionModel.load(path)
    assert lr.getThresholds() == [1.0, 2.0, 0.5] and lr.numFeatures == size
    present = vectors.where("features IS NOT NULL")
    _equal_to_arrow(model, present, lr.transform(present))


def test_large_models_go_to_mllib_row_major_sparse(planted):
    """Above the dense limit the coefficients reach MLlib in its row-major
    sparse form (CSR, ``isTransposed``: its product with a sparse Vector
    walks each class's weights, where the column-major form walks every
    column up to the Vector's last index); below it dense column-major.
    Both hold the same weights and the model MLlib builds from the sparse
    one scores as the Arrow scorer."""
    import numpy as np
    from pyspark.ml.classification import LogisticRegressionModel
    from pyspark.ml.common import _py2java
    from pyspark.ml.linalg import DenseMatrix, SparseMatrix

    from sparkmaxent.ml.mllib import MLLIB_CLASS, _matrices, mllib_form

    train, vectors, size, model = planted
    coefficients, intercepts = mllib_form(model.scorer(), size)
    dense, _ = _matrices(coefficients, intercepts)
    sparse, vector = _matrices(coefficients, intercepts, dense_limit=0)
    assert isinstance(dense, DenseMatrix) and not dense.isTransposed
    assert isinstance(sparse, SparseMatrix) and sparse.isTransposed
    np.testing.assert_array_equal(sparse.toArray(), dense.toArray())
    assert len(sparse.values) == np.count_nonzero(dense.toArray()) > 0
    sc = model.spark_session().sparkContext
    jvm_class = getattr(sc._jvm, MLLIB_CLASS)
    java = jvm_class(model.uid, _py2java(sc, sparse), _py2java(sc, vector), model.numClasses, True)
    lr = LogisticRegressionModel._from_java(java).setFeaturesCol("features")
    present = vectors.where("features IS NOT NULL")
    _equal_to_arrow(model, present, lr.transform(present))
