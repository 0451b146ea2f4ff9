"""CrossValidator and TrainValidationSplit over the classifier's Params, and
fitMultiple's one preparation per fold."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.ml import MaxEntClassificationModel, MaxEntClassifier


def _tune_l1(tuner, df, est, **settings):
    """``tuner`` (CrossValidator or TrainValidationSplit) over gamma1 0.2 and
    0.01 by held-out log loss, fitted on ``df``; checks what both tuners must
    give and returns the fitted tuning model."""
    from pyspark.ml.evaluation import MulticlassClassificationEvaluator
    from pyspark.ml.tuning import ParamGridBuilder

    grid = ParamGridBuilder().addGrid(est.l1, [0.2, 0.01]).build()
    evaluator = MulticlassClassificationEvaluator(metricName="logLoss")
    tuning = tuner(estimator=est, estimatorParamMaps=grid, evaluator=evaluator, seed=3, **settings)
    fitted = tuning.fit(df)
    metrics = getattr(fitted, "avgMetrics", None) or fitted.validationMetrics
    assert len(metrics) == 2 and np.all(np.isfinite(metrics))
    # a strong penalty keeps fewer features and fits worse than a weak one here
    assert metrics[1] < metrics[0]
    best = fitted.bestModel
    assert isinstance(best, MaxEntClassificationModel) and best.getOrDefault("l1") == 0.01
    return fitted


def test_cross_validator_over_l1(spark, df, monkeypatch, tmp_path):
    from pyspark.ml.tuning import CrossValidator

    import sparkmaxent.data.prepare as prepare

    calls = []
    real = prepare.prepare_table
    record = lambda *a, **k: calls.append(a[2]) or real(*a, **k)  # noqa: E731
    monkeypatch.setattr(prepare, "prepare_table", record)
    scratch = tmp_path / "scratch"
    est = MaxEntClassifier(method="grafting", checkpointDir=str(scratch))
    _tune_l1(CrossValidator, df, est, numFolds=2)
    assert len(calls) == 2 + 1  # one preparation per fold, one for the best model's refit
    assert all(out.startswith(str(scratch)) for out in calls)  # under checkpointDir
    assert list(scratch.iterdir()) == []  # and removed


def test_train_validation_split_over_l1(spark, df):
    from pyspark.ml.tuning import TrainValidationSplit

    fitted = _tune_l1(TrainValidationSplit, df, MaxEntClassifier(method="grafting"), trainRatio=0.7)
    assert fitted.bestModel.transform(df).count() == df.count()


def test_fit_multiple_matches_separate_fits(df):
    est = MaxEntClassifier(method="l2")
    maps = [{est.l2: 0.1}, {est.l2: 0.001}]
    together = dict(est.fitMultiple(df, maps))
    for i, pm in enumerate(maps):
        alone = est.fit(df, pm).maxentModel
        got = together[i].maxentModel
        assert got.config == alone.config
        np.testing.assert_allclose(got.weights.values, alone.weights.values, rtol=1e-9)


def test_warm_started_grid_reaches_the_same_optima_in_fewer_passes(df):
    est = MaxEntClassifier(method="grafting", nBest=2)
    grid = [{est.l1: g} for g in (0.01, 0.1, 0.03)]  # fitted as 0.1, 0.03, 0.01
    warm = dict(est.fitMultiple(df, grid))
    cold = dict(est.copy({est.warmStart: False}).fitMultiple(df, grid))
    for i in range(len(grid)):
        w, c = warm[i], cold[i]
        assert w.certificate["passed"] and c.certificate["passed"]
        assert w.report["objective"] == pytest.approx(c.report["objective"], rel=1e-7)
        assert w.maxentModel.weights.nnz == c.maxentModel.weights.nnz
    passes = [sum(m.report["passes"] for m in d.values()) for d in (warm, cold)]
    assert passes[0] < passes[1], passes


def test_a_grid_mixing_methods_tunes_and_a_bad_point_is_refused_up_front(df, monkeypatch):
    from pyspark.ml.evaluation import MulticlassClassificationEvaluator
    from pyspark.ml.tuning import TrainValidationSplit

    import sparkmaxent.api as api
    from sparkmaxent.config import ConfigError

    est = MaxEntClassifier()
    grid = [
        {est.method: "l2", est.regParam: 0.1},
        {est.method: "grafting", est.regParam: 0.01, est.elasticNetParam: 1.0},
    ]
    evaluator = MulticlassClassificationEvaluator(metricName="logLoss")
    tvs = TrainValidationSplit(estimator=est, estimatorParamMaps=grid, evaluator=evaluator, seed=1)
    fitted = tvs.fit(df)
    assert len(fitted.validationMetrics) == 2 and np.all(np.isfinite(fitted.validationMetrics))
    assert fitted.bestModel.maxentModel.config["train"]["method"] in ("l2", "grafting")

    trained = []
    real = api.train_model
    monkeypatch.setattr(api, "train_model", lambda *a, **k: trained.append(1) or real(*a, **k))
    bad = [*grid, {est.method: "grafting", est.regParam: 0.01}]  # elasticNetParam 0: no l1 part
    with pytest.raises(ConfigError, match=r"param map 2 .*elasticNetParam: method 'grafting'"):
        tvs.copy().setEstimatorParamMaps(bad).fit(df)
    assert trained == []
