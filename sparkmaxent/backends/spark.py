"""Spark backend: kernel blocks cached on the executors, one job per pass.

Data flow::

    events Parquet --read--> (repartition) --mapInArrow--> one CSR block per
    partition (pickled, one row) --as byte arrays--> persisted RDD of blocks
    (the JVM caches each pickle, the Python workers unpickle it per pass)

    each pass:  broadcast the task (it carries the weights)
                -> task(block) on every cached block (pure numpy)
                -> treeReduce(merge) to the driver
                -> destroy the broadcast

The blocks are cached as an RDD rather than as a cached DataFrame of events
rebuilt into blocks every pass: the DataFrame makes the JVM convert every
event to Arrow on every pass, while the RDD hands each Python worker one
pickled block, which unpickles at memory speed. Measured per-pass costs:
docs/benchmarks.md, "Figures from the code" (``python -m benchmarks.pass_overhead``).

Tasks cross to the executors with cloudpickle, so tasks defined in a script
or notebook work as well as library ones. Errors raised by a task on an
executor reach the driver as pyspark's ``PythonException`` whose message
holds the executor's Python traceback, original message included; they are
not wrapped.

Every pass runs under the backend's own Spark job group (``job_group``), so
its jobs can be cancelled or found in the Spark UI; the caller's job group is
restored afterwards.

A watchdog (``Watchdog``, a daemon thread polling the status tracker about
once a second while the calling thread runs the pass) cancels the job group
and raises ``StalledError`` when the cluster has had no executor, and the
pass no progress, for ``no_executor_timeout_s`` seconds (Spark itself waits
forever for executors that may never come), or when a pass outruns
``pass_timeout_s``.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import pickle
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel, cloudpickle
from pyspark.sql.pandas.types import from_arrow_schema

from ..data.drained import iter_partition_blocks
from ..data.schema import EVENTS_DIR, DatasetInfo, events_schema
from ..errors import StalledError, check_total_weight
from ..kernels import Block, Space
from ..kernels.keyed import Keyed, KeyedTask
from ..kernels.pointcache import OPERATORS
from ..kernels.stats import Count, CountTask  # noqa: F401 (CountTask: the trivial pass)
from .base import CachedBackend, capped_partitions
from .chunked import CACHE_CHUNK_BYTES, ChunkedPickles, chunk_rows, pickle_frames
from .opstore import OperatorStore
from .release import collect_local_jvm, release_memory, share_worker_pool
from .watchdog import ClusterStatus, PassLimit, Watchdog

logger = logging.getLogger(__name__)

R = TypeVar("R")

# Largest block cut from one partition, in stored non-zeros: keeps a pickled
# block (about 12 bytes per non-zero) far below the 2 GB limits of Arrow
# binary arrays and JVM byte arrays, and bounds what a pass's Python worker
# holds at once (a block unpickled, and the task's temporaries over it),
# whatever the partition's size; a task's fixed cost stays small beside a
# block this size.
MAX_BLOCK_NNZ = 1 << 23

_GROUP_KEYS = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")

# ---------------------------------------------------------------- job groups


@contextmanager
def job_group(sc, group_id: str, description: str = "") -> Iterator[None]:
    """Run the body under Spark job group ``group_id``, then restore the
    caller's job group (if any) instead of clearing it."""
    saved = [sc.getLocalProperty(key) for key in _GROUP_KEYS]
    sc.setJobGroup(group_id, description)
    try:
        yield
    finally:
        for key, value in zip(_GROUP_KEYS, saved):
            sc.setLocalProperty(key, value)  # None removes the property


# ---------------------------------------------------------------- tasks


class _Portable:
    """Pickles the wrapped task with cloudpickle (broadcasts use plain pickle),
    so tasks defined in ``__main__`` reach the executors; unpickles to the
    task itself."""

    def __init__(self, task: Any):
        self.task = task

    def __reduce__(self):
        return cloudpickle.loads, (cloudpickle.dumps(self.task, protocol=pickle.HIGHEST_PROTOCOL),)


def _merge(a, b):
    return a.merge(b)


def _add_piece(a: Any, b: Any) -> Any:
    # pieces of one key of a keyed pass (KeyedTask.split), summed
    return a.merge(b)


# ---------------------------------------------------------------- reading


def read_events_frame(spark, dataset_dir: str, info: DatasetInfo):
    """The events of a prepared dataset as a DataFrame with the columns of
    ``schema.events_schema(info.shape)``."""
    # An explicit schema spares a schema-inference job and fixes the types.
    schema = from_arrow_schema(events_schema(info.shape))
    return spark.read.schema(schema).parquet(f"{dataset_dir.rstrip('/')}/{EVENTS_DIR}")


def event_partitions(frame, partitions: int | None, n_events: int, min_partition_events: int = 0):
    """``frame`` (the events) in the partitions its blocks are cached in:
    ``partitions`` (None: the Parquet scan's), but each holding at least
    ``min_partition_events`` events (0: no such rule), so data of fewer
    than twice that many events is one partition.

    A Hessian-free round (``kernels/direction.py``) averages the
    partitions' own Newton steps (GIANT, Wang et al. 2018), which is the
    whole data's step only when each partition's Hessian is close to the
    whole data's. A partition of a few documents with many rare words
    holds most of its features alone, and the average of such steps
    converges linearly where one block's step converges as Newton does: on
    small data a core left idle costs less than the passes the average
    adds. The cap only lowers the count (``coalesce``: no shuffle, the same
    grouping of the scan's splits on every run).

    ``partitions`` events are spread by a hash of every column (the same
    partition for an event on every run). Round-robin would have Spark
    sort every map task's events first, to deal them the same way on a
    retry (``spark.sql.execution.sortBeforeRepartition``): the sort holds a
    task's events in the JVM's heap, which grows for them and stays grown
    beside the Python workers that build the blocks."""
    partitions, cap = capped_partitions(partitions, n_events, min_partition_events)
    if partitions is not None:
        return frame.repartition(partitions, *frame.columns)
    if cap is not None:  # at most the cap; coalesce never adds partitions
        return frame.coalesce(cap)
    return frame


def binary_row(data: bytes | memoryview, large: bool) -> pa.Array:
    """A one-row Arrow binary (or large_binary) array over ``data`` without
    copying it (``pa.array([data])`` copies the bytes into a new buffer)."""
    offsets = np.array([0, len(memoryview(data))], dtype=np.int64 if large else np.int32)
    arrow_type = pa.large_binary() if large else pa.binary()
    return pa.Array.from_buffers(arrow_type, 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _pickled_blocks(
    info: DatasetInfo, max_block_nnz: int, large: bool, chunk_bytes: int | None = None
):
    """The mapInArrow function: a partition's events in, each block's
    pickle out (column ``block``): one row a block, or with ``chunk_bytes``
    a header row and chunks of at most that many bytes
    (``chunked.chunk_rows``, what the RDD cache reads). ``large``: Spark
    expects large_binary (spark.sql.execution.arrow.useLargeVarTypes). One
    block is held at a time, dropped once pickled, and its pickle goes out
    without a copy: the Python worker building the cache holds one block's
    events (``iter_partition_blocks``), one block and its pickle's head at
    most, and once the partition is done gives what it freed back to the
    system (``release.release_memory``) before it runs passes
    (``release.share_worker_pool``)."""

    def build(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for block in iter_partition_blocks(batches, info, max_block_nnz):
            if chunk_bytes is None:
                rows: Any = [pickle.dumps(block, protocol=pickle.HIGHEST_PROTOCOL)]
            else:  # the block's arrays go out as they are (no pickle of them)
                rows = chunk_rows(pickle_frames(block), chunk_bytes)
            del block
            for row in rows:
                yield pa.RecordBatch.from_arrays([binary_row(row, large)], names=["block"])
            del rows
        release_memory()  # the events and pickles freed: the worker's passes start lean

    return build


def large_var_types(spark) -> bool:
    """Whether Spark expects Arrow's large_binary for a binary column
    (``spark.sql.execution.arrow.useLargeVarTypes``)."""
    value = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")
    return str(value).lower() == "true"


def check_pass_weight(name: str, own: float | None, weight: float) -> None:
    """A keyed pass's own weight sum ``own`` (``KeyedTask.result_weight``;
    None: it keeps none) must be the ``weight`` its sums were divided by
    (the total counted when the blocks were cached)."""
    if own is not None and not math.isclose(own, weight, rel_tol=1e-12):
        raise RuntimeError(
            f"{name}: the events weigh {own} in this pass, {weight} when cached: expected the same"
        )


def share_operators() -> None:
    """On an executor's Python worker: give the process's operator cache
    (``kernels/pointcache.py``) the store the executor's workers share
    (``opstore.py``), in the executor's local directory, which Spark
    removes when the application ends; once a process (again if the
    directory changed). Without a local directory (not on an executor), or
    where it cannot be made: none (each worker keeps its own operators)."""
    local = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
    if not local:
        return
    directory = os.path.join(local, "sparkmaxent-operators")
    store = OPERATORS.store
    if not (isinstance(store, OperatorStore) and store.directory == directory):
        try:
            OPERATORS.store = OperatorStore(directory)
        except OSError as e:
            logger.debug("no operator store in %s: %s", directory, e)
            OPERATORS.store = None


def on_executor(task: Callable[[Block], R], block: Block) -> R:
    """A pass's ``task`` on a cached ``block``, on an executor's Python
    worker: a product pass there finds the block's operator at its point
    whichever of the executor's workers built it (``share_operators``)."""
    share_operators()
    return task(block)


def pickled_block_rdd(frame, build):
    """The blocks ``build`` (``_pickled_blocks``) makes of ``frame``'s
    partitions, as a pyspark RDD whose JVM side holds each block's pickle
    as the Python worker wrote it: the binary column is read as a JVM RDD
    of byte arrays (``Dataset.as(Encoders.BINARY)``) and the Python side
    joins each block's chunks and unpickles it (``chunked.ChunkedPickles``).
    Persisting it caches those arrays. ``DataFrame.rdd`` instead
    converts every row to a JVM Row, pickles it again in the JVM (a growing
    buffer, then a copy), unpickles it in a second Python worker and
    pickles the block again into the cache: several transient copies of
    every block on the JVM heap, which the heap grows to hold and does not
    give back. The blocks (and the cache's bytes) are the same."""
    from pyspark.rdd import RDD

    rows = frame.mapInArrow(build, "block binary")
    encoder = frame.sparkSession._jvm.org.apache.spark.sql.Encoders.BINARY()
    jrdd = getattr(rows._jdf, "as")(encoder).javaRDD()
    return RDD(jrdd, frame.sparkSession.sparkContext, ChunkedPickles())


def _block_size(block: Block) -> Count:
    return CountTask()(block)


# ---------------------------------------------------------------- backend


class SparkBackend(CachedBackend):
    """Runs tasks over kernel blocks cached on Spark executors.

    Parameters
    ----------
    spark : SparkSession
    dataset_dir : str
        A prepared dataset (``dataset.json`` and ``events/``).
    info : DatasetInfo or None
        Its description; read from ``dataset.json`` when None.
    bias : bool
        Whether the model has a per-label bias (multiclass only).
    partitions : int or None
        Repartition the events into this many partitions (one shuffle, at
        construction); None keeps the partitions of the Parquet scan.
    min_partition_events : int
        Fewer partitions than ``partitions`` (or the scan's) where they
        would hold fewer events each (``event_partitions``; 0: none).
    name : str or None
        Names the cached RDD and the job group; a unique one by default.
    storage_level : str
        A ``pyspark.StorageLevel`` name for the block cache. With
        MEMORY_ONLY an evicted partition is rebuilt from Parquet.
    depth : int
        Depth of the tree reduction.
    cache_chunk_bytes : int
        Largest piece of a pickled block per row on its way into the JVM's
        cache (``chunked.py``).
    no_executor_timeout_s : float
        Cancel a pass (or the caching) and raise ``StalledError`` when the
        cluster has had no executor and the pass no progress for this many
        seconds; 0: wait forever, as Spark does.
    pass_timeout_s : float
        Cancel a pass and raise ``StalledError`` when it has run this many
        seconds; 0: ``pass_timeout_factor`` decides.
    pass_timeout_factor, pass_timeout_floor_s : float
        With ``pass_timeout_s`` 0, the limit of a pass is this factor times
        the slowest pass so far (the caching counted), at least the floor
        (``PassLimit``); factor 0: no limit.

    Attributes
    ----------
    info : DatasetInfo
    space : Space
    passes : int
        Passes run so far, failed ones included (construction is not a pass).
    n_events, n_blocks : int
        Events and blocks in the cache.
    weight : float
        Total event weight.
    job_group : str
        The Spark job group of this backend's jobs (filling the cache and
        every pass): cancel them with ``sc.cancelJobGroup(job_group)``, find
        them in the Spark UI or count them with the status tracker.
    rdd : pyspark.RDD of Block
        The cached blocks; None once closed.
    status : ClusterStatus
        What the watchdog polls, every ``watchdog_poll_s`` seconds.
    """

    watchdog_poll_s = 1.0

    def __init__(
        self,
        spark,
        dataset_dir: str,
        info: DatasetInfo | None = None,
        *,
        bias: bool = False,
        partitions: int | None = None,
        name: str | None = None,
        storage_level: str = "MEMORY_ONLY",
        depth: int = 2,
        max_block_nnz: int = MAX_BLOCK_NNZ,
        min_partition_events: int = 0,
        cache_chunk_bytes: int = CACHE_CHUNK_BYTES,
        no_executor_timeout_s: float = 600.0,
        pass_timeout_s: float = 0.0,
        max_executor_losses: int = 0,
        pass_timeout_factor: float = 0.0,
        pass_timeout_floor_s: float = 0.0,
    ):
        if partitions is not None and partitions < 1:
            raise ValueError(f"expected partitions >= 1 or None, got {partitions}")
        if depth < 1:
            raise ValueError(f"expected depth >= 1, got {depth}")
        level = getattr(StorageLevel, storage_level, None)
        if not isinstance(level, StorageLevel):
            known = sorted(k for k, v in vars(StorageLevel).items() if isinstance(v, StorageLevel))
            raise ValueError(f"expected a StorageLevel name in {known}, got {storage_level!r}")
        self.spark = spark
        self.sc = spark.sparkContext
        self.dataset_dir = dataset_dir
        self.info = info if info is not None else DatasetInfo.load(dataset_dir)
        self.space = self.info.space(bias)
        self.name = name or f"sparkmaxent-{uuid.uuid4().hex[:8]}"
        # unique even when two backends share a name
        self.job_group = f"{self.name}-{uuid.uuid4().hex[:12]}"
        self.depth = depth
        # the partition rule and block size a joined copy (spark_union.py) follows
        self.min_partition_events, self.max_block_nnz = min_partition_events, max_block_nnz
        self.passes = 0
        self.live_broadcasts = 0
        self.rdd = None
        self.no_executor_timeout_s, self.pass_timeout_s = no_executor_timeout_s, pass_timeout_s
        self.max_executor_losses = max_executor_losses
        self.pass_limit = PassLimit(0.0, pass_timeout_factor, pass_timeout_floor_s)
        self.status = ClusterStatus(self.sc)

        share_worker_pool(spark)
        t0 = time.perf_counter()
        with (
            job_group(self.sc, self.job_group, f"{self.name}: cache blocks"),
            self._watched("caching the blocks", pass_s=0.0),
        ):
            frame = event_partitions(
                read_events_frame(spark, dataset_dir, self.info), partitions,
                self.info.n_events, min_partition_events,
            )  # fmt: skip
            build = _pickled_blocks(
                self.info, max_block_nnz, large_var_types(spark), cache_chunk_bytes
            )
            rdd = pickled_block_rdd(frame, build)
            rdd.setName(f"{self.name} blocks of {dataset_dir}")
            rdd.persist(level)
            self.rdd = rdd
            try:
                # fills the cache now, so that pass timings are clean
                size = rdd.map(_block_size).treeAggregate(Count(0, 0.0, 0), _merge, _merge, depth)
            except BaseException:
                self.close()
                raise
        if size.events == 0:
            self.close()
            raise ValueError(f"{dataset_dir}: the dataset has no events")
        collect_local_jvm(self.sc)
        self.n_events, self.n_blocks, self.weight = size.events, size.blocks, size.weight
        self.partitions = rdd.getNumPartitions()
        self.pass_limit.seen(time.perf_counter() - t0)
        logger.info(
            "%s: cached %d events in %d blocks over %d partitions in %.1f s",
            self.name,
            self.n_events,
            self.n_blocks,
            self.partitions,
            time.perf_counter() - t0,
        )

    def run(self, task: Callable[[Block], R] | Keyed) -> R:
        """Apply ``task`` to every cached block and merge the results: one
        pass, one Spark job (plus shuffle stages of the tree for many
        partitions); a ``Keyed`` request runs its keyed pass (``_keyed``).

        Parameters
        ----------
        task : callable Block -> mergeable result, or Keyed
            Picklable with cloudpickle; it is broadcast once per pass.
        """
        if isinstance(task, Keyed):
            return self._keyed(task.task)
        with self._pass(task) as bc:
            assert self.rdd is not None, "_pass raises when the backend is closed"
            return self.rdd.map(lambda block: on_executor(bc.value, block)).treeReduce(
                _merge, self.depth
            )

    def _keyed(self, task: KeyedTask) -> Any:
        """A keyed pass (kernels/keyed.py; grafting's block-wise gradient
        test, kernels/topk.py) in one job: each data block's partial is cut
        into keyed pieces, those are summed per key across executors
        (reduceByKey), each sum is reduced to its result where it was
        summed, and only the results are tree-reduced to the driver.

        Sums are normalized on the executors with the total event weight W
        counted when the blocks were cached (a data constant).
        """
        weight = check_total_weight(self.weight)
        # one reduce partition per key, as far as the cluster's parallelism
        # goes; int keys hash to themselves
        n_reduce = max(1, min(task.n_keys, max(self.partitions, self.sc.defaultParallelism)))
        with self._pass(task) as bc:
            assert self.rdd is not None, "_pass raises when the backend is closed"
            summary = (
                self.rdd.flatMap(lambda block: bc.value.split(bc.value.partial(block)))
                .reduceByKey(_add_piece, n_reduce)
                .map(lambda kv: bc.value.summarize(kv[0], kv[1], weight))
                .treeReduce(_merge, self.depth)
            )
        check_pass_weight(self.name, task.result_weight(summary), weight)
        return summary

    @contextmanager
    def _pass(self, task: Any) -> Iterator[Any]:
        """Bookkeeping of one pass: count it, broadcast ``task`` (yielded),
        run the body under the backend's job group, destroy the broadcast."""
        if self.rdd is None:
            raise RuntimeError(f"{self.name} is closed: expected an open backend")
        self.passes += 1
        t0 = time.perf_counter()
        bc = self.sc.broadcast(_Portable(task))
        self.live_broadcasts += 1
        what = f"pass {self.passes} ({type(task).__name__})"
        self.pass_limit.fixed_s = self.pass_timeout_s  # an attribute callers may change
        try:
            with (
                job_group(self.sc, self.job_group, f"{self.name}: {what}"),
                self._watched(what, *self.pass_limit.next()),
            ):
                yield bc
        finally:
            bc.destroy()
            self.live_broadcasts -= 1
        self.pass_limit.seen(time.perf_counter() - t0)
        logger.debug(
            "%s: pass %d (%s) in %.3f s",
            self.name,
            self.passes,
            type(task).__name__,
            time.perf_counter() - t0,
        )

    @contextmanager
    def _watched(self, what: str, pass_s: float, pass_rule: str = "") -> Iterator[Watchdog]:
        """Run the body under a Watchdog; an exception after the watchdog
        cancelled the jobs becomes a StalledError saying what was lost."""
        dog = Watchdog(
            self.sc,
            self.job_group,
            what,
            self.status,
            self.no_executor_timeout_s,
            pass_s,
            self.watchdog_poll_s,
            max_losses=self.max_executor_losses,
            pass_rule=pass_rule,
        )
        with dog:
            try:
                yield dog
            except Exception as e:
                if dog.tripped is None:
                    raise
                raise StalledError(
                    f"{self.name}: {what} cancelled: {dog.tripped}. Its work is lost; a "
                    "selection run continues from the last checkpoint in its output directory "
                    "with --resume once executors are back"
                ) from e

    def derived(self, fn: Callable[[Block], Block], space: Space, what: str) -> SparkBackend:
        """A copy of this backend over ``fn`` of every cached block, cached
        as its own RDD and filled now (one job, not a pass): a wrapper whose
        passes would otherwise transform the blocks in every pass (widening
        by conjunctions) runs them on the copy. The copy counts its own
        passes; its ``close`` releases only the derived blocks."""
        if self.rdd is None:
            raise RuntimeError(f"{self.name} is closed: expected an open backend")
        out = self.plain_copy()
        out.space, out.passes = space, 0
        rdd = self.rdd.map(fn)
        rdd.setName(f"{self.name} blocks {what}")
        rdd.persist(self.rdd.getStorageLevel())
        with (
            job_group(self.sc, self.job_group, f"{self.name}: cache blocks {what}"),
            self._watched(f"caching the blocks {what}", pass_s=0.0),
        ):
            out.rdd = rdd
            try:
                rdd.count()
            except BaseException:
                out.close()
                raise
        return out

    def plain_copy(self) -> SparkBackend:
        """A shallow copy counting its own passes (``derived``'s start)."""
        return copy.copy(self)

    def close(self) -> None:
        """Unpersist the cached blocks; later passes fail. Idempotent."""
        if self.rdd is not None:
            self.rdd.unpersist()
            logger.debug("%s: unpersisted RDD %d", self.name, self.rdd.id())
            self.rdd = None

    def cached(self):
        return self.rdd
