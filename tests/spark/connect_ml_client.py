"""The pyspark.ml side of ``test_connect_ml.py``, run as a Spark Connect
client in its own process (a Connect session marks the whole process as
remote): ``python -m tests.spark.connect_ml_client URL OUT``.

Fits the classifier, the ranker and a Tokenizer + classifier Pipeline on
the tiny tables of ``tests/ml``, and leaves in ``OUT`` what the test
compares with a classic session: each model's weights (``*.json``), its
``transform`` output, saved models, and the output of the models loaded
back under Connect (Parquet, written by the server on the shared disk).
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession

from sparkmaxent.ml import (
    MaxEntClassificationModel,
    MaxEntClassifier,
    MaxEntRanker,
    MaxEntRankingModel,
)
from tests.ml.data import frame
from tests.ml.test_ranking import map_table

#: Spark must run the passes (not the driver), on the same partitions as classic
CONFIG = {"data.in_process_max_events": 0, "data.partitions": 2}
CLASSIFIER = {"method": "grafting", "l1": 0.01, "config": CONFIG}
RANKER = {
    "groupCol": "sent",
    "featuresCol": "feats",
    "correctCol": "ok",
    "method": "grafting",
    "l1": 0.005,
    "config": CONFIG,
}
PIPELINE_ROWS = [("good fine great", 1.0), ("bad awful poor", 0.0), ("fine good", 1.0)] * 10


def summary(model) -> dict:
    """What the test compares: weights, report figures, selected features."""
    w = model.maxentModel.weights
    return {
        "ids": w.ids.tolist(),
        "values": w.values.tolist(),
        "bias": None if w.bias is None else w.bias.tolist(),
        "objective": model.report["objective"],
        "passes": model.report["passes"],
        "kkt_passed": (model.certificate or {}).get("passed"),
        "selected": [list(r) for r in model.selectedFeatures.orderBy("feature").collect()],
    }


def pipeline(spark):
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import Tokenizer

    text = spark.createDataFrame(PIPELINE_ROWS, "text string, label double")
    stages = [
        Tokenizer(inputCol="text", outputCol="words"),
        MaxEntClassifier(featuresCol="words", method="l2", l2=0.01, config=CONFIG),
    ]
    return text, Pipeline(stages=stages)


def classifier(spark, out: str) -> dict:
    from pyspark.ml.feature import IndexToString

    df = frame(spark)
    model = MaxEntClassifier(**CLASSIFIER).fit(df)
    model.transform(df).write.parquet(os.path.join(out, "transform"))
    plan = model.transform(df)._explain_string(mode="formatted")
    # the prediction's nominal metadata names the classes: IndexToString needs no labels=
    named = IndexToString(inputCol="prediction", outputCol="predicted").transform(
        model.transform(df)
    )
    named.select("id", "prediction", "predicted").write.parquet(os.path.join(out, "named"))
    model.write().overwrite().save(os.path.join(out, "model"))
    model.write().overwrite().save(os.path.join(out, "model"))  # overwrite replaces it
    back = MaxEntClassificationModel.load(os.path.join(out, "model"))
    back.transform(df).write.parquet(os.path.join(out, "transform-loaded"))
    return {
        "classifier": summary(model),
        "classifier_loaded": summary(back),
        "python_udf": "EvalPython" in plan,  # transform's default: no Python worker
        # the default for tokens: MLlib's vectoriser and model, built on the server
        "text_mllib": getattr(model, "_text_mllib", None) is not None,
    }


def ranker_and_pipeline(spark, out: str) -> dict:
    from pyspark.ml import PipelineModel

    table = map_table(spark)
    ranker = MaxEntRanker(**RANKER).fit(table)
    ranker.transform(table).write.parquet(os.path.join(out, "ranked"))
    ranker.write().save(os.path.join(out, "ranker"))
    ranker_back = MaxEntRankingModel.load(os.path.join(out, "ranker"))

    text, pipe = pipeline(spark)
    fitted = pipe.fit(text)
    fitted.write().overwrite().save(os.path.join(out, "pipeline"))
    PipelineModel.load(os.path.join(out, "pipeline")).transform(text).write.parquet(
        os.path.join(out, "pipeline-loaded")
    )
    return {
        "ranker": summary(ranker),
        "ranker_loaded": summary(ranker_back),
        "pipeline": summary(fitted.stages[1]),
    }


def vectors(spark, out: str) -> dict:
    """The classifier on a ``CountVectorizer``'s Vectors: the Vectors, the
    model and its default ``transform`` (MLlib's model written under the
    model's checkpointDir and loaded on the server, ml/mllib_stored.py),
    with thresholds too, the SQL scorer's ``transform`` of both, and
    MLlib's model saved by ``saveMLlib`` and loaded under Connect with its
    ``transform``, written for the classic side to compare."""
    from pyspark.ml.classification import LogisticRegressionModel
    from pyspark.ml.feature import CountVectorizer

    df = frame(spark)
    vectorizer = CountVectorizer(inputCol="features", outputCol="vec").fit(df)
    vec = vectorizer.transform(df).select("id", "label", "vec")
    vec.write.parquet(os.path.join(out, "vectors"))
    model = MaxEntClassifier(featuresCol="vec", **CLASSIFIER).fit(vec)
    model.write().save(os.path.join(out, "vector-model"))
    # the default: MLlib's model written under checkpointDir, loaded on the server
    model.setCheckpointDir(os.path.join(out, "checkpoints"))
    model.transform(vec).write.parquet(os.path.join(out, "vector-transform"))
    kept = model._mllib
    plan = model.transform(vec)._explain_string(mode="formatted")
    tilted = model.copy({model.thresholds: [1.0, 3.0, 0.5]})
    tilted.transform(vec).write.parquet(os.path.join(out, "vector-thresholds"))
    try:  # MLlib's refusal of an existing output column, before any scoring
        model.transform(model.transform(vec))
        refused = ""
    except Exception as e:
        refused = str(e)
    for scored, name in ((model, "vector-sql"), (tilted, "vector-thresholds-sql")):
        sql = scored.copy()
        sql.scoring = "sql"
        sql.transform(vec).write.parquet(os.path.join(out, name))
    # MLlib's own model, built on the server from saveMLlib's files (the route Connect has)
    model.saveMLlib(os.path.join(out, "mllib"), len(vectorizer.vocabulary))
    lr = LogisticRegressionModel.load(os.path.join(out, "mllib"))
    lr.transform(vec).write.parquet(os.path.join(out, "mllib-transform"))
    return {
        "vector_model": summary(model),
        "vector_size": len(vectorizer.vocabulary),
        "python_udf": "EvalPython" in plan,
        # written once, kept on the model (copies share it), its files removed
        "mllib_kept": kept is not None and tilted._mllib is kept and model._mllib is kept,
        "refused": refused,
        "checkpoints_left": sorted(os.listdir(os.path.join(out, "checkpoints"))),
    }


PARTS = {"classifier": classifier, "ranker-pipeline": ranker_and_pipeline, "vectors": vectors}


def main(url: str, out: str, part: str) -> None:
    """Run ``part`` (a key of PARTS) into ``out``; its summaries go to ``models.json``."""
    spark = SparkSession.builder.remote(url).getOrCreate()
    result = PARTS[part](spark, out)
    with open(os.path.join(out, "models.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
