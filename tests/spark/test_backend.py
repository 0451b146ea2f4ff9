"""SparkBackend against LocalBackend on small prepared datasets, and the
backend's bookkeeping: passes, jobs, broadcasts, cache, errors."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.factory import make_backend
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.data.load import block_to_arrow, read_blocks, read_events_table, write_events
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.kernels import (
    CANDIDATES,
    MULTICLASS,
    LossGradTask,
    MomentsTask,
    MulticlassBlock,
    Weights,
)
from sparkmaxent.kernels.blocks import concat_blocks
from sparkmaxent.kernels.stats import Count, CountTask
from sparkmaxent.problem import Objective

from ..unit.helpers import random_candidates, random_multiclass

RTOL = 1e-9


def _write(directory, block, shape, n_files):
    if shape == MULTICLASS:
        info = DatasetInfo(MULTICLASS, block.n_predicates, [f"y{k}" for k in range(block.n_labels)])
    else:
        info = DatasetInfo(CANDIDATES, block.n_predicates)
    return write_events(block, str(directory), info, n_files=n_files)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """One small prepared dataset per event shape, over several files."""
    rng = np.random.default_rng(11)
    blocks = {
        MULTICLASS: random_multiclass(rng, m=150, P=14, K=4),
        CANDIDATES: random_candidates(rng, m=70, D=11),
    }
    out = {}
    for shape, block in blocks.items():
        d = tmp_path_factory.mktemp(shape)
        out[shape] = (str(d), _write(d, block, shape, n_files=3), block)
    return out


@pytest.fixture
def multiclass_backend(spark, datasets):
    directory, info, _ = datasets[MULTICLASS]
    with SparkBackend(spark, directory, info, partitions=2, name="test-mc") as backend:
        yield backend


def assert_same(a, b, what):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    scale = max(np.max(np.abs(b), initial=0.0), 1e-300)
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * scale, err_msg=what)


# ---------------------------------------------------------------- data/load (no Spark)


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
def test_written_events_read_back_as_the_same_blocks(datasets, shape):
    directory, info, block = datasets[shape]
    assert read_events_table(directory).num_rows == block.n_events == info.n_events
    assert info.total_weight == pytest.approx(block.c.sum())
    blocks = read_blocks(directory, n_blocks=4)
    assert len(blocks) == 4
    again = concat_blocks(blocks)
    assert (again.c == block.c).all()
    if shape == MULTICLASS:
        assert (again.X != block.X).nnz == 0 and (again.y == block.y).all()
    else:
        assert (again.F != block.F).nnz == 0
        assert (again.event_ptr == block.event_ptr).all() and (again.correct == block.correct).all()
    cap = block.n_events // 5 - 1  # just too small for 5 blocks
    capped = read_blocks(directory, n_blocks=1, max_events_per_block=cap)
    assert len(capped) == 6 and max(b.n_events for b in capped) <= cap
    assert sum(b.n_events for b in capped) == block.n_events
    assert block_to_arrow(block, event_id_start=10).column("event_id")[0].as_py() == 10


def test_write_events_rejects_an_info_that_does_not_fit(tmp_path):
    block = random_multiclass(np.random.default_rng(0), m=5, P=6, K=3)
    with pytest.raises(ValueError, match="expected info.n_features == 6"):
        write_events(block, str(tmp_path), DatasetInfo(MULTICLASS, 7, ["a", "b", "c"]))
    with pytest.raises(ValueError, match="expected 3 labels"):
        write_events(block, str(tmp_path), DatasetInfo(MULTICLASS, 6, ["a", "b"]))


# ---------------------------------------------------------------- same sums as local


def _compare(spark_backend, local_backend, space, rng, all_pairs=True):
    """Moments, then objective and gradient from both backends: over all
    features and over an active set, with and without scaling (all four
    pairs, or two that between them cover each option)."""
    ms, ml = spark_backend.run(MomentsTask()), local_backend.run(MomentsTask())
    assert ms.weight == pytest.approx(ml.weight, rel=RTOL)
    for field in ("total", "total_sq", "count"):
        assert_same(getattr(ms, field), getattr(ml, field), field)
    ids = np.sort(rng.choice(space.n_features, size=space.n_features // 3, replace=False))
    pairs = (
        [(None, None), (None, ids), (ml.scaling(), None), (ml.scaling(), ids)]
        if all_pairs
        else [(None, None), (ml.scaling(), ids)]
    )
    for scaling, active in pairs:
        n = space.n_features if active is None else len(active)
        theta = rng.normal(scale=0.5, size=n + space.n_bias)
        fs, gs = Objective(spark_backend, active, l2=0.1, scaling=scaling)(theta)
        fl, gl = Objective(local_backend, active, l2=0.1, scaling=scaling)(theta)
        assert fs == pytest.approx(fl, rel=RTOL)
        assert_same(
            gs, gl, f"gradient (scaling={scaling is not None}, active={active is not None})"
        )


@pytest.mark.parametrize("partitions", [1, 2, 3, 7])
@pytest.mark.parametrize(
    "shape,bias", [(MULTICLASS, False), (MULTICLASS, True), (CANDIDATES, False)]
)
def test_same_objective_and_gradient_as_local(spark, datasets, shape, bias, partitions):
    directory, info, block = datasets[shape]
    local = LocalBackend(read_blocks(directory, info), info.space(bias))
    with SparkBackend(spark, directory, bias=bias, partitions=partitions) as backend:
        assert backend.space == local.space
        assert backend.n_events == block.n_events
        assert backend.weight == pytest.approx(block.c.sum(), rel=1e-12)
        assert backend.partitions == partitions
        assert backend.n_blocks == partitions  # every partition holds events here
        _compare(
            backend,
            local,
            backend.space,
            np.random.default_rng(partitions),
            all_pairs=partitions == 2,
        )


def test_partitions_cut_into_several_blocks_give_the_same_sums(spark, datasets):
    directory, info, block = datasets[CANDIDATES]
    local = LocalBackend(read_blocks(directory, info), info.space())
    # about 4 candidates x 4.4 features per event: ~18 nnz, so ~3 events per block
    with SparkBackend(spark, directory, info, partitions=2, max_block_nnz=50) as backend:
        assert backend.n_blocks > 10
        count = backend.run(CountTask())
        assert count == Count(block.n_events, pytest.approx(block.c.sum()), backend.n_blocks)
        _compare(backend, local, backend.space, np.random.default_rng(5))


def test_events_are_spread_by_hash_not_dealt_round_robin(spark, datasets):
    """Repartitioned events are hash-partitioned on their columns: no
    round-robin, which makes Spark sort each map task's events in the JVM
    (sortBeforeRepartition); every partition gets events, none is lost."""
    from sparkmaxent.backends.spark import event_partitions, read_events_frame

    directory, info, _ = datasets[MULTICLASS]
    frame = event_partitions(read_events_frame(spark, directory, info), 3, info.n_events)
    plan = frame._jdf.queryExecution().executedPlan().toString().lower()
    assert "hashpartitioning" in plan and "roundrobin" not in plan
    sizes = frame.rdd.glom().map(len).collect()
    assert len(sizes) == 3 and min(sizes) > 0 and sum(sizes) == info.n_events


def test_the_parquet_partitions_are_kept_without_repartition(spark, datasets):
    directory, info, block = datasets[MULTICLASS]
    with SparkBackend(spark, directory) as backend:
        assert backend.info == info
        assert backend.run(CountTask()).events == block.n_events
        assert backend.passes == 1


@pytest.mark.parametrize("large", [False, True])
def test_a_pickled_block_goes_out_as_arrow_binary_without_a_copy(large):
    from sparkmaxent.backends.spark import binary_row

    data = bytes(range(256)) * 40
    row = binary_row(data, large)
    assert row.type == (pa.large_binary() if large else pa.binary())
    assert row.to_pylist() == [data]
    assert row.buffers()[2].address == pa.py_buffer(data).address  # the bytes' own memory


def test_the_cache_builder_makes_the_blocks_of_partition_blocks_one_at_a_time(datasets):
    """The mapInArrow function yields, block by block, the pickles of the
    blocks partition_blocks makes (the same bytes: each block's pickle head
    and its arrays out of band), building each only when the one before has
    gone out."""
    from sparkmaxent.backends.chunked import chunk_rows, pickle_frames
    from sparkmaxent.backends.spark import _pickled_blocks
    from sparkmaxent.data.drained import iter_partition_blocks, partition_blocks

    directory, info, _ = datasets[MULTICLASS]
    batches = read_events_table(directory, info).to_batches(max_chunksize=40)
    blocks = partition_blocks(batches, info, max_block_nnz=200)
    assert len(blocks) > 2
    rows = _pickled_blocks(info, 200, False, chunk_bytes=50)(iter(batches))
    out = [rb.column(0)[0].as_py() for rb in rows]
    assert out == [bytes(r) for b in blocks for r in chunk_rows(pickle_frames(b), 50)]
    lazy = iter_partition_blocks(batches, info, max_block_nnz=200)
    assert not isinstance(lazy, list) and len(list(lazy)) == len(blocks)


@pytest.mark.parametrize("limit", [200, 6])
def test_partition_blocks_fill_each_block_to_the_limit_reading_one_block_of_batches(
    datasets, limit
):
    """A partition's blocks are its events in order, each block as many as
    fit in max_block_nnz (an event beyond it alone), and each block comes
    out before the batches after the one holding the next block's first
    event are read: the worker holds one block's events, not the
    partition's."""
    import pyarrow.compute as pc

    from sparkmaxent.data.drained import iter_partition_blocks
    from sparkmaxent.data.schema import block_from_arrow

    directory, info, _ = datasets[MULTICLASS]
    table = read_events_table(directory, info)
    sizes = pc.list_value_length(table.column("indices")).to_numpy()
    assert sizes.max() > 6  # the small limit has events beyond it
    ends, filled, count = [], 0, 0
    for i, size in enumerate(sizes):  # the split, event by event
        if count and filled + size > limit:
            ends.append(i)
            filled = count = 0
        filled, count = filled + size, count + 1
    ends.append(len(sizes))
    read, given = [], table.to_batches(max_chunksize=7)
    batch_ends = np.cumsum([b.num_rows for b in given])

    def batches():
        for batch in given:
            read.append(batch.num_rows)
            yield batch

    starts = [0, *ends[:-1]]
    for n, block in enumerate(iter_partition_blocks(batches(), info, max_block_nnz=limit)):
        lo, hi = starts[n], ends[n]
        next_batch = min(np.searchsorted(batch_ends, hi, side="right"), len(given) - 1)
        assert sum(read) <= batch_ends[next_batch]  # none after the next block's first event's
        expected = block_from_arrow(table.slice(lo, hi - lo), info)
        assert block.n_events == hi - lo and (block.X != expected.X).nnz == 0
        assert np.array_equal(block.y, expected.y)
        assert block.X.nnz <= limit or block.n_events == 1
    assert n + 1 == len(ends) > 3


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
def test_the_cache_holds_the_workers_pickles_in_chunks_and_the_blocks_of_the_row_path(
    spark, datasets, shape
):
    """The JVM side of the cached RDD holds, in order, each block's header
    and its frames (the pickle's head, the arrays out of band) cut in
    chunks of at most cache_chunk_bytes, as the cache builder's Python
    worker wrote them; the blocks the passes get are exactly those the
    earlier path (``DataFrame.rdd`` of one row a block: Row, pickle,
    unpickle) gave: the same pickles, so every pass's result is the same."""
    import pickle

    from sparkmaxent.backends.chunked import MAGIC, chunk_rows, pickle_frames
    from sparkmaxent.backends.spark import (
        _pickled_blocks,
        event_partitions,
        large_var_types,
        read_events_frame,
    )

    directory, info, _ = datasets[shape]
    chunk = 97  # bytes: every block in several chunks, the last one short
    with SparkBackend(
        spark, directory, info, partitions=3, max_block_nnz=200, cache_chunk_bytes=chunk
    ) as backend:
        assert backend.n_blocks > 3
        cached = [bytes(b) for b in backend.rdd._jrdd.collect()]
        got = [pickle.dumps(b, protocol=pickle.HIGHEST_PROTOCOL) for b in backend.rdd.collect()]
        frame = event_partitions(read_events_frame(spark, directory, info), 3, info.n_events)
        whole = _pickled_blocks(info, 200, large_var_types(spark))  # one row a block
        old = frame.mapInArrow(whole, "block binary").rdd.map(lambda r: pickle.loads(r[0]))
        expected = [pickle.dumps(b, protocol=pickle.HIGHEST_PROTOCOL) for b in old.collect()]
    assert got == expected
    blocks = [pickle.loads(b) for b in expected]
    rows = [bytes(r) for b in blocks for r in chunk_rows(pickle_frames(b), chunk)]
    assert cached == rows
    assert sum(r.startswith(MAGIC) for r in cached) == len(expected) == backend.n_blocks
    assert max(len(r) for r in cached if not r.startswith(MAGIC)) == chunk
    assert sum(b.n_events for b in blocks) == info.n_events
    assert min(b.n_events for b in blocks) > 0


def framed(rows) -> bytes:
    """``rows`` as the JVM streams a partition's byte arrays to a worker."""
    import struct

    from pyspark.serializers import SpecialLengths

    out = b"".join(struct.pack(">i", len(r)) + bytes(r) for r in rows)
    return out + struct.pack(">i", SpecialLengths.END_OF_DATA_SECTION)


def read_buffer(array: np.ndarray):
    """The memory an array lies in: the object at the end of its bases."""
    while isinstance(array, np.ndarray):
        array = array.base
    return array.obj if isinstance(array, memoryview) else array


def test_a_read_block_holds_no_pickle_beside_its_arrays(datasets):
    """The worker reading a cached block gets the blocks written, whose
    arrays lie in the buffers the chunks were read into (no unpickled copy
    beside a pickle), and the reader keeps no block it has handed out."""
    import io

    from sparkmaxent.backends.chunked import ChunkedPickles, chunk_rows, pickle_frames
    from sparkmaxent.data.drained import partition_blocks

    directory, info, _ = datasets[MULTICLASS]
    batches = read_events_table(directory, info).to_batches(max_chunksize=40)
    blocks = partition_blocks(batches, info, max_block_nnz=200)
    stream = io.BytesIO(framed(r for b in blocks for r in chunk_rows(pickle_frames(b), 64)))
    reader = ChunkedPickles().load_stream(stream)
    first = next(reader)
    for array in (first.X.data, first.X.indices, first.y, first.c):
        assert isinstance(read_buffer(array), bytearray)  # the read buffer, not a copy of it
    assert first.X.nnz == blocks[0].X.nnz and np.array_equal(first.y, blocks[0].y)
    second = next(reader)
    held = list(reader.gi_frame.f_locals.values())  # what the reader keeps while a pass runs
    assert not any(v is first for v in held)  # the block before
    assert not any(isinstance(v, (bytearray, bytes, list)) for v in held)  # frames, pickles
    rest = [second, *reader]
    assert len(rest) == len(blocks) - 1
    assert all((a.X != b.X).nnz == 0 for a, b in zip(rest, blocks[1:]))


def test_chunked_rows_are_refused_without_their_header():
    """A stream that does not start with a block's header row (rows cached
    by another writer) is refused, not unpickled."""
    import io
    import struct

    from sparkmaxent.backends.chunked import ChunkedPickles

    stream = io.BytesIO(struct.pack(">i", 3) + b"abc")
    with pytest.raises(ValueError, match="header"):
        list(ChunkedPickles().load_stream(stream))


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
def test_the_blocks_own_arrays_are_measured_where_they_are_cached(spark, datasets, shape):
    """ArrayBytesTask's bytes (summed on the executors) equal a count from
    the Parquet events: 12 bytes a stored value (float64 value, int32
    index), 4 an index pointer (one more per block than its rows; scipy
    keeps int32 index arrays where they fit), 8 a label and weight and the
    two id columns per event; candidate sets add 8 an event pointer (one
    more per block) and 1 a candidate's flag."""
    import pyarrow.compute as pc

    from sparkmaxent.kernels.stats import ArrayBytes, ArrayBytesTask

    directory, info, _ = datasets[shape]
    table = read_events_table(directory, info)
    events, nnz = table.num_rows, pc.sum(pc.list_value_length(table.column("indices"))).as_py()
    with SparkBackend(spark, directory, info, partitions=3, max_block_nnz=200) as backend:
        blocks = backend.n_blocks
        if shape == MULTICLASS:
            rows = events  # one CSR row an event
            per_event = 8 * 4  # y, c, event_id, group
            extra = 0
        else:
            rows = pc.sum(pc.list_value_length(table.column("correct"))).as_py()  # candidates
            per_event = 8 * 3 + 8  # c, event_id, group; event_ptr
            extra = 8 * blocks + rows  # event_ptr's extra entry a block; correct, 1 byte each
        expected = 12 * nnz + 4 * (rows + blocks) + per_event * events + extra
        assert blocks > 1
        assert backend.run(ArrayBytesTask()) == ArrayBytes(expected, events, nnz, blocks)


# ---------------------------------------------------------------- bookkeeping


def test_passes_are_counted_and_run_under_the_backend_job_group(spark, datasets):
    sc = spark.sparkContext
    directory, info, _ = datasets[MULTICLASS]
    # 7 partitions: the tree reduction has a shuffle level, still one job
    with SparkBackend(spark, directory, info, partitions=7) as backend:
        sc.setJobGroup("caller-group", "outer")
        try:
            backend.run(CountTask())
            # the caller's job group is restored after a pass
            assert sc.getLocalProperty("spark.jobGroup.id") == "caller-group"
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        assert backend.passes == 1
        assert backend.job_group.startswith(backend.name)


def test_broadcasts_are_destroyed_after_every_pass(spark, multiclass_backend, monkeypatch):
    sc = spark.sparkContext
    made = []
    original = sc.broadcast

    def recording_broadcast(value):
        bc = original(value)
        made.append(bc)
        return bc

    monkeypatch.setattr(sc, "broadcast", recording_broadcast)
    space = multiclass_backend.space
    multiclass_backend.run(LossGradTask(space, Weights.zeros(space)))
    multiclass_backend.run(CountTask())
    assert len(made) == 2
    for bc in made:
        assert not bc._jbroadcast.isValid()  # destroyed on the JVM side
        assert not os.path.exists(bc._path)  # and its driver-side file removed
    assert multiclass_backend.live_broadcasts == 0


def test_close_unpersists_the_cache(spark, datasets):
    persistent = spark.sparkContext._jsc.getPersistentRDDs
    directory, info, _ = datasets[MULTICLASS]
    backend = SparkBackend(spark, directory, info, partitions=2, name="to-close")
    rdd_id = backend.rdd.id()
    assert rdd_id in persistent()
    assert backend.rdd.name().startswith("to-close")
    with backend:
        pass
    assert rdd_id not in persistent()
    backend.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        backend.run(CountTask())


def test_an_error_in_a_task_reaches_the_driver(spark, tmp_path, monkeypatch):
    sc = spark.sparkContext
    block = random_multiclass(np.random.default_rng(3), m=30, P=5, K=3)
    y = block.y.copy()
    y[17] = -1  # a label unseen in training: the kernel refuses to train on it
    bad = MulticlassBlock(X=block.X, y=y, c=block.c, n_labels=3)
    info = _write(tmp_path, bad, MULTICLASS, n_files=1)
    made = []
    original = sc.broadcast
    monkeypatch.setattr(sc, "broadcast", lambda v: made.append(original(v)) or made[-1])
    with SparkBackend(spark, str(tmp_path), info, partitions=2) as backend:
        space = backend.space
        with pytest.raises(Exception, match="cannot train on events whose label was not seen"):
            backend.run(LossGradTask(space, Weights.zeros(space)))
        assert backend.passes == 1 and backend.live_broadcasts == 0
        assert not made[-1]._jbroadcast.isValid()
        assert sc.getLocalProperty("spark.jobGroup.id") is None
        assert backend.run(CountTask()).events == 30  # the backend still works


def test_an_empty_dataset_is_refused_and_leaves_no_cache(spark, tmp_path):
    persistent = spark.sparkContext._jsc.getPersistentRDDs
    before = set(persistent().keys())
    empty = random_multiclass(np.random.default_rng(0), m=0, P=4, K=2)
    info = _write(tmp_path, empty, MULTICLASS, n_files=1)
    with pytest.raises(ValueError, match="has no events"):
        SparkBackend(spark, str(tmp_path), info)
    assert set(persistent().keys()) == before


# ---------------------------------------------------------------- factory


def test_factory_makes_both_backends_with_the_same_objective(spark, datasets):
    directory, info, _ = datasets[MULTICLASS]
    local = make_backend("local", directory, bias=True, partitions=3)
    assert isinstance(local, LocalBackend) and len(local.blocks) == 3
    assert local.info == info
    remote = make_backend("spark", directory, spark=spark, bias=True, partitions=2)
    try:
        assert isinstance(remote, SparkBackend) and remote.space == local.space
        theta = np.random.default_rng(0).normal(size=local.space.n_params)
        fs, gs = Objective(remote, None)(theta)
        fl, gl = Objective(local, None)(theta)
        assert fs == pytest.approx(fl, rel=RTOL)
        assert_same(gs, gl, "gradient")
        assert repr(remote).startswith(f"SparkBackend({remote.name!r}, {directory!r}, 150 events")
    finally:
        remote.close()
    assert "closed" in repr(remote) and remote.cached() is None
    known = (
        r"unknown backend 'dask': expected one of \['local', 'spark', 'spark-frame', 'spark-rdd'\]"
    )
    with pytest.raises(ValueError, match=known):
        make_backend("dask", directory)
