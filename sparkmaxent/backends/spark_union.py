"""Training and held-out events cached as one Spark backend (the refit
after a held-out choice, choice/points.py and choice/heldout.py; automatic
folds, choice/folds.py): the Spark counterpart of ``InProcessUnion``.

Data flow (one job with a shuffle, at construction; nothing read again
from disk and nothing through the driver)::

    training blocks (cached)  --key (target partition, 0, partition, block)--+
    held-out blocks (cached) --trainable events, cut into one piece per     +--> shuffle to the
                               target partition, key (target, 1, ...)  ----+    target partition,
                                                                                sorted by key
        --> each training block with an equal share of its partition's
            held-out pieces appended --> persisted RDD of blocks

Why: the Hessian-free round solver (``kernels/direction.py``) averages the
blocks' own Newton steps (GIANT, Wang et al. 2018), exact with one block
and as good as the training fits' with blocks that are samples of the
data. Two cached backends side by side (``UnionBackend``) give the
held-out events a small block of their own, which lacks the curvature of
many rare features: its step slows the average (more iterations, and
Newton stalls near the final tolerance). Here every block is a training
block with its share of the held-out events, as in process.
"""

from __future__ import annotations

import copy
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator

from ..kernels import Block
from ..kernels.blocks import concat_blocks, split_block, trainable_events
from ..kernels.stats import Count
from .base import PassesOnFirst, capped_partitions
from .spark import SparkBackend, _block_size, _merge, job_group

logger = logging.getLogger(__name__)

Key = tuple[int, int, int, int]  # (target partition, 0 training | 1 held-out, partition, block)


def keyed_training(n_in: int, n_out: int) -> Callable[[int, Iterable[Block]], Iterator]:
    """Training partition ``index`` of ``n_in`` to target ``index * n_out //
    n_in`` (as ``coalesce`` groups consecutive partitions; the same
    partition when ``n_out == n_in``), each block keyed by its place."""

    def keyed(index: int, blocks: Iterable[Block]) -> Iterator[tuple[Key, Block]]:
        target = index * n_out // n_in
        for j, block in enumerate(blocks):
            yield (target, 0, index, j), block

    return keyed


def keyed_heldout(n_out: int) -> Callable[[int, Iterable[Block]], Iterator]:
    """Each held-out block's trainable events (``trainable_events``: a
    label unseen in training, a candidate set without a correct candidate
    left out) cut into ``n_out`` consecutive pieces, piece t to target t
    (empty pieces dropped)."""

    def keyed(index: int, blocks: Iterable[Block]) -> Iterator[tuple[Key, Block]]:
        for j, block in enumerate(blocks):
            usable = trainable_events(block)
            if usable.n_events == 0:
                continue
            for t, piece in enumerate(split_block(usable, n_out)):
                if piece.n_events:
                    yield (t, 1, index, j), piece

    return keyed


def joined_partition(items: Iterable[tuple[Key, Block]]) -> Iterator[Block]:
    """One target partition's blocks, sorted by key (training blocks first,
    in their order, then the held-out pieces): the held-out pieces joined
    and cut into as many shares as there are training blocks, share i
    appended to training block i (``InProcessUnion``'s blocks, per
    partition). Without training blocks, the held-out pieces as one block.
    The partition's blocks are held at once (one or a few blocks of at
    most the backend's ``max_block_nnz`` non-zeros each)."""
    training: list[Block] = []
    held: list[Block] = []
    for key, block in items:
        (held if key[1] else training).append(block)
    if not held:
        yield from training
        return
    pieces = concat_blocks(held)
    if not training:
        yield pieces
        return
    shares = split_block(pieces, len(training))
    for block, share in zip(training, shares, strict=True):
        yield concat_blocks([block, share]) if share.n_events else block


def _target(key: Key) -> int:
    return key[0]


def joined_rdd(first, second, n_out: int):
    """The blocks of ``first`` (training) and ``second`` (held-out), RDDs of
    cached blocks, as ``n_out`` partitions of joined blocks (not cached):
    one shuffle, the order within a partition fixed by the keys, so a
    fixed partitioning of both gives the same blocks run to run."""
    n_in = first.getNumPartitions()
    keyed = first.mapPartitionsWithIndex(keyed_training(n_in, n_out)).union(
        second.mapPartitionsWithIndex(keyed_heldout(n_out))
    )
    return keyed.repartitionAndSortWithinPartitions(n_out, partitionFunc=_target).mapPartitions(
        joined_partition
    )


class SparkUnion(PassesOnFirst, SparkBackend):
    """A training ``SparkBackend`` (``first``) and a held-out one
    (``second``, prepared with the training dictionary) as one
    ``SparkBackend``: its own cached RDD in the partitions of ``first``
    (fewer when the union holds fewer than ``data.min_partition_events``
    events a partition, ``capped_partitions``; one when it is small), each
    training block holding a share of the held-out part's trainable
    events (``joined_rdd``), built on the executors from both parts'
    cached blocks at construction (one job, not a pass). Every pass, the
    keyed one (the block-wise gradient test) included, is a plain
    ``SparkBackend`` pass; it counts on ``first``, as ``UnionBackend``'s
    and ``InProcessUnion``'s do. ``close`` unpersists only the joined
    blocks: the parts are closed by their owners."""

    def __init__(self, first: SparkBackend, second: SparkBackend):
        if first.space != second.space:
            raise ValueError(
                f"a union of backends needs one feature space, got {first.space} and {second.space}"
            )
        if first.rdd is None or second.rdd is None:
            raise RuntimeError(f"{first.name} or {second.name} is closed: expected open backends")
        # SparkBackend's settings (its __init__ reads a dataset), but for the
        # pass counter (``first``'s)
        for name in ("spark", "sc", "dataset_dir", "info", "space", "depth", "status"):
            setattr(self, name, getattr(first, name))
        for name in ("no_executor_timeout_s", "pass_timeout_s", "max_executor_losses"):
            setattr(self, name, getattr(first, name))
        self.min_partition_events, self.max_block_nnz = (
            first.min_partition_events,
            first.max_block_nnz,
        )
        self.first, self.rdd, self.live_broadcasts = first, None, 0
        self.name = f"{first.name}+{second.name}"
        self.job_group = f"{self.name}-{uuid.uuid4().hex[:12]}"
        self.pass_limit = copy.copy(first.pass_limit)
        n_out, _ = capped_partitions(
            first.partitions, first.n_events + second.n_events, self.min_partition_events
        )
        t0 = time.perf_counter()
        with (
            job_group(self.sc, self.job_group, f"{self.name}: join blocks"),
            self._watched("joining the blocks", pass_s=0.0),
        ):
            rdd = joined_rdd(first.rdd, second.rdd, n_out)
            rdd.setName(f"{self.name} joined blocks")
            rdd.persist(first.rdd.getStorageLevel())
            self.rdd = rdd
            try:
                size = rdd.map(_block_size).treeAggregate(
                    Count(0, 0.0, 0), _merge, _merge, self.depth
                )
            except BaseException:
                self.close()
                raise
        self.n_events, self.n_blocks, self.weight = size.events, size.blocks, size.weight
        self.partitions = n_out
        self.join_s = time.perf_counter() - t0
        self.pass_limit.seen(self.join_s)
        logger.info(
            "%s: joined %d events (%d training) in %d blocks over %d partitions in %.1f s",
            self.name, self.n_events, first.n_events, self.n_blocks, n_out, self.join_s,
        )  # fmt: skip

    def plain_copy(self) -> SparkBackend:
        """A plain ``SparkBackend`` over the same settings and blocks,
        counting its own passes (``derived``: a copy over transformed
        blocks must not count on ``first``)."""
        out = SparkBackend.__new__(SparkBackend)
        out.__dict__.update({k: v for k, v in vars(self).items() if k != "first"})
        out.passes = 0
        return out
