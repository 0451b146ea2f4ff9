"""Creating the Spark session the jobs and tests use."""

from __future__ import annotations

import os
import sys

# Spark binds to the machine's external interface unless told otherwise; local
# runs and tests here stay on loopback, so nothing listens on the network.
LOOPBACK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
DEFAULT_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
}


def spark_session(
    master: str | None = "local[2]", app_name: str = "sparkmaxent", conf: dict | None = None
):
    """Get or create a SparkSession.

    Executors must run the driver's Python (else "No module named pyarrow"),
    so PYSPARK_PYTHON defaults to this interpreter. With a ``local`` master
    (or none, when spark-submit set it) the driver binds to 127.0.0.1 unless
    ``conf`` says otherwise.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    settings = dict(DEFAULT_CONF)
    if os.environ.get("SPARK_LOCAL_IP", "127.0.0.1").startswith("127."):
        settings.update(LOOPBACK_CONF)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    return builder.getOrCreate()
