"""The write stage of ``prepare``: the dictionary, the events and ``dataset.json``.

Everything is written to a temporary sibling directory of ``out_dir``,
published to ``out_dir`` only when complete (``storage.publish``), and
removed on any failure. Events are range-partitioned by event_id, so part
files in name order hold the events in source order. Spark names list items ``element`` (pyarrow:
``item``): readers cast to ``schema.events_schema``.
"""

from __future__ import annotations

import pyarrow as pa

from .. import storage
from .load import dataset_fingerprints
from .options import PrepareOptions
from .raw import RawSource
from .schema import (
    EVENTS_DIR,
    FEATURES_DIR,
    FEATURES_SCHEMA,
    KEYS_DIR,
    DatasetInfo,
    events_schema,
)


def write_features(dictionary: pa.Table, tmp: str) -> int:
    """Write the (feature, id, count) dictionary (in id order) under ``tmp``
    as one file, from the driver's process (both engines); its size."""
    path = storage.join(tmp, FEATURES_DIR, "part-00000.parquet")
    storage.write_parquet(path, dictionary.cast(FEATURES_SCHEMA))
    return dictionary.num_rows


def write_events(events, tmp: str, shape: str, n_parts: int) -> int:
    """Write indexed events in ``n_parts`` files under ``tmp``; their number."""
    from pyspark.sql import functions as F

    events = events.select(*[F.col(f.name).cast(_spark_type(f.type)) for f in events_schema(shape)])
    # Range partitioning by event_id keeps source order across and within files.
    events_dir = storage.join(tmp, EVENTS_DIR)
    (
        events.repartitionByRange(n_parts, "event_id")
        .sortWithinPartitions("event_id")
        .write.parquet(events_dir)
    )
    return parquet_rows(events.sparkSession, events_dir)


def save_info(
    spark,
    tmp: str,
    src: RawSource,
    labels: list[str],
    counts: dict,
    settings: PrepareOptions,
    vocab_info: DatasetInfo | None,
    in_process: bool,
) -> DatasetInfo:
    """The DatasetInfo of the dataset written in ``tmp``, fingerprinted and
    saved there as ``dataset.json``: ``counts`` holds n_ids, n_events,
    total_weight, quarantined, unknown_features, feature_occurrences,
    unknown_labels and unseen_labels; the ``settings``
    (resolved: merge_duplicates, vocabulary, partitions, binary) join the
    source. ``in_process``: fingerprinted in this process, not on Spark."""
    n_ids, n_events = int(counts["n_ids"]), int(counts["n_events"])
    info = DatasetInfo(
        shape=src.shape,
        n_features=n_ids,
        labels=labels,
        n_events=n_events,
        total_weight=float(counts["total_weight"]),
        source=dict(src.source),
        cutoff=int(settings.cutoff) if vocab_info is None else int(vocab_info.cutoff),
        quarantined=int(counts["quarantined"]),
        unknown_features=int(counts["unknown_features"]),
        feature_occurrences=int(counts["feature_occurrences"]),
        unknown_labels=int(counts["unknown_labels"]),
        unseen_labels=list(counts["unseen_labels"]),
        **dataset_fingerprints(spark, tmp, src.shape, n_ids, labels, in_process),
    )
    info.source.update(
        merge_duplicates=settings.merge_duplicates,
        vocabulary=settings.vocabulary,
        partitions=settings.partitions,
        binary=settings.binary,
    )
    info.save(tmp)
    return info


def write_keys(events, key_col: str, tmp: str) -> None:
    """Write (event_id, ``key_col``) of raw events carrying ``key`` under
    ``tmp``: what predictions join on to carry the user's key."""
    from pyspark.sql import functions as F

    events.select("event_id", F.col("key").alias(key_col)).write.parquet(
        storage.join(tmp, KEYS_DIR)
    )


def parquet_rows(spark, directory: str) -> int:
    """Rows of a Parquet directory on any file system, counted by Spark from
    the files' footers (no data crosses to the driver)."""
    return int(spark.read.parquet(directory).count())


def _spark_type(t: pa.DataType):
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(t)


__all__ = [
    "save_info",
    "write_features",
    "write_events",
    "write_keys",
    "parquet_rows",
]
