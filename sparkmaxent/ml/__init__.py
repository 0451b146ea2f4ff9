"""The pyspark.ml API: Estimators and Models with pyspark.ml Params,
persistence and tuning (docs/python-api.md)."""

from .classifier import MaxEntClassificationModel, MaxEntClassifier
from .ranking import MaxEntRanker, MaxEntRankingModel

__all__ = ["MaxEntClassifier", "MaxEntClassificationModel", "MaxEntRanker", "MaxEntRankingModel"]
