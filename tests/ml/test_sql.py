"""SQL scoring (ml/sql.py): transform without a Python worker gives the
Arrow scorer's output, for every feature column kind (sparse and dense
Vectors with unseen indices, stored zeros and nulls included), classes
absent in training, thresholds, binary predicates and standardization; the
SQL text runs in spark.sql."""

from __future__ import annotations

import pytest
from chispa import assert_approx_df_equality
from pyspark.sql import functions as F

from sparkmaxent.ml import MaxEntClassifier

from .data import events


def _both(model, df, scoring="sql"):
    """(``scoring``'s transform, Arrow transform) of ``df``, ordered by id."""
    sql = model.copy()
    sql.scoring = scoring
    arrow = model.copy()
    arrow.scoring = "arrow"
    return sql.transform(df).orderBy("id"), arrow.transform(df).orderBy("id")


def _equal(model, df, scoring="sql"):
    """The ``scoring`` (a SQL form) transform of ``df`` after checking it
    against the Arrow one: same columns, same values."""
    from pyspark.ml.functions import vector_to_array

    got, want = _both(model, df, scoring)
    assert got.columns == want.columns
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
    got = _equal(model, df)
    assert got.columns == [*df.columns, "rawPrediction", "probability", "prediction"]
    assert got.schema["prediction"].metadata["ml_attr"]["vals"] == model.labels
    odd = spark.createDataFrame(
        [(0, ["c1", "c1", "new"]), (1, []), (2, None), (3, ["it's", "a\\b", "{x}"]), (4, [None])],
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
    model.scoring = "sql"
    assert model.numClasses == 3 and model.uses_sql(model.scorer())
    got = _equal(model, df)
    assert {r.probability[1] for r in got.select("probability").collect()} == {0.0}
    standardized = MaxEntClassifier(l2=0.01, standardization=True).fit(df)
    standardized.scoring = "sql"
    assert standardized.uses_sql(standardized.scorer())  # the scaling folded into W and b
    assert standardized.maxentModel.scaling is not None
    _equal(standardized, df)


def test_ties_go_to_the_first_class_as_in_the_arrow_scorer(spark):
    """Two labels with the same events: every row ties, prediction class 0."""
    rows = [(i, f"l{i % 2}", ["x"] if i % 4 < 2 else []) for i in range(40)]
    df = spark.createDataFrame(rows, "id int, label string, features array<string>")
    got = _equal(MaxEntClassifier(l2=0.1).fit(df), df)
    assert {(r.prediction, round(r.probability[0], 12)) for r in got.collect()} == {(0.0, 0.5)}


def _vectors(spark):
    """Rows of Vectors over 12 indices: sparse ones with unseen indices (10,
    11 and past the training vocabulary), stored zeros, real values and no
    entries; dense ones with zeros, none at all; a null."""
    from pyspark.ml.linalg import Vectors

    rows = [
        Vectors.sparse(12, [0, 3, 5], [1.0, 2.0, 1.0]),
        Vectors.sparse(12, [1, 10, 11], [1.0, 1.0, 3.0]),
        Vectors.sparse(100000, [2, 4, 99999], [-0.5, 2.5e-7, 1e20]),
        Vectors.sparse(12, [0, 2, 6], [0.0, 1.0, 0.0]),
        Vectors.sparse(12, [], []),
        Vectors.dense([0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 1.5, 0.0]),
        Vectors.dense([0.0, 0.0, 0.0]),
        Vectors.dense([]),
        None,
    ]
    return spark.createDataFrame([(i, v) for i, v in enumerate(rows)], ["id", "features"])


def test_sql_scores_vectors(spark, df):
    """Vector features (the CountVectorizer's counts) scored in SQL as in the
    Arrow UDF, plain, standardized and binary."""
    from pyspark.ml.feature import CountVectorizer

    vectorizer = CountVectorizer(inputCol="features", outputCol="v").fit(df)
    vectors = vectorizer.transform(df).select("id", "label", F.col("v").alias("features"))
    unseen = _vectors(spark)
    for params in ({"l1": 0.01, "method": "grafting"},
                   {"l2": 0.01, "standardization": True, "binary": True}):  # fmt: skip
        model = MaxEntClassifier(**params).fit(vectors)
        model.scoring = "sql"
        assert model.uses_sql(model.scorer())
        assert all(n.isdigit() for n in model.featureNames)  # the Vector's indices
        got = _equal(model, vectors)
        assert got.select("prediction").distinct().count() > 1
        _equal(model, unseen)
    steps = dict(model.sqlExpression(kind="vector"))
    assert "CAST(`features` AS STRING)" in steps.values()  # no Python: the Vector's text


def test_sql_expression_runs_as_one_select(spark, model, df):
    steps = model.sqlExpression()
    df.createOrReplaceTempView("maxent_rows")
    select = ", ".join(f"{sql} AS {name}" for name, sql in steps)
    out = spark.sql(f"SELECT id, {select} FROM maxent_rows").orderBy("id")
    want = model.transform(df).orderBy("id").select("prediction").collect()
    assert [r[steps[-1][0]] for r in out.collect()] == [r.prediction for r in want]


def test_saved_sql_file_runs_as_transform(spark, model, df, tmp_path):
    """saveSQL writes one query a SQL user runs over their table: the
    columns of transform, the vectors as arrays; an existing file is refused."""
    from pyspark.errors import AnalysisException
    from pyspark.ml.functions import vector_to_array

    path = str(tmp_path / "score.sql")
    model.saveSQL(path, table="maxent_input")
    with pytest.raises(AnalysisException, match="PATH_ALREADY_EXISTS"):
        model.saveSQL(path, table="maxent_input")
    df.createOrReplaceTempView("maxent_input")
    with open(path) as f:
        got = spark.sql(f.read()).orderBy("id")
    sql = model.copy()
    sql.scoring = "sql"  # the same SQL, run by transform: equal to the last bit
    want = sql.transform(df).orderBy("id")
    want = want.withColumns({c: vector_to_array(c) for c in ("rawPrediction", "probability")})
    assert [f.dataType.simpleString() for f in got.schema] == [
        f.dataType.simpleString() for f in want.schema
    ]
    assert got.columns == want.columns and got.collect() == want.collect()


def test_spark_hash_is_spark_sqls_hash(spark):
    """The SQL scorer's perfect hash is built in Python with the hashes
    Spark evaluates per row (``hash(x)``, ``hash(d, x)``): equal on names
    of every tail length, non-ASCII bytes (signed tail bytes) and quotes;
    each name has a slot of its own (two of equal ``hash(x)`` too), the one
    Spark computes from the SQL."""
    from sparkmaxent.ml.sql import DisplacedSlots, spark_hash

    names = ["", "a", "ab", "abc", "abcd", "abcde", "t+1=NN", "w=é,ü", "日本語", "x" * 37, "it's"]
    names += ["w=159593", "w=193902"]  # equal hash(x): hash(d, x) parts them
    assert spark_hash(names[-1]) == spark_hash(names[-2])
    slots = DisplacedSlots.of(names)
    assert sorted(set(slots.slots)) == sorted(slots.slots) and slots.size > len(names)
    got = spark.createDataFrame([(x,) for x in names], "x string").selectExpr(
        "hash(x) AS h", f"{slots.sql('x')} AS slot"
    )
    assert [r.h for r in got.collect()] == [spark_hash(x) for x in names]
    assert [r.slot for r in got.collect()] == slots.slots


def test_sql_tables_are_built_once_per_model(spark, model, df, monkeypatch):
    """The perfect hash and weight literals are built on the first SQL
    transform and reused by the next ones (and by sqlExpression); a change
    of the weights builds them again, and the SQL scores follow it."""
    import copy

    from sparkmaxent.data.columns import ARRAY, MAP
    from sparkmaxent.ml import sql

    built = []
    real = sql.weight_tables
    monkeypatch.setattr(sql, "weight_tables", lambda *a: built.append(a[1]) or real(*a))
    own = model.copy()
    own._maxent = copy.deepcopy(model.maxentModel)
    own.__dict__.pop("_sql_tables", None)  # not the fixture's (copies share them)
    own.scoring = "sql"
    own.transform(df).collect()
    own.transform(df).collect()
    own.sqlExpression()
    assert built == [ARRAY]
    own.maxentModel.weights.values[0] += 1.0
    _equal(own, df)  # the new weights, equal to the Arrow scorer's
    assert built == [ARRAY, ARRAY]
    own.sqlExpression(kind=MAP)
    own.sqlExpression(kind=MAP)
    assert built == [ARRAY, ARRAY, MAP]
