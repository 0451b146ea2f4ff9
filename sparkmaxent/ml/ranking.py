"""``MaxEntRanker`` and ``MaxEntRankingModel``: candidate-set models
(parse reranking, TADM's shape) over ranking tables with one row per
candidate: a group (the event), the candidate's features and whether it is
correct (docs/design.md, candidate-set events).

``fit`` prepares the table with ``data.prepare.prepare_candidate_table``
and trains it as ``sparkmaxent train`` trains a ``tadm`` dataset;
``transform`` adds the candidate's score w . f(y), its probability within
its group, p(y | x) = exp(w . f(y)) / sum over the group, and a prediction
flag, true for the group's best-scoring candidates (all of them on a tie).
"""

from __future__ import annotations

from pyspark import keyword_only
from pyspark.ml import Model
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import HasProbabilityCol
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable

from ..config import ConfigError
from ..model import MaxentModel
from .base import MaxEntEstimator, refuse_existing_columns, scoring_binary
from .params import AUTO, TrainingParams, with_accessors
from .persistence import MaxEntReadable, MaxEntWritable
from .scoring import Scorer, candidate_score_column


class RankingParams(HasProbabilityCol, TrainingParams):
    """Params of the ranker and its model (with the training ones)."""

    groupCol = Param(
        Params._dummy(),
        "groupCol",
        "the candidate set (event) of a row",
        typeConverter=TypeConverters.toString,
    )
    correctCol = Param(
        Params._dummy(),
        "correctCol",
        "whether the candidate is correct: boolean, or numeric with > 0 meaning correct",
        typeConverter=TypeConverters.toString,
    )
    scoreCol = Param(
        Params._dummy(),
        "scoreCol",
        "output: the candidate's score w . f(y)",
        typeConverter=TypeConverters.toString,
    )

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(groupCol="group", correctCol="correct", scoreCol="score")


with_accessors(RankingParams)


class MaxEntRanker(MaxEntEstimator, RankingParams, DefaultParamsReadable, DefaultParamsWritable):
    """A candidate-set maxent model with the project's training methods.

    Params: groupCol, featuresCol (``array<string>``, ``map<string,double>``
    or ``Vector``), correctCol, weightCol (the same on every row of a group),
    and the outputs scoreCol, probabilityCol (double) and predictionCol
    (boolean); the training Params are MaxEntClassifier's.
    """

    @keyword_only
    def __init__(
        self,
        *,
        groupCol: str = "group",
        featuresCol: str = "features",
        correctCol: str = "correct",
        weightCol: str | None = None,
        scoreCol: str = "score",
        probabilityCol: str = "probability",
        predictionCol: str = "prediction",
        method: str = AUTO,
        regParam: float = 0.0,
        elasticNetParam: float = 0.0,
        l1: float | str = 1.0e-4,
        l2: float | str = 1.0e-4,
        nBest: int = 10,
        maxRounds: int = 0,
        maxFeatures: int = 0,
        standardization: bool = False,
        tol: float = 1.0e-7,
        maxIter: int = 1000,
        binary: bool = False,
        checkpointDir: str = "",
        warmStart: bool = True,
        config: dict | None = None,
    ) -> None:
        super().__init__()
        self._set(**self._input_kwargs)

    @keyword_only
    def setParams(
        self,
        *,
        groupCol: str = "group",
        featuresCol: str = "features",
        correctCol: str = "correct",
        weightCol: str | None = None,
        scoreCol: str = "score",
        probabilityCol: str = "probability",
        predictionCol: str = "prediction",
        method: str = AUTO,
        regParam: float = 0.0,
        elasticNetParam: float = 0.0,
        l1: float | str = 1.0e-4,
        l2: float | str = 1.0e-4,
        nBest: int = 10,
        maxRounds: int = 0,
        maxFeatures: int = 0,
        standardization: bool = False,
        tol: float = 1.0e-7,
        maxIter: int = 1000,
        binary: bool = False,
        checkpointDir: str = "",
        warmStart: bool = True,
        config: dict | None = None,
    ) -> MaxEntRanker:
        """Sets the Params given by keyword (the others keep their values)."""
        return self._set(**self._input_kwargs)

    def _data_params(self) -> tuple:
        return (*super()._data_params(), self.groupCol, self.correctCol)

    def _validation_split(self, dataset) -> tuple:
        raise ConfigError(
            "MaxEntRanker: no 'auto' penalty yet (held-out candidate sets); give l1 or l2, "
            "or tune them with CrossValidator"
        )

    def _prepare_into(
        self, spark, dataset, train_dir: str, cfg, vocabulary: str | None = None
    ) -> dict:
        from ..data.options import PrepareOptions
        from ..data.prepare import prepare_candidate_table

        prepare_candidate_table(
            spark,
            dataset,
            train_dir,
            group_col=self.getOrDefault(self.groupCol),
            features_col=self.getFeaturesCol(),
            correct_col=self.getOrDefault(self.correctCol),
            weight_col=self.weight_col(),
            settings=PrepareOptions.from_config(
                cfg.data, cfg.output, cutoff=0, overwrite=True, binary=cfg.data.binary
            ),
        )
        return {}

    def _model(self, maxent: MaxentModel, report: dict, extra: dict):
        return MaxEntRankingModel(maxent, report)


class MaxEntRankingModel(Model, RankingParams, MaxEntWritable, MaxEntReadable):
    """A trained candidate-set model; ``transform`` keeps every input column
    and adds scoreCol, probabilityCol and predictionCol (``""`` leaves a
    column out)."""

    def __init__(self, maxent: MaxentModel | None = None, report: dict | None = None) -> None:
        super().__init__()
        self._maxent = maxent
        self._report = dict(report or {})

    @property
    def maxentModel(self) -> MaxentModel:
        if self._maxent is None:
            raise ValueError("this MaxEntRankingModel holds no trained model")
        return self._maxent

    @property
    def report(self) -> dict:
        return self._report

    @property
    def certificate(self) -> dict | None:
        return self._report.get("kkt")

    @property
    def selectedFeatures(self):
        """A DataFrame (feature, weight) of every non-zero weight."""
        m = self.maxentModel
        values = m.weights.values[m.weights.values != 0]
        rows = [(n, float(w)) for (n, _), w in zip(m.selected_features(), values)]
        return self.spark_session().createDataFrame(rows, "feature string, weight double")

    def extra_metadata(self) -> dict:
        return {}

    @classmethod
    def from_saved(cls, maxent: MaxentModel, meta: dict, report: dict):
        return cls(maxent, report)

    def _transform(self, dataset):
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        from ..data.columns import names_and_values

        outs = (self.scoreCol, self.probabilityCol, self.predictionCol)
        refuse_existing_columns(dataset, [n for n in map(self.getOrDefault, outs) if n])
        names, values = names_and_values(dataset, "transform input", self.getFeaturesCol())
        scorer = Scorer.of(self.maxentModel, [0], 1, binary=scoring_binary(self))
        score = "__sparkmaxent_score"
        group = Window.partitionBy(self.getOrDefault(self.groupCol))
        top = F.max(score).over(group)
        outputs = {}
        if self.getOrDefault(self.scoreCol):
            outputs[self.getOrDefault(self.scoreCol)] = F.col(score)
        if self.getProbabilityCol():
            e = F.exp(F.col(score) - top)
            outputs[self.getProbabilityCol()] = e / F.sum(e).over(group)
        if self.getPredictionCol():
            outputs[self.getPredictionCol()] = F.col(score) == top
        scored = dataset.withColumn(score, candidate_score_column(scorer, names, values))
        return scored.withColumns(outputs).drop(score)


__all__ = ["MaxEntRanker", "MaxEntRankingModel"]
