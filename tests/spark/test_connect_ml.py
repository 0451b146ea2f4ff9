"""The pyspark.ml Estimators and Models under Spark Connect: fit,
transform, selectedFeatures, report and certificate, save and load (alone
and in a PipelineModel), and MaxEntRanker, with the DataFrame from a
Connect session, give what a classic session gives.

The Connect side runs in a subprocess (``tests/spark/connect_ml_client.py``;
a Connect session would make this whole process remote). The classic side
fits the same tables here on the RDD backend with the same partitions, so
both sum the same blocks in the same order: weights agree to 1e-9.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from chispa import assert_approx_df_equality, assert_df_equality

from sparkmaxent.ml import MaxEntClassificationModel, MaxEntClassifier, MaxEntRanker
from tests.ml.data import frame
from tests.ml.test_ranking import map_table
from tests.spark import connect_ml_client as client

pytestmark = pytest.mark.connect

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUTPUTS = ["rawPrediction", "probability", "prediction"]


@pytest.fixture(scope="module")
def server():
    pytest.importorskip("grpc", reason="the Spark Connect client needs the connect extra")
    from tests.e2e.connect import connect_server

    with connect_server(cores=2, memory="1g") as s:
        yield s


def run_client(server, out: str, part: str) -> dict:
    """``part`` of connect_ml_client.py run by a Connect client into ``out``."""
    env = {**os.environ, "PYTHONPATH": ROOT, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SPARK_REMOTE", None)
    proc = server.client(
        [sys.executable, "-m", "tests.spark.connect_ml_client", server.url, out, part],
        env=env,
        cwd=ROOT,
        timeout=1200,
    )
    assert proc.returncode == 0, f"the Connect client failed:\n{proc.stderr[-3000:]}"
    with open(os.path.join(out, "models.json")) as f:
        return json.load(f)


def centered(bias):
    """Biases up to their common shift, which no probability depends on (the
    optimizer's rounding may move along it: it is no check of the model)."""
    b = np.asarray(bias)
    return b - b.mean()


def assert_same(connect: dict, classic: dict) -> None:
    assert connect["ids"] == classic["ids"] and connect["ids"]
    np.testing.assert_allclose(connect["values"], classic["values"], rtol=1e-9, atol=1e-12)
    if classic["bias"] is None:
        assert connect["bias"] is None
    else:
        np.testing.assert_allclose(
            centered(connect["bias"]), centered(classic["bias"]), rtol=1e-9, atol=1e-12
        )
    assert connect["objective"] == pytest.approx(classic["objective"], rel=1e-9)
    assert connect["passes"] == classic["passes"]
    assert connect["kkt_passed"] == classic["kkt_passed"]
    assert [r[:-1] for r in connect["selected"]] == [r[:-1] for r in classic["selected"]]
    np.testing.assert_allclose(
        [r[-1] for r in connect["selected"]], [r[-1] for r in classic["selected"]], rtol=1e-9
    )


@pytest.mark.slow  # a Connect server and two fits: most of a minute
@pytest.mark.ci
def test_classifier_under_connect_is_the_classic_classifier(spark, server, tmp_path):
    out = str(tmp_path)
    models = run_client(server, out, "classifier")
    df = frame(spark)
    model = MaxEntClassifier(**client.CLASSIFIER).fit(df)
    assert models["classifier"]["kkt_passed"] is True
    assert_same(models["classifier"], client.summary(model))
    # the model saved and loaded under Connect is the one fitted there
    assert models["classifier_loaded"] == models["classifier"]
    assert models["python_udf"] is False  # Connect scores with no Python worker
    assert models["text_mllib"] is True  # MLlib's vectoriser and model (ml/mllib_text.py)

    model.scoring = "sql"  # the SQL scorer here: the same scores as Connect's default
    here = model.transform(df).orderBy("id")
    there = spark.read.parquet(os.path.join(out, "transform")).orderBy("id")
    assert there.columns == [*df.columns, "rawPrediction", "probability", "prediction"]
    # the values and the prediction's nominal metadata must agree; `there` went
    # through Parquet, which reads every column back as nullable (the classic
    # SQL-scored prediction is not nullable, as MLlib's)
    assert_df_equality(
        there.drop("rawPrediction", "probability"),
        here.drop("rawPrediction", "probability"),
        ignore_nullable=True,
    )
    assert here.schema["prediction"].metadata["ml_attr"]["type"] == "nominal"
    assert there.schema["prediction"].metadata == here.schema["prediction"].metadata
    # IndexToString under Connect read the class names from that metadata
    named = spark.read.parquet(os.path.join(out, "named")).collect()
    assert named and all(r.predicted == model.labels[int(r.prediction)] for r in named)
    scores = [(*r.rawPrediction.toArray(), *r.probability.toArray()) for r in there.collect()]
    expected = [(*r.rawPrediction.toArray(), *r.probability.toArray()) for r in here.collect()]
    np.testing.assert_allclose(scores, expected, rtol=1e-9, atol=1e-12)
    loaded = spark.read.parquet(os.path.join(out, "transform-loaded")).orderBy("id")
    assert_df_equality(loaded, there)

    # the model saved under Connect loads in a classic session and scores the same
    back = MaxEntClassificationModel.load(os.path.join(out, "model"))  # the default: MLlib's
    assert_df_equality(back.transform(df).orderBy("id"), there, ignore_nullable=True)


@pytest.mark.slow
def test_ranker_and_pipeline_under_connect_are_classic(spark, server, tmp_path):
    from pyspark.ml import PipelineModel

    out = str(tmp_path)
    models = run_client(server, out, "ranker-pipeline")
    table = map_table(spark)
    ranker = MaxEntRanker(**client.RANKER).fit(table)
    assert_same(models["ranker"], client.summary(ranker))
    assert models["ranker_loaded"] == models["ranker"]
    keys = ["sent", "cand"]
    there = spark.read.parquet(os.path.join(out, "ranked")).orderBy(keys)
    here = ranker.transform(table).orderBy(keys)
    assert_approx_df_equality(there, here, precision=1e-9)

    text, pipe = client.pipeline(spark)
    fitted = pipe.fit(text)
    assert_same(models["pipeline"], client.summary(fitted.stages[1]))
    loaded = PipelineModel.load(os.path.join(out, "pipeline"))  # saved under Connect
    assert isinstance(loaded.stages[1], MaxEntClassificationModel)
    there = spark.read.parquet(os.path.join(out, "pipeline-loaded")).orderBy("text")
    # the default route (MLlib's models for token arrays, classic or Connect): the same bits
    assert_df_equality(loaded.transform(text).orderBy("text"), there, ignore_nullable=True)


@pytest.mark.slow
def test_vector_transform_under_connect_predicts_as_mllib_does(spark, server, tmp_path):
    """Given Vectors, the default transform scores by MLlib's model built
    from our weights in a classic session (ml/mllib.py); a Connect client
    cannot build one, so there it writes it once under the model's
    checkpointDir, loads it on the server and removes the files
    (ml/mllib_stored.py): the same rawPrediction, probability and
    prediction as MLlib's model, the SQL scorer under Connect and the
    classic default for the same weights (the model saved under Connect),
    with thresholds too, no Python worker; and ``saveMLlib`` under Connect
    writes a model ``LogisticRegressionModel.load`` reads there, scoring
    the same."""
    out = str(tmp_path)
    models = run_client(server, out, "vectors")
    assert models["python_udf"] is False
    assert models["mllib_kept"] is True
    assert models["checkpoints_left"] == []
    assert "Column rawPrediction already exists" in models["refused"]
    vec = spark.read.parquet(os.path.join(out, "vectors"))
    assert vec.schema["vec"].metadata["ml_attr"]["num_attrs"] == models["vector_size"]
    model = MaxEntClassificationModel.load(os.path.join(out, "vector-model"))
    assert client.summary(model) == models["vector_model"]
    # a classic fit on the same Vectors gives the same weights (the sums' order may
    # differ: Parquet's row order), so the comparison below is of a typical model
    fitted = client.summary(MaxEntClassifier(featuresCol="vec", **client.CLASSIFIER).fit(vec))
    assert fitted["ids"] == models["vector_model"]["ids"]
    np.testing.assert_allclose(fitted["values"], models["vector_model"]["values"], rtol=1e-7)
    # classic: MLlib's own model built from the weights, and the default transform;
    # Connect: MLlib's model saved there (saveMLlib) and loaded there
    mllib = model.toMLlib(models["vector_size"]).transform(vec).orderBy("id")
    here = model.transform(vec).orderBy("id")
    there = spark.read.parquet(os.path.join(out, "vector-transform")).orderBy("id")
    saved = spark.read.parquet(os.path.join(out, "mllib-transform")).orderBy("id")
    sql = spark.read.parquet(os.path.join(out, "vector-sql")).orderBy("id")
    assert there.columns == here.columns == mllib.columns == [*vec.columns, *OUTPUTS]
    assert there.count() == vec.count() > 0
    # the prediction keeps its class names under Connect's MLlib route
    assert there.schema["prediction"].metadata == sql.schema["prediction"].metadata
    assert there.schema["prediction"].metadata["ml_attr"]["vals"] == model.labels
    _assert_scores_equal(there, mllib, here, saved, sql)
    tilted = spark.read.parquet(os.path.join(out, "vector-thresholds")).orderBy("id")
    tilted_sql = spark.read.parquet(os.path.join(out, "vector-thresholds-sql")).orderBy("id")
    classic = model.copy({model.thresholds: [1.0, 3.0, 0.5]}).transform(vec).orderBy("id")
    _assert_scores_equal(tilted, tilted_sql, classic)
    assert tilted.select("prediction").exceptAll(there.select("prediction")).count() > 0


def _assert_scores_equal(there, *others) -> None:
    """Equal predictions (chispa) and rawPrediction and probability to 1e-9."""
    for other in others:
        assert_df_equality(
            there.select("id", "prediction"),
            other.select("id", "prediction"),
            ignore_nullable=True,
            ignore_metadata=True,
        )
        for col in ("rawPrediction", "probability"):
            np.testing.assert_allclose(
                [r[col].toArray() for r in there.orderBy("id").collect()],
                [r[col].toArray() for r in other.collect()],
                rtol=1e-9,
                atol=1e-12,
            )
