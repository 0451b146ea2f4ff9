"""Choosing a backend by name: a small registry, not an if/elif chain.

Registry: ``BACKENDS[kind] -> builder(dataset_dir, spark=..., bias=..., partitions=...,
watchdog=...)``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..data.schema import DatasetInfo
from ..errors import ConfigError
from .base import Backend, capped_partitions

logger = logging.getLogger(__name__)


def _local(
    dataset_dir: str,
    *,
    spark=None,
    bias: bool = False,
    partitions: int | None = None,
    watchdog: dict | None = None,
    min_partition_events: int = 0,
) -> Backend:
    """All events read into this process (pyarrow), cut into ``partitions`` blocks."""
    from ..data.load import read_blocks
    from .local import LocalBackend

    info = DatasetInfo.load(dataset_dir)
    n_blocks, _ = capped_partitions(partitions or 1, info.n_events, min_partition_events)
    blocks = read_blocks(dataset_dir, info, n_blocks=n_blocks)
    return LocalBackend(blocks, info.space(bias), info, dataset_dir)


def _spark(
    dataset_dir: str,
    *,
    spark=None,
    bias: bool = False,
    partitions: int | None = None,
    watchdog: dict | None = None,
    min_partition_events: int = 0,
) -> Backend:
    """Blocks cached on Spark executors; without ``spark``, the active session
    (or a new one, with the master spark-submit gives)."""
    from .session import spark_session
    from .spark import SparkBackend

    if spark is None:
        spark = spark_session(master=None)
    return SparkBackend(
        spark, dataset_dir, bias=bias, partitions=partitions,
        min_partition_events=min_partition_events, **(watchdog or {}),
    )  # fmt: skip


def _spark_frame(
    dataset_dir: str,
    *,
    spark=None,
    bias: bool = False,
    partitions: int | None = None,
    watchdog: dict | None = None,
    min_partition_events: int = 0,
) -> Backend:
    """Blocks cached as a DataFrame, DataFrame API only (backends/frame.py):
    the backend of a Spark Connect session, also usable in a classic one."""
    from .frame import FrameBackend
    from .session import spark_session

    if spark is None:
        spark = spark_session(master=None)
    limits = {k: v for k, v in (watchdog or {}).items() if k.startswith("pass_timeout")}
    return FrameBackend(
        spark, dataset_dir, bias=bias, partitions=partitions,
        min_partition_events=min_partition_events, **limits,
    )  # fmt: skip


def _spark_rdd(dataset_dir: str, *, spark=None, **kwargs) -> Backend:
    """The RDD backend (backends/spark.py); a classic session only."""
    from ..session_kind import is_connect

    if spark is not None and is_connect(spark):
        raise ConfigError(
            "train.backend = spark-rdd needs a classic Spark session (RDDs, broadcasts): "
            "under Spark Connect use spark or spark-frame"
        )
    return _spark(dataset_dir, spark=spark, **kwargs)


def _spark_auto(dataset_dir: str, *, spark=None, **kwargs) -> Backend:
    """Per session kind, the faster design (benchmarks/connect.py): the RDD
    backend in a classic session, the DataFrame backend under Spark Connect
    (the only one possible there)."""
    from ..session_kind import is_connect
    from .session import spark_session

    if spark is None:
        spark = spark_session(master=None)
    build = _spark_frame if is_connect(spark) else _spark
    return build(dataset_dir, spark=spark, **kwargs)


BACKENDS: dict[str, Callable[..., Backend]] = {
    "local": _local,
    "spark": _spark_auto,
    "spark-rdd": _spark_rdd,
    "spark-frame": _spark_frame,
}


def make_backend(
    kind: str,
    dataset_dir: str,
    *,
    spark=None,
    bias: bool = False,
    partitions: int | None = None,
    watchdog: dict | None = None,
    min_partition_events: int = 0,
) -> Backend:
    """A backend of the given kind over a prepared dataset.

    Parameters
    ----------
    kind : {"local", "spark", "spark-rdd", "spark-frame"}
        A key of ``BACKENDS``; "spark" picks by session kind (``_spark_auto``).
    dataset_dir : str
        A prepared dataset (``dataset.json`` and ``events/``).
    spark : SparkSession or None
        For "spark"; ignored by "local".
    bias : bool
        Whether the model has a per-label bias (multiclass only).
    partitions : int or None
        Spark partitions, or number of in-process blocks for "local".
    watchdog : dict or None
        For "spark": ``no_executor_timeout_s``, ``pass_timeout_s``,
        ``pass_timeout_factor``, ``pass_timeout_floor_s`` and
        ``max_executor_losses`` of SparkBackend (FrameBackend takes the
        ``pass_timeout*`` ones); ignored by "local".
    min_partition_events : int
        Fewer partitions (blocks) than ``partitions`` where they would hold
        fewer events each (``data.min_partition_events``; 0: none): data of
        fewer than twice this many events is one partition
        (``spark.event_partitions`` says why).
    """
    if kind not in BACKENDS:
        raise ValueError(f"unknown backend {kind!r}: expected one of {sorted(BACKENDS)}")
    logger.debug("making a %s backend over %s", kind, dataset_dir)
    return BACKENDS[kind](
        dataset_dir, spark=spark, bias=bias, partitions=partitions, watchdog=watchdog,
        min_partition_events=min_partition_events,
    )  # fmt: skip
