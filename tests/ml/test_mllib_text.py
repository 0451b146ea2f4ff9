"""Token arrays scored by MLlib's own CountVectorizerModel (over the
model's vocabulary) and LogisticRegressionModel (ml/mllib_text.py):
transform's default for an ``array<string>`` column gives the Arrow
scorer's rawPrediction, probability and prediction to 1e-12 (tokens
outside the vocabulary, empty arrays, null rows and null tokens, repeated
tokens counted or, for a binary model, present once; string labels with
their nominal metadata, classes absent in training, thresholds,
standardization) with no Python worker; what has no such form falls back
with a log line or, with ``scoring = "mllib"``, is refused naming why."""

from __future__ import annotations

import logging

import pytest
from pyspark.sql import functions as F

from sparkmaxent.ml import MaxEntClassifier
from sparkmaxent.ml.mllib import NotMLlib
from sparkmaxent.ml.mllib_text import text_models, vocabulary_form

from .conftest import GRAFTING
from .data import events, frame
from .test_binary import _repeated
from .test_sql_mllib import _equal_to_arrow, _no_python

LOGGER = "sparkmaxent.ml.mllib_text"


def _odd(spark, label="double"):
    """Rows the vocabulary meets at scoring: repeats, a token it does not
    hold, an empty array, a null row, null tokens, quotes and backslashes."""
    rows = [
        (900, ["c1", "c1", "c1", "new"]),
        (901, []),
        (902, None),
        (903, ["it's", "a\\b", "{x}"]),
        (904, [None]),
        (905, ["c2", None, "w1", "w1"]),
    ]
    zero = "L0" if label == "string" else 0.0
    return spark.createDataFrame(
        [(i, zero, f, "odd") for i, f in rows],
        f"id long, label {label}, features array<string>, note string",
    )


def test_tokens_are_scored_by_mllib_as_by_the_arrow_scorer(spark, model, df, caplog):
    rows = df.unionByName(_odd(spark))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        got = _equal_to_arrow(model, rows)
    assert not caplog.records, "MLlib's models apply: no fallback"
    _no_python(got)
    assert got.columns == [*df.columns, "rawPrediction", "probability", "prediction"]
    assert got.schema["prediction"].metadata["ml_attr"]["vals"] == model.labels
    assert got.select("prediction").distinct().count() > 1
    empty, null = (got.where(f"id = {i}").first() for i in (901, 902))
    assert null.probability == empty.probability  # a null row scores as an empty one
    _no_python(_equal_to_arrow(model.copy({model.thresholds: [1.0, 2.0, 0.5]}), rows))
    # the vocabulary: the predicates with a weight, in the model's predicate order
    vocabulary, (coefficients, _) = vocabulary_form(model.scorer())
    assert vocabulary == [n for n in model.featureNames if n in set(vocabulary)]
    assert coefficients.shape == (model.numClasses, len(vocabulary))
    vectorizer, lr = text_models(model)
    assert vectorizer.vocabulary == vocabulary and lr.numFeatures == len(vocabulary)
    assert text_models(model.copy())[0] is vectorizer  # built once, copies share it


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_repeated_tokens_count_or_are_present_as_in_training(spark):
    """A model fitted on counts scores repeats as counts; a binary one as
    presence (the vectoriser's binary=True): both as the Arrow scorer, and
    the two differ on the repeats."""
    train = _repeated(spark)
    counted = MaxEntClassifier(**GRAFTING).fit(train)
    binary = MaxEntClassifier(binary=True, **GRAFTING).fit(train)
    repeated = train.unionByName(_odd(spark).drop("note"))
    assert text_models(binary)[0].getBinary() and not text_models(counted)[0].getBinary()
    for fitted in (counted, binary):
        _no_python(_equal_to_arrow(fitted, repeated))
    once = repeated.withColumn("features", F.array_distinct("features"))
    _equal_to_arrow(binary, repeated, binary.transform(once))  # presence: repeats change nothing
    twice = counted.transform(repeated).select("id", "probability").orderBy("id").collect()
    single = counted.transform(once).select("id", "probability").orderBy("id").collect()
    assert any(a.probability != b.probability for a, b in zip(twice, single))


@pytest.mark.slow
def test_string_labels_absent_classes_and_standardization(spark):
    from pyspark.ml.feature import IndexToString

    words = frame(spark, string_labels=True)
    named = MaxEntClassifier(l2=0.01, standardization=True).fit(words)
    assert named.maxentModel.scaling is not None  # folded into MLlib's coefficients
    got = _equal_to_arrow(named, words.unionByName(_odd(spark, "string")))
    _no_python(got)
    assert named.labels == ["L0", "L1", "L2"]
    assert got.schema["prediction"].metadata["ml_attr"]["vals"] == named.labels
    shown = IndexToString(inputCol="prediction", outputCol="shown").transform(got)
    assert {r.shown for r in shown.select("shown").collect()} <= set(named.labels)
    rows = [(i, float(2 * y), f) for i, y, f in events(120, 2, seed=5)]  # classes 0 and 2
    gapped = spark.createDataFrame(rows, "id long, label double, features array<string>")
    absent = MaxEntClassifier(**GRAFTING).fit(gapped)
    got = _equal_to_arrow(absent, gapped)
    assert absent.numClasses == 3
    assert {r.probability[1] for r in got.select("probability").collect()} == {0.0}


@pytest.mark.slow
def test_what_has_no_mllib_form_falls_back_or_is_refused(spark, caplog):
    repeated = _repeated(spark)
    combined = {**GRAFTING, "config": {"train.grafting.combination_degree": 2}}
    conjunctions = MaxEntClassifier(binary=True, **combined).fit(repeated)
    empty = MaxEntClassifier(method="grafting", l1=100.0).fit(repeated)
    for model, why in ((conjunctions, "conjunctions"), (empty, "vocabulary would be empty")):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=LOGGER):
            got = _equal_to_arrow(model, repeated)
        assert why in caplog.text
        assert "EvalPython" in got._jdf.queryExecution().executedPlan().toString()
        strict = model.copy()
        strict.scoring = "mllib"
        with pytest.raises(NotMLlib, match=why):
            strict.transform(repeated)
