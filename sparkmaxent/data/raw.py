"""The read stage of ``prepare``: input files -> raw events (tables: ``rawtable``).

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

from ..session_kind import default_parallelism
from ..shapes import MULTICLASS
from .inputs import display_path, expand_inputs
from .readers import ParseError, format_spec

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
    """Raw events of a prepare run and how to name a position in them;
    ``key_col``: the table column the raw events carry as ``key``."""

    def __init__(
        self,
        raw,
        shape: str,
        files: list[str],
        source: dict,
        table: str | None = None,
        key_col: str | None = None,
    ):
        self.raw, self.shape, self.files, self.source, self.table = raw, shape, files, source, table
        self.key_col = key_col

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
    parallelism = default_parallelism(spark)
    if len(uris) < parallelism:
        # Fewer files than cores parse in fewer tasks; spread their events so
        # the later stages use every core (hashing is deterministic: no sort).
        raw = raw.repartition(parallelism, "event_id")
    logger.info("reading %d file(s) as %r", len(uris), fmt)
    return RawSource(raw, spec.shape, [display_path(u) for u in uris], file_source(fmt, uris, opts))


def file_source(fmt: str, uris: list[str], opts: dict) -> dict:
    """DatasetInfo.source of a run over files."""
    return {"format": fmt, "inputs": [display_path(u) for u in uris], "options": opts}


def _ddl_struct(spark, ddl: str):
    from pyspark.sql.types import StructType

    return StructType.fromDDL(ddl)


__all__ = ["RawSource", "read_files", "FILE_SHIFT", "KIND_EVENT", "KIND_ERROR"]
