"""SQL scoring (ml/sql.py): transform without a Python worker gives the
Arrow scorer's output, for every feature column kind, classes absent in
training, thresholds and standardization; the SQL text runs in spark.sql."""

from __future__ import annotations

from chispa import assert_approx_df_equality

from sparkmaxent.ml import MaxEntClassifier

from .data import events


def _both(model, df):
    """(SQL transform, Arrow transform) of ``df``, ordered by id."""
    sql = model.copy()
    arrow = model.copy()
    arrow.scoring = "arrow"
    return sql.transform(df).orderBy("id"), arrow.transform(df).orderBy("id")


def _equal(model, df):
    """The SQL transform of ``df`` after checking it against the Arrow one."""
    from pyspark.ml.functions import vector_to_array

    got, want = _both(model, df)
    from pyspark.sql import functions as F

    cols = ["id", "prediction"]  # one column per entry: chispa compares floats approximately
    for vector in ("probability", "rawPrediction"):
        for k in range(model.numClasses):  # -inf (an absent class) as a finite stand-in
            entry = F.greatest(vector_to_array(vector)[k], F.lit(-1e300))
            cols.append(entry.alias(f"{vector}{k}"))
    assert_approx_df_equality(
        got.select(*cols), want.select(*cols), precision=1e-9, ignore_nullable=True
    )
    return got


def test_sql_scores_as_the_arrow_scorer(spark, model, df):
    from pyspark.sql import functions as F

    got = _equal(model, df)
    assert got.columns == [*df.columns, "rawPrediction", "probability", "prediction"]
    assert got.schema["prediction"].metadata["ml_attr"]["vals"] == model.labels
    odd = spark.createDataFrame(
        [(0, ["c1", "c1", "new"]), (1, []), (2, None), (3, ["it's", "a\\b"])],
        "id int, features array<string>",
    )
    _equal(model, odd)
    words = F.array_distinct("features")
    values = F.transform(words, lambda x: F.length(x) * 0.5)
    maps = df.select("id", F.map_from_arrays(words, values).alias("features"))
    _equal(model, maps)
    _equal(model.copy({model.thresholds: [1.0, 2.0, 0.5]}), df)


def test_sql_scores_absent_classes(spark):
    rows = [(i, float(2 * y), f) for i, y, f in events(120, 2, seed=5)]  # classes 0 and 2
    df = spark.createDataFrame(rows, "id long, label double, features array<string>")
    model = MaxEntClassifier(l2=0.01).fit(df)
    assert model.numClasses == 3 and model.uses_sql(model.scorer(), "array<string>")
    got = _equal(model, df)
    assert {r.probability[1] for r in got.select("probability").collect()} == {0.0}
    standardized = MaxEntClassifier(l2=0.01, standardization=True).fit(df)
    assert not standardized.uses_sql(standardized.scorer(), "array<string>")  # Arrow


def test_sql_expression_runs_as_one_select(spark, model, df):
    steps = model.sqlExpression()
    df.createOrReplaceTempView("maxent_rows")
    select = ", ".join(f"{sql} AS {name}" for name, sql in steps)
    out = spark.sql(f"SELECT id, {select} FROM maxent_rows").orderBy("id")
    want = model.transform(df).orderBy("id").select("prediction").collect()
    assert [r[steps[-1][0]] for r in out.collect()] == [r.prediction for r in want]
