"""Preparing small inputs in the driver's process, without Spark jobs.

When the input files are small enough (``plan.Limits.input_bytes``:
``data.in_process_max_events`` times ``data.in_process_bytes_per_event``
bytes in all; 0 events: never), ``prepare`` runs its stages here on Arrow
tables: the same parser function the executors run (``raw._make_parse_udf``),
the same checks and messages (``checks``), label list
(``dictionary.labels_of``), per-event finishing (``indexing._finalize_udf``)
and fingerprints, written through ``storage``.
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
from .indexing import _finalize_udf
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
from .schema import EVENTS_DIR, FEATURES_DIR, FEATURES_SCHEMA, DatasetInfo, events_schema
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

    def dictionary(self, cutoff: int, vocabulary: str | None) -> pa.Table:
        return _dictionary(self.events, cutoff, vocabulary)

    def write_features(self, dictionary: pa.Table, tmp: str) -> int:
        storage.write_parquet(storage.join(tmp, FEATURES_DIR, "part-00000.parquet"), dictionary)
        return dictionary.num_rows

    def index(self, dictionary, n_features, labels, unseen_labels, count_unknown, binary):
        return _index(
            self.events, dictionary, self.src.shape, labels, unseen_labels, count_unknown, binary
        )

    def merge(self, events: pa.Table) -> pa.Table:
        return _merge(events, self.src.shape)

    def write_events(self, events: pa.Table, tmp: str, n_parts: int) -> int:
        """In event_id order, cut into ``n_parts`` files of consecutive rows."""
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


def _dictionary(events: pa.Table, cutoff: int, vocabulary: str | None) -> pa.Table:
    """The (feature, id, count) dictionary of ``dictionary.feature_dictionary``:
    count(f) the summed weight of the events f occurs in, kept when >=
    ``cutoff``, ids in feature-string order; or the ``vocabulary``'s."""
    if vocabulary is not None:
        table = storage.read_parquet(storage.join(vocabulary, FEATURES_DIR))
        return table.select(FEATURES_SCHEMA.names).cast(FEATURES_SCHEMA).sort_by("id")
    feats = events.column("features")
    rows = pc.list_parent_indices(feats)
    pairs = pa.table({"row": rows, "feature": pc.list_flatten(feats)})
    pairs = pairs.group_by(["row", "feature"]).aggregate([])  # distinct within an event
    weight = events.column("weight").take(pairs.column("row"))
    counts = (
        pa.table({"feature": pairs.column("feature"), "count": weight})
        .group_by("feature")
        .aggregate([("count", "sum")])
        .rename_columns(["feature", "count"])
    )
    if cutoff > 0:
        counts = counts.filter(pc.greater_equal(counts.column("count"), float(cutoff)))
    counts = counts.sort_by("feature")
    ids = pa.array(np.arange(counts.num_rows, dtype=np.int32))
    return pa.table([counts.column("feature"), ids, counts.column("count")], schema=FEATURES_SCHEMA)


def _index(
    events: pa.Table,
    dictionary: pa.Table,
    shape: str,
    labels: list[str],
    unseen_labels: list[str],
    count_unknown: bool,
    binary: bool = False,
) -> tuple[pa.Table, int, int]:
    """``indexing.index_events`` in this process: each event's features
    looked up in the dictionary (unknown ones dropped, and counted when
    ``count_unknown``), then finished by the executors' own per-batch code
    (``binary`` included)."""
    feats = events.column("features").combine_chunks()
    rows = pc.list_parent_indices(feats).to_numpy()
    pos = pc.index_in(pc.list_flatten(feats), value_set=dictionary.column("feature"))
    known = pos.is_valid().to_numpy(zero_copy_only=False)
    ids = dictionary.column("id").take(pos.filter(pa.array(known)))
    values = pc.list_flatten(events.column("values").combine_chunks()).filter(pa.array(known))
    entries = {"id": ids.combine_chunks(), "value": values}
    if shape != MULTICLASS:
        cands = pc.list_flatten(events.column("cand").combine_chunks()).filter(pa.array(known))
        entries = {"cand": cands, **entries}
    per_event = np.bincount(rows[known], minlength=events.num_rows)
    offsets = pa.array(np.concatenate([[0], np.cumsum(per_event)]).astype(np.int32))
    fs = pa.ListArray.from_arrays(
        offsets, pa.StructArray.from_arrays(list(entries.values()), names=list(entries))
    )
    cols = {c: events.column(c).combine_chunks() for c in ("event_id", "group", "weight")}
    if shape == MULTICLASS:
        cols["label"] = _label_index(events.column("label"), labels, unseen_labels)
    else:
        cols["correct"] = events.column("correct").combine_chunks()
    batch = pa.RecordBatch.from_arrays([*cols.values(), fs], names=[*cols, "fs"])
    schema = events_schema(shape)
    final = pa.Table.from_batches(
        list(_finalize_udf(shape, schema, binary)(iter([batch]))), schema=schema
    )
    if not count_unknown:
        return final, 0, 0
    return final, int((~known).sum()), len(known)


def _label_index(label: pa.ChunkedArray, labels: list[str], unseen: list[str]) -> pa.Array:
    """A known label's index in ``labels``; the j-th of ``unseen`` -(j + 1)."""
    known = pc.index_in(label, value_set=pa.array(labels, pa.string())).to_numpy(
        zero_copy_only=False
    )
    other = pc.index_in(label, value_set=pa.array(unseen, pa.string())).to_numpy(
        zero_copy_only=False
    )
    out = np.where(np.isnan(known), -(np.nan_to_num(other, nan=-1.0) + 1), known)
    return pa.array(out.astype(np.int32))


def _merge(events: pa.Table, shape: str) -> pa.Table:
    """``indexing.merge_duplicates`` in this process: identical events
    (label, indices, values) as one, with the summed weight and the
    smallest event_id and group."""
    keys = ["label"] if shape == MULTICLASS else ["correct", "cand_nnz"]
    d = events.select([*keys, "indices", "values"]).to_pydict()
    first: dict[tuple, int] = {}
    group_of = np.empty(events.num_rows, dtype=np.int64)
    for r, key in enumerate(zip(*(d[k] for k in d))):
        key = tuple(tuple(v) if isinstance(v, list) else v for v in key)
        group_of[r] = first.setdefault(key, len(first))
    reps = np.empty(len(first), dtype=np.int64)
    reps[group_of[::-1]] = np.arange(events.num_rows)[::-1]  # each group's first row
    n = len(first)
    weight = np.bincount(group_of, events.column("weight").to_numpy(), minlength=n)
    event_id = np.full(n, np.iinfo(np.int64).max)
    group = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(event_id, group_of, events.column("event_id").to_numpy())
    np.minimum.at(group, group_of, events.column("group").to_numpy())
    out = events.take(pa.array(reps))
    for name, col in (("weight", weight), ("event_id", event_id), ("group", group)):
        out = out.set_column(out.schema.get_field_index(name), name, pa.array(col))
    return out
