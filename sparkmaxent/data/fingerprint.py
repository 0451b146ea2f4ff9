"""Content fingerprints of a prepared dataset, written to ``dataset.json``.

``events_fingerprint``: the events' row count, total weight and an id
hashed from every column of every event row (``schema.events_schema``);
``vocabulary_fingerprint``: an id hashed from the feature dictionary
(``features/``: feature strings and ids, not counts), the labels, the shape
and the feature-space size. A checkpoint records both and ``--resume``
refuses training data whose ids differ (selection/checkpoint.py).

Definition (``SCHEME``): each row is hashed to two independent 64-bit
lanes (splitmix64 mixing of every column value, a list or string element
together with its position in the row), vectorized in numpy over Arrow
batches; the lanes are summed mod 2**64 over all rows, so the result does
not depend on how the rows are split into partitions or batches. With
Spark the per-partition sums are computed on the executors
(``mapInArrow``) and only one row per partition reaches the driver; the
same figures come from pyarrow in-process (``table_digest``), so a dataset
written without Spark gets the same id as one prepared by Spark.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from .. import storage
from ..hashing import mix64
from .schema import EVENTS_DIR, FEATURES_DIR, events_schema

#: Version of the definition above; fingerprints of other schemes are not compared.
SCHEME = 1
_MASK = (1 << 64) - 1
_LANES = (0x243F6A8885A308D3, 0x13198A2E03707344)  # two seeds (digits of pi)
FEATURE_COLUMNS = pa.schema([("feature", pa.string()), ("id", pa.int32())])


def _u64(x: int) -> np.uint64:
    return np.uint64(x & _MASK)


def _name_seed(name: str, lane: int) -> np.uint64:
    h = hashlib.sha256(f"{lane}:{name}".encode()).digest()
    return np.uint64(int.from_bytes(h[:8], "little"))


def _as_u64(values: np.ndarray) -> np.ndarray:
    """Values as uint64 bit patterns: floats by their float64 bits (with -0.0
    as 0.0), integers and booleans sign-extended to 64 bits."""
    if values.dtype.kind == "f":
        return (values.astype(np.float64) + 0.0).view(np.uint64)
    return values.astype(np.int64).view(np.uint64)


def _segment_sums(elements: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per-row sums (mod 2**64) of ``elements`` cut at ``offsets`` (from 0)."""
    cs = np.concatenate([np.zeros(1, np.uint64), np.cumsum(elements, dtype=np.uint64)])
    return cs[offsets[1:]] - cs[offsets[:-1]]


def _elements_hash(values: np.ndarray, offsets: np.ndarray, seed: np.uint64) -> np.ndarray:
    """Per-row hash of variable-length rows: each element mixed with its
    position in the row, summed per row, mixed with the row's length."""
    lengths = np.diff(offsets)
    pos = np.arange(len(values), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    e = mix64(_as_u64(values) ^ mix64(pos.view(np.uint64) + seed))
    return mix64(_segment_sums(e, offsets) ^ mix64(lengths.astype(np.uint64) ^ seed))


def _column_hash(arr: pa.Array, seed: np.uint64) -> np.ndarray:
    """Per-row uint64 hash of one column (primitive, list of primitive, or string)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        offsets = arr.offsets.to_numpy().astype(np.int64)
        values = arr.flatten().to_numpy(zero_copy_only=False)
        return _elements_hash(values, offsets - offsets[0], seed)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        odt = np.int64 if pa.types.is_large_string(t) else np.int32
        buffers = arr.buffers()
        offsets = np.frombuffer(buffers[1], dtype=odt)[arr.offset : arr.offset + len(arr) + 1]
        offsets = offsets.astype(np.int64)
        data = (
            np.frombuffer(buffers[2], dtype=np.uint8)
            if buffers[2] is not None
            else np.zeros(0, np.uint8)
        )
        return _elements_hash(data[offsets[0] : offsets[-1]], offsets - offsets[0], seed)
    return mix64(_as_u64(arr.to_numpy(zero_copy_only=False)) ^ seed)


def row_lanes(table: pa.Table | pa.RecordBatch, schema: pa.Schema) -> tuple[int, int]:
    """The two lane sums (mod 2**64) of the rows of ``table``, cast to ``schema``."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    table = table.select(schema.names).cast(schema)
    sums = []
    for lane, seed in enumerate(_LANES):
        h = np.full(table.num_rows, _u64(seed), dtype=np.uint64)
        for name in schema.names:
            h = mix64(h ^ _column_hash(table.column(name), _name_seed(name, lane)))
        sums.append(int(np.sum(h, dtype=np.uint64)))
    return sums[0], sums[1]


def table_digest(
    table: pa.Table | pa.RecordBatch, schema: pa.Schema, weight_col: str | None
) -> tuple[int, float, int, int]:
    """(rows, weight sum, lane 0, lane 1) of ``table``: the partial figures
    that ``combine`` adds up."""
    l0, l1 = row_lanes(table, schema) if table.num_rows else (0, 0)
    weight = (
        float(np.sum(table.column(weight_col).to_numpy(zero_copy_only=False)))
        if weight_col and table.num_rows
        else 0.0
    )
    return table.num_rows, weight, l0, l1


def combine(parts: list[tuple[int, float, int, int]]) -> tuple[int, float, int, int]:
    """Sum partial digests (lanes mod 2**64, weights with ``math.fsum``)."""
    return (
        sum(p[0] for p in parts),
        math.fsum(p[1] for p in parts),
        sum(p[2] for p in parts) & _MASK,
        sum(p[3] for p in parts) & _MASK,
    )


def _id(doc: dict) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def events_fingerprint_of(digest: tuple[int, float, int, int]) -> dict:
    """The ``dataset.json`` entry of combined event digests."""
    rows, weight, l0, l1 = digest
    return {
        "id": _id({"rows": rows, "lanes": [f"{l0:016x}", f"{l1:016x}"]}),
        "rows": rows,
        "weight": weight,
        "scheme": SCHEME,
    }


def vocabulary_fingerprint_of(
    digest: tuple[int, float, int, int], shape: str, n_features: int, labels: list[str]
) -> dict:
    """The ``dataset.json`` entry of a feature dictionary's combined digest."""
    rows, _, l0, l1 = digest
    return {
        "id": _id(
            {
                "rows": rows,
                "lanes": [f"{l0:016x}", f"{l1:016x}"],
                "shape": shape,
                "n_features": int(n_features),
                "labels": list(labels),
            }
        ),
        "features": rows,
        "labels": len(labels),
        "scheme": SCHEME,
    }


# ---------------------------------------------------------------- in-process


def events_fingerprint_table(table: pa.Table, shape: str) -> dict:
    """``events_fingerprint`` of event rows in this process (pyarrow)."""
    return events_fingerprint_of(table_digest(table, events_schema(shape), "weight"))


def vocabulary_fingerprint_local(
    dataset_dir: str, shape: str, n_features: int, labels: list[str]
) -> dict:
    """``vocabulary_fingerprint`` from ``<dataset_dir>/features`` read here."""
    table = storage.read_parquet(
        storage.join(dataset_dir, FEATURES_DIR), columns=FEATURE_COLUMNS.names
    )
    return vocabulary_fingerprint_of(
        table_digest(table, FEATURE_COLUMNS, None), shape, n_features, labels
    )


# ---------------------------------------------------------------- on Spark


def _partition_digest(schema: pa.Schema, weight_col: str | None):
    """The mapInArrow function: one row of partial figures per partition."""

    def digest(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = [table_digest(b, schema, weight_col) for b in batches if b.num_rows]
        rows, weight, l0, l1 = combine(parts) if parts else (0, 0.0, 0, 0)
        signed = [int(np.uint64(x).view(np.int64)) for x in (l0, l1)]
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([rows], pa.int64()),
                pa.array([weight], pa.float64()),
                pa.array([signed[0]], pa.int64()),
                pa.array([signed[1]], pa.int64()),
            ],
            names=["rows", "weight", "l0", "l1"],
        )

    return digest


def spark_digest(frame, schema: pa.Schema, weight_col: str | None) -> tuple[int, float, int, int]:
    """Combined digest of a DataFrame's rows: partial figures per partition
    on the executors, one row each collected and combined here."""
    out = frame.mapInArrow(
        _partition_digest(schema, weight_col), "rows long, weight double, l0 long, l1 long"
    ).collect()
    return combine([(r["rows"], r["weight"], r["l0"] & _MASK, r["l1"] & _MASK) for r in out])


def events_fingerprint_spark(spark, dataset_dir: str, shape: str) -> dict:
    """``events_fingerprint`` of ``<dataset_dir>/events``, hashed on the executors."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = events_schema(shape)
    frame = spark.read.schema(from_arrow_schema(schema)).parquet(
        storage.join(dataset_dir, EVENTS_DIR)
    )
    return events_fingerprint_of(spark_digest(frame, schema, "weight"))


def vocabulary_fingerprint_spark(
    spark, dataset_dir: str, shape: str, n_features: int, labels: list[str]
) -> dict:
    """``vocabulary_fingerprint`` of ``<dataset_dir>/features``, hashed on the executors."""
    from pyspark.sql.pandas.types import from_arrow_schema

    frame = spark.read.schema(from_arrow_schema(FEATURE_COLUMNS)).parquet(
        storage.join(dataset_dir, FEATURES_DIR)
    )
    return vocabulary_fingerprint_of(
        spark_digest(frame, FEATURE_COLUMNS, None), shape, n_features, labels
    )


def describe(fp: dict, kind: str) -> str:
    """``<id> (N events, weight W)`` or ``<id> (F features, L labels)``."""
    if not fp:
        return "unknown"
    if kind == "events":
        return f"{fp['id']} ({fp['rows']} events, weight {fp['weight']:.10g})"
    return f"{fp['id']} ({fp['features']} features, {fp['labels']} labels)"
