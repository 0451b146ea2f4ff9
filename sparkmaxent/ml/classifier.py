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

import math

import numpy as np
from pyspark.ml import Model
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable

from ..errors import InputError
from ..model import MaxentModel
from .base import MaxEntEstimator
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


class MaxEntClassifier(MaxEntEstimator, MaxEntParams, DefaultParamsReadable, DefaultParamsWritable):
    """Sparse conditional maxent (multinomial logistic regression) with the
    project's training methods and feature selection.

    Params (``explainParams()`` lists them with their schema keys):
    featuresCol (``array<string>``, ``map<string,double>`` or ``Vector``),
    labelCol, weightCol, predictionCol, probabilityCol, rawPredictionCol;
    method, regParam, elasticNetParam, l1, l2, nBest, maxRounds, maxFeatures,
    standardization (default false, unlike MLlib), tol, maxIter,
    checkpointDir, warmStart and config (other keys by dotted name). regParam
    and elasticNetParam mean MLlib's penalty on the loss averaged over event
    weight (``params.penalty_keys``).
    """

    def setLabelCol(self, value: str) -> MaxEntClassifier:
        return self._set(labelCol=value)

    def _data_params(self) -> tuple:
        return (*super()._data_params(), self.labelCol)

    def _prepare_into(self, spark, dataset, train_dir: str, cfg) -> dict:
        from ..data.prepare import prepare_table

        label_col = self.getLabelCol()
        info = prepare_table(
            spark,
            dataset,
            train_dir,
            label_col=label_col,
            features_col=self.getFeaturesCol(),
            weight_col=self.weight_col(),
            partitions=cfg.data.partitions or None,
            overwrite=True,
            lock_stale_s=cfg.output.lock_stale_s,
            in_process_max_events=cfg.data.in_process_max_events,
        )
        numeric = is_numeric(dataset, label_col)
        classes, n_classes = label_classes(list(info.labels), numeric, label_col)
        return {"classes": classes, "n_classes": n_classes, "numeric": numeric}

    def _model(self, maxent: MaxentModel, report: dict, extra: dict):
        return MaxEntClassificationModel(
            maxent, extra["classes"], extra["n_classes"], extra["numeric"], report
        )


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
        m = self.maxentModel
        values = m.weights.values[m.weights.values != 0]
        rows = [(n, lab, float(w)) for (n, lab), w in zip(m.selected_features(), values)]
        spark = self.spark_session()
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

        from ..data.columns import ARRAY, feature_kind, names_and_values

        where, col = "transform input", self.getFeaturesCol()
        names, values = names_and_values(dataset, where, col)
        binary = feature_kind(dataset, where, col) == ARRAY  # values all 1.0: not shipped
        scored = dataset.withColumn(
            _SCORES, score_column(self.scorer(), names, None if binary else values)
        )
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
