"""A partition's blocks built from its Arrow batches as they come, each
block's rows copied out piece by piece and each source chunk let go once
copied: the events a block is built from change hands instead of being
held twice.

A Python worker that caches a partition's blocks holds a block's Arrow
batches (about the size of the block's arrays) while it builds the block,
a copy of its rows made contiguous. Copied at once, the rows of a block
sit twice in memory until the block is done; copied chunk by chunk into
arrays allocated (not yet touched) for the whole range, with each chunk
that ends within the range dropped as soon as it is copied and its memory
handed back to the system at once (Arrow's pool keeps freed memory
otherwise), the pages the block's arrays touch follow the pages the
batches give back, and a worker's peak while it builds a block is about
its batches' (``iter_partition_blocks``, the Spark cache builder's).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..kernels import Block
from .schema import DatasetInfo, block_from_arrow


def partition_blocks(
    batches: Iterable[pa.RecordBatch], info: DatasetInfo, max_block_nnz: int
) -> list[Block]:
    """Kernel blocks from one partition's Arrow batches, of consecutive
    events in order: each as many events as fit in ``max_block_nnz``
    non-zeros (an event alone beyond it makes a block of its own); none if
    the partition is empty."""
    return list(iter_partition_blocks(batches, info, max_block_nnz))


def iter_partition_blocks(
    batches: Iterable[pa.RecordBatch], info: DatasetInfo, max_block_nnz: int
) -> Iterator[Block]:
    """``partition_blocks`` one block at a time, each built as soon as its
    events have come and before the next block's are read: the worker
    caching a partition holds one block's events, not the partition's.
    Each block's rows are copied out of its batches chunk by chunk, letting
    go of each as it goes (``drained_slices``), so the block's arrays take
    the place of its events instead of sitting beside them."""
    pending: list[pa.RecordBatch] = []
    nnz = 0
    for batch in batches:
        while batch.num_rows:
            sizes = pc.fill_null(pc.list_value_length(batch.column("indices")), 0)
            ends = np.cumsum(sizes.to_numpy(), dtype=np.int64)
            fit = int(np.searchsorted(ends, max_block_nnz - nnz, side="right"))
            if fit == batch.num_rows:
                pending.append(batch)
                nnz += int(ends[-1])
                break
            fit = fit or (0 if pending else 1)  # an event beyond the limit alone
            if fit:
                pending.append(batch.slice(0, fit))
            batch = batch.slice(fit)
            yield _drained_block(pending, info)
            nnz = 0
    if pending:
        yield _drained_block(pending, info)


def _drained_block(pending: list[pa.RecordBatch], info: DatasetInfo) -> Block:
    """The block of ``pending``'s rows, emptying the list: its batches'
    chunks are let go as their rows are copied (``drained_slices``)."""
    table = pa.Table.from_batches(pending)
    pending.clear()
    columns = {name: list(table.column(name).chunks) for name in table.schema.names}
    schema, rows = table.schema, table.num_rows
    del table  # the chunks in ``columns`` are the only references left
    return block_from_arrow(next(drained_slices(columns, schema, np.array([0, rows]))), info)


def drained_slices(
    columns: dict[str, list[pa.Array | None]], schema: pa.Schema, bounds: np.ndarray
) -> Iterator[pa.Table]:
    """Rows ``bounds[j]..bounds[j + 1]`` of the table whose columns are
    ``columns`` (each a list of chunks of the same row counts, ``schema``'s
    order), one table a range with one contiguous chunk a column. Each
    source chunk is replaced by None in ``columns`` once its last row was
    copied: the caller must hold no other reference to the chunks, or
    nothing is freed. ``bounds`` are increasing, from 0 to the row count."""
    first = [c for c in next(iter(columns.values())) if c is not None]
    if len(first) < len(next(iter(columns.values()))):
        raise ValueError("expected columns none of whose chunks was let go")
    starts = np.concatenate([[0], np.cumsum([len(c) for c in first], dtype=np.int64)])
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        arrays = [_drained_column(columns[f.name], starts, int(lo), int(hi)) for f in schema]
        yield pa.Table.from_arrays(arrays, schema=schema)


def _pieces(chunks: list, starts: np.ndarray, lo: int, hi: int) -> Iterator[tuple[int, pa.Array]]:
    """(chunk index, the chunk's rows within lo..hi) of each chunk that holds some."""
    for i in range(int(np.searchsorted(starts, lo, side="right")) - 1, len(chunks)):
        if starts[i] >= hi:
            return
        a, b = max(lo, int(starts[i])), min(hi, int(starts[i + 1]))
        if b > a:
            yield i, chunks[i].slice(a - int(starts[i]), b - a)


def _drained_column(chunks: list, starts: np.ndarray, lo: int, hi: int) -> pa.Array:
    """Rows lo..hi of one column as one array (see ``drained_slices``)."""
    kind = chunks[int(np.searchsorted(starts, lo, side="right")) - 1].type
    numeric_list = pa.types.is_list(kind) and (
        pa.types.is_integer(kind.value_type) or pa.types.is_floating(kind.value_type)
    )
    pieces = [piece for _, piece in _pieces(chunks, starts, lo, hi)]
    total = sum(p.offsets[-1].as_py() - p.offsets[0].as_py() for p in pieces) if numeric_list else 0
    if not numeric_list or total >= 2**31:  # small columns; beyond a list<>, Arrow raises
        _drop_copied(chunks, starts, hi)
        return pa.concat_arrays(pieces)
    del pieces
    values = np.empty(total, dtype=kind.value_type.to_pandas_dtype())
    offsets = np.empty(hi - lo + 1, dtype=np.int32)
    offsets[0], row, at = 0, 0, 0
    for i, piece in _pieces(chunks, starts, lo, hi):
        flat = piece.flatten().to_numpy(zero_copy_only=False)  # as block_from_arrow reads
        values[at : at + len(flat)] = flat
        own = piece.offsets.to_numpy()
        offsets[row + 1 : row + len(piece) + 1] = own[1:] - own[0] + at
        row, at = row + len(piece), at + len(flat)
        del flat, own, piece
        if starts[i + 1] <= hi:
            chunks[i] = None  # its rows are copied: its buffers can go
            pa.default_memory_pool().release_unused()  # to the system, now
    return pa.ListArray.from_arrays(_over(offsets), _over(values), type=kind)


def _over(a: np.ndarray) -> pa.Array:
    """A primitive Arrow array over ``a``'s memory (no copy)."""
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), len(a), [None, pa.py_buffer(a)])


def _drop_copied(chunks: list, starts: np.ndarray, hi: int) -> None:
    """Let go of every chunk whose rows all lie before ``hi``."""
    for i in range(len(chunks)):
        if starts[i + 1] <= hi:
            chunks[i] = None
