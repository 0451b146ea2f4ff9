"""The write stage of ``prepare``: the dictionary and the events, by Spark.

Everything is written to a temporary sibling directory of ``out_dir``,
published to ``out_dir`` only when complete (``storage.publish``), and
removed on any failure. Events are range-partitioned by event_id, so part
files in name order hold the events in source order. Spark names list items ``element`` (pyarrow:
``item``): readers cast to ``schema.events_schema``.
"""

from __future__ import annotations

import pyarrow as pa

from .. import storage
from .schema import EVENTS_DIR, FEATURES_DIR, FEATURES_SCHEMA, KEYS_DIR, events_schema


def write_features(dictionary, tmp: str) -> int:
    """Write the feature dictionary in id order under ``tmp``; its size."""
    from pyspark.sql import functions as F

    features_dir = storage.join(tmp, FEATURES_DIR)
    (
        dictionary.repartition(1)
        .sortWithinPartitions("id")
        .select(*[F.col(f.name).cast(_spark_type(f.type)) for f in FEATURES_SCHEMA])
        .write.parquet(features_dir)
    )
    return parquet_rows(dictionary.sparkSession, features_dir)


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
    "write_features",
    "write_events",
    "write_keys",
    "parquet_rows",
]
