"""DataFrame backend: kernel blocks cached as a DataFrame of pickled blocks,
one Spark job per pass, with the DataFrame API only.

It runs under Spark Connect, which has no RDDs, SparkContext, broadcast
variables or ``_jvm`` (a Connect client only builds DataFrame plans), and
in a classic session too. The math is the kernels' (``task(block)`` and the
results' ``merge``), exactly as in ``SparkBackend``; only the plumbing
differs.

Data flow::

    events Parquet --read--> (repartition) --mapInArrow--> one row per block
    (column ``block``: the pickled block, as SparkBackend builds it)
    --persist--> cached DataFrame of blocks

    each pass:  the task (it carries the weights) travels in the closure of
                a mapInArrow function: unpickle each block of the partition,
                task(block), merge -> one pickled result per partition
                -> (many partitions: a shuffle to ~sqrt of them, merged again)
                -> collect -> merge_all on the driver

    derived copy (``derived``): the cached blocks --mapInArrow(fn)-->
                persisted DataFrame of the transformed blocks (the
                lattice's widened events), filled once, passes run on it

    gradient test: per partition, the partial gradient cut into feature
                blocks (``task.split``), keyed rows -> groupBy(key)
                .applyInArrow: summed and summarized where summed -> collect
                the summaries -> merge_all

Timeouts: ``pass_timeout_s`` cancels the pass (under Connect its operations
carry the backend's tag, cancelled with ``spark.interruptTag``; in a
classic session its job group) and raises ``StalledError``. There is no
executor watchdog (``no_executor_timeout_s``): a Connect client cannot see
the cluster's executors, the server's own scheduler waits for them.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import pickle
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

import pyarrow as pa
from pyspark import StorageLevel

from ..data.schema import DatasetInfo
from ..errors import StalledError, check_total_weight
from ..kernels import Block, Space
from ..kernels.keyed import Keyed, KeyedTask
from ..kernels.stats import CountTask
from ..session_kind import is_connect
from .base import CachedBackend, merge_all
from .spark import (
    MAX_BLOCK_NNZ,
    _add_piece,
    _pickled_blocks,
    check_pass_weight,
    event_partitions,
    job_group,
    large_var_types,
    on_executor,
    read_events_frame,
)
from .watchdog import PassLimit

logger = logging.getLogger(__name__)

R = TypeVar("R")

# Above this many partial results a pass merges them in one more stage on
# the executors (about sqrt of them reach the driver), as treeReduce does.
TREE_ABOVE = 16


def _binary_column(values: list[bytes], name: str, large: bool) -> pa.RecordBatch:
    arrow_type = pa.large_binary() if large else pa.binary()
    return pa.RecordBatch.from_arrays([pa.array(values, type=arrow_type)], names=[name])


def _unpickled(batches: Iterator[pa.RecordBatch]) -> Iterator[Block]:
    """The unpickled values (blocks, results) of a partition's binary column."""
    for batch in batches:
        for data in batch.column(0).to_pylist():
            yield pickle.loads(data)


def _merged(values: Iterator[Any]) -> Any:
    """The values merged in order, or None for none."""
    out = None
    for value in values:
        out = value if out is None else out.merge(value)
    return out


def _apply_task(task: Callable[[Block], Any], large: bool):
    """The mapInArrow function of a pass: one row (column ``result``, the
    pickled merge of ``task`` over the partition's blocks) per non-empty
    partition; each task run as the RDD backend runs it (``on_executor``:
    the executor's Python workers share the blocks' Hessian operators)."""

    def apply(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out = _merged(on_executor(task, block) for block in _unpickled(batches))
        if out is not None:
            yield _binary_column([pickle.dumps(out, pickle.HIGHEST_PROTOCOL)], "result", large)

    return apply


def _map_blocks(fn: Callable[[Block], Block], large: bool):
    """The mapInArrow function of a derived copy: every block of the
    partition replaced by ``fn`` of it (one pickled block per row)."""

    def apply(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for block in _unpickled(batches):
            data = pickle.dumps(fn(block), pickle.HIGHEST_PROTOCOL)
            yield _binary_column([data], "block", large)

    return apply


def _same(result: Any) -> Any:
    return result


def _split_partials(task: KeyedTask, large: bool):
    """The mapInArrow function of a keyed pass: the partition's partials,
    summed, cut into keyed pieces (``task.split``)."""
    arrow_type = pa.large_binary() if large else pa.binary()

    def split(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        lg = _merged(task.partial(block) for block in _unpickled(batches))
        if lg is None:
            return
        keys, pieces = [], []
        for key, piece in task.split(lg):
            keys.append(key)
            pieces.append(pickle.dumps(piece, pickle.HIGHEST_PROTOCOL))
        yield pa.RecordBatch.from_arrays(
            [pa.array(keys, type=pa.int64()), pa.array(pieces, type=arrow_type)],
            names=["key", "piece"],
        )

    return split


def _summarize_pieces(task: KeyedTask, weight: float, large: bool):
    """The applyInArrow function of a keyed pass: one key's pieces summed
    and reduced to its result (``task.summarize``)."""

    def summarize(table: pa.Table) -> pa.Table:
        key = int(table.column("key")[0].as_py())
        pieces = [pickle.loads(p) for p in table.column("piece").to_pylist()]
        total = pieces[0]
        for piece in pieces[1:]:
            total = _add_piece(total, piece)
        summary = task.summarize(key, total, weight)
        data = pickle.dumps(summary, pickle.HIGHEST_PROTOCOL)
        return pa.Table.from_batches([_binary_column([data], "summary", large)])

    return summarize


class FrameBackend(CachedBackend):
    """Runs tasks over kernel blocks cached as a DataFrame (Spark Connect or
    classic).

    Parameters
    ----------
    spark : SparkSession
        A classic or a Spark Connect session.
    dataset_dir, info, bias, partitions, name, storage_level, max_block_nnz
    min_partition_events
        As for ``SparkBackend``.
    pass_timeout_s, pass_timeout_factor, pass_timeout_floor_s : float
        Interrupt a pass and raise ``StalledError`` when it has run longer
        than its limit (``PassLimit``), as for ``SparkBackend``.
    no_executor_timeout_s : float
        Accepted for the factory's sake and ignored (module docstring).

    Attributes
    ----------
    info, space, passes, n_events, n_blocks, weight, job_group
        As for ``SparkBackend``; under Connect ``job_group`` is the tag of
        every operation instead.
    partitions : int
        Partitions holding blocks.
    blocks : DataFrame or None
        The cached blocks; None once closed.
    """

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
        max_block_nnz: int = MAX_BLOCK_NNZ,
        min_partition_events: int = 0,
        no_executor_timeout_s: float = 0.0,
        pass_timeout_s: float = 0.0,
        pass_timeout_factor: float = 0.0,
        pass_timeout_floor_s: float = 0.0,
    ):
        if partitions is not None and partitions < 1:
            raise ValueError(f"expected partitions >= 1 or None, got {partitions}")
        level = getattr(StorageLevel, storage_level, None)
        if not isinstance(level, StorageLevel):
            raise ValueError(f"expected a StorageLevel name, got {storage_level!r}")
        self.spark = spark
        self.dataset_dir = dataset_dir
        self.info = info if info is not None else DatasetInfo.load(dataset_dir)
        self.space = self.info.space(bias)
        self.name = name or f"sparkmaxent-{uuid.uuid4().hex[:8]}"
        self.job_group = f"{self.name}-{uuid.uuid4().hex[:12]}"
        self.pass_timeout_s = pass_timeout_s
        self.pass_limit = PassLimit(0.0, pass_timeout_factor, pass_timeout_floor_s)
        self.passes = 0
        self.large = large_var_types(spark)
        t0 = time.perf_counter()
        frame = event_partitions(
            read_events_frame(spark, dataset_dir, self.info), partitions, self.info.n_events,
            min_partition_events,
        )  # fmt: skip
        build = _pickled_blocks(self.info, max_block_nnz, self.large)
        self.blocks = frame.mapInArrow(build, "block binary").persist(level)
        try:
            # fills the cache now, so that pass timings are clean
            with self._tagged("caching the blocks", 0.0):
                counts = self._results(CountTask())
            self.pass_limit.seen(time.perf_counter() - t0)
        except BaseException:
            self.close()
            raise
        if not counts:
            self.close()
            raise ValueError(f"{dataset_dir}: the dataset has no events")
        size = merge_all(counts)
        self.n_events, self.n_blocks, self.weight = size.events, size.blocks, size.weight
        self.partitions = len(counts)
        logger.info(
            "%s: cached %d events in %d blocks (DataFrame) in %.1f s",
            self.name,
            self.n_events,
            self.n_blocks,
            time.perf_counter() - t0,
        )

    def _open(self):
        if self.blocks is None:
            raise RuntimeError(f"{self.name} is closed: expected an open backend")
        return self.blocks

    def _results(self, task: Callable[[Block], Any], tree: bool = False) -> list:
        """Per-partition results of ``task`` (merged once more on the
        executors when there are many and ``tree``), on the driver."""
        frame = self._open().mapInArrow(_apply_task(task, self.large), "result binary")
        if tree and self.partitions > TREE_ABOVE:
            n = max(2, math.isqrt(self.partitions))
            # the tree stage: each of n partitions merges the pickled results it gets
            frame = frame.repartition(n).mapInArrow(_apply_task(_same, self.large), "result binary")
        return [pickle.loads(row[0]) for row in frame.collect()]

    def run(self, task: Callable[[Block], R] | Keyed) -> R:
        """Apply ``task`` to every cached block and merge the results: one
        pass (one job, plus a small merge stage for many partitions); a
        ``Keyed`` request runs its keyed pass (``_keyed``)."""
        if isinstance(task, Keyed):
            return self._keyed(task.task)
        self._open()
        self.passes += 1
        with self._tagged(f"pass {self.passes} ({type(task).__name__})"):
            return merge_all(self._results(task, tree=True))

    def _keyed(self, task: KeyedTask) -> Any:
        """A keyed pass (kernels/keyed.py; grafting's block-wise gradient
        test, kernels/topk.py) in one pass: the partials' pieces summed and
        summarized per key on the executors; only the results reach the
        driver. Sums are normalized with the total weight W counted when
        the blocks were cached."""
        blocks = self._open()
        weight = check_total_weight(self.weight)
        self.passes += 1
        with self._tagged(f"pass {self.passes} ({type(task).__name__})"):
            pieces = blocks.mapInArrow(_split_partials(task, self.large), "key long, piece binary")
            rows = (
                pieces.groupBy("key")
                .applyInArrow(_summarize_pieces(task, weight, self.large), "summary binary")
                .collect()
            )
        summary = merge_all([pickle.loads(row[0]) for row in rows])
        check_pass_weight(self.name, task.result_weight(summary), weight)
        return summary

    @contextmanager
    def _tagged(self, what: str, timeout_s: float | None = None) -> Iterator[None]:
        """Run the body's operations under the backend's tag (Connect) or job
        group (classic: a session's tags are thread-local there, so another
        thread could not interrupt them); after ``timeout_s`` (0: never;
        None: a pass, its ``PassLimit``, its time then counted) cancel them
        and raise StalledError."""
        is_pass = timeout_s is None
        if timeout_s is None:
            self.pass_limit.fixed_s = self.pass_timeout_s  # an attribute callers may change
            limit_s, rule = self.pass_limit.next()
        else:
            limit_s, rule = timeout_s, f"spark.pass_timeout_s = {timeout_s:g} s"
        fired = threading.Event()
        if is_connect(self.spark):
            scope: Any = contextlib.nullcontext()
            self.spark.addTag(self.job_group)
            cancel = partial(self.spark.interruptTag, self.job_group)
        else:
            sc = self.spark.sparkContext
            scope = job_group(sc, self.job_group, f"{self.name}: {what}")
            cancel = partial(sc.cancelJobGroup, self.job_group)

        def interrupt() -> None:
            fired.set()
            logger.error("%s of %s ran past %g s: cancelling it", what, self.name, limit_s)
            cancel()

        timer = threading.Timer(limit_s, interrupt) if limit_s > 0 else None
        t0 = time.perf_counter()
        try:
            with scope:
                if timer is not None:
                    timer.daemon = True
                    timer.start()
                yield
        except Exception as e:
            if not fired.is_set():
                raise
            raise StalledError(
                f"{self.name}: {what} cancelled: it ran longer than {rule}. Its work is lost; "
                "a selection run continues from the last checkpoint in its output directory "
                "with --resume"
            ) from e
        finally:
            if timer is not None:
                timer.cancel()
            if is_connect(self.spark):
                self.spark.removeTag(self.job_group)
        if is_pass:
            self.pass_limit.seen(time.perf_counter() - t0)
        logger.debug("%s: %s in %.3f s", self.name, what, time.perf_counter() - t0)

    def derived(self, fn: Callable[[Block], Block], space: Space, what: str) -> FrameBackend:
        """A copy of this backend over ``fn`` of every cached block, cached
        as its own DataFrame (the storage level of the blocks) and filled now
        (one job, not a pass), as ``SparkBackend.derived`` does with an RDD:
        a wrapper whose passes would otherwise transform the blocks in every
        pass (widening by conjunctions) runs them on the copy. The copy
        counts its own passes; its ``close`` releases only the derived blocks."""
        blocks = self._open()
        out = copy.copy(self)
        out.space, out.passes = space, 0
        mapped = blocks.mapInArrow(_map_blocks(fn, self.large), "block binary")
        out.blocks = mapped.persist(blocks.storageLevel)
        try:
            with out._tagged(f"caching the blocks {what}", 0.0):
                out._results(CountTask())
        except BaseException:
            out.close()
            raise
        return out

    def close(self) -> None:
        """Unpersist the cached blocks; later passes fail. Idempotent."""
        if self.blocks is not None:
            self.blocks.unpersist()
            self.blocks = None

    def cached(self):
        return self.blocks
