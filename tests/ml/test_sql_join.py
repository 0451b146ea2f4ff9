"""SQL scoring by explode, broadcast join and groupBy (ml/sql_join.py):
transform with ``scoring = "sql-join"`` gives the Arrow scorer's output for
every feature column kind, with unknown features, empty and null rows,
thresholds, absent classes and ties; its text is one runnable SELECT."""

from __future__ import annotations

from pyspark.sql import functions as F

from sparkmaxent.ml import MaxEntClassifier

from .data import events
from .test_sql import _equal as _sql_equal
from .test_sql import _vectors


def _equal(model, df):
    """The sql-join transform of ``df`` after checking it against the Arrow one."""
    return _sql_equal(model, df, "sql-join")


def test_join_scores_as_the_arrow_scorer(spark, model, df):
    got = _equal(model, df)
    assert got.count() == df.count()
    assert got.schema["prediction"].metadata["ml_attr"]["vals"] == model.labels
    odd = spark.createDataFrame(
        [(0, ["c1", "c1", "new"]), (1, []), (2, None), (3, ["it's", "a\\b", "{x}"]), (4, [None])],
        "id int, features array<string>",
    )
    _equal(model, odd)
    words = F.array_distinct("features")
    values = F.transform(words, lambda x: F.length(x) * 0.5)
    _equal(model, df.select("id", F.map_from_arrays(words, values).alias("features")))
    _equal(model.copy({model.thresholds: [1.0, 2.0, 0.5]}), df)


def test_join_scores_absent_classes_and_binary(spark):
    rows = [(i, float(2 * y), f) for i, y, f in events(120, 2, seed=5)]  # classes 0 and 2
    df = spark.createDataFrame(rows, "id long, label double, features array<string>")
    got = _equal(MaxEntClassifier(l2=0.01).fit(df), df)
    assert {r.probability[1] for r in got.select("probability").collect()} == {0.0}
    _equal(MaxEntClassifier(l2=0.01, binary=True, standardization=True).fit(df), df)


def test_join_scores_vectors(spark, df):
    from pyspark.ml.feature import CountVectorizer

    vectorizer = CountVectorizer(inputCol="features", outputCol="v").fit(df)
    vectors = vectorizer.transform(df).select("id", "label", F.col("v").alias("features"))
    model = MaxEntClassifier(l1=0.01, method="grafting").fit(vectors)
    assert _equal(model, vectors).select("prediction").distinct().count() > 1
    _equal(model, _vectors(spark))


def test_ties_go_to_the_first_class_as_in_the_arrow_scorer(spark):
    """Two labels with the same events: every row ties, prediction class 0."""
    rows = [(i, f"l{i % 2}", ["x"] if i % 4 < 2 else []) for i in range(40)]
    df = spark.createDataFrame(rows, "id int, label string, features array<string>")
    got = _equal(MaxEntClassifier(l2=0.1).fit(df), df)
    assert {(r.prediction, round(r.probability[0], 12)) for r in got.collect()} == {(0.0, 0.5)}


def test_join_query_runs_as_one_select(spark, model, df):
    from sparkmaxent.ml.sql import PREDICTION
    from sparkmaxent.ml.sql_join import join_sql

    df.createOrReplaceTempView("maxent_join_rows")
    query = join_sql(model.scorer(), "features", "array<string>", "maxent_join_rows",
                     {"prediction": PREDICTION})  # fmt: skip
    got = spark.sql(query).orderBy("id")
    assert got.columns == [*df.columns, "prediction"]
    want = model.transform(df).orderBy("id")
    assert [r.prediction for r in got.collect()] == [r.prediction for r in want.collect()]
