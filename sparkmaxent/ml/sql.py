"""Scoring as Spark SQL expressions: no Python worker.

A model without conjunctions scores a row as S_k = sum_j x_j W[j, k] + b_k
over the predicates it uses (``Scorer.linear``, standardization folded in).
Each feature first becomes its row of K weights in one flat ``array<double>``
literal (one row per slot of a used predicate, read by ``from_json`` from
one string literal, constant-folded once by the optimizer), found in O(1):
a name by a perfect hash built here with Spark's own ``hash`` (Murmur3,
:func:`spark_hash`; :class:`DisplacedSlots`), its slot's name compared
(a map literal would be scanned key by key); a Vector's index by an index
-> row literal. An unknown name adds nothing, a repeated one adds
again, as ``prepare`` sums repeats; a model trained on binary predicates
reads an array's distinct names and a value's presence, as
``prepare(binary=True)``. The K scores are one ``aggregate`` over the
row's known features adding each one's K weights with a ``transform``,
all of it generated code (Spark interprets ``zip_with``).
rawPrediction (S less its row mean), probability (softmax) and prediction
(argmax, or MLlib's p_k / t_k with thresholds) follow with higher-order
array functions. The text is plain Spark SQL, so Scala, Java and SQL users
run it as it is (``MaxEntClassificationModel.sqlExpression``), and it needs
nothing but the DataFrame API (classic or Spark Connect).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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
TEXT, SCORES, OUT = "__maxent_t", "__maxent_s", "__maxent_o"
#: the output columns of the steps
RAW, PROBABILITY, PREDICTION = "__maxent_raw", "__maxent_probability", "__maxent_prediction"


@dataclass(frozen=True)
class WeightTables:
    """What the SQL text of a model is built from, for one features column
    kind: the expensive part (the perfect hash of the names, the weight rows
    as one literal), built once per model by :meth:`SQLExport.sql_tables`.
    ``lookup`` is the literal of the slot names (``array<string>``: ARRAY,
    MAP) or of each Vector index's row (``array<int>``: VECTOR); ``flat`` the
    row-major ``array<double>`` literal of the weight rows; ``bias`` b."""

    kind: str
    lookup: str
    flat: str
    bias: np.ndarray
    slots: DisplacedSlots | None = None


def weight_tables(scorer: Scorer, kind: str) -> WeightTables:
    """The :class:`WeightTables` of ``scorer`` for a features column of ``kind``."""
    W, b = scorer.linear()
    names = scorer.names.to_pylist()
    used = np.flatnonzero(np.any(W != 0, axis=1))
    if kind == VECTOR:
        used = np.asarray([j for j in used if _is_index(names[j])], dtype=np.int64)
        # Vector index i -> its row (0-based) of the weights, -1: unused
        row_of = np.full(max((int(names[j]) + 1 for j in used), default=0), -1, dtype=np.int64)
        row_of[[int(names[j]) for j in used]] = np.arange(len(used))
        flat = _literal(W[used].ravel().tolist(), "double")
        return WeightTables(kind, _literal(row_of.tolist(), "int"), flat, b)
    if kind not in (ARRAY, MAP):
        raise ValueError(f"no SQL scoring for a features column of kind {kind!r}")
    keys = [names[j] for j in used]
    slots = DisplacedSlots.of(keys)
    table: list[str | None] = [None] * slots.size
    rows = np.zeros((slots.size, W.shape[1]))
    for j, key, slot in zip(used, keys, slots.slots):
        table[slot], rows[slot] = key, W[j]
    names_at = f"from_json({_string(json.dumps(table))}, 'array<string>')"
    return WeightTables(kind, names_at, _literal(rows.ravel().tolist(), "double"), b, slots)


def tables_key(scorer: Scorer) -> bytes:
    """A digest of what :func:`weight_tables` reads (W, b, the names, binary):
    a model whose weights or vocabulary change gets another."""
    import hashlib

    W, b = scorer.linear()
    digest = hashlib.blake2b(digest_size=16)
    for part in (W.shape, W.tobytes(), b.tobytes(), bytes([scorer.binary])):
        digest.update(repr(part).encode() if isinstance(part, tuple) else part)
    for buffer in scorer.names.buffers():
        digest.update(b"" if buffer is None else memoryview(buffer))
    return digest.digest()


def score_sql(
    scorer: Scorer, features_col: str, kind: str, tables: WeightTables | None = None
) -> list[tuple[str, str]]:
    """SQL steps (column name, expression; each may use the columns of the
    steps before it) ending in ``raw``, ``probability`` (``array<double>``
    over the output classes) and ``prediction`` (double), for a features
    column of ``kind`` (``data.columns``: ARRAY, MAP or VECTOR, a pyspark.ml
    Vector read through its text: see :func:`vector_entries`), from the
    model's ``tables`` (:func:`weight_tables`; built here if not given). The
    intermediate columns are :data:`INTERMEDIATE`."""
    tables = tables or weight_tables(scorer, kind)
    if tables.kind != kind:
        raise ValueError(f"weight tables of a {tables.kind} column given for a {kind} column")
    col = _quoted(features_col)
    steps = []
    if kind == VECTOR:
        steps.append((TEXT, f"CAST({col} AS STRING)"))
        at = f"coalesce(try_element_at({tables.lookup}, e.i + 1), -1)"
        # the entries are the stored values: presence is 1.0 where one is non-zero
        entries = f"transform({vector_entries(TEXT)}, e -> named_struct('i', {at}, 'x', e.x))"
        known = f"filter({entries}, e -> e.i >= 0)"
    else:
        slots, names_at = tables.slots, tables.lookup
        assert slots is not None
        if kind == ARRAY:
            listed = f"coalesce({f'array_distinct({col})' if scorer.binary else col}, array())"
            found = f"(s, j) -> element_at({names_at}, s + 1) = l[j]"
            known = _let(listed, "l", f"filter(transform(l, x -> {slots.sql('x')}), {found})")
        else:
            pairs = f"coalesce(map_entries({col}), array())"
            entry = f"named_struct('i', {slots.sql('e.key')}, 'k', e.key, 'x', e.value)"
            found = f"e -> element_at({names_at}, e.i + 1) = e.k"
            known = f"filter(transform({pairs}, e -> {entry}), {found})"
    scores = _scores(known, tables.flat, tables.bias, scorer.binary, kind)
    return [*steps, (SCORES, scores), *output_steps(scorer)]


def _scores(known: str, flat: str, b: np.ndarray, binary: bool, kind: str) -> str:
    """``array<double>`` S_k = b_k + sum_e x_e rows[e.i, k] over the entries
    ``known`` of the predicates the model uses (``array<int>`` of weight
    rows for an array of names, whose x_e are 1; else ``array<struct<i,
    x>>``): one ``aggregate`` over the entries, from b, adding each entry's
    row of K weights to the K sums with a ``transform`` over them, each
    weight an ``element_at`` into the flat literal ``flat`` (row-major, so
    an entry's K weights are read side by side), all of it generated code
    (``zip_with`` is not). ``known`` is an argument of the aggregate, so
    it is evaluated once per row. An entry's K sums in the inner loop, not
    each class's sum over the entries (an aggregate per class): the same
    reads, but consecutive ones, and no lambda per class over every entry
    (benchmarks/ml_api.py measures transform). Dense rows, not each
    feature's non-zero (class, weight) pairs only: SQL has no scatter-add
    into an array, so pairs cost a pass per class over every pair of the
    row with a class test each, or an array rebuilt per pair, more work
    than K weights read per known feature even on a grafting model's
    sparse rows."""
    K = len(b)
    value = "CAST(e.x != 0 AS DOUBLE)" if binary else "e.x"
    row, times = ("e", "") if kind == ARRAY else ("e.i", f" * {value}")
    add = f"(a, k) -> a + element_at({flat}, {row} * {K} + k + 1){times}"
    summed = f"aggregate({known}, {_doubles(b)}, (acc, e) -> transform(acc, {add}))"
    return f"coalesce({summed}, {_doubles(b)})"


def _let(value: str, name: str, body: str) -> str:
    """``body`` with lambda variable ``name`` bound to ``value``, evaluated
    once per row (a one-element ``transform``): a column used once inside a
    lambda would be inlined by the optimizer and evaluated per element."""
    return f"element_at(transform(array({value}), {name} -> {body}), 1)"


def _literal(values: list, of: str) -> str:
    """An ``array<of>`` literal read by ``from_json`` from one string
    (constant-folded once by the optimizer; finite values only)."""
    return f"from_json({_string(json.dumps(values, allow_nan=False))}, 'array<{of}>')"


_U32 = np.uint32


def _mixed(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    """4-byte blocks (or tail bytes) ``k1`` mixed into Murmur3 x86 32-bit states ``h1``."""

    def rotl(x: np.ndarray, r: int) -> np.ndarray:
        return (x << _U32(r)) | (x >> _U32(32 - r))

    k1 = rotl(k1 * _U32(0xCC9E2D51), 15) * _U32(0x1B873593)
    return rotl(h1 ^ k1, 13) * _U32(5) + _U32(0xE6546B64)


def _finished(h1: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Murmur3's finalization of states ``h1`` after ``length`` bytes, as signed 32-bit ints."""
    h1 = h1 ^ length.astype(_U32)
    h1 = (h1 ^ (h1 >> _U32(16))) * _U32(0x85EBCA6B)
    h1 = (h1 ^ (h1 >> _U32(13))) * _U32(0xC2B2AE35)
    return (h1 ^ (h1 >> _U32(16))).view(np.int32).astype(np.int64)


def _utf8_blocks(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(bytes of each string's UTF-8 form, zero-padded to a multiple of 4, one
    row per string; its length in bytes)."""
    data = [t.encode("utf-8") for t in texts]
    n = np.asarray([len(x) for x in data], dtype=np.int64)
    buf = np.zeros((len(data), -(-int(n.max(initial=0)) // 4) * 4), dtype=np.uint8)
    for i, x in enumerate(data):
        buf[i, : len(x)] = np.frombuffer(x, dtype=np.uint8)
    return buf, n


def _hashed_blocks(buf: np.ndarray, n: np.ndarray, seeds) -> np.ndarray:
    """Murmur3 x86 32-bit of each row of :func:`_utf8_blocks` from its seed,
    a 1..3 byte tail mixed byte by byte as signed ints (as Spark's
    ``Murmur3_x86_32.hashUnsafeBytes``), as signed 32-bit ints."""
    blocks = buf.view("<u4")
    seeds = np.broadcast_to(np.asarray(seeds, dtype=np.int64), n.shape)
    h1 = seeds.astype(_U32)
    aligned = n - n % 4
    with np.errstate(over="ignore"):
        for b in range(blocks.shape[1]):
            rows = aligned >= 4 * (b + 1)
            h1[rows] = _mixed(h1[rows], blocks[rows, b].astype(_U32))
        for t in range(3):
            rows = np.flatnonzero(n % 4 > t)
            tail = buf[rows, aligned[rows] + t].view(np.int8).astype(np.int32).view(_U32)
            h1[rows] = _mixed(h1[rows], tail)
        return _finished(h1, n)


def spark_hashes(texts: list[str]) -> np.ndarray:
    """Spark SQL's ``hash(text)`` of each string (Murmur3 x86 32-bit over its
    UTF-8 bytes, seed 42), as signed 32-bit ints."""
    return _hashed_blocks(*_utf8_blocks(texts), 42)


def spark_hash(text: str) -> int:
    """Spark SQL's ``hash(text)`` of one string (:func:`spark_hashes`)."""
    return int(spark_hashes([text])[0])


def spark_hash_ints(values) -> np.ndarray:
    """Spark SQL's ``hash(d)`` of each int d (Murmur3 ``hashInt``, seed 42):
    the seed ``hash(d, x)`` hashes string x with."""
    values = np.asarray(values, dtype=np.int64)
    with np.errstate(over="ignore"):
        h1 = _mixed(np.full(values.shape, 42, dtype=_U32), values.astype(_U32))
        return _finished(h1, np.full(values.shape, 4))


@dataclass(frozen=True)
class DisplacedSlots:
    """A perfect hash of names into ``size`` slots (hash and displace,
    Belazzougui, Botelho and Dietzfelbinger 2009): name x is in bucket
    ``pmod(hash(x), B)`` (B = len(displacements)) and in slot ``pmod(hash(d,
    x), size)``, d its bucket's displacement (x hashed again from the seed
    ``hash(d)``, so names of equal ``hash(x)`` part too); no two names share
    a slot: a lookup is two hashes of the name, one displacement and one
    name compared, whatever the number of names."""

    displacements: list[int]
    size: int
    #: the slot of each name, in the order given
    slots: list[int]

    #: slots per name: the weights literal has a row per slot
    SLACK = 1.25
    #: displacements tried at once for a bucket of several names
    TRIES = 32

    @classmethod
    def of(cls, names: list[str]) -> DisplacedSlots:
        """Slots for distinct ``names``: buckets of several names first,
        largest first, each at the first displacement d whose slots are free
        and distinct; then the one-name buckets, d = 0, 1, ... in turn."""
        n = len(names)
        B, size = max(n, 1), max(int(n * cls.SLACK) + 1, 1)
        buf, length = _utf8_blocks(names)
        bucket_of = _hashed_blocks(buf, length, 42) % B
        order = np.argsort(bucket_of, kind="stable")
        starts = np.searchsorted(bucket_of[order], np.arange(B + 1))
        counts = np.diff(starts)
        displacements, taken, slots = np.zeros(B, np.int64), np.zeros(size, bool), np.zeros(n, int)

        def slots_at(members: np.ndarray, ds: np.ndarray) -> np.ndarray:
            """Slots of ``members`` (rows) at displacements ``ds`` (columns)."""
            rows = np.repeat(members, len(ds))
            seeds = np.tile(spark_hash_ints(ds), len(members))
            return (_hashed_blocks(buf[rows], length[rows], seeds) % size).reshape(-1, len(ds))

        for b in np.argsort(-counts, kind="stable")[: np.count_nonzero(counts > 1)]:
            members = order[starts[b] : starts[b + 1]]
            for first in range(0, 1 << 20, cls.TRIES):
                at = slots_at(members, np.arange(first, first + cls.TRIES))
                ok = ~taken[at].any(axis=0)
                ok &= np.all(np.diff(np.sort(at, axis=0), axis=0) != 0, axis=0)
                if ok.any():
                    break
            else:
                raise ValueError(f"no displacement places the {len(members)} names of a bucket")
            d = int(np.argmax(ok))
            taken[at[:, d]], slots[members], displacements[b] = True, at[:, d], first + d
        single = np.flatnonzero(counts == 1)
        for d in range(1 << 20):
            if not len(single):
                break
            members = order[starts[single]]
            at = slots_at(members, np.asarray([d]))[:, 0]
            _, first_of = np.unique(at, return_index=True)  # one name per free slot
            placed = first_of[~taken[at[first_of]]]
            taken[at[placed]], slots[members[placed]] = True, at[placed]
            displacements[single[placed]] = d
            single = np.delete(single, placed)
        return cls(displacements.tolist(), size, slots.tolist())

    def sql(self, key: str) -> str:
        """The 0-based slot of the name ``key`` (an expression of a string):
        its own slot if it is one of the names (compare it there)."""
        d = f"from_json({_string(json.dumps(self.displacements))}, 'array<int>')"
        bucket = f"CAST(pmod(hash({key}), {len(self.displacements)}) AS INT) + 1"
        return f"CAST(pmod(hash(element_at({d}, {bucket}), {key}), {self.size}) AS INT)"


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
    probability 0, as ``Scorer.multiclass``. One step computes the three as
    a struct, each part once per row (bound by :func:`_let`): the max and
    the mean of S, exp(S_k - max) per class and their total, the
    probabilities; the argmax is the max's first position (ties go to the
    first class, as ``numpy.argmax``). The three outputs are its fields."""
    K = len(scorer.classes)
    raw, prob = f"transform({SCORES}, x -> x - c.m)", "transform(e, x -> x / z)"
    if not np.array_equal(scorer.classes, np.arange(scorer.n_classes)):
        at = np.zeros(scorer.n_classes, dtype=np.int64)
        at[scorer.classes] = np.arange(K) + 1  # 1-based positions; 0: absent
        where = f"array({', '.join(str(int(i)) for i in at)})"
        raw = (
            f"transform({where}, i -> IF(i = 0, CAST('-Infinity' AS DOUBLE), "
            f"{SCORES}[i - 1] - c.m))"
        )
        prob = f"transform({where}, i -> IF(i = 0, CAST(0 AS DOUBLE), e[i - 1] / z))"
    if scorer.thresholds is None:
        classes = f"array({', '.join(str(float(c)) for c in scorer.classes)})"
        prediction = f"CAST({classes}[array_position({SCORES}, c.t) - 1] AS DOUBLE)"
    else:  # MLlib's largest p_k / t_k (a zero threshold: +inf where p_k > 0)
        t = _doubles(scorer.thresholds)
        scaled = (
            f"transform(p, (x, k) -> IF({t}[k] = 0, IF(x > 0, CAST('Infinity' AS DOUBLE), "
            f"CAST(0 AS DOUBLE)), x / {t}[k]))"
        )
        prediction = _let(scaled, "q", "CAST(array_position(q, array_max(q)) - 1 AS DOUBLE)")
    fields = f"named_struct('raw', {raw}, 'probability', p, 'prediction', {prediction})"
    top_mean = (
        f"named_struct('t', array_max({SCORES}), "
        f"'m', aggregate({SCORES}, CAST(0 AS DOUBLE), (a, x) -> a + x) / {K})"
    )
    total = "aggregate(e, CAST(0 AS DOUBLE), (a, x) -> a + x)"
    body = _let(total, "z", _let(prob, "p", fields))
    body = _let(top_mean, "c", _let(f"transform({SCORES}, x -> exp(x - c.t))", "e", body))
    return [
        (OUT, body),
        (RAW, f"{OUT}.raw"),
        (PROBABILITY, f"{OUT}.probability"),
        (PREDICTION, f"{OUT}.prediction"),
    ]


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
INTERMEDIATE = (TEXT, SCORES, OUT)


def sql_scored(
    scorer: Scorer, dataset, features_col: str, kind: str, tables: WeightTables | None = None
):
    """(DataFrame, {raw, probability, prediction: column}, columns to drop)
    of ``dataset`` scored by the steps of :func:`score_sql`."""
    from pyspark.sql import functions as F

    scored = dataset
    for name, sql in score_sql(scorer, features_col, kind, tables):
        scored = scored.withColumn(name, F.expr(sql))
    fields = {"raw": RAW, "probability": PROBABILITY, "prediction": PREDICTION}
    return scored, fields, [*INTERMEDIATE, *fields.values()]


class SQLExport:
    """``sqlExpression``, ``sqlQuery`` and ``saveSQL`` of a
    ``MaxEntClassificationModel``: the model as Spark SQL text, its
    :class:`WeightTables` built once per model and features column kind."""

    def sql_tables(self: Any, scorer: Scorer, kind: str) -> WeightTables:
        """The model's :class:`WeightTables` for ``kind``, built on first use
        and kept on the model (copies share them) under the digest of its
        weights and vocabulary (:func:`tables_key`): a model whose weights
        or names change builds them again; thresholds and columns do not
        enter them."""
        cache = self.__dict__.setdefault("_sql_tables", {})
        key = tables_key(scorer)
        if kind not in cache or cache[kind][0] != key:
            cache[kind] = (key, weight_tables(scorer, kind))
        return cache[kind][1]

    def sqlExpression(self: Any, featuresCol: str | None = None, kind: str = ARRAY):
        """The model as Spark SQL: a list of (column, expression) steps, each
        using the columns before it, the last three giving rawPrediction and
        probability (``array<double>``) and prediction; ``kind`` is the
        features column's type (``array<string>``, ``map<string,double>`` or
        ``vector``, a pyspark.ml Vector column as it is). Run them with
        ``withColumn(name, expr(sql))`` in order,
        or as one SELECT with lateral column aliases (Spark >= 3.4); the text
        is plain SQL for Scala, Java and SQL users (ml/sql.py)."""
        scorer = self.scorer()
        col = featuresCol or self.getFeaturesCol()
        return score_sql(scorer, col, kind, self.sql_tables(scorer, kind))

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
