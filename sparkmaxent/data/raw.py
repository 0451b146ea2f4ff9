"""The read stage of ``prepare``: input files or a Spark table -> raw events.

Parsers (``readers.FORMATS``) run on the executors inside ``mapInArrow``,
one whole file per row of Spark's ``binaryFile`` source, so line numbers are
exact. One DataFrame carries both raw events and parse errors (``kind``
column), so the files are parsed once. ``event_id`` and ``group`` become
globally unique as ``file_index * FILE_SHIFT + id within the file``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from ..shapes import CANDIDATES, MULTICLASS
from .columns import names_and_values
from .inputs import display_path, expand_inputs
from .readers import MAX_ABS_VALUE, InputError, ParseError, format_spec

logger = logging.getLogger("sparkmaxent.data.prepare")  # a prepare run logs under one name

FILE_SHIFT = 2**40  # event_id = file_index * FILE_SHIFT + id within the file
_RAW_BATCH_ROWS = 4096  # raw events per Arrow batch out of the parser UDF

KIND_EVENT, KIND_ERROR = 0, 1  # the ``kind`` column of raw events


def _raw_ddl(shape: str) -> str:
    target = (
        "label string"
        if shape == MULTICLASS
        else "correct array<boolean>, cand_nnz array<int>, cand array<int>"
    )
    return (
        "kind tinyint, file_index int, line long, " + target + ", weight double, "
        "features array<string>, values array<double>, event_id long, `group` long, "
        "reason string, text string"
    )


class _LineTracker:
    """Counts the lines a parser consumes, so an event yielded by a parser
    that does not report lines can be placed at the first non-blank line read
    since the previous yield (a TADM event's count line)."""

    def __init__(self, lines: Iterable[str]):
        self._lines = lines
        self.n = 0
        self.start = 0

    def __iter__(self) -> Iterator[str]:
        for line in self._lines:
            self.n += 1
            if not self.start and line and not line.isspace():
                self.start = self.n
            yield line

    def take(self) -> int:
        start = self.start or self.n
        self.start = 0
        return start


def _file_lines(path: str, data: bytes) -> tuple[list[str], list[ParseError]]:
    """Lines of a file without their line ends, and an error per line that
    is not UTF-8 (such a line reaches the parser as blank)."""
    errors: list[ParseError] = []
    try:
        text = data.decode("utf-8")
        lines = text.split("\n")
        crlf = "\r" in text
    except UnicodeDecodeError:
        lines, crlf = [], True
        for no, raw in enumerate(data.split(b"\n"), start=1):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                errors.append(
                    ParseError(
                        path,
                        no,
                        f"expected UTF-8 text, got byte "
                        f"0x{raw[e.start]:02x} at byte {e.start + 1} of the line",
                        raw.decode("utf-8", "replace"),
                    )
                )
                lines.append("")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it starts none
    if crlf:  # Windows line ends
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines, errors


class _RawBatcher:
    """Collects raw events and errors of one task into Arrow batches."""

    def __init__(self, shape: str, schema: pa.Schema):
        self.shape, self.schema = shape, schema
        self._reset()

    def _reset(self) -> None:
        self.cols: dict[str, list] = {name: [] for name in self.schema.names}

    def __len__(self) -> int:
        return len(self.cols["kind"])

    def add_event(self, fi: int, line: int, ev, base: int) -> None:
        c = self.cols
        if len(ev.features) != len(ev.values):
            raise ValueError(
                f"parser bug: {len(ev.features)} features but "
                f"{len(ev.values)} values at line {line}"
            )
        c["kind"].append(KIND_EVENT)
        c["file_index"].append(fi)
        c["line"].append(line)
        if self.shape == MULTICLASS:
            c["label"].append(ev.label)
        else:
            if sum(ev.cand_nnz) != len(ev.features) or len(ev.cand_nnz) != len(ev.correct):
                raise ValueError(
                    f"parser bug: cand_nnz {ev.cand_nnz} does not match "
                    f"{len(ev.features)} features / {len(ev.correct)} candidates "
                    f"at line {line}"
                )
            c["correct"].append(ev.correct)
            c["cand_nnz"].append(ev.cand_nnz)
            c["cand"].append(
                np.repeat(np.arange(len(ev.cand_nnz), dtype=np.int32), ev.cand_nnz).tolist()
            )
        c["weight"].append(float(ev.weight))
        c["features"].append(ev.features)
        c["values"].append(ev.values)
        c["event_id"].append(base + ev.event_id)
        c["group"].append(base + ev.group)
        c["reason"].append(None)
        c["text"].append(None)

    def add_error(self, fi: int, err: ParseError) -> None:
        c = self.cols
        for name in self.schema.names:
            c[name].append(None)
        c["kind"][-1] = KIND_ERROR
        c["file_index"][-1] = fi
        c["line"][-1] = err.line
        c["reason"][-1] = err.reason
        c["text"][-1] = err.text

    def flush(self) -> pa.RecordBatch | None:
        if not len(self):
            return None
        arrays = [pa.array(self.cols[f.name], type=f.type) for f in self.schema]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _make_parse_udf(
    shape: str,
    parser,
    options: dict,
    schema: pa.Schema,
    file_index: dict[str, int],
    stop_at_first_error: bool,
):
    """The function ``mapInArrow`` runs over ``binaryFile`` rows (path, content)."""

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out = _RawBatcher(shape, schema)
        for batch in batches:
            paths = batch.column("path").to_pylist()
            contents = batch.column("content")
            for i, uri in enumerate(paths):
                if uri not in file_index:
                    raise ValueError(
                        f"binaryFile returned {uri!r}, which is not among the "
                        f"{len(file_index)} expanded input files"
                    )
                fi, name = file_index[uri], display_path(uri)
                base = fi * FILE_SHIFT
                lines, errors = _file_lines(name, contents[i].as_py() or b"")
                for err in errors:
                    out.add_error(fi, err)
                if errors and stop_at_first_error:
                    continue
                tracker = _LineTracker(lines)
                for item in parser(name, tracker, options):
                    line = tracker.take()
                    if isinstance(item, ParseError):
                        out.add_error(fi, item)
                        if stop_at_first_error:
                            break
                    else:
                        out.add_event(fi, getattr(item, "line", None) or line, item, base)
                    if len(out) >= _RAW_BATCH_ROWS:
                        yield out.flush()
        last = out.flush()
        if last is not None:
            yield last

    return parse


class RawSource:
    """Raw events of a prepare run and how to name a position in them."""

    def __init__(self, raw, shape: str, files: list[str], source: dict, table: str | None = None):
        self.raw, self.shape, self.files, self.source, self.table = raw, shape, files, source, table

    def where(self, file_index: int, line: int | None) -> str:
        if self.table is not None:
            return f"table {self.table}"
        return f"{self.files[file_index]}:{line}"


def read_files(spark, inputs: list[str], fmt: str, opts: dict, quarantine: bool) -> RawSource:
    """Raw events of the files named by ``inputs``, parsed as ``fmt`` with the
    resolved parser options ``opts`` (lazily: nothing runs before an action)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    spec = format_spec(fmt)
    # A parser checks its options when it starts: run it on no lines here so a
    # bad option fails on the driver, before any task.
    for _ in spec.parser("<options>", iter(()), opts):
        break
    uris = expand_inputs(spark, inputs)
    file_index = {u: i for i, u in enumerate(uris)}
    raw_struct = _ddl_struct(spark, _raw_ddl(spec.shape))
    arrow_schema = to_arrow_schema(raw_struct)
    udf = _make_parse_udf(
        spec.shape, spec.parser, opts, arrow_schema, file_index, stop_at_first_error=not quarantine
    )
    files = spark.read.format("binaryFile").load(uris).select("path", "content")
    raw = files.mapInArrow(udf, raw_struct)
    parallelism = spark.sparkContext.defaultParallelism
    if len(uris) < parallelism:
        # Fewer files than cores parse in fewer tasks; spread their events so
        # the later stages use every core (hashing is deterministic: no sort).
        raw = raw.repartition(parallelism, "event_id")
    logger.info("reading %d file(s) as %r", len(uris), fmt)
    source = {"format": fmt, "inputs": [display_path(u) for u in uris], "options": opts}
    return RawSource(raw, spec.shape, [display_path(u) for u in uris], source)


def _ddl_struct(spark, ddl: str):
    from pyspark.sql.types import StructType

    return StructType.fromDDL(ddl)


# ------------------------------------------------------------------ tables


def read_table(
    spark,
    table,
    *,
    label_col: str,
    features_col: str,
    weight_col: str | None,
    values_col: str | None,
) -> RawSource:
    """Raw multiclass events of a DataFrame or catalog table, after checking
    its columns' presence, types and values (``prepare_table``)."""
    from pyspark.sql import functions as F

    df, name = _table_frame(spark, table)
    _check_table_columns(df, name, {label_col: "label"}, weight_col)
    names, values = names_and_values(df, name, features_col, values_col)
    weight = F.col(weight_col).cast("double") if weight_col else F.lit(1.0)
    _check_table_values(
        df, name, weight, names, values, {label_col: "labels"}, features_col, weight_col, values_col
    )
    raw = df.select(
        F.lit(KIND_EVENT).cast("tinyint").alias("kind"),
        F.lit(0).alias("file_index"),
        F.lit(None).cast("long").alias("line"),
        F.col(label_col).cast("string").alias("label"),
        weight.alias("weight"),
        names.alias("features"),
        values.alias("values"),
        F.monotonically_increasing_id().alias("event_id"),
        F.lit(None).cast("string").alias("reason"),
        F.lit(None).cast("string").alias("text"),
    ).withColumn("group", F.col("event_id"))
    source = {
        "format": "table",
        "inputs": [name],
        "options": {
            "label_col": label_col,
            "features_col": features_col,
            "weight_col": weight_col,
            "values_col": values_col,
        },
    }
    return RawSource(raw, MULTICLASS, [name], source, table=name)


def read_candidate_table(
    spark,
    table,
    *,
    group_col: str,
    features_col: str,
    correct_col: str,
    weight_col: str | None,
    values_col: str | None,
) -> RawSource:
    """Raw candidate-set events of a DataFrame or catalog table with one row
    per candidate (``prepare_candidate_table``), after the checks of
    :func:`read_table`.

    The rows of a group form one event, its candidates in the table's row
    order, as the lines of a TADM event. A candidate is correct when its
    ``correct_col`` is true (boolean) or > 0 (numeric: TADM's score). The
    event id is the group id when ``group_col`` is an integer column (so a
    table of TADM's events numbered 0, 1, ... prepares as TADM text does),
    else the position of the group's first row. The weight column, if any,
    must hold one weight per group.
    """
    from pyspark.sql import functions as F

    df, name = _table_frame(spark, table)
    _check_table_columns(df, name, {group_col: "group", correct_col: "correct"}, weight_col)
    correct = _correct_flag(df, name, correct_col)
    names, values = names_and_values(df, name, features_col, values_col)
    weight = F.col(weight_col).cast("double") if weight_col else F.lit(1.0)
    not_null = {group_col: "group ids", correct_col: "correct flags"}
    _check_table_values(
        df, name, weight, names, values, not_null, features_col, weight_col, values_col
    )
    cands = df.select(
        F.col(group_col).alias("g"),
        F.struct(
            F.monotonically_increasing_id().alias("row"),
            correct.alias("correct"),
            names.alias("names"),
            values.alias("values"),
        ).alias("c"),
        weight.alias("w"),
    )
    events = cands.groupBy("g").agg(
        F.array_sort(F.collect_list("c")).alias("cs"),  # row order: rows are unique
        F.min("w").alias("weight"),
        F.max("w").alias("w_max"),
    )
    if weight_col:
        _check_one_weight_per_group(events, name, weight_col, group_col)
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
    ).withColumn("group", F.col("event_id"))
    source = {
        "format": "table",
        "inputs": [name],
        "options": {
            "group_col": group_col,
            "features_col": features_col,
            "correct_col": correct_col,
            "weight_col": weight_col,
            "values_col": values_col,
        },
    }
    return RawSource(raw, CANDIDATES, [name], source, table=name)


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


def _check_one_weight_per_group(events, name: str, weight_col: str, group_col: str) -> None:
    """A candidate set has one weight: every row of a group the same."""
    from pyspark.sql import functions as F

    bad = events.where(F.col("weight") != F.col("w_max")).select("g", "weight", "w_max").first()
    if bad is not None:
        raise InputError(
            f"{name}: column {weight_col!r}: expected one weight per group of "
            f"{group_col!r}, got {bad['weight']:g} and {bad['w_max']:g} in group {bad['g']!r}"
        )


def _table_frame(spark, table):
    """(DataFrame, name for messages) of a DataFrame or a catalog table name."""
    from pyspark.sql import DataFrame

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


def _check_table_values(
    df,
    name: str,
    weight,
    names,
    values,
    not_null: dict[str, str],
    features_col: str,
    weight_col: str | None,
    values_col: str | None,
) -> None:
    """No nulls (in the ``not_null`` columns: name -> what they hold, and
    the features), NaN or infinite values, no negative weights: one pass over
    ``df``. ``names``/``values`` are the features as
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
    counts = df.agg(
        *[
            F.sum(F.coalesce(cond, F.lit(False)).cast("long")).alias(f"c{i}")
            for i, (_, _, cond) in enumerate(checks)
        ]
    ).first()
    for i, (col, what, _) in enumerate(checks):
        if counts[f"c{i}"]:
            raise InputError(f"{name}: column {col!r}: expected no {what}, got {counts[f'c{i}']}")


__all__ = [
    "RawSource",
    "read_files",
    "read_table",
    "read_candidate_table",
    "FILE_SHIFT",
    "KIND_EVENT",
    "KIND_ERROR",
]
