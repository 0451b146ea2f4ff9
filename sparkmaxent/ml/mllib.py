"""A classification model as MLlib's own ``LogisticRegressionModel``.

A multiclass model without conjunctions scores a row as S_k = x . W_k + b_k
over its predicates (``Scorer.linear``, standardization folded in). Given
Vectors its predicates are the Vector's indices, so the model is a
multinomial logistic regression over that index space: MLlib's
``coefficientMatrix`` (numClasses x numFeatures) and ``interceptVector``.
Centering both over the classes the model knows (W_k - mean_k W_k, b_k -
mean_k b_k) makes MLlib's margins equal to this project's rawPrediction
(S less its row mean), so probability (softmax) and prediction (argmax, or
the largest p_k / t_k with ``thresholds``) are equal too; a class absent in
training has intercept -inf (raw -inf, probability 0, as ``Scorer``).
Predicates that are no index below numFeatures never occur in such a
Vector and are dropped.

What does not map is refused (:class:`NotMLlib`, naming why): conjunction
features and candidate-set models (not linear in the Vector), a model
trained on binary predicates (it scores presence, MLlib the stored value),
fewer than two classes, a zero threshold (MLlib's p / 0 is +inf even where
p = 0). ``fit`` records the size of the Vectors it was given (the column's
``ml_attr`` metadata, as ``CountVectorizer``, ``HashingTF`` and
``VectorAssembler`` write it, else the one size of every row), and
``transform`` of a Vector column uses MLlib's model for Vectors of that
size: the JVM scores it, no Python worker and no SQL text. A classic
session builds it from the coefficients in its JVM. A Spark Connect client
builds no JVM object from given coefficients (pyspark's Connect
``LogisticRegressionModel`` has no such constructor; only ``fit`` and
``load`` make one on the server), so there the model is written once with
``save_mllib`` and loaded on the server (``ml/mllib_stored.py``); with no
location to write it, ``transform`` scores the Vectors with the SQL
expressions (``ml/sql.py``), also in the JVM with no Python worker, to the
same predictions. A column whose metadata gives another
size is refused, naming the column (its indices are other features). A
null Vector scores as an empty one, as the other scorers do (MLlib alone
would fail on it).

``saveMLlib`` writes MLlib's saved-model layout (``metadata/`` JSON text,
``data/`` Parquet) with DataFrame writers only, so it works under Spark
Connect and on any file system Spark writes to; Scala, Java, Python and
SQL users load it with ``LogisticRegressionModel.load``.
"""

from __future__ import annotations

import json
import logging
import time

import numpy as np

from ..errors import InputError
from ..session_kind import is_connect
from .mllib_stored import NotMLlib, stored_mllib_model
from .scoring import Scorer
from .sql import _is_index

log = logging.getLogger(__name__)

#: MLlib's model class, as its saved metadata names it
MLLIB_CLASS = "org.apache.spark.ml.classification.LogisticRegressionModel"
#: numClasses x numFeatures above which the coefficients are stored sparse
#: (:func:`_matrices`); a dense matrix scores sparse Vectors fastest
DENSE_LIMIT = 1 << 24
#: the column transform hands MLlib: the features, a null Vector as an empty one
_FEATURES = "__sparkmaxent_vector"


def refuse(scorer: Scorer, num_features: int, values: bool = True) -> None:
    """NotMLlib naming why ``scorer`` has no MLlib form (module docstring).
    ``values``: the Vectors hold values MLlib scores as they are, which a
    binary model does not (a vocabulary's binary Vectors hold presence:
    ``values=False``, ml/mllib_text.py)."""
    if scorer.compact is None:
        raise NotMLlib(
            "the model scores conjunctions of predicates or candidate sets: it is not "
            "linear in the Vector"
        )
    if values and scorer.binary:
        raise NotMLlib(
            "the model was trained on binary predicates (it scores a value's presence; "
            "MLlib scores the value)"
        )
    if scorer.n_classes < 2:
        raise NotMLlib(f"numClasses is {scorer.n_classes}; MLlib needs at least 2")
    if scorer.thresholds is not None and np.any(scorer.thresholds == 0):
        raise NotMLlib("a threshold is 0 (MLlib's p / 0 is +inf even where p = 0)")
    if num_features < 1:
        raise NotMLlib(f"numFeatures must be >= 1, got {num_features}")


def mllib_form(scorer: Scorer, num_features: int):
    """(coefficients numClasses x numFeatures as a scipy CSR matrix,
    intercepts numClasses) of MLlib's multinomial ``LogisticRegressionModel``
    scoring Vectors of size ``num_features`` as ``scorer`` does (module
    docstring); NotMLlib when there is none. Sparse, so a vocabulary of
    millions costs memory for the model's weights only."""
    refuse(scorer, num_features)
    names = scorer.names.to_pylist()
    rows = [j for j, n in enumerate(names) if _is_index(n) and int(n) < num_features]
    index = np.asarray([int(names[j]) for j in rows], dtype=np.int64)
    return centered_form(scorer, np.asarray(rows, dtype=np.int64), index, num_features)


def centered_form(scorer: Scorer, rows: np.ndarray, index: np.ndarray, num_features: int):
    """(coefficients numClasses x ``num_features`` CSR, intercepts) of the
    linear form's predicate ``rows`` (positions in ``scorer.names``) at
    Vector indices ``index``, weights and intercepts centered over the
    classes the model knows (module docstring), -inf for the intercept of
    a class absent in training."""
    from scipy import sparse

    W, b = scorer.linear()
    W = W - W.mean(axis=1, keepdims=True)
    b = b - b.mean()
    block = W[rows].T  # (classes the model knows) x (its Vector indices)
    k, j = np.nonzero(block)
    shape = (scorer.n_classes, num_features)
    coefficients = sparse.csr_matrix((block[k, j], (scorer.classes[k], index[j])), shape=shape)
    intercepts = np.full(scorer.n_classes, -np.inf)
    intercepts[scorer.classes] = b
    return coefficients, intercepts


def _matrices(coefficients, intercepts: np.ndarray, dense_limit: int = DENSE_LIMIT):
    """(pyspark Matrix, DenseVector) of :func:`mllib_form`'s CSR
    ``coefficients``: dense column-major up to ``dense_limit`` entries
    (MLlib's product with a sparse Vector then reads each of the Vector's
    entries' K weights side by side), else sparse row-major (MLlib's
    ``isTransposed`` CSR: its product with a sparse Vector walks each
    class's weights; the column-major sparse form walks every column up to
    the Vector's last index, on every row)."""
    from pyspark.ml.linalg import DenseMatrix, Matrix, SparseMatrix, Vectors

    K, N = coefficients.shape
    matrix: Matrix
    if K * N <= dense_limit:
        matrix = DenseMatrix(K, N, coefficients.toarray().ravel(order="F"))
    else:
        csr = coefficients.tocsr()
        csr.sort_indices()
        matrix = SparseMatrix(K, N, csr.indptr, csr.indices, csr.data, isTransposed=True)
    return matrix, Vectors.dense(intercepts)


def vector_size(dataset, column: str) -> int | None:
    """The Vector size the ``ml_attr`` metadata of ``column`` records
    (``num_attrs``, or one past the largest attribute index), else None."""
    field = next((f for f in dataset.schema.fields if f.name == column), None)
    attr = ((field.metadata or {}).get("ml_attr") or {}) if field else {}
    if "num_attrs" in attr:
        return int(attr["num_attrs"])
    indices = [a.get("idx", -1) for group in (attr.get("attrs") or {}).values() for a in group]
    return max(indices) + 1 if indices else None


def fitted_vector_size(df, col: str) -> int | None:
    """The size of the Vectors in ``col``: its ``ml_attr`` metadata, else
    the one size every non-null row has (one pass); None when ``col`` holds
    no Vectors or Vectors of several sizes (which MLlib's model refuses: the
    Arrow scorer, which reads indices, scores them)."""
    from pyspark.sql import functions as F

    from ..data.columns import VECTOR, feature_kind

    if feature_kind(df, "fit input", col) != VECTOR:
        return None
    size = vector_size(df, col)
    if size is None:
        # row-based: an Arrow UDF cannot read a UDT column from Parquet
        sizes = F.udf(lambda v: None if v is None else int(v.size), "int", useArrow=False)
        low, high = df.select(F.min(sizes(col)), F.max(sizes(col))).first()
        size = low if low == high else None
    return size


def checked_size(dataset, column: str, fitted: int | None) -> int | None:
    """The size of the Vectors in ``column``: its ``ml_attr`` metadata's,
    else ``fitted`` (the size the model was fitted on; None for a model
    saved before it was recorded); an InputError naming the column when the
    two disagree (another vocabulary: its indices are other features)."""
    size = vector_size(dataset, column)
    if size is not None and fitted is not None and size != fitted:
        raise InputError(
            f"featuresCol {column!r}: its Vectors have size {size} (the column's ml_attr "
            f"metadata) but the model was fitted on Vectors of size {fitted}; index the "
            "features with the CountVectorizer, HashingTF or VectorAssembler model the "
            "training data was indexed with"
        )
    return fitted if size is None else size


def _outputs(lr, model, features_col: str):
    """``lr`` with ``model``'s features, output columns and thresholds."""
    lr.setFeaturesCol(features_col)
    lr.setRawPredictionCol(model.getRawPredictionCol())
    lr.setProbabilityCol(model.getProbabilityCol())
    lr.setPredictionCol(model.getPredictionCol())
    if model.isDefined(model.thresholds) and model.getThresholds() is not None:
        lr.setThresholds(list(model.getThresholds()))
    return lr


def mllib_model(model, num_features: int):
    """``model`` (a ``MaxEntClassificationModel``) as a pyspark
    ``LogisticRegressionModel`` with the model's Params: built in the
    classic session's JVM from the coefficients, or under Spark Connect
    loaded on the server from files written once (ml/mllib_stored.py);
    NotMLlib if it has no such form or, under Connect, no location to
    write it."""
    scorer = model.scorer()
    refuse(scorer, num_features)
    lr = built_model(model, "_mllib", num_features, lambda: mllib_form(scorer, num_features))
    return _outputs(lr.copy(), model, model.getFeaturesCol())


def built_model(model, slot: str, num_features: int, form):
    """MLlib's ``LogisticRegressionModel`` of ``form()`` ((coefficients,
    intercepts) over Vectors of ``num_features``), without thresholds or
    column Params: built in the classic session's JVM, or under Spark
    Connect written with ``save_mllib`` and loaded on the server
    (ml/mllib_stored.py); kept in the model's attribute ``slot`` under the
    model's weights, ``num_features`` (and the Connect session) and built
    again when they change. ``form`` is called only to build it."""
    from pyspark.ml.classification import LogisticRegressionModel
    from pyspark.ml.common import _py2java

    spark = model.spark_session()
    if is_connect(spark):  # no JVM here: built on the server from files (ml/mllib_stored.py)

        def save(path: str) -> None:
            save_mllib(model, path, num_features, thresholds=False, form=form())

        return stored_mllib_model(model, num_features, save, slot)
    key = (id(model.maxentModel), num_features)
    cached = getattr(model, slot, None)
    if cached is None or cached[0] != key:
        coefficients, intercepts = form()
        matrix, vector = _matrices(coefficients, intercepts)
        sc = spark.sparkContext
        jvm_class = getattr(sc._jvm, MLLIB_CLASS)
        java = jvm_class(
            model.uid, _py2java(sc, matrix), _py2java(sc, vector), len(intercepts), True
        )
        cached = (key, LogisticRegressionModel._from_java(java))
        setattr(model, slot, cached)
    return cached[1]


def mllib_transform(model, dataset, features_col: str, size: int | None, required: bool):
    """``dataset`` scored by MLlib's model for Vectors of ``size``
    (:func:`checked_size`; every column, then rawPrediction, probability
    and prediction as MLlib adds them), or None with a log line when the
    model or session does not allow it (``required``: raise NotMLlib instead)."""
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    try:
        if size is None:
            raise NotMLlib(
                f"featuresCol {features_col!r} has no ml_attr metadata giving the Vector size "
                "and the model (saved before it recorded one) knows none"
            )
        lr = mllib_model(model, size)
    except NotMLlib as why:
        if required:
            raise
        # the caller scores in SQL (Spark Connect, scoring "sql") or the Arrow UDF
        log.info("transform scores the Vectors without MLlib's model: %s", why)
        return None
    vector = F.col(features_col)
    empty = array_to_vector(F.array_repeat(F.lit(0.0), size))
    lr.setFeaturesCol(_FEATURES)
    guarded = dataset.withColumn(_FEATURES, F.when(vector.isNull(), empty).otherwise(vector))
    return lr.transform(guarded).drop(_FEATURES)


def save_mllib(
    model,
    path: str,
    num_features: int,
    overwrite: bool = False,
    thresholds: bool = True,
    form: tuple | None = None,
) -> None:
    """Write ``model`` at ``path`` in MLlib's ``LogisticRegressionModel``
    layout (metadata JSON text, Parquet data) with DataFrame writers only,
    the metadata last: an interrupted save leaves nothing loadable.
    ``thresholds``: whether the model's thresholds go into its Params;
    ``form``: (coefficients, intercepts) to write (default: Vectors whose
    indices are the predicate names, :func:`mllib_form`)."""
    from pyspark.ml.linalg import MatrixUDT, VectorUDT
    from pyspark.sql.types import BooleanType, IntegerType, StructField, StructType

    from .. import storage
    from .persistence import path_exists

    scorer = model.scorer()
    matrix, vector = _matrices(*(form or mllib_form(scorer, num_features)))
    if storage.exists(path):
        if not overwrite:
            raise path_exists(path)
        storage.delete(path)
    spark = model.spark_session()
    schema = StructType(
        [
            StructField("numClasses", IntegerType(), False),
            StructField("numFeatures", IntegerType(), False),
            StructField("interceptVector", VectorUDT(), True),
            StructField("coefficientMatrix", MatrixUDT(), True),
            StructField("isMultinomial", BooleanType(), False),
        ]
    )
    data = [(scorer.n_classes, num_features, vector, matrix, True)]
    spark.createDataFrame(data, schema).repartition(1).write.parquet(storage.join(path, "data"))
    params = {
        "featuresCol": model.getFeaturesCol(),
        "rawPredictionCol": model.getRawPredictionCol(),
        "probabilityCol": model.getProbabilityCol(),
        "predictionCol": model.getPredictionCol(),
        "family": "multinomial",
    }
    if thresholds and scorer.thresholds is not None:
        params["thresholds"] = scorer.thresholds.tolist()
    metadata = {
        "class": MLLIB_CLASS,
        "timestamp": int(time.time() * 1000),
        "sparkVersion": spark.version,
        "uid": model.uid,
        "paramMap": params,
        "defaultParamMap": {},
    }
    text = spark.createDataFrame([(json.dumps(metadata),)], "value string")
    text.repartition(1).write.text(storage.join(path, "metadata"))


class MLlibExport:
    """``toMLlib`` and ``saveMLlib`` of a ``MaxEntClassificationModel``."""

    def toMLlib(self, numFeatures: int):
        """This model as MLlib's ``LogisticRegressionModel`` scoring Vectors
        of size ``numFeatures`` (e.g. ``len(countVectorizerModel.vocabulary)``)
        with equal rawPrediction, probability and prediction, and this
        model's column Params and thresholds; under Spark Connect loaded on
        the server from files written once (ml/mllib_stored.py gives where).
        Raises NotMLlib (a ValueError) naming why a model has no such form
        or, under Connect, no location to write it (ml/mllib.py)."""
        return mllib_model(self, int(numFeatures))

    def saveMLlib(self, path: str, numFeatures: int, overwrite: bool = False) -> None:
        """Save this model in MLlib's own ``LogisticRegressionModel`` format
        at ``path`` (any path Spark writes to; an existing one only with
        ``overwrite``): ``LogisticRegressionModel.load(path)`` in Python,
        Scala or Java gives :meth:`toMLlib`'s model, also under Spark Connect."""
        save_mllib(self, path, int(numFeatures), overwrite)


__all__ = [
    "MLlibExport",
    "NotMLlib",
    "built_model",
    "centered_form",
    "checked_size",
    "fitted_vector_size",
    "mllib_form",
    "mllib_transform",
    "save_mllib",
]
