"""Every Param of ``MaxEntClassifier`` and ``MaxEntClassificationModel``
checked the way pyspark's own tests check its stages
(``pyspark.testing.mlutils.check_params`` and pyspark's
``ml/tests/test_param.py``: params sorted by name, owned by the stage's
uid, defaults, getters and setters, ``isSet`` / ``isDefined`` /
``clear``, ``explainParam``'s text, ``copy(extra)``), with what a JVM stage
would supply written out here: no JVM is needed but for the fitted model's
checks."""

from __future__ import annotations

import pytest
from pyspark.ml.param import Param, Params, TypeConverters

from sparkmaxent.ml import MaxEntClassificationModel, MaxEntClassifier

#: a valid value for every Param: one unlike its default where it has one
OTHER = {
    "binary": True,
    "checkpointDir": "/tmp/elsewhere",
    "config": {"train.choice.points": 5},
    "elasticNetParam": 0.5,
    "featuresCol": "feats",
    "l1": 0.25,
    "l2": 3.0,
    "labelCol": "y",
    "maxFeatures": 9,
    "maxIter": 11,
    "maxRounds": 13,
    "method": "grafting",
    "nBest": 17,
    "predictionCol": "yhat",
    "probabilityCol": "p",
    "rawPredictionCol": "raw",
    "regParam": 0.125,
    "standardization": True,
    "thresholds": [0.5, 0.5],
    "tol": 1e-3,
    "validationFraction": 0.3,
    "validationIndicatorCol": "held",
    "warmStart": False,
    "weightCol": "w",
}
STAGES = [MaxEntClassifier, MaxEntClassificationModel]


def _cap(name: str) -> str:
    return name[0].upper() + name[1:]


def _explained(stage, p) -> str:
    """pyspark's explainParam text, built here from the stage's maps."""
    if not stage.isDefined(p):
        return f"{p.name}: {p.doc} (undefined)"
    values = []
    if stage.hasDefault(p):
        values.append(f"default: {stage._defaultParamMap[p]}")
    if stage.isSet(p):
        values.append(f"current: {stage._paramMap[p]}")
    return f"{p.name}: {p.doc} ({', '.join(values)})"


@pytest.mark.parametrize("cls", STAGES, ids=lambda c: c.__name__)
def test_params_are_sorted_owned_and_reachable_by_name(cls):
    stage = cls()
    names = [p.name for p in stage.params]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert sorted(OTHER) == names  # a new Param needs a value in OTHER (and a check here)
    for p in stage.params:
        assert p.parent == stage.uid, p.name
        assert stage.hasParam(p.name) and stage.getParam(p.name) == p, p.name
        assert getattr(stage, p.name) == p, p.name  # the instance's copy of the class Param
        assert getattr(cls, p.name).parent == Params._dummy().uid, p.name
        assert isinstance(p.doc, str) and p.doc.strip(), p.name
        assert not stage.isSet(p), p.name
        assert stage.isDefined(p) == stage.hasDefault(p), p.name


@pytest.mark.parametrize("cls", STAGES, ids=lambda c: c.__name__)
def test_each_param_sets_gets_explains_and_clears(cls):
    stage = cls()
    for p in stage.params:
        getter, setter = getattr(stage, f"get{_cap(p.name)}"), getattr(stage, f"set{_cap(p.name)}")
        default = stage.getOrDefault(p) if stage.hasDefault(p) else None
        if stage.hasDefault(p):
            assert getter() == default, p.name
        else:
            with pytest.raises(KeyError):
                stage.getOrDefault(p)
        assert stage.explainParam(p) == _explained(stage, p), p.name
        assert setter(OTHER[p.name]) is stage, p.name
        assert stage.isSet(p) and stage.isDefined(p), p.name
        assert getter() == OTHER[p.name] != default, p.name
        assert stage.explainParam(p.name) == _explained(stage, p), p.name
        assert "current: " in stage.explainParam(p), p.name
        stage.clear(p)
        assert not stage.isSet(p), p.name
        assert stage.isDefined(p) == stage.hasDefault(p), p.name
        if stage.hasDefault(p):
            assert getter() == default, p.name
    assert stage.explainParams() == "\n".join(_explained(stage, p) for p in stage.params)


@pytest.mark.parametrize("cls", STAGES, ids=lambda c: c.__name__)
def test_a_param_of_another_stage_is_refused(cls):
    other = Param(Params._dummy(), "otherParam", "not a member", TypeConverters.toString)
    with pytest.raises(ValueError):
        cls().set(other, "value")
    with pytest.raises(AttributeError):  # pyspark's getParam of an unknown name
        cls().getParam("otherParam")


@pytest.mark.parametrize("cls", STAGES, ids=lambda c: c.__name__)
def test_copy_with_extra_overrides_and_leaves_the_original(cls):
    stage = cls()
    stage.set(stage.l2, 2.0)
    extra = {stage.getParam(name): value for name, value in OTHER.items() if name != "l2"}
    copied = stage.copy(extra)
    assert type(copied) is cls and copied.uid == stage.uid and copied.params == stage.params
    for p, value in extra.items():
        assert copied.isSet(p) and copied.getOrDefault(p) == value, p.name
        assert not stage.isSet(p), p.name
    assert copied.getL2() == 2.0
    # what is set on the copy beyond extra is the original's map, as pyspark checks it
    assert {p: v for p, v in copied._paramMap.items() if p not in extra} == stage._paramMap
    assert copied._defaultParamMap == stage._defaultParamMap
    copied.set(copied.l2, 4.0)
    assert stage.getL2() == 2.0  # the maps are the copy's own
    assert stage.copy()._paramMap == stage._paramMap


def test_the_fitted_model_carries_the_estimators_params(model, df):
    """MLlib's fit copies the estimator's Param values onto the model
    (``copyValues``): every Param the estimator set or defaulted is the
    model's, under the model's uid; a copy of the fitted model with extra
    scores with it and leaves the original's columns."""
    est = MaxEntClassifier(method="grafting", l1=0.01)
    for p in model.params:
        assert p.parent == model.uid, p.name
        if est.isDefined(p.name):
            assert model.getOrDefault(p.name) == est.getOrDefault(p.name), p.name
    renamed = model.copy({model.predictionCol: "yhat", model.probabilityCol: "p"})
    assert renamed.uid == model.uid and renamed.maxentModel is model.maxentModel
    out = renamed.transform(df)
    assert {"yhat", "p", "rawPrediction"} <= set(out.columns)
    assert "prediction" not in out.columns
    assert model.getPredictionCol() == "prediction" and model.getProbabilityCol() == "probability"
    assert [r.yhat for r in out.orderBy("id").collect()] == [
        r.prediction for r in model.transform(df).orderBy("id").collect()
    ]
