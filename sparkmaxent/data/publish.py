"""The publish stage of ``prepare``: write the dataset, then move it into place.

Everything is written to a temporary sibling directory of ``out_dir``,
renamed to ``out_dir`` only when complete, and removed on any failure.
Events are range-partitioned by event_id, so part files in name order hold
the events in source order. Spark names list items ``element`` (pyarrow:
``item``): readers cast to ``schema.events_schema``.
"""

from __future__ import annotations

import os
import shutil
import uuid

import pyarrow as pa

from .readers import InputError
from .schema import EVENTS_DIR, FEATURES_DIR, FEATURES_SCHEMA, events_schema


def temp_sibling(out_dir: str, tag: str) -> str:
    """A fresh hidden path next to ``out_dir``: ``.<name>.<tag>-<random>``."""
    parent, name = os.path.split(os.path.abspath(out_dir).rstrip("/"))
    return os.path.join(parent, f".{name}.{tag}-{uuid.uuid4().hex[:8]}")


def check_out_dir(out_dir: str, overwrite: bool) -> None:
    """Refuse an existing ``out_dir`` unless ``overwrite``."""
    if os.path.exists(out_dir) and not overwrite:
        raise InputError(
            f"output directory {out_dir} exists: expected a new path, or "
            "overwrite=True (--overwrite) to replace it"
        )


def publish(tmp: str, out_dir: str, overwrite: bool) -> None:
    """Rename the complete ``tmp`` to ``out_dir``; an old ``out_dir`` is moved
    aside first and removed only once the new one is in place."""
    out_dir = os.path.abspath(out_dir)
    check_out_dir(out_dir, overwrite)
    if os.path.exists(out_dir):
        old = temp_sibling(out_dir, "old")
        os.rename(out_dir, old)
        try:
            os.rename(tmp, out_dir)
        except BaseException:
            os.rename(old, out_dir)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, out_dir)


def write_features(dictionary, tmp: str) -> int:
    """Write the feature dictionary in id order under ``tmp``; its size."""
    from pyspark.sql import functions as F

    features_dir = os.path.join(tmp, FEATURES_DIR)
    (
        dictionary.repartition(1)
        .sortWithinPartitions("id")
        .select(*[F.col(f.name).cast(_spark_type(f.type)) for f in FEATURES_SCHEMA])
        .write.parquet(features_dir)
    )
    return parquet_rows(features_dir)


def write_events(events, tmp: str, shape: str, n_parts: int) -> int:
    """Write indexed events in ``n_parts`` files under ``tmp``; their number."""
    from pyspark.sql import functions as F

    events = events.select(*[F.col(f.name).cast(_spark_type(f.type)) for f in events_schema(shape)])
    # Range partitioning by event_id keeps source order across and within files.
    events_dir = os.path.join(tmp, EVENTS_DIR)
    (
        events.repartitionByRange(n_parts, "event_id")
        .sortWithinPartitions("event_id")
        .write.parquet(events_dir)
    )
    return parquet_rows(events_dir)


def parquet_rows(directory: str) -> int:
    """Rows in the Parquet files of a local directory, from their footers."""
    import pyarrow.parquet as pq

    return sum(
        pq.read_metadata(os.path.join(directory, name)).num_rows
        for name in os.listdir(directory)
        if name.endswith(".parquet")
    )


def _spark_type(t: pa.DataType):
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(t)


__all__ = [
    "temp_sibling",
    "check_out_dir",
    "publish",
    "write_features",
    "write_events",
    "parquet_rows",
]
