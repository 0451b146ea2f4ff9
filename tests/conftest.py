"""One Spark session for the whole test run (chispa's habit), on loopback."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

SHARED_DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


@pytest.fixture(scope="session")
def spark():
    from sparkmaxent.backends.session import spark_session

    session = spark_session(
        "local[2]",
        "sparkmaxent-tests",
        {
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.ui.enabled": "false",  # the UI is on by default; no use in tests
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def shared_data():
    """Path to ../shared/data; tests that need it skip with a clear message."""
    if not os.path.isdir(SHARED_DATA):
        pytest.skip(f"shared corpora not found at {SHARED_DATA}")
    return SHARED_DATA
