"""Row ranges copied out of Arrow columns chunk by chunk (data/drained.py):
the same blocks as slicing the table, and the copied chunks let go."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sparkmaxent.data.drained import drained_slices
from sparkmaxent.data.load import block_to_arrow
from sparkmaxent.data.schema import DatasetInfo, block_from_arrow
from sparkmaxent.kernels import CANDIDATES, MULTICLASS
from sparkmaxent.kernels.blocks import split_block

from .helpers import random_candidates, random_multiclass


def chunked_table(shape: str, rng) -> tuple[pa.Table, DatasetInfo]:
    """Events in 12 chunks, each its own buffers in Arrow's pool."""
    if shape == MULTICLASS:
        block = random_multiclass(rng, m=600, P=25, K=4)
        info = DatasetInfo(shape=MULTICLASS, n_features=25, labels=["a", "b", "c", "d"])
    else:
        block = random_candidates(rng, m=300, D=20)
        info = DatasetInfo(shape=CANDIDATES, n_features=20, labels=[])
    parts, start = [], 0
    for piece in split_block(block, 12):
        events = block_to_arrow(piece, start)  # over numpy's memory: copied into the pool
        events = pa.concat_tables([events, events.slice(0, 0)]).combine_chunks()
        parts.append(events.to_batches()[0])
        start += piece.n_events
    return pa.Table.from_batches(parts), info


def columns_of(table: pa.Table) -> dict:
    return {name: list(table.column(name).chunks) for name in table.schema.names}


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
def test_drained_slices_give_the_blocks_of_the_tables_slices(shape):
    rng = np.random.default_rng(3)
    table, info = chunked_table(shape, rng)
    bounds = np.array([0, 1, 77, 230, 231, table.num_rows])  # cuts inside chunks and at them
    want = [block_from_arrow(table.slice(a, b - a), info) for a, b in zip(bounds[:-1], bounds[1:])]
    got = [
        block_from_arrow(t, info) for t in drained_slices(columns_of(table), table.schema, bounds)
    ]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for name in ("c", "event_id", "group") + (
            ("y",) if shape == MULTICLASS else ("event_ptr", "correct")
        ):
            np.testing.assert_array_equal(getattr(g, name), getattr(w, name))
        gx, wx = (g.X, w.X) if shape == MULTICLASS else (g.F, w.F)
        for part in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(gx, part), getattr(wx, part))
            assert getattr(gx, part).dtype == getattr(wx, part).dtype


def test_drained_slices_let_go_of_each_chunk_once_copied():
    """With no other reference to the chunks, Arrow's pool gives back each
    range's source chunks while the range is copied: after the first half
    is drained, the pool holds about the other half, not all of it."""
    rng = np.random.default_rng(4)
    table, info = chunked_table(MULTICLASS, rng)
    columns, schema, m = columns_of(table), table.schema, table.num_rows
    del table
    before = pa.total_allocated_bytes()
    slices = drained_slices(columns, schema, np.array([0, m // 2, m]))
    first = next(slices)
    assert all(c is None for c in columns["values"][:6]) and columns["values"][6] is not None
    # the half still to copy, and the first range's small columns (its list
    # columns' copies are numpy's); holding every chunk would be all of it
    assert pa.total_allocated_bytes() < 0.7 * before
    del first
    list(slices)
    assert all(c is None for column in columns.values() for c in column)
    assert pa.total_allocated_bytes() < 0.1 * before
    with pytest.raises(ValueError, match="let go"):  # drained columns cannot be read again
        next(drained_slices(columns, schema, np.array([0, m])))
