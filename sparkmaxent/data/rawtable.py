"""The read stage of ``prepare`` for Spark tables: a DataFrame or catalog
table -> raw events (``raw.RawSource``), after checking its columns'
presence, types and values in one pass. Multiclass tables have one event
per row; candidate-set tables one row per candidate, grouped into events.
Feature columns are read by ``columns.names_and_values``.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..plan import Limits
from ..shapes import CANDIDATES, MULTICLASS
from .columns import names_and_values
from .local_prepare import collect_raw
from .options import TableColumns
from .raw import KIND_EVENT, RawSource
from .readers import MAX_ABS_VALUE, InputError


def read_table(spark, table, cols: TableColumns, limits: Limits | None = None) -> RawSource:
    """Raw multiclass events of a DataFrame or catalog table, after checking
    its columns' presence, types and values (``prepare_table``); ``cols``
    names the label, features, values, weight and key columns. With a key
    column, each event carries that column's value as ``key``. Without a
    label column (``cols.label`` "": data to predict) every label is ""
    (unseen in training).

    A table of at most ``limits.max_events`` rows (``limits.rows``; None or
    0: never; not with ``cols.key``) is collected into this process with Arrow in one Spark job,
    its value checks evaluated in the same projection, so ``prepare``
    finishes it in-process (``local_prepare.build_local``)."""
    from pyspark.sql import functions as F

    label_col, features_col, values_col = cols.label or None, cols.features, cols.values
    weight_col, key_col = cols.weight, cols.key
    labels = {label_col: "label"} if label_col else {}
    df, name = _table_frame(spark, table)
    _check_table_columns(df, name, {**labels, **_key(key_col)}, weight_col)
    names, values = names_and_values(df, name, features_col, values_col)
    weight = F.col(weight_col).cast("double") if weight_col else F.lit(1.0)
    not_null = {c: "labels" for c in labels}
    checks = _value_checks(
        df, weight, names, values, not_null, features_col, weight_col, values_col
    )
    label = F.col(label_col).cast("string") if label_col else F.lit("")
    columns = [
        F.lit(KIND_EVENT).cast("tinyint").alias("kind"),
        F.lit(0).alias("file_index"),
        F.lit(None).cast("long").alias("line"),
        label.alias("label"),
        weight.alias("weight"),
        names.alias("features"),
        values.alias("values"),
        F.monotonically_increasing_id().alias("event_id"),
        F.lit(None).cast("string").alias("reason"),
        F.lit(None).cast("string").alias("text"),
        *([F.col(key_col).alias("key")] if key_col else []),
    ]
    if key_col is None and limits is not None and limits.rows(df):
        flags = [
            F.coalesce(c, F.lit(False)).alias(f"__check{i}") for i, (_, _, c) in enumerate(checks)
        ]
        frame = df.select(*columns, *flags).withColumn("group", F.col("event_id"))
        raw = collect_raw(spark, frame, MULTICLASS)
        counts = [
            pc.sum(raw.column(f"__check{i}").cast(pa.int64())).as_py() for i in range(len(checks))
        ]
        _raise_on_counts(name, checks, counts)
        raw = raw.drop_columns([f"__check{i}" for i in range(len(checks))])
    else:
        _check_table_values(df, name, checks)
        raw = df.select(*columns).withColumn("group", F.col("event_id"))
    source = {
        "format": "table",
        "inputs": [name],
        "options": {
            "label_col": label_col,
            "features_col": features_col,
            "weight_col": weight_col,
            "values_col": values_col,
            "key_col": key_col,
        },
    }
    return RawSource(raw, MULTICLASS, [name], source, table=name, key_col=key_col)


def read_candidate_table(
    spark, table, cols: TableColumns, limits: Limits | None = None
) -> RawSource:
    """Raw candidate-set events of a DataFrame or catalog table with one row
    per candidate (``prepare_candidate_table``; ``cols`` names the group,
    features, values, correct, weight and key columns), after the checks of
    :func:`read_table`; the events of a table of at most
    ``limits.max_events`` rows (not with ``cols.key``) are collected into
    this process, as in :func:`read_table` (the checks stay Spark jobs).

    The rows of a group form one event, its candidates in the table's row
    order, as the lines of a TADM event. A candidate is correct when its
    ``cols.correct`` is true (boolean) or > 0 (numeric: TADM's score). The
    event id is the group id when ``cols.group`` is an integer column (so a
    table of TADM's events numbered 0, 1, ... prepares as TADM text does),
    else the position of the group's first row. The weight column, if any,
    must hold one weight per group, and so must ``cols.key`` (carried as
    ``key``), e.g. the group column itself.
    """
    from pyspark.sql import functions as F

    group_col, features_col, values_col = str(cols.group), cols.features, cols.values
    correct_col, weight_col, key_col = cols.correct, cols.weight, cols.key
    df, name = _table_frame(spark, table)
    required = {group_col: "group", correct_col: "correct", **_key(key_col)}
    _check_table_columns(df, name, required, weight_col)
    correct = _correct_flag(df, name, correct_col)
    names, values = names_and_values(df, name, features_col, values_col)
    weight = F.col(weight_col).cast("double") if weight_col else F.lit(1.0)
    not_null = {group_col: "group ids", correct_col: "correct flags"}
    checks = _value_checks(
        df, weight, names, values, not_null, features_col, weight_col, values_col
    )
    _check_table_values(df, name, checks)
    cands = df.select(
        F.col(group_col).alias("g"),
        F.struct(
            F.monotonically_increasing_id().alias("row"),
            correct.alias("correct"),
            names.alias("names"),
            values.alias("values"),
        ).alias("c"),
        weight.alias("w"),
        (F.col(key_col) if key_col else F.lit(None)).alias("k"),
    )
    events = cands.groupBy("g").agg(
        F.array_sort(F.collect_list("c")).alias("cs"),  # row order: rows are unique
        F.min("w").alias("weight"),
        F.max("w").alias("w_max"),
        F.min("k").alias("key"),
        F.max("k").alias("k_max"),
    )
    _check_one_per_group(events, name, group_col, weight_col, key_col)
    integral = dict(df.dtypes)[group_col] in ("tinyint", "smallint", "int", "bigint")
    event_id = F.col("g").cast("long") if integral else F.col("cs")[0]["row"]
    raw = events.select(
        F.lit(KIND_EVENT).cast("tinyint").alias("kind"),
        F.lit(0).alias("file_index"),
        F.lit(None).cast("long").alias("line"),
        F.transform("cs", lambda c: c["correct"]).alias("correct"),
        F.transform("cs", lambda c: F.size(c["names"])).alias("cand_nnz"),
        F.flatten(F.transform("cs", lambda c, i: F.array_repeat(i, F.size(c["names"])))).alias(
            "cand"
        ),
        "weight",
        F.flatten(F.transform("cs", lambda c: c["names"])).alias("features"),
        F.flatten(F.transform("cs", lambda c: c["values"])).alias("values"),
        event_id.alias("event_id"),
        F.lit(None).cast("string").alias("reason"),
        F.lit(None).cast("string").alias("text"),
        *([F.col("key")] if key_col else []),
    ).withColumn("group", F.col("event_id"))
    if key_col is None and limits is not None and limits.rows(df):
        raw = collect_raw(spark, raw, CANDIDATES)
    source = {
        "format": "table",
        "inputs": [name],
        "options": {
            "group_col": group_col,
            "features_col": features_col,
            "correct_col": correct_col,
            "weight_col": weight_col,
            "values_col": values_col,
            "key_col": key_col,
        },
    }
    return RawSource(raw, CANDIDATES, [name], source, table=name, key_col=key_col)


def _key(key_col: str | None) -> dict[str, str]:
    return {key_col: "key"} if key_col else {}


def _correct_flag(df, name: str, correct_col: str):
    """The boolean expression of a candidate's correct column: a boolean, or
    a number > 0 (TADM's score)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, NumericType

    ctype = df.schema[correct_col].dataType
    if isinstance(ctype, BooleanType):
        return F.col(correct_col)
    if isinstance(ctype, NumericType):
        return F.col(correct_col) > 0
    raise InputError(
        f"{name}: expected column {correct_col!r} of type boolean or numeric (> 0: "
        f"correct), got {ctype.simpleString()}"
    )


def _check_one_per_group(
    events, name: str, group_col: str, weight_col: str | None, key_col: str | None
) -> None:
    """A candidate set has one weight and one key: every row of a group the
    same (``events``: a group's min and max of each); one pass, when either
    column is given."""
    from pyspark.sql import functions as F

    checks = [
        (c, lo, hi)
        for c, lo, hi in ((weight_col, "weight", "w_max"), (key_col, "key", "k_max"))
        if c
    ]
    if not checks:
        return
    differs = [F.col(lo) != F.col(hi) for _, lo, hi in checks]
    bad = events.where(differs[0] if len(differs) == 1 else differs[0] | differs[1]).first()
    for col, lo, hi in checks if bad is not None else []:
        if bad[lo] != bad[hi]:
            raise InputError(
                f"{name}: column {col!r}: expected one value per group of {group_col!r}, "
                f"got {bad[lo]!r} and {bad[hi]!r} in group {bad['g']!r}"
            )


def _table_frame(spark, table):
    """(DataFrame, name for messages) of a DataFrame, a catalog table name,
    or such a pair already (``tables.prepare_input``: files read by Spark)."""
    from pyspark.sql import DataFrame

    if isinstance(table, tuple):
        return table
    if isinstance(table, DataFrame):
        return table, "<DataFrame>"
    name = str(table)
    if not spark.catalog.tableExists(name):
        raise InputError(f"expected a table named {name!r} in the Spark catalog, found none")
    return spark.table(name), name


def _check_table_columns(df, name: str, required: dict[str, str], weight_col: str | None) -> None:
    """The ``required`` columns (name -> role) exist; the weight column, if
    any, exists and is numeric (the features column is checked by
    ``columns.names_and_values``)."""
    from pyspark.sql.types import NumericType

    fields = {f.name: f.dataType for f in df.schema.fields}

    def need(col: str, role: str) -> None:
        if col not in fields:
            raise InputError(
                f"{name}: expected a {role} column named {col!r}, got columns {list(fields)}"
            )

    for col, role in required.items():
        need(col, role)
    if weight_col is not None:
        need(weight_col, "weight")
        if not isinstance(fields[weight_col], NumericType):
            raise InputError(
                f"{name}: expected a numeric weight column {weight_col!r}, got "
                f"{fields[weight_col].simpleString()}"
            )


def _value_checks(
    df,
    weight,
    names,
    values,
    not_null: dict[str, str],
    features_col: str,
    weight_col: str | None,
    values_col: str | None,
) -> list:
    """(column, what must not occur, boolean expression true on a row where
    it occurs) of each value check: no nulls (in the ``not_null`` columns:
    name -> what they hold, and the features), NaN or infinite values, no
    negative weights. ``names``/``values`` are the features as
    ``columns.names_and_values`` reads them."""
    from pyspark.sql import functions as F

    inf = float("inf")
    values_name = values_col or features_col

    def not_finite(c):
        return F.isnan(c) | c.isin(inf, -inf)

    # (column, what must not occur, rows where it occurs), checked in one pass
    floats = {c for c, t in df.dtypes if t in ("float", "double")}
    checks = [
        (col, f"null or NaN {what}", F.col(col).isNull() | F.isnan(col))
        if col in floats
        else (col, f"null {what}", F.col(col).isNull())
        for col, what in not_null.items()
    ]
    checks += [
        (features_col, "null feature lists", F.col(features_col).isNull()),
        (features_col, "rows with null feature names", F.exists(names, lambda x: x.isNull())),
        (
            values_name,
            "rows with null, NaN or infinite values",
            F.exists(values, lambda x: x.isNull() | not_finite(x)),
        ),
        (
            values_name,
            f"rows with a value of magnitude > {MAX_ABS_VALUE:g}",
            F.exists(values, lambda x: F.abs(x) > MAX_ABS_VALUE),
        ),
    ]
    if weight_col:
        checks += [
            (weight_col, "null, NaN or infinite weights", weight.isNull() | not_finite(weight)),
            (weight_col, "negative weights", weight < 0),
        ]
    if values_col:
        checks.append(
            (
                values_col,
                f"rows whose values do not pair up with {features_col!r}",
                F.size(values) != F.size(names),
            )
        )
    return checks


def _check_table_values(df, name: str, checks: list) -> None:
    """The ``_value_checks`` of ``df``, counted in one pass."""
    from pyspark.sql import functions as F

    row = df.agg(
        *[
            F.sum(F.coalesce(cond, F.lit(False)).cast("long")).alias(f"c{i}")
            for i, (_, _, cond) in enumerate(checks)
        ]
    ).first()
    _raise_on_counts(name, checks, [row[f"c{i}"] for i in range(len(checks))])


def _raise_on_counts(name: str, checks: list, counts: list) -> None:
    """The error of the first check that some rows fail (``counts``: rows per check)."""
    for (col, what, _), n in zip(checks, counts, strict=True):
        if n:
            raise InputError(f"{name}: column {col!r}: expected no {what}, got {n}")


__all__ = ["read_table", "read_candidate_table"]
