"""Scoring as Spark SQL expressions: no Python worker.

A model without conjunctions scores a row as S_k = sum_j x_j W[j, k] + b_k
over the predicates it uses (``Scorer.linear``, standardization folded in).
Each feature first becomes its row of K weights in one flat ``array<double>``
literal (one row per used predicate, read by ``from_json`` from one
string literal, constant-folded once by the optimizer), found in O(1): a
name by Spark's own ``hash`` (Murmur3, :func:`spark_hash` here) into a
bucket of a sorted literal name array and ``array_position`` within that
bucket (a map literal would be scanned key by key); a Vector's index by an
index -> row literal. An unknown name adds nothing, a repeated one adds
again, as ``prepare`` sums repeats; a model trained on binary predicates
reads an array's distinct names and a value's presence, as
``prepare(binary=True)``. The K scores are one ``transform`` over the
classes of an ``aggregate`` over the row's known features, bound once per
row (:func:`_let`), all of it generated code (Spark interprets ``zip_with``).
rawPrediction (S less its row mean), probability (softmax) and prediction
(argmax, or MLlib's p_k / t_k with thresholds) follow with higher-order
array functions. The text is plain Spark SQL, so Scala, Java and SQL users
run it as it is (``MaxEntClassificationModel.sqlExpression``), and it needs
nothing but the DataFrame API (classic or Spark Connect).
"""

from __future__ import annotations

import json
from typing import Any

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
    steps = []
    if kind == VECTOR:
        used = np.asarray([j for j in used if _is_index(names[j])], dtype=np.int64)
        # Vector index i -> its row (1-based) of the weights, 0: unused
        row_of = np.zeros(max((int(names[j]) + 1 for j in used), default=0), dtype=np.int64)
        row_of[[int(names[j]) for j in used]] = np.arange(len(used)) + 1
        rows = W[used]
        steps.append((TEXT, f"CAST({col} AS STRING)"))
        at = f"coalesce(try_element_at({_literal(row_of.tolist(), 'int')}, e.i + 1), 0)"
        # the entries are the stored values: presence is 1.0 where one is non-zero
        known = f"transform({vector_entries(TEXT)}, e -> named_struct('i', {at}, 'x', e.x))"
    elif kind in (ARRAY, MAP):
        keys = sorted((names[j] for j in used), key=lambda n: n.encode("utf-8"))
        M, keys, first = hash_buckets(keys)
        row = {names[j]: j for j in used}
        rows = W[[row[n] for n in keys]] if keys else np.zeros((0, W.shape[1]))
        if kind == ARRAY:
            listed = f"coalesce({f'array_distinct({col})' if scorer.binary else col}, array())"
            at = _position("x", M, keys, first)
            known = f"transform({listed}, x -> named_struct('i', {at}, 'x', 1D))"
        else:
            pairs = f"coalesce(map_entries({col}), array())"
            at = _position("e.key", M, keys, first)
            known = f"transform({pairs}, e -> named_struct('i', {at}, 'x', e.value))"
    else:
        raise ValueError(f"no SQL scoring for a features column of kind {kind!r}")
    return [*steps, (SCORES, _scores(known, rows, b, scorer.binary, kind)), *output_steps(scorer)]


def _scores(known: str, rows: np.ndarray, b: np.ndarray, binary: bool, kind: str) -> str:
    """``array<double>`` S_k = b_k + sum_e x_e rows[e.i - 1, k] over the
    entries ``known`` (``array<struct<i, x>>``, i the 1-based weight row, 0:
    a predicate the model does not use): one ``transform`` over the classes
    of an ``aggregate`` over the entries, each weight an ``element_at`` into
    one flat literal (row-major), all of them generated code (``zip_with``
    is not); the entries are bound once (:func:`_let`), not per class."""
    K = len(b)
    value = "CAST(e.x != 0 AS DOUBLE)" if binary else "e.x"
    times = "" if kind == ARRAY else f" * {value}"
    flat = _literal(rows.ravel().tolist(), "double")
    weight = f"element_at({flat}, (e.i - 1) * {K} + k + 1)"
    add = f"(s, e) -> s + {weight}{times}"
    per_class = f"transform({_doubles(b)}, (b, k) -> aggregate(kn, b, {add}))"
    return f"coalesce({_let(f'filter({known}, e -> e.i > 0)', 'kn', per_class)}, {_doubles(b)})"


def _let(value: str, name: str, body: str) -> str:
    """``body`` with lambda variable ``name`` bound to ``value``, evaluated
    once per row (a one-element ``transform``): a column used once inside a
    lambda would be inlined by the optimizer and evaluated per element."""
    return f"element_at(transform(array({value}), {name} -> {body}), 1)"


def _literal(values: list, of: str) -> str:
    """An ``array<of>`` literal read by ``from_json`` from one string
    (constant-folded once by the optimizer; finite values only)."""
    return f"from_json({_string(json.dumps(values, allow_nan=False))}, 'array<{of}>')"


def _position(key: str, M: int, keys: list[str], first: list[int]) -> str:
    """The 1-based position of name ``key`` in ``keys`` (0 when absent), in
    O(1): its bucket ``pmod(hash(key), M)`` holds ``keys[first[b]:first[b +
    1]]`` (:func:`hash_buckets`), searched by ``array_position``."""
    names = f"from_json({_string(json.dumps(keys))}, 'array<string>')"
    firsts = f"from_json({_string(json.dumps(first))}, 'array<bigint>')"
    # a bucket's (first, count) packed in one lookup: first * 2^20 + count
    lo = f"element_at({firsts}, pmod(hash({key}), {M}) + 1)"
    head, count = f"CAST({lo} DIV 1048576 AS INT)", f"CAST({lo} % 1048576 AS INT)"
    found = f"array_position(slice({names}, {head} + 1, {count}), {key})"
    return f"CAST(IF({found} = 0, 0, {head} + {found}) AS INT)"


def spark_hash(text: str, seed: int = 42) -> int:
    """Spark SQL's ``hash(text)`` of a string (Murmur3 x86 32-bit over its
    UTF-8 bytes, seed 42, a 1..3 byte tail mixed byte by byte as signed ints
    as ``Murmur3_x86_32.hashUnsafeBytes`` does), as a signed 32-bit int."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    def mix(h1: int, k1: int) -> int:
        k1 = rotl((k1 * 0xCC9E2D51) & mask, 15) * 0x1B873593 & mask
        return (rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & mask

    data = text.encode("utf-8")
    n, h1 = len(data), seed & mask
    aligned = n - n % 4
    for i in range(0, aligned, 4):
        h1 = mix(h1, int.from_bytes(data[i : i + 4], "little"))
    for byte in data[aligned:]:
        h1 = mix(h1, (byte - 256 if byte > 127 else byte) & mask)
    h1 ^= n
    h1 = ((h1 ^ (h1 >> 16)) * 0x85EBCA6B) & mask
    h1 = ((h1 ^ (h1 >> 13)) * 0xC2B2AE35) & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def hash_buckets(names: list[str]) -> tuple[int, list[str], list[int]]:
    """(M, names reordered by bucket, packed bucket bounds): name x is in
    bucket ``pmod(hash(x), M)`` of M = len(names) buckets; bucket b holds
    positions first .. first + count - 1 of the reordered names, packed as
    first * 2^20 + count in entry b (a bucket holds far fewer than 2^20)."""
    M = max(len(names), 1)
    bucket = [spark_hash(x) % M for x in names]
    order = sorted(range(len(names)), key=lambda j: bucket[j])
    counts = np.bincount(bucket, minlength=M) if names else np.zeros(M, np.int64)
    firsts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    packed = (firsts * 2**20 + counts).tolist()
    return M, [names[j] for j in order], [int(x) for x in packed]


def _is_index(name: str) -> bool:
    """Whether predicate ``name`` is a Vector index (as ``data.columns`` names them)."""
    return name.isdigit() and str(int(name)) == name


def vector_entries(text: str) -> str:
    """``array<struct<i: int, x: double>>`` of a Vector's stored entries (a
    dense Vector's non-zero ones, as ``data.columns`` reads Vectors), from
    the column ``text`` holding ``CAST(vector AS STRING)``: Spark prints a
    SparseVector ``(size,[i,...],[x,...])`` and a DenseVector ``[x,...]``,
    doubles exactly (Java's shortest round-trip form), which array casts
    read back; SQL has no other access to the Vector type's fields."""
    t = text

    def listed(part: str, of: str) -> str:
        return f"coalesce(CAST(split(NULLIF({part}, ''), ',') AS array<{of}>), array())"

    indices = listed(f"substring_index(substring_index({t}, '],[', 1), ',[', -1)", "INT")
    values = listed(f"substring_index(substring_index({t}, '],[', -1), '])', 1)", "DOUBLE")
    pair = f"named_struct('i', {indices}, 'x', {values})"
    entry = "transform(v.i, (i, p) -> named_struct('i', i, 'x', v.x[p]))"
    sparse = _let(pair, "v", entry)
    dense = (
        f"filter(transform({listed(f'substring({t}, 2, length({t}) - 2)', 'DOUBLE')}, "
        "(x, i) -> named_struct('i', i, 'x', x)), e -> e.x != 0)"
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
    # the row's mean and softmax total bound once per row (:func:`_let`): a
    # column used once inside a lambda is inlined there, once per class
    raw = f"transform({SCORES}, s -> s - m)"
    prob = f"transform({EXPS}, e -> e / z)"
    if not np.array_equal(scorer.classes, np.arange(scorer.n_classes)):
        at = np.zeros(scorer.n_classes, dtype=np.int64)
        at[scorer.classes] = np.arange(K) + 1  # 1-based positions; 0: absent
        where = f"array({', '.join(str(int(i)) for i in at)})"
        raw = (
            f"transform({where}, i -> IF(i = 0, CAST('-Infinity' AS DOUBLE), {SCORES}[i - 1] - m))"
        )
        prob = f"transform({where}, i -> IF(i = 0, CAST(0 AS DOUBLE), {EXPS}[i - 1] / z))"
    raw, prob = _let(MEAN, "m", raw), _let(TOTAL, "z", prob)
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


def sql_scored(scorer: Scorer, dataset, features_col: str, kind: str):
    """(DataFrame, {raw, probability, prediction: column}, columns to drop)
    of ``dataset`` scored by the steps of :func:`score_sql`."""
    from pyspark.sql import functions as F

    scored = dataset
    for name, sql in score_sql(scorer, features_col, kind):
        scored = scored.withColumn(name, F.expr(sql))
    fields = {"raw": RAW, "probability": PROBABILITY, "prediction": PREDICTION}
    return scored, fields, [*INTERMEDIATE, *fields.values()]


class SQLExport:
    """``sqlExpression``, ``sqlQuery`` and ``saveSQL`` of a
    ``MaxEntClassificationModel``: the model as Spark SQL text."""

    def sqlExpression(self: Any, featuresCol: str | None = None, kind: str = ARRAY):
        """The model as Spark SQL: a list of (column, expression) steps, each
        using the columns before it, the last three giving rawPrediction and
        probability (``array<double>``) and prediction; ``kind`` is the
        features column's type (``array<string>``, ``map<string,double>`` or
        ``vector``, a pyspark.ml Vector column as it is). Run them with
        ``withColumn(name, expr(sql))`` in order,
        or as one SELECT with lateral column aliases (Spark >= 3.4); the text
        is plain SQL for Scala, Java and SQL users (ml/sql.py)."""
        return score_sql(self.scorer(), featuresCol or self.getFeaturesCol(), kind)

    def sqlQuery(self: Any, table: str, featuresCol: str | None = None, kind: str = ARRAY) -> str:
        """The model as one Spark SQL query over ``table`` (a table or view
        name, or a parenthesized subquery): every column of it plus
        rawPrediction and probability (``array<double>``) and prediction, as
        named by the output Params, with the values ``transform`` gives;
        runs in ``spark.sql`` or any Spark SQL client, no Python needed."""
        outputs = {
            self.getOrDefault(param): step
            for param, step in (
                (self.rawPredictionCol, RAW),
                (self.probabilityCol, PROBABILITY),
                (self.predictionCol, PREDICTION),
            )
            if self.getOrDefault(param)
        }
        return select_sql(self.sqlExpression(featuresCol, kind), table, outputs)

    def saveSQL(
        self: Any,
        path: str,
        table: str = "input",
        featuresCol: str | None = None,
        kind: str = ARRAY,
        overwrite: bool = False,
    ) -> None:
        """Write :meth:`sqlQuery` to a ``.sql`` file at ``path`` (any
        storage path; an existing one only with ``overwrite``) for Scala,
        Java and SQL users: ``spark.sql(text)`` with ``table`` replaced by
        their table or view."""
        from .. import storage
        from .persistence import path_exists

        if storage.exists(path) and not overwrite:
            raise path_exists(path)
        head = (
            f"-- sparkmaxent MaxEntClassificationModel {self.uid}: scores the {kind} "
            f"column {featuresCol or self.getFeaturesCol()} of table {table}\n"
        )
        storage.write_text(path, head + self.sqlQuery(table, featuresCol, kind) + "\n")


__all__ = [
    "SQLExport",
    "score_sql",
    "sql_scored",
    "select_sql",
    "output_steps",
    "RAW",
    "PROBABILITY",
    "PREDICTION",
    "INTERMEDIATE",
]
