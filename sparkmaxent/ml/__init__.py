"""The pyspark.ml API: Estimators and Models with pyspark.ml Params,
persistence and tuning (docs/python-api.md)."""

from .classifier import MaxEntClassificationModel, MaxEntClassifier

__all__ = ["MaxEntClassifier", "MaxEntClassificationModel"]
