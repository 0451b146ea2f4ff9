"""Scoring as one Spark SQL query by explode, broadcast join and groupBy.

The scores S_k = b_k + sum_j x_j W[j, k] (``Scorer.linear``, standardization
folded in) without a lambda per feature and class: each row's features
become rows (row id, predicate, value) (``explode_outer``), joined with the
model's non-zero weights (predicate, class, weight), a literal table small
enough to broadcast, and summed per row and class in one ``GROUP BY`` row id
(S_k a conditional sum). A predicate the model does not use joins no weight,
a row without features keeps its intercepts; repeated names add again, as
``prepare`` sums them, and a model trained on binary predicates reads an
array's distinct names and a value's presence. The input columns travel
through the ``GROUP BY`` as one struct. rawPrediction, probability and
prediction follow from the scores as in ``ml/sql.py`` (:func:`output_steps`).
The text is one SELECT over a table for Scala, Java and SQL users; rows come
out in no particular order (the ``GROUP BY`` shuffles them).
"""

from __future__ import annotations

import numpy as np

from ..data.columns import ARRAY, MAP, VECTOR
from .scoring import Scorer
from .sql import SCORES, _is_index, _quoted, _string, output_steps, vector_entries

#: the columns of the query's inner steps
ROW_ID, ROW, FEATURES = "__maxent_id", "__maxent_row", "__maxent_f"


def weights_table(scorer: Scorer, kind: str) -> str:
    """The non-zero weights as a literal relation ``(f, k, w)``: predicate
    (a name, or a Vector index for ``kind`` VECTOR), model label, weight."""
    W, _ = scorer.linear()
    names = scorer.names.to_pylist()
    rows = []
    for j, k in zip(*np.nonzero(W), strict=True):
        if kind == VECTOR and not _is_index(names[j]):
            continue  # a name a Vector cannot hold
        key = names[j] if kind == VECTOR else _string(names[j])
        rows.append(f"({key}, {int(k)}, {float(W[j, k])!r}D)")
    f = "INT" if kind == VECTOR else "STRING"
    if not rows:
        return f"(SELECT CAST(NULL AS {f}) AS f, 0 AS k, 0D AS w WHERE false)"
    return f"(SELECT * FROM VALUES {', '.join(rows)} AS w(f, k, w))"


def _exploded(scorer: Scorer, features_col: str, kind: str, table: str) -> str:
    """The rows (row id, row, f, x) of ``table``: one per feature of a
    row (``x`` its value), one with f NULL for a row without features. The
    row id is drawn below the explode (above it, each feature would get one)."""
    col = _quoted(features_col)
    if kind == ARRAY:
        feature = f"array_distinct({col})" if scorer.binary else col
    elif kind == MAP:
        feature = col
    elif kind == VECTOR:
        feature = f"CAST({col} AS STRING)"
    else:
        raise ValueError(f"no SQL scoring for a features column of kind {kind!r}")
    keep = f"SELECT {ROW_ID}, {ROW}"
    source = (
        f"SELECT monotonically_increasing_id() AS {ROW_ID}, struct(*) AS {ROW}, "
        f"{feature} AS {FEATURES} FROM {table}"
    )
    if kind == ARRAY:
        inner = f"{keep}, explode_outer({FEATURES}) AS f FROM ({source})"
        return f"{keep}, f, 1D AS x FROM ({inner})"
    if kind == MAP:
        inner = f"{keep}, explode_outer({FEATURES}) AS (f, v) FROM ({source})"
    else:
        entries = f"{keep}, explode_outer({vector_entries(FEATURES)}) AS e FROM ({source})"
        inner = f"{keep}, e.i AS f, e.x AS v FROM ({entries})"
    x = "CAST(v != 0 AS DOUBLE)" if scorer.binary else "v"
    return f"{keep}, f, {x} AS x FROM ({inner})"


def join_sql(scorer: Scorer, features_col: str, kind: str, table: str, outputs: dict) -> str:
    """One Spark SQL query over ``table`` (a table or view name, or a
    parenthesized subquery): its columns, then ``outputs`` (output column ->
    step column of :func:`output_steps`: RAW, PROBABILITY, PREDICTION, the
    vectors as ``array<double>``)."""
    _, b = scorer.linear()
    sums = ", ".join(f"{float(b[k])!r}D + sum(IF(w.k = {k}, w.w * e.x, 0D))" for k in range(len(b)))
    exploded = _exploded(scorer, features_col, kind, table)
    scores = (
        f"SELECT first(e.{ROW}) AS {ROW}, array({sums}) AS {SCORES}\n"
        f"  FROM ({exploded}) e\n  LEFT JOIN {weights_table(scorer, kind)} w ON e.f = w.f\n"
        f"  GROUP BY e.{ROW_ID}"
    )
    steps = ",\n    ".join(f"{sql} AS {name}" for name, sql in output_steps(scorer))
    shown = ", ".join(f"{step} AS {_quoted(out)}" for out, step in outputs.items())
    return f"SELECT {ROW}.*, {shown}\nFROM (\n  SELECT *,\n    {steps}\n  FROM (\n{scores}))"


def join_transform(scorer: Scorer, dataset, features_col: str, kind: str, outputs: dict):
    """:func:`join_sql` run over ``dataset`` (``spark.sql`` with the
    DataFrame as its input, classic or Spark Connect)."""
    query = join_sql(scorer, features_col, kind, "\0", outputs)
    query = query.replace("{", "{{").replace("}", "}}").replace("\0", "{input}")
    return dataset.sparkSession.sql(query, input=dataset)


__all__ = ["join_sql", "join_transform", "weights_table", "sql_scored"]


def sql_scored(form: str, scorer: Scorer, dataset, features_col: str, kind: str):
    """(DataFrame, {raw, probability, prediction: column}, columns to drop)
    of ``dataset`` scored in SQL: ``form`` "sql" by the steps of
    ``ml/sql.py`` (lambdas over each row's arrays), "sql-join" by
    :func:`join_transform`."""
    from pyspark.sql import functions as F

    from .sql import INTERMEDIATE, PREDICTION, PROBABILITY, RAW, score_sql

    fields = {"raw": RAW, "probability": PROBABILITY, "prediction": PREDICTION}
    if form == "sql-join":
        named = {step: step for step in fields.values()}
        return join_transform(scorer, dataset, features_col, kind, named), fields, list(named)
    scored = dataset
    for name, sql in score_sql(scorer, features_col, kind):
        scored = scored.withColumn(name, F.expr(sql))
    return scored, fields, [*INTERMEDIATE, *fields.values()]
