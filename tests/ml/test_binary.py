"""The ``binary`` Param: a fit on rows with repeated tokens is the fit on
their distinct tokens (as CountVectorizer's binary=True), the model scores
presence through SQL and Arrow, remembers the setting across save/load and
refuses a different one; combination features train on count rows with it."""

from __future__ import annotations

import numpy as np
import pytest
from chispa import assert_approx_df_equality

from sparkmaxent.config import ConfigError
from sparkmaxent.ml import MaxEntClassificationModel, MaxEntClassifier, MaxEntRanker

from .conftest import GRAFTING
from .data import events


def _repeated(spark):
    """Rows whose tokens repeat (the cue up to 4 times, by row): counts and
    presence differ."""
    rows = [
        (i, float(y), [w for k, w in enumerate(f) for _ in range(1 + (i + k) % 4)])
        for i, y, f in events(240, 3, seed=3)
    ]
    return spark.createDataFrame(rows, "id long, label double, features array<string>")


@pytest.fixture(scope="module")
def repeated(spark):
    return _repeated(spark)


@pytest.fixture(scope="module")
def distinct(repeated):
    from pyspark.sql import functions as F

    return repeated.withColumn("features", F.array_distinct("features"))


@pytest.fixture(scope="module")
def fitted(repeated, distinct):
    """(binary fit on repeated rows, plain fit on their distinct tokens)."""
    return (
        MaxEntClassifier(binary=True, **GRAFTING).fit(repeated),
        MaxEntClassifier(**GRAFTING).fit(distinct),
    )


def _outputs(model, df, scoring: str):
    from pyspark.ml.functions import vector_to_array

    scorer = model.copy()
    scorer.scoring = scoring
    cols = ["id", "prediction"]
    for vector in ("probability", "rawPrediction"):
        cols += [vector_to_array(vector)[k].alias(f"{vector}{k}") for k in range(3)]
    return scorer.transform(df).select(*cols).orderBy("id")


def test_binary_fit_is_the_fit_on_distinct_tokens(fitted, repeated, distinct):
    binary, plain = fitted
    assert binary.getBinary() is True and plain.getBinary() is False
    assert binary.featureNames == plain.featureNames
    np.testing.assert_allclose(
        binary.coefficientMatrix.toArray(), plain.coefficientMatrix.toArray(), atol=1e-9
    )
    np.testing.assert_allclose(
        binary.interceptVector.toArray(), plain.interceptVector.toArray(), atol=1e-9
    )
    want = _outputs(plain, distinct, "arrow")
    for scoring in ("sql", "arrow"):
        got = _outputs(binary, repeated, scoring)  # the repeats are read as presence
        assert_approx_df_equality(got, want, precision=1e-9, ignore_nullable=True)
    # without binary the repeats count: the same rows give other scores
    counted = _outputs(plain, repeated, "arrow").collect()
    assert any(
        abs(a["probability0"] - b["probability0"]) > 1e-6 for a, b in zip(counted, want.collect())
    )


def test_binary_model_scores_map_values_as_presence(spark, fitted, distinct):
    from pyspark.sql import functions as F

    binary, plain = fitted
    values = F.transform("features", lambda x: F.length(x) * 1.5)  # counts-like values > 1
    maps = distinct.select("id", F.map_from_arrays("features", values).alias("features"))
    want = _outputs(plain, distinct, "arrow")
    for scoring in ("sql", "arrow"):
        got = _outputs(binary, maps, scoring)
        assert_approx_df_equality(got, want, precision=1e-9, ignore_nullable=True)
    assert binary.predictProbability({"c1": 3.0, "w2": 2.0}) == plain.predictProbability(
        ["c1", "w2"]
    )


def test_binary_survives_save_and_load(fitted, repeated, tmp_path):
    binary, _ = fitted
    path = str(tmp_path / "binary_model")
    binary.save(path)
    loaded = MaxEntClassificationModel.load(path)
    assert loaded.getBinary() is True
    want = _outputs(binary, repeated, "arrow")
    for scoring in ("sql", "arrow"):
        got = _outputs(loaded, repeated, scoring)
        assert_approx_df_equality(got, want, precision=1e-12, ignore_nullable=True)


def test_a_model_refuses_another_binary_setting(fitted, repeated):
    binary, plain = fitted
    with pytest.raises(ConfigError, match="binary: the model was trained with binary = true"):
        binary.copy({binary.binary: False}).transform(repeated)
    with pytest.raises(ConfigError, match="binary = false"):
        plain.copy({plain.binary: True}).transform(repeated)


def test_binary_and_its_config_key_together_are_refused():
    est = MaxEntClassifier(binary=True, config={"data.binary": True})
    with pytest.raises(ConfigError, match="binary and config"):
        est.training_config()
    assert MaxEntClassifier(config={"data.binary": True}).training_config().data.binary


def test_combination_features_train_on_repeated_tokens_with_binary(repeated):
    combined = {**GRAFTING, "config": {"train.grafting.combination_degree": 2}}
    model = MaxEntClassifier(binary=True, **combined).fit(repeated)
    assert model.getBinary() is True
    scored = model.transform(repeated).select("prediction").collect()  # Arrow: conjunctions
    assert len(scored) == repeated.count()
    with pytest.raises(Exception, match=r"MaxEntClassifier\(binary=True\)"):
        MaxEntClassifier(**combined).fit(repeated)


def test_ranker_binary_fit_is_the_fit_on_presence_values(spark):
    from pyspark.sql import functions as F

    from .test_ranking import map_table

    table = map_table(spark)  # values 0.5 and 1.0
    ones = table.withColumn("feats", F.transform_values("feats", lambda k, v: F.lit(1.0)))
    params = {"groupCol": "sent", "featuresCol": "feats", "correctCol": "ok", **GRAFTING}
    binary = MaxEntRanker(binary=True, **params).fit(table)
    plain = MaxEntRanker(**params).fit(ones)
    assert binary.getBinary() is True
    np.testing.assert_allclose(
        binary.maxentModel.weights.values, plain.maxentModel.weights.values, atol=1e-9
    )
    cols = ["sent", "cand", "score", "probability", "prediction"]
    got = binary.transform(table).select(*cols).orderBy("sent", "cand")
    want = plain.transform(ones).select(*cols).orderBy("sent", "cand")
    assert_approx_df_equality(got, want, precision=1e-9, ignore_nullable=True)
    counted = plain.transform(table).select(*cols).orderBy("sent", "cand").collect()
    assert any(abs(a["score"] - b["score"]) > 1e-6 for a, b in zip(counted, want.collect()))
