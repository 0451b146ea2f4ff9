"""What kind of Spark session a job runs in, for the layers below the
backends (data preparation, storage): a classic session or a Spark Connect
client, and how many partitions it runs in parallel."""

from __future__ import annotations


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect client session (a thin gRPC client:
    no SparkContext, RDDs, broadcasts or ``_jvm``), told by its class so that
    the Connect client's own dependencies need not be importable."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark) -> int:
    """The SparkContext's default parallelism; under Connect (no SparkContext)
    ``spark.default.parallelism`` if set, else ``spark.sql.shuffle.partitions``."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    value = spark.conf.get("spark.default.parallelism", None)
    return max(1, int(value or spark.conf.get("spark.sql.shuffle.partitions", "8")))
