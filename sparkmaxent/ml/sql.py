"""Scoring as Spark SQL expressions: no Python worker.

A model without conjunctions scores a row as S_k = sum_j x_j W[j, k] + b_k
over the predicates it uses (``Scorer.linear``, standardization folded in).
The weights travel as one JSON string literal read by ``from_json`` into a
``map<string, array<double>>`` (constant-folded once by the optimizer);
each row's scores are an ``aggregate`` over its features with
``try_element_at`` on that map (an unknown name adds nothing, a repeated
one adds again, as ``prepare`` sums repeats; a model trained on binary
predicates reads an array's distinct names and a value's presence, as
``prepare(binary=True)``). rawPrediction (S less its row
mean), probability (softmax) and prediction (argmax, or MLlib's
p_k / t_k with thresholds) follow with higher-order array functions. The
text is plain Spark SQL, so Scala, Java and SQL users run it as it is
(``MaxEntClassificationModel.sqlExpression``), and it needs nothing but the
DataFrame API (classic or Spark Connect).
"""

from __future__ import annotations

import json

import numpy as np

from ..data.columns import ARRAY, MAP, VECTOR
from .scoring import Scorer


def _string(text: str) -> str:
    """A Spark SQL string literal (backslash escapes, the parser's default)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _doubles(values) -> str:
    """An array<double> literal (+-inf and NaN as casts)."""
    out = []
    for v in values:
        if np.isfinite(v):
            out.append(f"CAST({float(v)!r} AS DOUBLE)")
        else:
            out.append(f"CAST('{'-' if v < 0 else ''}Infinity' AS DOUBLE)")
    return f"array({', '.join(out)})"


def _quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


#: the intermediate columns of the steps (dropped after the outputs)
SCORES, TOP, EXPS, TOTAL, MEAN = (
    "__maxent_s",
    "__maxent_top",
    "__maxent_e",
    "__maxent_z",
    "__maxent_m",
)
#: the output columns of the steps
RAW, PROBABILITY, PREDICTION = "__maxent_raw", "__maxent_probability", "__maxent_prediction"


def score_sql(scorer: Scorer, features_col: str, kind: str) -> list[tuple[str, str]]:
    """SQL steps (column name, expression; each may use the columns of the
    steps before it) ending in ``raw``, ``probability`` (``array<double>``
    over the output classes) and ``prediction`` (double), for a features
    column of ``kind`` (``data.columns``: ARRAY, MAP or VECTOR: then the
    column is the Vector as ``array<double>``, which
    ``pyspark.ml.functions.vector_to_array`` gives in the JVM). The
    intermediate columns are :data:`SCORES`, :data:`TOP`, :data:`EXPS`,
    :data:`TOTAL` and :data:`MEAN`."""
    W, b = scorer.linear()
    names = scorer.names.to_pylist()
    used = np.flatnonzero(np.any(W != 0, axis=1))
    weights = json.dumps({names[j]: W[j].tolist() for j in used}, allow_nan=False)
    wmap = f"from_json({_string(weights)}, 'map<string,array<double>>')"
    col = _quoted(features_col)

    def add(key: str, times: str = "") -> str:
        """acc plus the weights of predicate ``key`` (times its value)."""
        return (
            f"coalesce(zip_with(acc, try_element_at({wmap}, {key}), (s, w) -> s + w{times}), acc)"
        )

    if kind == ARRAY:
        step = add("x")
        listed = f"array_distinct({col})" if scorer.binary else col
        scores = f"aggregate(coalesce({listed}, array()), {_doubles(b)}, (acc, x) -> {step})"
    elif kind == MAP:
        # presence (data.indexing.presence): 1.0 where the value is non-zero
        value = "CAST(e.value != 0 AS DOUBLE)" if scorer.binary else "e.value"
        step = add("e.key", f" * {value}")
        body = f"aggregate(map_entries({col}), {_doubles(b)}, (acc, e) -> {step})"
        scores = f"coalesce({body}, {_doubles(b)})"
    elif kind == VECTOR:
        # the entries are the non-zero values: presence multiplies by 1.0
        step = add("cast(e.i AS STRING)", "" if scorer.binary else " * e.x")
        dense = col  # the Vector as array<double> (pyspark.ml.functions.vector_to_array)
        entries = (
            f"filter(zip_with({dense}, sequence(0, size({dense}) - 1), "
            "(x, i) -> named_struct('x', x, 'i', i)), e -> e.x != 0)"
        )
        body = f"aggregate({entries}, {_doubles(b)}, (acc, e) -> {step})"
        scores = f"coalesce({body}, {_doubles(b)})"
    else:
        raise ValueError(f"no SQL scoring for a features column of kind {kind!r}")
    return [(SCORES, scores), *output_steps(scorer)]


def output_steps(scorer: Scorer) -> list[tuple[str, str]]:
    """raw, probability and prediction from the scores column (S by model
    label), by output class: a class the model never saw has raw -inf and
    probability 0, as ``Scorer.multiclass``."""
    K = len(scorer.classes)
    steps = [
        (TOP, f"array_max({SCORES})"),
        (EXPS, f"transform({SCORES}, s -> exp(s - {TOP}))"),
        (TOTAL, f"aggregate({EXPS}, CAST(0 AS DOUBLE), (a, e) -> a + e)"),
        (MEAN, f"aggregate({SCORES}, CAST(0 AS DOUBLE), (a, s) -> a + s) / {K}"),
    ]
    mean = MEAN
    raw = f"transform({SCORES}, s -> s - {mean})"
    prob = f"transform({EXPS}, e -> e / {TOTAL})"
    if not np.array_equal(scorer.classes, np.arange(scorer.n_classes)):
        at = np.zeros(scorer.n_classes, dtype=np.int64)
        at[scorer.classes] = np.arange(K) + 1  # 1-based positions; 0: absent
        where = f"array({', '.join(str(int(i)) for i in at)})"
        raw = (
            f"transform({where}, i -> IF(i = 0, CAST('-Infinity' AS DOUBLE), "
            f"{SCORES}[i - 1] - {mean}))"
        )
        prob = f"transform({where}, i -> IF(i = 0, CAST(0 AS DOUBLE), {EXPS}[i - 1] / {TOTAL}))"
    if scorer.thresholds is None:
        classes = f"array({', '.join(str(float(c)) for c in scorer.classes)})"
        prediction = f"CAST({classes}[array_position({SCORES}, {TOP}) - 1] AS DOUBLE)"
    else:
        scaled = (
            f"zip_with({prob}, {_doubles(scorer.thresholds)}, (p, t) -> IF(t = 0, "
            "IF(p > 0, CAST('Infinity' AS DOUBLE), CAST(0 AS DOUBLE)), p / t))"
        )
        prediction = f"CAST(array_position({scaled}, array_max({scaled})) - 1 AS DOUBLE)"
    return [*steps, (RAW, raw), (PROBABILITY, prob), (PREDICTION, prediction)]


#: every intermediate column of the steps
INTERMEDIATE = (SCORES, TOP, EXPS, TOTAL, MEAN)

__all__ = ["score_sql", "output_steps", "RAW", "PROBABILITY", "PREDICTION", "INTERMEDIATE"]
