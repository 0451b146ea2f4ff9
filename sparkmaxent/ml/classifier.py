"""``MaxEntClassifier`` and ``MaxEntClassificationModel``: the project's
training and scoring as a pyspark.ml Estimator and Model.

``fit(df)`` prepares the DataFrame with ``data.prepare.prepare_table`` into a
scratch directory (removed afterwards) and trains it with
``api.train_model``, the entry the command line uses, so the Estimator and
``sparkmaxent train`` fit the same model. ``transform(df)`` keeps every input
column and adds MLlib's prediction columns: Vectors and token arrays scored
by MLlib's own models (``ml/mllib.py``, ``ml/mllib_text.py``), other
columns in an Arrow UDF (``ml/scoring.py``) or SQL (ml/transform.py).

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
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import keyword_only
from pyspark.ml.classification import ProbabilisticClassificationModel, ProbabilisticClassifier
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable

from ..errors import InputError
from ..model import MaxentModel
from .base import MaxEntEstimator
from .mllib import MLlibExport, fitted_vector_size
from .params import AUTO, MaxEntParams
from .persistence import MaxEntReadable, MaxEntWritable
from .sql import SQLExport
from .summary import MaxEntClassificationSummary, MaxEntTrainingSummary
from .transform import MaxEntScoring


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


def indexed_names(df, col: str, n_classes: int) -> list[str] | None:
    """The label names a ``StringIndexer`` recorded on a numeric label
    column (its nominal ``ml_attr`` metadata), if one per class."""
    field = next((f for f in df.schema.fields if f.name == col), None)
    vals = ((field.metadata or {}).get("ml_attr") or {}).get("vals") if field else None
    return [str(v) for v in vals] if vals and len(vals) >= n_classes else None


def is_numeric(df, col: str) -> bool:
    from pyspark.sql.types import NumericType

    fields = {f.name: f.dataType for f in df.schema.fields}
    return isinstance(fields.get(col), NumericType)


class MaxEntClassifier(
    MaxEntEstimator,
    ProbabilisticClassifier,
    MaxEntParams,
    DefaultParamsReadable,
    DefaultParamsWritable,
):
    """Sparse conditional maxent (multinomial logistic regression) with the
    project's training methods and feature selection; a pyspark
    ``ProbabilisticClassifier``.

    Params (``explainParams()`` lists them with their schema keys):
    featuresCol (``array<string>``, ``map<string,double>`` or ``Vector``),
    labelCol, weightCol, predictionCol, probabilityCol, rawPredictionCol,
    thresholds; method (default ``"auto"``: grafting when l1 is set or
    elasticNetParam > 0, else l2), regParam, elasticNetParam, l1, l2, nBest,
    maxRounds, maxFeatures, standardization (default false, unlike MLlib),
    tol, maxIter, checkpointDir, warmStart and config (other keys by dotted
    name). A Param the chosen method does not read is refused by ``fit``.
    ``l1="auto"`` chooses gamma1 on held-out rows (validationIndicatorCol, or
    validationFraction of each label's rows) by the warm-started path of
    ``train.choice.path`` and refits the chosen point on all rows.
    """

    @keyword_only
    def __init__(
        self,
        *,
        featuresCol: str = "features",
        labelCol: str = "label",
        predictionCol: str = "prediction",
        probabilityCol: str = "probability",
        rawPredictionCol: str = "rawPrediction",
        weightCol: str | None = None,
        thresholds: list[float] | None = None,
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
        validationIndicatorCol: str | None = None,
        validationFraction: float = 0.2,
    ) -> None:
        super().__init__()
        self._set(**self._input_kwargs)

    @keyword_only
    def setParams(
        self,
        *,
        featuresCol: str = "features",
        labelCol: str = "label",
        predictionCol: str = "prediction",
        probabilityCol: str = "probability",
        rawPredictionCol: str = "rawPrediction",
        weightCol: str | None = None,
        thresholds: list[float] | None = None,
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
        validationIndicatorCol: str | None = None,
        validationFraction: float = 0.2,
    ) -> MaxEntClassifier:
        """Sets the Params given by keyword (the others keep their values)."""
        return self._set(**self._input_kwargs)

    def _data_params(self) -> tuple:
        return (*super()._data_params(), self.labelCol)

    def _validation_split(self, dataset) -> tuple:
        """(training rows, held-out rows): validationIndicatorCol's true rows
        are held out; else validationFraction of each label's rows, those
        first in the order of a seeded hash of the row (label, features,
        weight), as data/split.py orders its units: the same split on every
        run and partitioning."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        from ..data.columns import names_and_values

        if self.isSet(self.validationIndicatorCol):
            flag = self.getValidationIndicatorCol()
            if flag not in dataset.columns:
                raise InputError(
                    f"validationIndicatorCol {flag!r}: no such column (columns: "
                    f"{', '.join(dataset.columns)})"
                )
            held = F.coalesce(F.col(flag).cast("boolean"), F.lit(False))
            return dataset.where(~held), dataset.where(held)
        label = self.getLabelCol()
        names, values = names_and_values(dataset, "fit input", self.getFeaturesCol())
        weight = self.weight_col()
        parts = [F.col(label).cast("string"), names, values]
        parts += [F.col(weight)] if weight else []
        u, rank, size = "__sparkmaxent_u", "__sparkmaxent_rank", "__sparkmaxent_size"
        by_label = Window.partitionBy(label)
        ranked = dataset.withColumn(u, F.xxhash64(F.lit(0), *parts)).select(
            "*",
            F.row_number().over(by_label.orderBy(u)).alias(rank),
            F.count("*").over(by_label).alias(size),
        )
        held = F.col(rank) <= F.floor(
            F.col(size) * self.getOrDefault(self.validationFraction) + 0.5
        )
        ranked = ranked.withColumn(u, held).drop(rank, size)
        return ranked.where(~F.col(u)).drop(u), ranked.where(F.col(u)).drop(u)

    def _prepare_into(
        self, spark, dataset, train_dir: str, cfg, vocabulary: str | None = None
    ) -> dict:
        from ..data.options import PrepareOptions
        from ..data.prepare import prepare_table

        label_col = self.getLabelCol()
        settings = PrepareOptions.from_config(
            cfg.data,
            cfg.output,
            cutoff=0,
            vocabulary=vocabulary,
            merge_duplicates=vocabulary is None,
            overwrite=True,
            binary=cfg.data.binary if vocabulary is None else None,  # held-out rows follow
        )
        info = prepare_table(
            spark,
            dataset,
            train_dir,
            label_col=label_col,
            features_col=self.getFeaturesCol(),
            weight_col=self.weight_col(),
            settings=settings,
        )
        numeric = is_numeric(dataset, label_col)
        classes, n_classes = label_classes(list(info.labels), numeric, label_col)
        return {
            "classes": classes,
            "n_classes": n_classes,
            "numeric": numeric,
            "names": indexed_names(dataset, label_col, n_classes),
            "vector_size": fitted_vector_size(dataset, self.getFeaturesCol()),
        }

    def _model(self, maxent: MaxentModel, report: dict, extra: dict):
        model = MaxEntClassificationModel(
            maxent, extra["classes"], extra["n_classes"], extra["numeric"], report, extra["names"]
        )
        model._vector_size = extra["vector_size"]
        model._training = extra["dataset"]
        return model


class MaxEntClassificationModel(
    ProbabilisticClassificationModel,
    MaxEntParams,
    MaxEntWritable,
    MaxEntReadable,
    MLlibExport,
    SQLExport,
    MaxEntScoring,
):
    """A trained model, a pyspark ``ProbabilisticClassificationModel``:
    ``transform`` adds rawPrediction (``Vector`` of the scores w . f(x, k) +
    b_k, centered per row), probability (``Vector``) and prediction
    (``double`` class index, with the class names as nominal metadata) and
    keeps every input column; ``predict``, ``predictRaw`` and
    ``predictProbability`` score one row."""

    def __init__(
        self,
        maxent: MaxentModel | None = None,
        classes: np.ndarray | None = None,
        n_classes: int = 0,
        numeric_labels: bool = False,
        report: dict | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__()
        self._maxent = maxent
        self._classes = np.asarray(classes if classes is not None else [], dtype=np.int64)
        self._n_classes = int(n_classes)
        self._numeric = bool(numeric_labels)
        self._report = dict(report or {})
        self._label_names = list(label_names) if label_names else None
        self._training: Any = None  # the training DataFrame (the summary's), not saved
        #: the size of the Vectors fitted on (None: features of another kind)
        self._vector_size: int | None = None

    @property
    def maxentModel(self) -> MaxentModel:
        """The project's model (``model.py``): weights, space, labels, config."""
        if self._maxent is None:
            raise ValueError("this MaxEntClassificationModel holds no trained model")
        return self._maxent

    @property
    def numClasses(self) -> int:
        """Length of the probability and rawPrediction vectors."""
        return self._n_classes

    @property
    def numFeatures(self) -> int:
        """The size of the Vectors the model was fitted on (as MLlib's), or
        for names (``array<string>``, ``map``) the atomic predicates of the
        training data's dictionary."""
        if self._vector_size is not None:
            return self._vector_size
        return int(self.maxentModel.n_atoms)

    @property
    def labels(self) -> list[str]:
        """Name of each class index (the prediction column's values): the
        label string, or for a numeric label column indexed by
        ``StringIndexer`` the name it recorded; ``""`` for an index of a
        numeric label column absent in training."""
        out = [""] * self._n_classes
        for k, c in enumerate(self._classes):
            out[int(c)] = self.maxentModel.labels[k]
        if self._label_names:
            out = self._label_names[: self._n_classes]
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
        """The final KKT certificate over all candidates (grafting; problem/kkt.py), else None."""
        return self._report.get("kkt")

    @property
    def selectedFeatures(self):
        """A DataFrame (feature, label, weight) of every non-zero weight."""
        m = self.maxentModel
        values = m.weights.values[m.weights.values != 0]
        rows = [(n, lab, float(w)) for (n, lab), w in zip(m.selected_features(), values)]
        spark = self.spark_session()
        return spark.createDataFrame(rows, "feature string, label string, weight double")

    # ---- MLlib's coefficients -------------------------------------------
    @property
    def featureNames(self) -> list[str]:
        """The predicates the model uses: column j of ``coefficientMatrix``."""
        return self.scorer().names.to_pylist()

    @property
    def coefficientMatrix(self):
        """A ``SparseMatrix`` (numClasses x len(featureNames)): the weight of
        each used predicate per class on the raw feature values
        (standardization folded in); rows of classes absent in training are 0."""
        from pyspark.ml.linalg import DenseMatrix

        W, _ = self.scorer().linear()
        full = np.zeros((self._n_classes, W.shape[0]))
        full[self._classes] = W.T
        return DenseMatrix(*full.shape, full.ravel(order="F")).toSparse()

    @property
    def interceptVector(self):
        """A ``DenseVector`` of the per-class intercepts (-inf for a class
        absent in training, as its rawPrediction)."""
        from pyspark.ml.linalg import Vectors

        _, b = self.scorer().linear()
        full = np.full(self._n_classes, -np.inf)
        full[self._classes] = b
        return Vectors.dense(full)

    # ---- one row --------------------------------------------------------
    def _one(self, value) -> pa.StructArray:
        """Score one row given as a pyspark ``Vector`` (names are the
        indices), a list of predicate names or a dict name -> value."""
        from pyspark.ml.linalg import SparseVector, Vector

        if isinstance(value, SparseVector):
            names, values = [str(int(i)) for i in value.indices], [float(v) for v in value.values]
        elif isinstance(value, Vector):
            dense = value.toArray()
            nz = np.flatnonzero(dense)
            names, values = [str(int(i)) for i in nz], [float(v) for v in dense[nz]]
        elif isinstance(value, dict):
            names, values = [str(k) for k in value], [float(v) for v in value.values()]
        elif isinstance(value, (list, tuple)):
            names, values = [str(k) for k in value], [1.0] * len(value)
        else:
            raise TypeError(
                "expected a pyspark.ml Vector, a list of predicate names or a dict "
                f"name -> value, got {type(value).__name__}"
            )
        return self.scorer().multiclass(
            pa.array([names], pa.list_(pa.string())), pa.array([values], pa.list_(pa.float64()))
        )

    def predict(self, value) -> float:
        """The predicted class index of one row (see ``predictProbability``)."""
        return float(self._one(value).field("prediction")[0].as_py())

    def predictRaw(self, value):
        """The rawPrediction ``DenseVector`` of one row."""
        from pyspark.ml.linalg import Vectors

        return Vectors.dense(self._one(value).field("raw")[0].as_py())

    def predictProbability(self, value):
        """The probability ``DenseVector`` of one row: a pyspark ``Vector``
        (predicate names are its indices), a list of names or a dict."""
        from pyspark.ml.linalg import Vectors

        return Vectors.dense(self._one(value).field("probability")[0].as_py())

    # ---- summaries ------------------------------------------------------
    @property
    def hasSummary(self) -> bool:
        """Whether the training summary exists (not after ``load``, as MLlib)."""
        return self._training is not None

    @property
    def summary(self) -> MaxEntTrainingSummary:
        """The training summary: metrics on the training DataFrame and the objective history."""
        if self._training is None:
            raise RuntimeError("No training summary available for this MaxEntClassificationModel")
        predictions, label = self._evaluated(self._training)
        return MaxEntTrainingSummary(predictions, self, label)

    def evaluate(self, dataset) -> MaxEntClassificationSummary:
        """Metrics of the model on ``dataset`` (labelCol needed; string labels
        are mapped to the model's class indices)."""
        predictions, label = self._evaluated(dataset)
        return MaxEntClassificationSummary(predictions, self, label)

    def _evaluated(self, dataset):
        """(scored dataset, numeric label column) for the summaries."""
        from pyspark.sql import functions as F

        label = self.getLabelCol()
        scored = self.transform(dataset)
        if is_numeric(dataset, label):
            return scored, label
        index = "__sparkmaxent_label_index"
        pairs = [
            x
            for k, c in enumerate(self._classes)
            for x in (F.lit(self.maxentModel.labels[k]), F.lit(float(c)))
        ]
        return scored.withColumn(index, F.create_map(*pairs)[F.col(label).cast("string")]), index

    # ---- persistence ----------------------------------------------------
    def extra_metadata(self) -> dict:
        """What a saved model adds to pyspark.ml's metadata (persistence.py)."""
        return {
            "classes": self._classes.tolist(),
            "numClasses": self._n_classes,
            "numericLabels": self._numeric,
            "labelNames": self._label_names,
            "vectorSize": self._vector_size,
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
        model = cls(
            maxent,
            classes,
            meta["numClasses"],
            meta["numericLabels"],
            report,
            meta.get("labelNames"),
        )
        model._vector_size = meta.get("vectorSize")  # absent in models saved before it
        return model

    # ---- scoring (ml/transform.py) ---------------------------------------
    def _transform(self, dataset):
        return self._scored(dataset)


__all__ = ["MaxEntClassifier", "MaxEntClassificationModel", "label_classes"]
