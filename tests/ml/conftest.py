"""One small fitted model shared by the pyspark.ml tests (a fit prepares
the DataFrame on Spark: seconds each)."""

from __future__ import annotations

import pytest

from sparkmaxent.ml import MaxEntClassificationModel, MaxEntClassifier

from .data import frame

GRAFTING = {"method": "grafting", "l1": 0.01}


@pytest.fixture(scope="session")
def df(spark):
    return frame(spark)


@pytest.fixture(scope="session")
def model(df) -> MaxEntClassificationModel:
    return MaxEntClassifier(**GRAFTING).fit(df)
