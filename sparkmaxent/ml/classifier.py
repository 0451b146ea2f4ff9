"""``MaxEntClassifier`` and ``MaxEntClassificationModel``: the project's
training and scoring as a pyspark.ml Estimator and Model.

``fit(df)`` prepares the DataFrame with ``data.prepare.prepare_table`` into a
scratch directory (removed afterwards) and trains it with
``api.train_model``, the entry the command line uses, so the Estimator and
``sparkmaxent train`` fit the same model. ``transform(df)`` keeps every input
column and adds MLlib's prediction columns, scored in an Arrow UDF
(``ml/scoring.py``).

Labels. A numeric label column holds class indices, as in MLlib: values must
be integers >= 0; the prediction is the class index and the probability
vector has ``max label + 1`` entries. Any other label column (strings,
booleans) is indexed as ``StringIndexer(stringOrderType="alphabetAsc")``
would: class i is the i-th label in sorted order. ``model.labels[i]`` is the
label string of class i either way. MLlib's evaluators need a numeric label
column, so index string labels first (``StringIndexer``) to evaluate.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark import keyword_only
from pyspark.ml import Estimator, Model
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable

from ..errors import InputError
from ..model import MaxentModel
from .params import MaxEntParams
from .persistence import MaxEntReadable, MaxEntWritable
from .scoring import Scorer, score_column

#: the temporary column transform scores into
_SCORES = "__sparkmaxent_scores"


def label_classes(labels: list[str], numeric: bool, label_col: str) -> tuple[np.ndarray, int]:
    """(output class of each model label, number of classes). Model labels
    (sorted strings, as ``prepare`` lists them) of a numeric column are
    class indices and must be integers >= 0."""
    if not numeric:
        return np.arange(len(labels)), len(labels)
    classes = []
    for s in labels:
        x = float(s)
        if not (math.isfinite(x) and x >= 0 and x == int(x)):
            raise InputError(
                f"labelCol {label_col!r}: a numeric label column holds class indices "
                f"(integers >= 0, as in MLlib), got {s}; index other labels with "
                "StringIndexer or give a string column"
            )
        classes.append(int(x))
    return np.asarray(classes, dtype=np.int64), max(classes) + 1


def is_numeric(df, col: str) -> bool:
    from pyspark.sql.types import NumericType

    fields = {f.name: f.dataType for f in df.schema.fields}
    return isinstance(fields.get(col), NumericType)


class MaxEntClassifier(Estimator, MaxEntParams, DefaultParamsReadable, DefaultParamsWritable):
    """Sparse conditional maxent (multinomial logistic regression) with the
    project's training methods and feature selection.

    Params (``explainParams()`` lists them with their schema keys):
    featuresCol (``array<string>``, ``map<string,double>`` or ``Vector``),
    labelCol, weightCol, predictionCol, probabilityCol, rawPredictionCol;
    method, regParam, elasticNetParam, l1, l2, nBest, maxRounds, maxFeatures,
    standardization (default false, unlike MLlib), tol, maxIter,
    checkpointDir and config (other keys by dotted name). regParam and
    elasticNetParam mean MLlib's penalty on the loss averaged over event
    weight (``params.penalty_keys``).
    """

    _input_kwargs: dict[str, Any]

    @keyword_only
    def __init__(self, **kwargs) -> None:
        super().__init__()
        self._set(**self._input_kwargs)

    @keyword_only
    def setParams(self, **kwargs) -> MaxEntClassifier:
        return self._set(**self._input_kwargs)

    def setMethod(self, value: str) -> MaxEntClassifier:
        return self._set(method=value)

    def setRegParam(self, value: float) -> MaxEntClassifier:
        return self._set(regParam=value)

    def setElasticNetParam(self, value: float) -> MaxEntClassifier:
        return self._set(elasticNetParam=value)

    def setL1(self, value: float) -> MaxEntClassifier:
        return self._set(l1=value)

    def setL2(self, value: float) -> MaxEntClassifier:
        return self._set(l2=value)

    def setNBest(self, value: int) -> MaxEntClassifier:
        return self._set(nBest=value)

    def setConfig(self, value: dict) -> MaxEntClassifier:
        return self._set(config=value)

    def setFeaturesCol(self, value: str) -> MaxEntClassifier:
        return self._set(featuresCol=value)

    def setLabelCol(self, value: str) -> MaxEntClassifier:
        return self._set(labelCol=value)

    def setWeightCol(self, value: str) -> MaxEntClassifier:
        return self._set(weightCol=value)

    def _fit(self, dataset) -> MaxEntClassificationModel:
        with self._prepared(dataset) as prepared:
            return self._train(prepared)

    def fitMultiple(self, dataset, paramMaps):
        """One model per param map (CrossValidator, TrainValidationSplit),
        all trained on one preparation of ``dataset`` when the maps change
        training Params only."""
        from pyspark.ml.base import _FitMultipleIterator

        names = {p.name for p in data_params(self)}
        if any(p.name in names for pm in paramMaps for p in pm):
            return super().fitMultiple(dataset, paramMaps)
        with self._prepared(dataset) as prepared:
            models = [self.copy(pm)._train(prepared) for pm in paramMaps]
        return _FitMultipleIterator(lambda i: models[i], len(models))

    @contextmanager
    def _prepared(self, dataset) -> Iterator[Prepared]:
        """``dataset`` prepared (``prepare_table``) into a scratch directory
        under checkpointDir (else output.scratch_dir, else the driver's
        temporary directory), removed on exit."""
        from .. import api
        from ..data.prepare import prepare_table

        cfg = self.training_config()
        spark = dataset.sparkSession
        label_col = self.getLabelCol()
        weight_col = self.getOrDefault(self.weightCol) if self.isDefined(self.weightCol) else None
        scratch = dataclasses.replace(
            cfg.output, scratch_dir=self.getOrDefault(self.checkpointDir) or cfg.output.scratch_dir
        )
        with api.scratch_for(spark, dataclasses.replace(cfg, output=scratch), None) as work:
            train_dir = f"{work}/train"
            info = prepare_table(
                spark,
                dataset,
                train_dir,
                label_col=label_col,
                features_col=self.getFeaturesCol(),
                weight_col=weight_col or None,
                partitions=cfg.data.partitions or None,
                overwrite=True,
                lock_stale_s=cfg.output.lock_stale_s,
            )
            numeric = is_numeric(dataset, label_col)
            classes, n_classes = label_classes(list(info.labels), numeric, label_col)
            yield Prepared(spark, train_dir, classes, n_classes, numeric)

    def _train(self, prepared: Prepared) -> MaxEntClassificationModel:
        """Train this estimator's configuration on a prepared dataset with
        ``api.train_model`` (what ``sparkmaxent train`` runs)."""
        from .. import api

        maxent, report = api.train_model(prepared.spark, self.training_config(), prepared.train_dir)
        # the scratch dictionary goes away: the model's vocabulary is its used features
        maxent = dataclasses.replace(maxent, dictionary="")
        model = MaxEntClassificationModel(
            maxent, prepared.classes, prepared.n_classes, prepared.numeric, report
        )
        return self._copyValues(model)


def data_params(est: MaxEntParams) -> tuple:
    """Params that change what ``fit`` prepares (``config`` may hold data keys)."""
    return (est.featuresCol, est.labelCol, est.weightCol, est.checkpointDir, est.config)


@dataclass
class Prepared:
    """A training DataFrame prepared for ``api.train_model``, with its label mapping."""

    spark: Any
    train_dir: str
    classes: np.ndarray
    n_classes: int
    numeric: bool


class MaxEntClassificationModel(Model, MaxEntParams, MaxEntWritable, MaxEntReadable):
    """A trained model; ``transform`` adds rawPrediction (``Vector`` of the
    scores w . f(x, k) + b_k, centered per row), probability (``Vector``)
    and prediction (``double`` class index) and keeps every input column."""

    def __init__(
        self,
        maxent: MaxentModel | None = None,
        classes: np.ndarray | None = None,
        n_classes: int = 0,
        numeric_labels: bool = False,
        report: dict | None = None,
    ) -> None:
        super().__init__()
        self._maxent = maxent
        self._classes = np.asarray(classes if classes is not None else [], dtype=np.int64)
        self._n_classes = int(n_classes)
        self._numeric = bool(numeric_labels)
        self._report = dict(report or {})

    @property
    def maxentModel(self) -> MaxentModel:
        """The project's model (``model.py``): weights, space, labels, config."""
        if self._maxent is None:
            raise ValueError("this MaxEntClassificationModel holds no trained model")
        return self._maxent

    @property
    def numClasses(self) -> int:
        return self._n_classes

    @property
    def labels(self) -> list[str]:
        """Label string of each class index (the prediction column's values);
        ``""`` for an index of a numeric label column absent in training."""
        out = [""] * self._n_classes
        for k, c in enumerate(self._classes):
            out[int(c)] = self.maxentModel.labels[k]
        return out

    @property
    def numericLabels(self) -> bool:
        """Whether the label column was numeric (values are class indices)."""
        return self._numeric

    @property
    def report(self) -> dict:
        """The run report (``train_report.json`` of ``sparkmaxent train``)."""
        return self._report

    @property
    def certificate(self) -> dict | None:
        """The final KKT certificate over all candidates (the grafting
        methods; ``problem/kkt.py``), else None."""
        return self._report.get("kkt")

    @property
    def selectedFeatures(self):
        """A DataFrame (feature, label, weight) of every non-zero weight."""
        from pyspark.sql import SparkSession

        m = self.maxentModel
        values = m.weights.values[m.weights.values != 0]
        rows = [(n, lab, float(w)) for (n, lab), w in zip(m.selected_features(), values)]
        spark = SparkSession.active()
        return spark.createDataFrame(rows, "feature string, label string, weight double")

    def extra_metadata(self) -> dict:
        """What a saved model adds to pyspark.ml's metadata (persistence.py)."""
        return {
            "classes": self._classes.tolist(),
            "numClasses": self._n_classes,
            "numericLabels": self._numeric,
        }

    @classmethod
    def from_saved(cls, maxent: MaxentModel, meta: dict, report: dict):
        classes = np.asarray(meta["classes"], dtype=np.int64)
        if len(classes) != len(maxent.labels) or (
            len(classes) and not 0 <= classes.min() <= classes.max() < meta["numClasses"]
        ):
            raise InputError(
                f"saved model metadata: classes {classes.tolist()[:5]}... do not match the "
                f"model's {len(maxent.labels)} labels and numClasses {meta['numClasses']}"
            )
        return cls(maxent, classes, meta["numClasses"], meta["numericLabels"], report)

    def scorer(self) -> Scorer:
        return Scorer.of(self.maxentModel, self._classes, self._n_classes)

    def _transform(self, dataset):
        from pyspark.ml.functions import array_to_vector
        from pyspark.sql import functions as F

        from ..data.columns import names_and_values

        names, values = names_and_values(dataset, "transform input", self.getFeaturesCol())
        scored = dataset.withColumn(_SCORES, score_column(self.scorer(), names, values))
        outputs = {}
        for param, field in (
            (self.rawPredictionCol, "raw"),
            (self.probabilityCol, "probability"),
            (self.predictionCol, "prediction"),
        ):
            name = self.getOrDefault(param)
            if name:
                col = F.col(f"{_SCORES}.{field}")
                outputs[name] = col if field == "prediction" else array_to_vector(col)
        return scored.withColumns(outputs).drop(_SCORES)


__all__ = ["MaxEntClassifier", "MaxEntClassificationModel", "label_classes"]
