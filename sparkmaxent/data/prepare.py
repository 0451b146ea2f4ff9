"""Preparing a dataset: text files (or a Spark table) -> the layout of ``schema.py``.

Steps, all on Spark except the small bookkeeping on the driver:

1. **Read.** Input patterns are expanded on the driver into a sorted file
   list; ``binaryFile`` reads each file whole and ``mapInArrow`` runs the
   registered parser over it (``readers.FORMATS``), so parsing happens on the
   executors with exact line numbers. One output carries both raw events and
   parse errors (``kind`` column), so the files are parsed once.
   ``event_id``/``group`` become globally unique: ``file_index * 2**40 + local``.
2. **Check.** The first parse error stops the run with ``path:line: reason``
   (``readers.InputError``), unless ``quarantine`` sets rejected records
   aside in ``<out>/_quarantine/`` (JSON lines: path, line, reason, text).
   Empty datasets, a single label, and candidate sets without a correct
   candidate are errors too (the last two for training data only).
3. **Dictionary.** count(f) = sum of the weights of the events f occurs in;
   features with count >= cutoff are kept (the count-cutoff baseline) and
   numbered in feature-string order; labels are the sorted distinct label
   strings. With ``vocabulary`` the dictionary and labels of a prepared
   training set are reused instead (for held-out and test data).
4. **Index.** Features are mapped to ids with a join (broadcast when the
   dictionary is small); within an event (candidate) features are sorted by
   id and repeated features' values summed; features outside the dictionary
   are dropped (an event may end up empty; it keeps its label).
5. **Merge.** Identical events (label, indices, values) become one with the
   summed weight and the smallest event_id/group (``merge_duplicates``).
6. **Write** atomically: a temporary sibling directory is renamed to
   ``out_dir`` only when complete, and removed on any failure. Events are
   range-partitioned by event_id, so part files in name order hold the
   events in source order. Spark names list items ``element`` (pyarrow:
   ``item``): readers cast to ``schema.events_schema``.

Counting conventions: ``unknown_features`` counts (event, feature)
occurrences dropped because the vocabulary lacks them; ``unknown_labels``
counts events (before merging) whose label the vocabulary lacks. Input must
be UTF-8; a line that is not becomes a parse error and reaches the parser as
a blank line. Event weights must be finite and >= 0.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from dataclasses import asdict
from typing import Any, Iterable, Iterator

import numpy as np
import pyarrow as pa

from ..shapes import CANDIDATES, MULTICLASS
from .readers import FORMATS, InputError, ParseError, format_spec
from .schema import EVENTS_DIR, FEATURES_DIR, FEATURES_SCHEMA, DatasetInfo, events_schema

logger = logging.getLogger(__name__)

QUARANTINE_DIR = "_quarantine"
FILE_SHIFT = 2 ** 40  # event_id = file_index * FILE_SHIFT + id within the file
# Dictionaries up to this size are broadcast to every task for the feature join
# (about 40 bytes a feature); larger ones go through a shuffle join.
BROADCAST_MAX_FEATURES = 2_000_000
_RAW_BATCH_ROWS = 4096  # raw events per Arrow batch out of the parser UDF

_KIND_EVENT, _KIND_ERROR = 0, 1


# ------------------------------------------------------------------ inputs

def _has_scheme(path: str) -> bool:
    head, sep, _ = path.partition("://")
    return bool(sep) and head.isalpha()


def _hidden(name: str) -> bool:
    # Spark's own convention: _SUCCESS, .crc and _temporary are not data.
    return name.startswith((".", "_"))


def expand_inputs(spark, inputs: Iterable[str]) -> list[str]:
    """Files named by ``inputs`` (files, directories, globs), sorted, as
    fully qualified URIs (``file:/...``, ``hdfs://...``).

    Directories are listed recursively, and directories and globs skip
    hidden files (names starting with ``.`` or ``_``, Spark's convention); a
    file named explicitly is always read. Listing goes through Hadoop's FileSystem, so the
    names match what Spark's ``binaryFile`` source reports.

    Raises
    ------
    InputError
        If no input is given, or a pattern matches no file.
    """
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    if not inputs:
        raise InputError("expected at least one input file, directory or glob, got none")
    jvm = spark._jvm
    hconf = spark._jsc.hadoopConfiguration()
    found: set[str] = set()
    for pattern in inputs:
        if not _has_scheme(pattern):
            pattern_q = os.path.abspath(os.path.expanduser(pattern))
        else:
            pattern_q = pattern
        is_glob = any(c in pattern for c in "*?[{")
        jpath = jvm.org.apache.hadoop.fs.Path(pattern_q)
        fs = jpath.getFileSystem(hconf)
        statuses = fs.globStatus(jpath) or []
        matched: list[str] = []
        for st in statuses:
            if st.isDirectory():
                it = fs.listFiles(st.getPath(), True)
                while it.hasNext():
                    f = it.next()
                    rel = f.getPath().toString()[len(st.getPath().toString()):]
                    if f.isFile() and not any(_hidden(p) for p in rel.split("/") if p):
                        matched.append(f.getPath().toString())
            elif not (is_glob and _hidden(st.getPath().getName())):
                matched.append(st.getPath().toString())
        if not matched:
            raise InputError(f"expected input files, got nothing matching {pattern!r}"
                             + (f" (looked for {pattern_q})" if pattern_q != pattern else ""))
        found.update(matched)
    return sorted(found)


def display_path(uri: str) -> str:
    """``file:/a/b`` -> ``/a/b``; other URIs as they are."""
    if uri.startswith("file://"):
        return uri[len("file://"):]
    if uri.startswith("file:"):
        return uri[len("file:"):]
    return uri


def resolve_options(fmt: str, options: dict | None) -> dict:
    """The parser options of ``fmt``: its declared defaults updated by
    ``options``; string values are converted to the type of the default
    (so ``lowercase=false`` from a command line is False, not a true string).

    Raises
    ------
    InputError
        For an unknown format, or an option the format does not declare
        (when it declares any).
    """
    spec = format_spec(fmt)
    given = dict(options or {})
    if spec.options:
        unknown = sorted(set(given) - set(spec.options))
        if unknown:
            raise InputError(f"unknown option(s) {unknown} for format {fmt!r}: expected "
                             f"some of {sorted(spec.options)}")
    resolved = dict(spec.options)
    for key, value in given.items():
        default = spec.options.get(key)
        if isinstance(value, str) and default is not None and not isinstance(default, str):
            value = _coerce(fmt, key, value, type(default))
        resolved[key] = value
    return resolved


def _coerce(fmt: str, key: str, value: str, kind: type) -> Any:
    if kind is bool:
        low = value.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise InputError(f"option {key} of format {fmt!r}: expected true or false, got {value!r}")
    try:
        return kind(value)
    except ValueError:
        raise InputError(f"option {key} of format {fmt!r}: expected a {kind.__name__}, "
                         f"got {value!r}") from None


# ------------------------------------------------------- parsing on executors

def _raw_ddl(shape: str) -> str:
    target = ("label string" if shape == MULTICLASS
              else "correct array<boolean>, cand_nnz array<int>, cand array<int>")
    return ("kind tinyint, file_index int, line long, " + target + ", weight double, "
            "features array<string>, values array<double>, event_id long, `group` long, "
            "reason string, text string")


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
                errors.append(ParseError(path, no, f"expected UTF-8 text, got byte "
                                         f"0x{raw[e.start]:02x} at byte {e.start + 1} of the line",
                                         raw.decode("utf-8", "replace")))
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
            raise ValueError(f"parser bug: {len(ev.features)} features but "
                             f"{len(ev.values)} values at line {line}")
        c["kind"].append(_KIND_EVENT)
        c["file_index"].append(fi)
        c["line"].append(line)
        if self.shape == MULTICLASS:
            c["label"].append(ev.label)
        else:
            if sum(ev.cand_nnz) != len(ev.features) or len(ev.cand_nnz) != len(ev.correct):
                raise ValueError(f"parser bug: cand_nnz {ev.cand_nnz} does not match "
                                 f"{len(ev.features)} features / {len(ev.correct)} candidates "
                                 f"at line {line}")
            c["correct"].append(ev.correct)
            c["cand_nnz"].append(ev.cand_nnz)
            c["cand"].append(np.repeat(np.arange(len(ev.cand_nnz), dtype=np.int32),
                                       ev.cand_nnz).tolist())
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
        c["kind"][-1] = _KIND_ERROR
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


def _make_parse_udf(shape: str, parser, options: dict, schema: pa.Schema,
                    file_index: dict[str, int], stop_at_first_error: bool):
    """The function ``mapInArrow`` runs over ``binaryFile`` rows (path, content)."""

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out = _RawBatcher(shape, schema)
        for batch in batches:
            paths = batch.column("path").to_pylist()
            contents = batch.column("content")
            for i, uri in enumerate(paths):
                if uri not in file_index:
                    raise ValueError(f"binaryFile returned {uri!r}, which is not among the "
                                     f"{len(file_index)} expanded input files")
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


def _finalize_udf(shape: str, schema: pa.Schema):
    """Per batch of indexed events: sort each event's (candidate, id) entries,
    sum the values of repeated features, and rebuild cand_nnz, all without a
    per-event Python loop."""

    def finalize(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            m = batch.num_rows
            fs = batch.column("fs")
            offsets = fs.offsets.to_numpy().astype(np.int64)
            # ListArray.flatten and StructArray.flatten honour slice offsets
            # (StructArray.field does not).
            flat = fs.flatten()
            parts = {f.name: a for f, a in zip(flat.type, flat.flatten())}
            ids = parts["id"].to_numpy(zero_copy_only=False)
            vals = parts["value"].to_numpy(zero_copy_only=False)
            offsets = offsets - offsets[0]
            rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(offsets))
            if shape == CANDIDATES:
                cands = parts["cand"].to_numpy(zero_copy_only=False).astype(np.int64)
                correct = batch.column("correct")
                c_off = correct.offsets.to_numpy().astype(np.int64)
                c_off = c_off - c_off[0]
                gcand = c_off[rows] + cands  # candidate index within the batch
                order = np.lexsort((ids, gcand))
                key_hi = gcand[order]
            else:
                order = np.lexsort((ids, rows))
                key_hi = rows[order]
            ids_s, vals_s, rows_s = ids[order], vals[order], rows[order]
            n = len(ids_s)
            new = np.ones(n, dtype=bool)
            if n > 1:
                new[1:] = (key_hi[1:] != key_hi[:-1]) | (ids_s[1:] != ids_s[:-1])
            starts = np.flatnonzero(new)
            out_vals = np.add.reduceat(vals_s, starts) if n else vals_s
            out_ids = ids_s[starts].astype(np.int32)
            per_event = np.bincount(rows_s[starts], minlength=m)
            new_off = np.concatenate([[0], np.cumsum(per_event)]).astype(np.int32)
            indices = pa.ListArray.from_arrays(pa.array(new_off), pa.array(out_ids, pa.int32()))
            values = pa.ListArray.from_arrays(pa.array(new_off),
                                              pa.array(out_vals, pa.float64()))
            cols: dict[str, pa.Array] = {
                "weight": batch.column("weight"), "indices": indices, "values": values,
                "event_id": batch.column("event_id"), "group": batch.column("group"),
            }
            if shape == MULTICLASS:
                cols["label"] = batch.column("label")
            else:
                n_cands = int(c_off[-1])
                nnz = np.bincount(key_hi[starts], minlength=n_cands).astype(np.int32)
                cols["correct"] = batch.column("correct")
                cols["cand_nnz"] = pa.ListArray.from_arrays(
                    pa.array(c_off.astype(np.int32)), pa.array(nnz, pa.int32()))
            yield pa.RecordBatch.from_arrays(
                [cols[f.name].cast(f.type) for f in schema], schema=schema)

    return finalize


# ---------------------------------------------------------------- sources

class _Source:
    """Raw events of a prepare run and how to name a position in them."""

    def __init__(self, raw, shape: str, files: list[str], source: dict, table: str | None = None):
        self.raw, self.shape, self.files, self.source, self.table = raw, shape, files, source, table

    def where(self, file_index: int, line: int | None) -> str:
        if self.table is not None:
            return f"table {self.table}"
        return f"{self.files[file_index]}:{line}"


def _spark_schema(arrow_schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema)


def _read_files(spark, inputs: list[str], fmt: str, options: dict | None,
                quarantine: bool) -> _Source:
    from pyspark.sql.pandas.types import to_arrow_schema

    spec = format_spec(fmt)
    opts = resolve_options(fmt, options)
    # A parser checks its options when it starts: run it on no lines here so a
    # bad option fails on the driver, before any task.
    for _ in spec.parser("<options>", iter(()), opts):
        break
    uris = expand_inputs(spark, inputs)
    file_index = {u: i for i, u in enumerate(uris)}
    raw_struct = _ddl_struct(spark, _raw_ddl(spec.shape))
    arrow_schema = to_arrow_schema(raw_struct)
    udf = _make_parse_udf(spec.shape, spec.parser, opts, arrow_schema, file_index,
                          stop_at_first_error=not quarantine)
    files = spark.read.format("binaryFile").load(uris).select("path", "content")
    raw = files.mapInArrow(udf, raw_struct)
    parallelism = spark.sparkContext.defaultParallelism
    if len(uris) < parallelism:
        # Fewer files than cores parse in fewer tasks; spread their events so
        # the later stages use every core (hashing is deterministic: no sort).
        raw = raw.repartition(parallelism, "event_id")
    logger.info("reading %d file(s) as %r", len(uris), fmt)
    source = {"format": fmt, "inputs": [display_path(u) for u in uris], "options": opts}
    return _Source(raw, spec.shape, [display_path(u) for u in uris], source)


def _ddl_struct(spark, ddl: str):
    from pyspark.sql.types import StructType

    return StructType.fromDDL(ddl)


# ------------------------------------------------------------------ output

def _temp_sibling(out_dir: str, tag: str) -> str:
    parent, name = os.path.split(os.path.abspath(out_dir).rstrip("/"))
    return os.path.join(parent, f".{name}.{tag}-{uuid.uuid4().hex[:8]}")


def _check_out_dir(out_dir: str, overwrite: bool) -> None:
    if os.path.exists(out_dir) and not overwrite:
        raise InputError(f"output directory {out_dir} exists: expected a new path, or "
                         "overwrite=True (--overwrite) to replace it")


def _publish(tmp: str, out_dir: str, overwrite: bool) -> None:
    """Rename the complete ``tmp`` to ``out_dir``; an old ``out_dir`` is moved
    aside first and removed only once the new one is in place."""
    out_dir = os.path.abspath(out_dir)
    _check_out_dir(out_dir, overwrite)
    if os.path.exists(out_dir):
        old = _temp_sibling(out_dir, "old")
        os.rename(out_dir, old)
        try:
            os.rename(tmp, out_dir)
        except BaseException:
            os.rename(old, out_dir)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, out_dir)


# ------------------------------------------------------------------ public

def prepare(spark, inputs: list[str], out_dir: str, fmt: str, *,
            options: dict | None = None, cutoff: int = 0, merge_duplicates: bool = True,
            vocabulary: str | None = None, partitions: int | None = None,
            quarantine: bool = False, overwrite: bool = False,
            require_labels: bool = True) -> DatasetInfo:
    """Prepare text files of a registered format as a dataset (``schema.py``).

    Parameters
    ----------
    spark : SparkSession
    inputs : list of str
        Files, directories (read recursively) and globs; local paths or URIs.
    out_dir : str
        Local directory to create; written atomically.
    fmt : str
        A name in ``readers.FORMATS``.
    options : dict, optional
        Parser options (e.g. ``{"mode": "basenp"}`` for ``conll``).
    cutoff : int
        Keep features whose weighted event count is >= cutoff (0 keeps all).
        Ignored with ``vocabulary``.
    merge_duplicates : bool
        Merge identical events, summing weights (training data). Keep False
        for test/prediction data so every event keeps its own row.
    vocabulary : str, optional
        A prepared training dataset whose feature dictionary and labels are
        reused; unseen features are dropped and counted, unseen labels are
        counted and listed in DatasetInfo.unseen_labels, event label -(j + 1)
        for the j-th of them, so their names survive for evaluation.
    partitions : int, optional
        Number of event files (default: ``spark.sparkContext.defaultParallelism``).
    quarantine : bool
        Set malformed records aside in ``<out_dir>/_quarantine/`` instead of
        failing at the first one.
    overwrite : bool
        Replace an existing ``out_dir`` (only once the new one is complete).
    require_labels : bool
        Training data: require >= 2 labels (multiclass) or a correct
        candidate in every event (candidate sets). Not checked with
        ``vocabulary``.

    Returns
    -------
    DatasetInfo
        As saved in ``<out_dir>/dataset.json``.

    Raises
    ------
    InputError
        Bad input, named by file and line: unknown format or option, no
        matching file, a malformed record (without ``quarantine``), no
        events, a single label, a training event without a correct
        candidate, an existing ``out_dir`` without ``overwrite``.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown input format {fmt!r}: expected one of {sorted(FORMATS)}")
    _check_out_dir(out_dir, overwrite)
    t0 = time.perf_counter()
    src = _read_files(spark, [inputs] if isinstance(inputs, str) else list(inputs), fmt,
                      options, quarantine)
    return _run(spark, src, out_dir, cutoff=cutoff, merge_duplicates=merge_duplicates,
                vocabulary=vocabulary, partitions=partitions, quarantine=quarantine,
                overwrite=overwrite, require_labels=require_labels, t0=t0)


def prepare_table(spark, table, out_dir: str, *, label_col: str = "label",
                  features_col: str = "features", weight_col: str | None = None,
                  values_col: str | None = None, cutoff: int = 0,
                  merge_duplicates: bool = True, vocabulary: str | None = None,
                  partitions: int | None = None, overwrite: bool = False,
                  require_labels: bool = True) -> DatasetInfo:
    """Prepare a Spark DataFrame or table of multiclass events.

    Parameters
    ----------
    spark : SparkSession
    table : DataFrame or str
        A DataFrame, or the name of a table in the catalog.
    out_dir : str
        As in :func:`prepare`.
    label_col : str
        Label column (any type; labels are its values as strings).
    features_col : str
        ``array<string>`` column of feature names.
    weight_col : str, optional
        Numeric event weights (default 1.0).
    values_col : str, optional
        ``array<double>`` feature values, aligned with ``features_col``
        (default 1.0 each).
    cutoff, merge_duplicates, vocabulary, partitions, overwrite, require_labels
        As in :func:`prepare`.

    Returns
    -------
    DatasetInfo

    Raises
    ------
    InputError
        A missing column (the columns present are listed), a features column
        that is not ``array<string>``, nulls, NaN or infinite values or
        negative weights (the column is named), and the checks of
        :func:`prepare`.
    """
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, NumericType, StringType

    _check_out_dir(out_dir, overwrite)
    t0 = time.perf_counter()
    if isinstance(table, DataFrame):
        df, name = table, "<DataFrame>"
    else:
        name = str(table)
        if not spark.catalog.tableExists(name):
            raise InputError(f"expected a table named {name!r} in the Spark catalog, found none")
        df = spark.table(name)
    fields = {f.name: f.dataType for f in df.schema.fields}

    def need(col: str, role: str) -> None:
        if col not in fields:
            raise InputError(f"{name}: expected a {role} column named {col!r}, got columns "
                             f"{list(fields)}")

    need(label_col, "label")
    need(features_col, "features")
    ftype = fields[features_col]
    if not (isinstance(ftype, ArrayType) and isinstance(ftype.elementType, StringType)):
        raise InputError(f"{name}: expected column {features_col!r} of type array<string>, "
                         f"got {ftype.simpleString()}")
    if weight_col is not None:
        need(weight_col, "weight")
        if not isinstance(fields[weight_col], NumericType):
            raise InputError(f"{name}: expected a numeric weight column {weight_col!r}, got "
                             f"{fields[weight_col].simpleString()}")
    if values_col is not None:
        need(values_col, "values")
        vtype = fields[values_col]
        if not (isinstance(vtype, ArrayType) and isinstance(vtype.elementType, NumericType)):
            raise InputError(f"{name}: expected column {values_col!r} of type array<double>, "
                             f"got {vtype.simpleString()}")

    weight = F.col(weight_col).cast("double") if weight_col else F.lit(1.0)
    values = (F.col(values_col).cast("array<double>") if values_col
              else F.transform(F.col(features_col), lambda _: F.lit(1.0)))
    inf = float("inf")

    def not_finite(c):
        return F.isnan(c) | c.isin(inf, -inf)

    # (column, what must not occur, rows where it occurs), checked in one pass
    checks = [(label_col, "null labels", F.col(label_col).isNull()),
              (features_col, "null feature lists", F.col(features_col).isNull()),
              (features_col, "rows with null feature names",
               F.exists(F.col(features_col), lambda x: x.isNull()))]
    if weight_col:
        checks += [(weight_col, "null, NaN or infinite weights",
                    weight.isNull() | not_finite(weight)),
                   (weight_col, "negative weights", weight < 0)]
    if values_col:
        checks += [(values_col, "rows with null, NaN or infinite values",
                    F.exists(F.col(values_col), lambda x: x.isNull() | not_finite(x))),
                   (values_col, f"rows whose values do not pair up with {features_col!r}",
                    F.size(F.col(values_col)) != F.size(F.col(features_col)))]
    counts = df.agg(*[F.sum(F.coalesce(cond, F.lit(False)).cast("long")).alias(f"c{i}")
                      for i, (_, _, cond) in enumerate(checks)]).first()
    for i, (col, what, _) in enumerate(checks):
        if counts[f"c{i}"]:
            raise InputError(f"{name}: column {col!r}: expected no {what}, "
                             f"got {counts[f'c{i}']}")

    raw = df.select(
        F.lit(_KIND_EVENT).cast("tinyint").alias("kind"), F.lit(0).alias("file_index"),
        F.lit(None).cast("long").alias("line"), F.col(label_col).cast("string").alias("label"),
        weight.alias("weight"), F.col(features_col).alias("features"), values.alias("values"),
        F.monotonically_increasing_id().alias("event_id"),
        F.lit(None).cast("string").alias("reason"), F.lit(None).cast("string").alias("text"),
    ).withColumn("group", F.col("event_id"))
    source = {"format": "table", "inputs": [name],
              "options": {"label_col": label_col, "features_col": features_col,
                          "weight_col": weight_col, "values_col": values_col}}
    src = _Source(raw, MULTICLASS, [name], source, table=name)
    return _run(spark, src, out_dir, cutoff=cutoff, merge_duplicates=merge_duplicates,
                vocabulary=vocabulary, partitions=partitions, quarantine=False,
                overwrite=overwrite, require_labels=require_labels, t0=t0)


# ------------------------------------------------------------------ the run

def _run(spark, src: _Source, out_dir: str, *, cutoff: int, merge_duplicates: bool,
         vocabulary: str | None, partitions: int | None, quarantine: bool,
         overwrite: bool, require_labels: bool, t0: float) -> DatasetInfo:
    from pyspark import StorageLevel

    if cutoff < 0:
        raise InputError(f"expected a count cutoff >= 0, got {cutoff}")
    if partitions is not None and partitions < 1:
        raise InputError(f"expected partitions >= 1, got {partitions}")
    vocab_info = None
    if vocabulary is not None:
        try:
            vocab_info = DatasetInfo.load(vocabulary)
        except (FileNotFoundError, ValueError) as e:
            raise InputError(f"vocabulary: {e}") from None
        if vocab_info.shape != src.shape:
            raise InputError(f"vocabulary {vocabulary} holds {vocab_info.shape} events, but "
                             f"the input is {src.shape}")
    n_parts = partitions or spark.sparkContext.defaultParallelism
    tmp = _temp_sibling(out_dir, "tmp")
    cached: list = []
    try:
        os.makedirs(tmp)
        raw = src.raw.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(raw)
        info = _build(spark, src, raw, tmp, cutoff=cutoff, merge_duplicates=merge_duplicates,
                      vocab_info=vocab_info, vocabulary=vocabulary, n_parts=n_parts,
                      quarantine=quarantine, require_labels=require_labels, cached=cached)
        _publish(tmp, out_dir, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        for df in cached:
            df.unpersist()
    logger.info("prepared %s: %d events (total weight %g), %d features, %d labels, "
                "%d quarantined, %d unknown features, %d unknown labels, in %.1f s",
                out_dir, info.n_events, info.total_weight, info.n_features, len(info.labels),
                info.quarantined, info.unknown_features, info.unknown_labels,
                time.perf_counter() - t0)
    return info


def _build(spark, src: _Source, raw, tmp: str, *, cutoff: int, merge_duplicates: bool,
           vocab_info: DatasetInfo | None, vocabulary: str | None, n_parts: int,
           quarantine: bool, require_labels: bool, cached: list) -> DatasetInfo:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    shape = src.shape
    is_event = F.col("kind") == _KIND_EVENT
    is_error = F.col("kind") == _KIND_ERROR
    pos = F.struct("file_index", "line")
    training = require_labels and vocab_info is None

    # One pass over the parsed data for every check.
    aggs = [F.sum(is_error.cast("long")).alias("n_errors"),
            F.sum(is_event.cast("long")).alias("n_raw"),
            F.sum(F.when(is_event, F.col("weight"))).alias("total_weight"),
            F.min(F.when(is_error, pos)).alias("first_error"),
            F.min(F.when(is_event & (F.isnan("weight") | (F.col("weight") < 0)
                                     | F.col("weight").isin(float("inf"))),
                         F.struct("file_index", "line", "weight"))).alias("bad_weight")]
    if shape == MULTICLASS:
        if vocab_info is None:
            aggs.append(F.array_sort(F.collect_set(F.when(is_event, F.col("label"))))
                        .alias("labels"))
        else:
            known = F.array(*[F.lit(x) for x in vocab_info.labels]) if vocab_info.labels \
                else F.array().cast("array<string>")
            unseen = is_event & ~F.array_contains(known, F.col("label"))
            aggs.append(F.sum(unseen.cast("long")).alias("unknown_labels"))
            aggs.append(F.array_sort(F.collect_set(F.when(unseen, F.col("label"))))
                        .alias("unseen_labels"))
    elif training:
        no_correct = is_event & ~F.exists("correct", lambda x: x)
        aggs.append(F.min(F.when(no_correct, F.struct("file_index", "line", "event_id",
                                                        F.size("correct").alias("n"))))
                    .alias("no_correct"))
    stats = raw.agg(*aggs).first()
    n_errors = int(stats["n_errors"] or 0)

    if n_errors and not quarantine:
        fe = stats["first_error"]
        rec = raw.where(is_error & (F.col("file_index") == fe["file_index"])
                        & (F.col("line") == fe["line"])).select("reason").first()
        more = (" (stopped at the first malformed record; quarantine=True / --quarantine "
                "sets malformed records aside)")
        raise InputError(f"{src.where(fe['file_index'], fe['line'])}: {rec['reason']}{more}")
    quarantined = 0
    if n_errors:
        names = F.array(*[F.lit(p) for p in src.files])
        (raw.where(is_error)
            .select(F.element_at(names, F.col("file_index") + 1).alias("path"), "line",
                    "reason", "text", "file_index")
            .repartition(1).sortWithinPartitions("file_index", "line").drop("file_index")
            .write.json(os.path.join(tmp, QUARANTINE_DIR)))
        quarantined = n_errors
        logger.warning("quarantined %d malformed record(s) in %s", n_errors,
                       os.path.join(QUARANTINE_DIR, ""))
    if not stats["n_raw"]:
        raise InputError(f"expected events in {_describe(src)}, got none after parsing"
                         + (f" ({n_errors} malformed record(s) quarantined)" if n_errors else ""))
    bw = stats["bad_weight"]
    if bw is not None:
        raise InputError(f"{src.where(bw['file_index'], bw['line'])}: expected a finite "
                         f"event weight >= 0, got {bw['weight']}")

    # Labels.
    unknown_labels, unseen_labels = 0, []
    if shape == MULTICLASS:
        if vocab_info is None:
            labels = list(stats["labels"])
            if training and len(labels) < 2:
                raise InputError(f"expected at least 2 distinct labels in training data, got "
                                 f"{len(labels)} ({labels}) in {_describe(src)}; pass a "
                                 "vocabulary (or require_labels=False) for test data")
        else:
            labels = list(vocab_info.labels)
            unknown_labels = int(stats["unknown_labels"] or 0)
            unseen_labels = list(stats["unseen_labels"] or [])
    else:
        labels = []
        nc = stats["no_correct"] if training else None
        if nc is not None:
            where = (src.where(nc["file_index"], nc["line"]) if src.table is None
                     else f"table {src.table}")
            raise InputError(f"{where}: expected at least one correct candidate in a training "
                             f"event, got none among {nc['n']} candidate(s) (pass a "
                             "vocabulary or require_labels=False for test data)")

    events = raw.where(is_event)

    # Feature dictionary.
    if vocab_info is None:
        counts = (events.select("weight", F.explode(F.array_distinct("features")).alias("feature"))
                  .groupBy("feature").agg(F.sum("weight").alias("count")))
        if cutoff > 0:
            counts = counts.where(F.col("count") >= cutoff)
        # One partition sorted by feature: monotonically_increasing_id is then
        # the row number, so ids follow feature-string order.
        dictionary = (counts.repartition(1).sortWithinPartitions("feature")
                      .withColumn("id", F.monotonically_increasing_id().cast("int"))
                      .select("feature", "id", "count")
                      .persist(StorageLevel.MEMORY_AND_DISK))
    else:
        dictionary = (spark.read.parquet(os.path.join(vocabulary, FEATURES_DIR))
                      .select(F.col("feature").cast("string"), F.col("id").cast("int"),
                              F.col("count").cast("double"))
                      .persist(StorageLevel.MEMORY_AND_DISK))
    cached.append(dictionary)
    features_dir = os.path.join(tmp, FEATURES_DIR)
    (dictionary.repartition(1).sortWithinPartitions("id")
        .select(*[F.col(f.name).cast(_spark_type(f.type)) for f in FEATURES_SCHEMA])
        .write.parquet(features_dir))
    n_features = _parquet_rows(features_dir)
    if vocab_info is not None and n_features != vocab_info.n_features:
        raise InputError(f"vocabulary {vocabulary}: dataset.json says {vocab_info.n_features} "
                         f"features, {FEATURES_DIR}/ holds {n_features}")

    # Index: explode (event, feature), join the dictionary, regroup by event.
    # Event columns ride along (first()) so no join back to the events is
    # needed; explode_outer keeps events without features.
    if shape == MULTICLASS:
        # known label: its index; unseen label j (of DatasetInfo.unseen_labels): -(j + 1)
        def position(names):
            return (F.array_position(F.array(*[F.lit(x) for x in names]), F.col("label"))
                    .cast("int") if names else F.lit(0))
        label_index = F.when(position(labels) > 0, position(labels) - 1).otherwise(
            -position(unseen_labels)).cast("int")
        head, zipped = [label_index.alias("label")], F.arrays_zip("features", "values")
        entry = ["id", "value"]
    else:
        head, zipped = [F.col("correct")], F.arrays_zip("features", "values", "cand")
        entry = ["cand", "id", "value"]
    carried = ["group", "weight", "label" if shape == MULTICLASS else "correct"]
    occ = (events.select("event_id", "group", "weight", *head,
                         F.explode_outer(zipped).alias("z"))
           .select("event_id", "group", "weight", carried[2],
                   F.col("z.features").alias("feature"), F.col("z.values").alias("value"),
                   *([F.col("z.cand").alias("cand")] if shape == CANDIDATES else [])))
    lookup = dictionary.select("feature", "id")
    if n_features <= BROADCAST_MAX_FEATURES:
        lookup = F.broadcast(lookup)
    joined = occ.join(lookup, "feature", "left")
    unknown_features = 0
    if vocab_info is not None:  # occurrences of features outside the vocabulary
        unknown_features = joined.where(F.col("feature").isNotNull()
                                        & F.col("id").isNull()).count()
    indexed = (joined.groupBy("event_id")
               .agg(*[F.first(c).alias(c) for c in carried],
                    F.collect_list(F.when(F.col("id").isNotNull(), F.struct(*entry))).alias("fs")))
    out_schema = events_schema(shape)
    final_struct = _spark_schema(out_schema)
    final = indexed.mapInArrow(_finalize_udf(shape, to_arrow_schema(final_struct)),
                               final_struct)

    if merge_duplicates:
        keys = ["label"] if shape == MULTICLASS else ["correct", "cand_nnz"]
        final = (final.groupBy(*keys, "indices", "values")
                 .agg(F.sum("weight").alias("weight"), F.min("event_id").alias("event_id"),
                      F.min("group").alias("group")))
    final = final.select(*[F.col(f.name).cast(_spark_type(f.type)) for f in out_schema])
    # Range partitioning by event_id keeps source order across and within files.
    events_dir = os.path.join(tmp, EVENTS_DIR)
    (final.repartitionByRange(n_parts, "event_id").sortWithinPartitions("event_id")
        .write.parquet(events_dir))
    n_events = _parquet_rows(events_dir)

    info = DatasetInfo(
        shape=shape, n_features=int(n_features), labels=labels, n_events=n_events,
        total_weight=float(stats["total_weight"]), source=dict(src.source),
        cutoff=int(cutoff) if vocab_info is None else int(vocab_info.cutoff),
        quarantined=quarantined, unknown_features=int(unknown_features),
        unknown_labels=unknown_labels, unseen_labels=unseen_labels)
    info.source.update({"merge_duplicates": merge_duplicates, "vocabulary": vocabulary,
                        "partitions": n_parts})
    info.save(tmp)
    return info


def _parquet_rows(directory: str) -> int:
    """Rows in the Parquet files of a local directory, from their footers."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(os.path.join(directory, name)).num_rows
               for name in os.listdir(directory) if name.endswith(".parquet"))


def _describe(src: _Source) -> str:
    if src.table is not None:
        return f"table {src.table}"
    if len(src.files) <= 3:
        return ", ".join(src.files)
    return f"{len(src.files)} files ({src.files[0]}, ..., {src.files[-1]})"


def _spark_type(t: pa.DataType):
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(t)


def info_summary(info: DatasetInfo) -> dict:
    """The figures of a DatasetInfo worth a log line (no label/input lists)."""
    d = asdict(info)
    d["n_labels"] = len(d.pop("labels"))
    d["n_inputs"] = len(d["source"].get("inputs", []))
    d["format"] = d.pop("source").get("format")
    return d


__all__ = ["prepare", "prepare_table", "expand_inputs", "resolve_options", "display_path",
           "info_summary", "QUARANTINE_DIR", "FILE_SHIFT"]
