"""Scoring as Spark SQL expressions: no Python worker.

A model without conjunctions scores a row as S_k = sum_j x_j W[j, k] + b_k
over the predicates it uses (``Scorer.linear``, standardization folded in).
The weights travel as one JSON string literal read by ``from_json`` into a
``map<string, array<double>>`` (constant-folded once by the optimizer);
each row's scores are an ``aggregate`` over its features with
``try_element_at`` on that map (an unknown name adds nothing, a repeated
one adds again, as ``prepare`` sums repeats; a Vector's index looks up a
row of an ``array<array<double>>`` literal instead; a model trained on binary
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
TEXT, SCORES, TOP, EXPS, TOTAL, MEAN = (
    "__maxent_t",
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
    column of ``kind`` (``data.columns``: ARRAY, MAP or VECTOR, a pyspark.ml
    Vector read through its text: see :func:`vector_entries`). The
    intermediate columns are :data:`INTERMEDIATE`."""
    W, b = scorer.linear()
    names = scorer.names.to_pylist()
    used = np.flatnonzero(np.any(W != 0, axis=1))
    col = _quoted(features_col)
    start = _doubles(b)

    def add(weights: str, key: str, times: str = "") -> str:
        """acc plus the weights of predicate ``key`` (times its value)."""
        row = f"try_element_at({weights}, {key})"
        return f"coalesce(zip_with(acc, {row}, (s, w) -> s + w{times}), acc)"

    steps = []
    if kind == VECTOR:
        # predicate name j (an index) -> row j + 1 of an array<array<double>>: one lookup
        by_index = {int(names[j]): W[j].tolist() for j in used if _is_index(names[j])}
        rows = [by_index.get(i) for i in range(max(by_index, default=-1) + 1)]
        wrows = f"from_json({_string(json.dumps(rows, allow_nan=False))}, 'array<array<double>>')"
        # the entries are the stored values: presence is 1.0 where one is non-zero
        value = "CAST(e.x != 0 AS DOUBLE)" if scorer.binary else "e.x"
        step = add(wrows, "e.i + 1", f" * {value}")
        steps.append((TEXT, f"CAST({col} AS STRING)"))
        body = f"aggregate({vector_entries(TEXT)}, {start}, (acc, e) -> {step})"
        scores = f"coalesce({body}, {start})"
    else:
        weights = json.dumps({names[j]: W[j].tolist() for j in used}, allow_nan=False)
        wmap = f"from_json({_string(weights)}, 'map<string,array<double>>')"
        if kind == ARRAY:
            listed = f"array_distinct({col})" if scorer.binary else col
            step = add(wmap, "x")
            scores = f"aggregate(coalesce({listed}, array()), {start}, (acc, x) -> {step})"
        elif kind == MAP:
            # presence (data.indexing.presence): 1.0 where the value is non-zero
            value = "CAST(e.value != 0 AS DOUBLE)" if scorer.binary else "e.value"
            step = add(wmap, "e.key", f" * {value}")
            body = f"aggregate(map_entries({col}), {start}, (acc, e) -> {step})"
            scores = f"coalesce({body}, {start})"
        else:
            raise ValueError(f"no SQL scoring for a features column of kind {kind!r}")
    return [*steps, (SCORES, scores), *output_steps(scorer)]


def _is_index(name: str) -> bool:
    """Whether predicate ``name`` is a Vector index (as ``data.columns`` names them)."""
    return name.isdigit() and str(int(name)) == name


def vector_entries(text: str) -> str:
    """``array<struct<i: int, x: double>>`` of a Vector's stored entries (a
    dense Vector's non-zero ones, as ``data.columns`` reads Vectors), from
    the column ``text`` holding ``CAST(vector AS STRING)``: Spark prints a
    SparseVector ``(size,[i,...],[x,...])`` and a DenseVector ``[x,...]``,
    doubles exactly (Java's shortest round-trip form), which the casts read
    back; SQL has no other access to the Vector type's fields."""
    t = text

    def listed(part: str, of: str) -> str:
        return f"transform(filter(split({part}, ','), s -> s != ''), s -> CAST(s AS {of}))"

    indices = listed(f"substring_index(substring_index({t}, '],[', 1), ',[', -1)", "INT")
    values = listed(f"substring_index(substring_index({t}, '],[', -1), '])', 1)", "DOUBLE")
    sparse = f"zip_with({indices}, {values}, (i, x) -> named_struct('i', i, 'x', x))"
    dense = (
        f"filter(transform(split(substring({t}, 2, length({t}) - 2), ','), (s, i) -> "
        "named_struct('i', i, 'x', CAST(IF(s = '', '0', s) AS DOUBLE))), e -> e.x != 0)"
    )
    return f"IF(startswith({t}, '('), {sparse}, {dense})"


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


def select_sql(steps: list[tuple[str, str]], table: str, outputs: dict[str, str]) -> str:
    """One Spark SQL query running ``steps`` over ``table``: every column of
    the table, then ``outputs`` (output column -> step column: RAW,
    PROBABILITY, PREDICTION; the vectors as ``array<double>``, SQL having no
    Vector type). The steps are lateral column aliases (Spark >= 3.4)."""
    inner = ",\n    ".join(f"{sql} AS {name}" for name, sql in steps)
    shown = ", ".join(f"{step} AS {_quoted(out)}" for out, step in outputs.items())
    hidden = ", ".join(name for name, _ in steps)
    return (
        f"SELECT * EXCEPT ({hidden}), {shown}\nFROM (\n  SELECT *,\n    {inner}\n  FROM {table}\n)"
    )


#: every intermediate column of the steps
INTERMEDIATE = (TEXT, SCORES, TOP, EXPS, TOTAL, MEAN)

__all__ = [
    "score_sql",
    "select_sql",
    "output_steps",
    "RAW",
    "PROBABILITY",
    "PREDICTION",
    "INTERMEDIATE",
]
