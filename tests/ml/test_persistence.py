"""Save and load: the model alone, inside a PipelineModel, and the
estimator with its Params."""

from __future__ import annotations

import numpy as np
import pytest
from chispa import assert_df_equality
from pyspark.errors import AnalysisException

from sparkmaxent import storage
from sparkmaxent.ml import MaxEntClassificationModel, MaxEntClassifier
from sparkmaxent.model import MaxentModel


def test_model_round_trip(model, df, tmp_path):
    path = str(tmp_path / "m")
    model.write().overwrite().save(path)
    model.write().overwrite().save(path)  # overwrite replaces it
    with pytest.raises(AnalysisException, match="PATH_ALREADY_EXISTS") as e:
        model.save(path)  # as pyspark refuses it for any Python stage
    assert e.value.getCondition() == "PATH_ALREADY_EXISTS"
    back = MaxEntClassificationModel.load(path)
    assert back.uid == model.uid and back.labels == model.labels
    assert back.numClasses == model.numClasses and back.report == model.report
    assert back.extractParamMap() == {
        back.getParam(p.name): v for p, v in model.extractParamMap().items()
    }
    saved = MaxentModel.load(storage.join(path, "model"))  # the project's format
    np.testing.assert_array_equal(saved.weights.values, model.maxentModel.weights.values)
    assert_df_equality(back.transform(df), model.transform(df))


def test_output_column_params_survive_a_round_trip(model, df, tmp_path):
    renamed = model.copy({model.predictionCol: "guess", model.rawPredictionCol: ""})
    path = str(tmp_path / "renamed")
    renamed.save(path)
    cols = MaxEntClassificationModel.load(path).transform(df).columns
    assert cols == [*df.columns, "probability", "guess"]


def test_pipeline_model_round_trip(spark, tmp_path):
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.ml.feature import Tokenizer

    rows = [("good fine great", 1.0), ("bad awful poor", 0.0), ("fine good", 1.0)] * 10
    text = spark.createDataFrame(rows, "text string, label double")
    pipeline = Pipeline(
        stages=[
            Tokenizer(inputCol="text", outputCol="words"),
            MaxEntClassifier(featuresCol="words", method="l2", l2=0.01),
        ]
    )
    path = str(tmp_path / "pipeline")
    pipeline.write().overwrite().save(str(tmp_path / "unfitted"))
    unfitted = Pipeline.load(str(tmp_path / "unfitted"))
    assert unfitted.getStages()[1].getOrDefault("featuresCol") == "words"

    fitted = pipeline.fit(text)
    fitted.write().overwrite().save(path)
    back = PipelineModel.load(path)
    assert isinstance(back.stages[1], MaxEntClassificationModel)
    assert_df_equality(back.transform(text), fitted.transform(text))


def test_estimator_round_trip(tmp_path):
    est = MaxEntClassifier(
        method="ifs", maxFeatures=5, config={"train.ifs.gain_prior_variance": 2.0}
    )
    path = str(tmp_path / "est")
    est.save(path)
    back = MaxEntClassifier.load(path)
    assert back.uid == est.uid
    assert back.training_config() == est.training_config()
