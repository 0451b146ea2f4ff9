"""Reading a prepared dataset into kernel blocks in this process (pyarrow only,
no Spark), and writing kernel blocks out as a prepared dataset.

The reader serves the local backend and tools; the writer serves tests and
synthetic benchmarks, which need prepared datasets without running
``prepare``. Both follow the layout of ``data/schema.py``.
"""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np
import pyarrow as pa

from .. import storage
from ..errors import InputError
from ..kernels import CANDIDATES, MULTICLASS
from ..kernels.blocks import Block, CandidateBlock, MulticlassBlock
from .fingerprint import (
    events_fingerprint_spark,
    events_fingerprint_table,
    vocabulary_fingerprint_local,
    vocabulary_fingerprint_spark,
)
from .schema import EVENTS_DIR, DatasetInfo, block_from_arrow, events_schema

logger = logging.getLogger(__name__)


def events_files(dataset_dir: str) -> list[str]:
    """The Parquet files of ``<dataset_dir>/events``, in name order.

    Spark's ``_SUCCESS`` and ``.crc`` side files are not ``*.parquet`` and so
    are skipped.
    """
    events_dir = storage.join(dataset_dir, EVENTS_DIR)
    if not storage.is_dir(events_dir):
        raise FileNotFoundError(
            f"{dataset_dir} is not a prepared dataset: expected a directory "
            f"{EVENTS_DIR}/ of Parquet files in it"
        )
    files = storage.parquet_files(events_dir)
    if not files:
        raise FileNotFoundError(f"expected *.parquet files in {events_dir}, found none")
    return files


def read_events_table(dataset_dir: str, info: DatasetInfo | None = None) -> pa.Table:
    """All events of a prepared dataset as one Arrow table.

    Columns are selected and cast to ``schema.events_schema(info.shape)``, so
    files written by Spark (list items named ``element``, nullable columns)
    and by pyarrow read alike.

    Returns
    -------
    pa.Table, n_events rows, columns of ``events_schema(info.shape)``
    """
    info = info if info is not None else DatasetInfo.load(dataset_dir)
    schema = events_schema(info.shape)
    tables = []
    for path in events_files(dataset_dir):
        table = storage.read_parquet_file(path)
        missing = [n for n in schema.names if n not in table.column_names]
        if missing:
            raise InputError(
                f"{path}: expected {info.shape} event columns {schema.names}, "
                f"missing {missing} (got {table.column_names})"
            )
        tables.append(table.select(schema.names).cast(schema))
    return pa.concat_tables(tables)


def dataset_fingerprints(
    spark, dataset_dir: str, shape: str, n_features: int, labels: list[str], in_process: bool
) -> dict:
    """``events_fingerprint`` and ``vocabulary_fingerprint`` of a written
    dataset (DatasetInfo's fields): hashed here with pyarrow when
    ``in_process`` (a small dataset: two Spark jobs fewer), else on the
    executors; the same figures either way (data/fingerprint.py)."""
    if not in_process:
        return {
            "events_fingerprint": events_fingerprint_spark(spark, dataset_dir, shape),
            "vocabulary_fingerprint": vocabulary_fingerprint_spark(
                spark, dataset_dir, shape, n_features, labels
            ),
        }
    events = read_events_table(dataset_dir, DatasetInfo(shape=shape, n_features=n_features))
    return {
        "events_fingerprint": events_fingerprint_table(events, shape),
        "vocabulary_fingerprint": vocabulary_fingerprint_local(
            dataset_dir, shape, n_features, labels
        ),
    }


def read_blocks(
    dataset_dir: str,
    info: DatasetInfo | None = None,
    n_blocks: int = 1,
    max_events_per_block: int | None = None,
) -> list[Block]:
    """The events of a prepared dataset as kernel blocks, in file order.

    Parameters
    ----------
    dataset_dir : str
        A prepared dataset (``dataset.json`` and ``events/*.parquet``).
    info : DatasetInfo or None
        Its description; read from ``dataset.json`` when None.
    n_blocks : int
        Number of blocks of consecutive events to cut the data into (fewer
        if there are fewer events).
    max_events_per_block : int or None
        If given, more blocks are cut where needed so that none is larger.

    Returns
    -------
    list of Block
        Non-empty blocks; together they hold every event once.
    """
    if n_blocks < 1:
        raise ValueError(f"expected n_blocks >= 1, got {n_blocks}")
    if max_events_per_block is not None and max_events_per_block < 1:
        raise ValueError(f"expected max_events_per_block >= 1 or None, got {max_events_per_block}")
    info = info if info is not None else DatasetInfo.load(dataset_dir)
    table = read_events_table(dataset_dir, info)
    m = table.num_rows
    if m == 0:
        raise InputError(f"{dataset_dir}: the dataset has no events")
    if max_events_per_block is not None:
        n_blocks = max(n_blocks, math.ceil(m / max_events_per_block))
    bounds = np.linspace(0, m, min(n_blocks, m) + 1).astype(np.int64)
    blocks = [
        block_from_arrow(table.slice(lo, hi - lo), info) for lo, hi in zip(bounds[:-1], bounds[1:])
    ]
    logger.debug("read %d events from %s into %d blocks", m, dataset_dir, len(blocks))
    return blocks


def _list_array(offsets: np.ndarray, values: pa.Array | np.ndarray) -> pa.ListArray:
    # Arrow's list<> type has int32 offsets: fine for the small data this writes.
    return pa.ListArray.from_arrays(pa.array(np.asarray(offsets, dtype=np.int32)), values)


def block_to_arrow(block: Block, event_id_start: int = 0) -> pa.Table:
    """Event rows of ``block`` in the prepared-dataset schema.

    ``event_id`` and ``group`` come from the block when it carries them, else
    they number the events from ``event_id_start``.

    Returns
    -------
    pa.Table, block.n_events rows, columns of ``events_schema(shape)``
    """
    m = block.n_events
    event_id = getattr(block, "event_id", None)
    if event_id is None:
        event_id = np.arange(event_id_start, event_id_start + m, dtype=np.int64)
    group = getattr(block, "group", None)
    group = event_id if group is None else group
    if isinstance(block, MulticlassBlock):
        X = block.X.tocsr()
        columns = [
            pa.array(np.asarray(block.y, dtype=np.int32)),
            pa.array(np.asarray(block.c, dtype=np.float64)),
            _list_array(X.indptr, pa.array(X.indices.astype(np.int32))),
            _list_array(X.indptr, pa.array(X.data.astype(np.float64))),
        ]
        shape = MULTICLASS
    elif isinstance(block, CandidateBlock):
        F = block.F.tocsr()
        ptr = np.asarray(block.event_ptr, dtype=np.int64)
        columns = [
            pa.array(np.asarray(block.c, dtype=np.float64)),
            _list_array(ptr, pa.array(np.asarray(block.correct, dtype=bool))),
            _list_array(ptr, pa.array(np.diff(F.indptr).astype(np.int32))),
            # an event's features are its candidates' rows, which are contiguous
            _list_array(F.indptr[ptr], pa.array(F.indices.astype(np.int32))),
            _list_array(F.indptr[ptr], pa.array(F.data.astype(np.float64))),
        ]
        shape = CANDIDATES
    else:
        raise TypeError(f"expected a MulticlassBlock or CandidateBlock, got {type(block).__name__}")
    columns += [
        pa.array(np.asarray(event_id, dtype=np.int64)),
        pa.array(np.asarray(group, dtype=np.int64)),
    ]
    return pa.Table.from_arrays(columns, schema=events_schema(shape))


def write_events(
    block: Block, dataset_dir: str, info: DatasetInfo, n_files: int = 1
) -> DatasetInfo:
    """Write ``block`` as a prepared dataset: ``n_files`` Parquet files of
    consecutive events under ``<dataset_dir>/events`` and ``dataset.json``.

    ``info`` must describe the block (shape, n_features, labels); the
    ``n_events`` and ``total_weight`` written are the block's.

    Returns
    -------
    DatasetInfo
        The description written.
    """
    expected_shape = MULTICLASS if isinstance(block, MulticlassBlock) else CANDIDATES
    if info.shape != expected_shape:
        raise ValueError(
            f"expected info.shape {expected_shape!r} for a "
            f"{type(block).__name__}, got {info.shape!r}"
        )
    if info.n_features != block.n_predicates:
        raise ValueError(
            f"expected info.n_features == {block.n_predicates} (the block's "
            f"columns), got {info.n_features}"
        )
    if info.shape == MULTICLASS and len(info.labels) != block.n_labels:
        raise ValueError(f"expected {block.n_labels} labels in info.labels, got {len(info.labels)}")
    if n_files < 1:
        raise ValueError(f"expected n_files >= 1, got {n_files}")
    table = block_to_arrow(block)
    events_dir = storage.join(dataset_dir, EVENTS_DIR)
    storage.mkdirs(events_dir)
    stale = storage.parquet_files(events_dir)
    if stale:
        raise FileExistsError(f"expected an empty {events_dir}, found {len(stale)} Parquet files")
    bounds = np.linspace(0, table.num_rows, n_files + 1).astype(np.int64)
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        storage.write_parquet(
            storage.join(events_dir, f"part-{i:05d}.parquet"), table.slice(lo, hi - lo)
        )
    written = dataclasses.replace(
        info,
        n_events=int(block.n_events),
        total_weight=float(np.sum(block.c)),
        events_fingerprint=events_fingerprint_table(table, info.shape),
    )
    written.save(dataset_dir)
    return written
