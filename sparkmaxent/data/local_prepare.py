"""Preparing small inputs in the driver's process, without Spark jobs.

When the input files are small enough (``plan.Limits.input_bytes``:
``data.in_process_max_events`` times ``data.in_process_bytes_per_event``
bytes in all; 0 events: never), ``prepare`` runs its stages here on Arrow
tables: the same parser function the executors run (``raw._make_parse_udf``),
the same checks and messages (``checks``), label list
(``dictionary.labels_of``), the same stage functions (``dictionary``,
``indexing``: ``stages`` says which) and fingerprints, written through
``storage``.
The result is the dataset the Spark stages write: the same rows in the
same order, the same dictionary and the same ``dataset.json``. The Spark
stages' job start-up (seconds each) is what small inputs save. Quarantine
(``--quarantine``) writes the rejected records as the Spark stage does
(one JSON-lines file, in file and line order), and ``split.split_local``
splits off a held-out part here.
"""

from __future__ import annotations

import json
import logging
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import storage
from ..plan import Limits
from ..shapes import MULTICLASS
from .checks import QUARANTINE_DIR, check_counts, parse_error
from .dictionary import count_features
from .indexing import index_table, merge_table, unknown_occurrences
from .inputs import display_path, expand_inputs
from .options import PrepareOptions
from .raw import (
    KIND_ERROR,
    KIND_EVENT,
    RawSource,
    _ddl_struct,
    _make_parse_udf,
    _raw_ddl,
    file_source,
)
from .readers import format_spec
from .schema import EVENTS_DIR, DatasetInfo
from .stages import build

logger = logging.getLogger("sparkmaxent.data.prepare")  # a prepare run logs under one name


def read_small(
    spark,
    inputs: list[str],
    fmt: str,
    opts: dict,
    limits: Limits,
    quarantine: bool = False,
) -> RawSource | None:
    """The raw events of ``inputs`` parsed here (``RawSource.raw`` an Arrow
    table), or None when they are too large for it (``limits.input_bytes``;
    never with a limit of 0 events). Parsing stops at the first malformed
    record unless ``quarantine``."""
    if limits.max_events <= 0:
        return None
    uris = expand_inputs(spark, inputs)
    total = sum(storage.size(u) for u in uris)
    if not limits.input_bytes(total):
        return None
    from pyspark.sql.pandas.types import to_arrow_schema

    spec = format_spec(fmt)
    schema = to_arrow_schema(_ddl_struct(spark, _raw_ddl(spec.shape)))
    parse = _make_parse_udf(
        spec.shape,
        spec.parser,
        opts,
        schema,
        {u: i for i, u in enumerate(uris)},
        stop_at_first_error=not quarantine,
    )
    files = pa.RecordBatch.from_arrays(
        [pa.array(uris), pa.array([storage.read_bytes(u) for u in uris], pa.binary())],
        names=["path", "content"],
    )
    raw = pa.Table.from_batches(list(parse(iter([files]))), schema=schema)
    logger.info("read %d file(s) (%d bytes) as %r in this process", len(uris), total, fmt)
    files_shown = [display_path(u) for u in uris]
    return RawSource(raw, spec.shape, files_shown, file_source(fmt, uris, opts))


def collect_raw(spark, frame, shape: str) -> pa.Table:
    """The rows of a small DataFrame of raw events (``raw._raw_ddl``'s
    columns, any others after them) collected here with Arrow in one Spark
    job, the raw columns cast to the types ``read_small`` gives, so
    ``build_local`` finishes a table as it finishes files."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(_ddl_struct(spark, _raw_ddl(shape)))
    table = frame.toArrow()
    raw = table.select(schema.names).cast(schema)
    for name in table.column_names:
        if name not in schema.names:
            raw = raw.append_column(name, table.column(name))
    return raw


def is_local(src: RawSource) -> bool:
    """Whether ``src`` was read here (by ``read_small``)."""
    return isinstance(src.raw, pa.Table)


def raw_stats_local(raw: pa.Table, shape: str, vocab_info: DatasetInfo | None, training: bool):
    """``checks.raw_stats``' figures from an Arrow table of raw events."""
    kind = raw.column("kind").to_numpy(zero_copy_only=False)
    fi = raw.column("file_index").to_numpy(zero_copy_only=False)
    line = raw.column("line").to_numpy(zero_copy_only=False)
    is_event, is_error = kind == KIND_EVENT, kind == KIND_ERROR
    ev = raw.filter(pa.array(is_event))
    weight = ev.column("weight").to_numpy(zero_copy_only=False)
    stats: dict = {
        "n_errors": int(is_error.sum()),
        "n_raw": int(is_event.sum()),
        "total_weight": float(weight.sum()),
        "first_error": None,
        "bad_weight": None,
    }
    if is_error.any():
        i = _first(np.flatnonzero(is_error), fi, line)
        stats["first_error"] = {"file_index": int(fi[i]), "line": int(line[i])}
        stats["first_reason"] = raw.column("reason")[i].as_py()
    efi, eline = fi[is_event], line[is_event]
    bad = np.isnan(weight) | (weight < 0) | (weight == np.inf)
    if bad.any():
        i = _first(np.flatnonzero(bad), efi, eline)
        stats["bad_weight"] = {"file_index": int(efi[i]), "line": eline[i], "weight": weight[i]}
    if shape == MULTICLASS:
        names = set(ev.column("label").to_pylist())
        if vocab_info is None:
            stats["labels"] = sorted(names)
        else:
            unseen = ~np.isin(ev.column("label").to_numpy(zero_copy_only=False), vocab_info.labels)
            stats["unknown_labels"] = int(unseen.sum())
            stats["unseen_labels"] = sorted(names - set(vocab_info.labels))
    elif training:
        stats["no_correct"] = None
        correct = ev.column("correct").to_pylist()
        none = np.flatnonzero([not any(c) for c in correct])
        if len(none):
            i = _first(none, efi, eline)
            stats["no_correct"] = {
                "file_index": int(efi[i]),
                "line": eline[i],
                "n": len(correct[i]),
            }
    return stats


def _first(rows: np.ndarray, fi: np.ndarray, line: np.ndarray) -> int:
    """The row among ``rows`` first in (file, line) order."""
    return int(rows[np.lexsort((line[rows], fi[rows]))[0]])


def build_local(
    spark, src: RawSource, tmp: str, settings: PrepareOptions, vocab_info: DatasetInfo | None
) -> DatasetInfo:
    """``stages.build`` in this process (``ArrowEngine``): raw events read
    by ``read_small`` (or collected by ``collect_raw``) to a complete
    dataset in ``tmp``."""
    return build(ArrowEngine(spark, src), tmp, settings, vocab_info)


class ArrowEngine:
    """The prepare stages (``stages.Engine``) on Arrow tables in the
    driver's process."""

    in_process = True

    def __init__(self, spark, src: RawSource) -> None:
        self.spark, self.src = spark, src
        self.events = src.raw.filter(pc.equal(src.raw.column("kind"), KIND_EVENT))

    def raw_stats(self, vocab_info: DatasetInfo | None, training: bool) -> dict:
        return raw_stats_local(self.src.raw, self.src.shape, vocab_info, training)

    def check(self, stats: dict, tmp: str, quarantine: bool) -> int:
        quarantined = 0
        if stats["n_errors"] and not quarantine:  # read_small stopped at the first error
            fe = stats["first_error"]
            raise parse_error(self.src, fe["file_index"], fe["line"], stats["first_reason"])
        if stats["n_errors"]:
            quarantined = write_quarantine(self.src, tmp)
        check_counts(self.src, stats, quarantined)
        return quarantined

    def feature_counts(self, cutoff: int) -> pa.Table:
        return count_features(self.events)

    def index(self, dictionary, labels, unseen_labels, binary) -> pa.Table:
        return index_table(self.events, dictionary, self.src.shape, labels, unseen_labels, binary)

    def unknown_occurrences(self, dictionary: pa.Table) -> tuple[int, int]:
        return unknown_occurrences(self.events, dictionary)

    def merge(self, events: pa.Table) -> pa.Table:
        return merge_table(events, self.src.shape)

    def write_events(self, events: pa.Table, tmp: str, n_parts: int) -> int:
        """In event_id order, cut into ``n_parts`` files of consecutive rows;
        where only Spark's writers reach (``storage.renames``: a remote
        file system under Spark Connect) written by Spark, as Spark's
        engine writes them."""
        if not storage.renames(tmp):
            from .publish import write_events

            return write_events(self.spark.createDataFrame(events), tmp, self.src.shape, n_parts)
        events = events.sort_by("event_id")
        chunks = np.array_split(np.arange(events.num_rows), min(n_parts, max(events.num_rows, 1)))
        for k, rows in enumerate(chunks):
            part = events.slice(int(rows[0]), len(rows)) if len(rows) else events.slice(0, 0)
            storage.write_parquet(storage.join(tmp, EVENTS_DIR, f"part-{k:05d}.parquet"), part)
        return events.num_rows

    def write_keys(self, key_col: str, tmp: str) -> None:
        raise AssertionError(
            f"key column {key_col!r}: a table with keys is prepared on Spark (rawtable.read_table)"
        )


def write_quarantine(src: RawSource, tmp: str) -> int:
    """The rejected records of ``src`` under ``tmp``/_quarantine as Spark's
    JSON writer gives them in ``checks.check_raw`` (path, line, reason,
    text; null fields left out; one file in file and line order, and
    _SUCCESS); returns how many."""
    errors = src.raw.filter(pc.equal(src.raw.column("kind"), KIND_ERROR))
    fi = errors.column("file_index").to_numpy(zero_copy_only=False)
    line = errors.column("line").to_numpy(zero_copy_only=False)
    cols = {c: errors.column(c).to_pylist() for c in ("reason", "text")}
    out = []
    for i in np.lexsort((line, fi)):
        rec = {"path": src.files[fi[i]], "line": int(line[i])}
        rec.update({c: v[i] for c, v in cols.items() if v[i] is not None})
        out.append(_spark_json(rec) + "\n")
    directory = storage.join(tmp, QUARANTINE_DIR)
    storage.write_text(storage.join(directory, "part-00000.json"), "".join(out))
    storage.write_bytes(storage.join(directory, "_SUCCESS"), b"")
    logger.warning("quarantined %d malformed record(s) in %s", len(out), f"{QUARANTINE_DIR}/")
    return len(out)


def _spark_json(rec: dict) -> str:
    """``rec`` as one line of Spark's (Jackson's) JSON: compact, non-ASCII
    as is, control characters as \\uXXXX in upper case."""
    text = json.dumps(rec, ensure_ascii=False, separators=(",", ":"))
    return re.sub(r"(\\\\)|\\u([0-9a-f]{4})", lambda m: m[1] or "\\u" + m[2].upper(), text)
