"""pyspark.ml conventions: every Param has a getter, a setter, a default
that matches the keyword signature; the classification model is a pyspark
ProbabilisticClassificationModel (predict*, numFeatures, thresholds,
coefficients, summaries); transform refuses an existing output column and
marks the prediction nominal so IndexToString needs no labels."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from sparkmaxent.ml import (
    MaxEntClassificationModel,
    MaxEntClassifier,
    MaxEntRanker,
    MaxEntRankingModel,
)
from sparkmaxent.train import METHODS

#: a value to set for the Params that have no default
UNSET = {"weightCol": "w", "thresholds": [0.5, 0.5], "validationIndicatorCol": "v"}
STAGES = [MaxEntClassifier, MaxEntRanker, MaxEntClassificationModel, MaxEntRankingModel]


def _cap(name: str) -> str:
    return name[0].upper() + name[1:]


@pytest.mark.parametrize("cls", STAGES, ids=lambda c: c.__name__)
def test_every_param_has_a_getter_and_a_setter(cls):
    stage = cls()
    assert len(stage.params) >= 20
    for p in stage.params:
        getter, setter = getattr(stage, f"get{_cap(p.name)}"), getattr(stage, f"set{_cap(p.name)}")
        value = stage.getOrDefault(p) if stage.hasDefault(p) else UNSET[p.name]
        if stage.hasDefault(p):
            assert getter() == value, p.name
        assert setter(value) is stage, p.name
        assert stage.isSet(p) and getter() == value, p.name


@pytest.mark.parametrize("cls", [MaxEntClassifier, MaxEntRanker], ids=lambda c: c.__name__)
def test_keyword_signature_lists_every_param_with_its_default(cls):
    stage = cls()
    for method in (cls.__init__, cls.setParams):
        sig = inspect.signature(method)
        names = [n for n in sig.parameters if n != "self"]
        assert sorted(names) == sorted(p.name for p in stage.params), method.__name__
        for name in names:
            param = sig.parameters[name]
            assert param.kind is inspect.Parameter.KEYWORD_ONLY, name
            want = stage.getOrDefault(name) if stage.hasDefault(name) else None
            if name == "config":
                assert param.default is None and want == {}
            else:
                assert param.default == want, name
    with pytest.raises(TypeError, match="nope"):
        cls(nope=1)
    assert stage.setParams(l1=0.5) is stage and stage.getL1() == 0.5
    assert not stage.isSet(stage.l2)  # setParams sets the keywords given only


def test_explain_params_lists_the_methods():
    text = MaxEntClassifier().explainParams()
    assert "method: training method" in text
    for method in ("auto", *METHODS):
        assert method in text, method


def test_the_classes_are_pyspark_classifiers():
    from pyspark.ml.classification import (
        ProbabilisticClassificationModel,
        ProbabilisticClassifier,
    )

    assert issubclass(MaxEntClassifier, ProbabilisticClassifier)
    assert issubclass(MaxEntClassificationModel, ProbabilisticClassificationModel)
    assert not inspect.isabstract(MaxEntClassificationModel)


def test_one_row_scoring_matches_transform(spark, model):
    rows = [["c1", "w3"], ["c0", "c0", "unseen"], []]
    df = spark.createDataFrame(
        [(i, r) for i, r in enumerate(rows)], "id int, features array<string>"
    )
    out = model.transform(df).orderBy("id").collect()
    for row, scored in zip(rows, out):
        assert model.predict(row) == scored.prediction
        np.testing.assert_allclose(model.predictRaw(row).toArray(), scored.rawPrediction.toArray())
        np.testing.assert_allclose(
            model.predictProbability(row).toArray(), scored.probability.toArray()
        )
    assert model.predictProbability({"c2": 1.0}).argmax() == 2
    with pytest.raises(TypeError, match="expected a pyspark.ml Vector"):
        model.predict(3)
    assert model.numClasses == 3 and model.numFeatures >= len(model.featureNames) > 0


def test_coefficients_reproduce_the_raw_scores(model):
    W, b = model.coefficientMatrix, model.interceptVector
    names = model.featureNames
    assert (W.numRows, W.numCols) == (3, len(names)) and len(b) == 3
    assert W.toArray().astype(bool).sum() == model.maxentModel.nonzero  # sparse: the weights
    for row in (["c1", "w3"], ["c2"], ["w0", "w1", "c0"]):
        x = np.array([1.0 if n in row else 0.0 for n in names])
        s = W.toArray() @ x + b.toArray()
        np.testing.assert_allclose(s - s.mean(), model.predictRaw(row).toArray(), atol=1e-12)


def test_thresholds_move_the_prediction(spark, model, df):
    from pyspark.errors import IllegalArgumentException

    zero_last = model.copy({model.thresholds: [1.0, 1.0, 0.0]})
    assert {r.prediction for r in zero_last.transform(df).select("prediction").collect()} == {2.0}
    assert zero_last.predict(["c0"]) == 2.0 and model.predict(["c0"]) == 0.0
    with pytest.raises(IllegalArgumentException, match="numClasses = 3"):
        model.copy({model.thresholds: [0.5, 0.5]}).transform(df)


def test_an_existing_output_column_is_refused(model, df):
    from pyspark.errors import IllegalArgumentException

    out = model.transform(df)
    with pytest.raises(IllegalArgumentException, match="Column rawPrediction already exists"):
        model.transform(out)
    renamed = model.copy(
        {model.rawPredictionCol: "r2", model.probabilityCol: "p2", model.predictionCol: "y2"}
    )
    assert renamed.transform(out).columns[-3:] == ["r2", "p2", "y2"]


def test_training_summary_and_evaluate(model, df):
    from pyspark.ml.evaluation import MulticlassClassificationEvaluator

    assert model.hasSummary
    summary = model.summary
    accuracy = MulticlassClassificationEvaluator(metricName="accuracy").evaluate(
        model.transform(df)
    )
    assert summary.accuracy == pytest.approx(accuracy) and accuracy > 0.6
    assert model.evaluate(df).accuracy == pytest.approx(accuracy)
    assert len(summary.precisionByLabel) == 3 and summary.labels == [0.0, 1.0, 2.0]
    history = summary.objectiveHistory
    assert len(history) == len(model.report["rounds"]) > 1
    assert history[-1] == pytest.approx(model.report["objective"])
    assert all(a >= b - 1e-12 for a, b in zip(history, history[1:]))  # rounds only add


def test_index_to_string_reads_the_prediction_metadata(spark):
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import IndexToString, StringIndexer

    from .data import frame

    named = frame(spark, string_labels=True)
    pipeline = Pipeline(
        stages=[
            StringIndexer(inputCol="label", outputCol="label_index"),
            MaxEntClassifier(labelCol="label_index", l1=0.01),
            IndexToString(inputCol="prediction", outputCol="predicted"),
        ]
    )
    fitted = pipeline.fit(named)
    maxent = fitted.stages[1]
    assert sorted(maxent.labels) == ["L0", "L1", "L2"]  # StringIndexer's names
    rows = fitted.transform(named).select("prediction", "predicted", "label").collect()
    assert all(r.predicted == maxent.labels[int(r.prediction)] for r in rows)
    assert np.mean([r.predicted == r.label for r in rows]) > 0.6
    # string labels: evaluate maps them onto the class indices
    direct = MaxEntClassifier(l1=0.01).fit(named)
    assert direct.evaluate(named).accuracy > 0.6


@pytest.mark.parametrize("scoring", ["arrow", "sql", "mllib"])
def test_score_vectors_carry_mllib_attribute_size(model, df, scoring):
    """rawPrediction and probability carry numClasses as their attribute
    group size, as MLlib's classifiers write it, whichever route scored them
    (a Connect client's default route is MLlib's, a classic one's the Arrow
    UDF: the same columns either way)."""
    scorer = model.copy()
    scorer.scoring = scoring
    out = scorer.transform(df)
    for col in ("rawPrediction", "probability"):
        assert out.schema[col].metadata == {"ml_attr": {"num_attrs": model.numClasses}}
