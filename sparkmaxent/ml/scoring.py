"""Scoring DataFrame rows with a trained model inside an Arrow UDF.

The model's weights and the names of the predicates it uses travel in the
UDF's closure, so scoring needs only the DataFrame API (no RDD, SparkContext,
broadcast or JVM access) and runs under Spark Connect too. Feature columns
are read by :func:`sparkmaxent.data.columns.names_and_values`, as in
training; each Arrow batch becomes one kernel block, scored by the training
kernels (``kernels/loss.py`` scores, ``kernels/softmax.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from ..kernels import MULTICLASS
from ..kernels.blocks import CandidateBlock, MulticlassBlock
from ..kernels.loss import candidate_scores, multiclass_scores
from ..kernels.softmax import row_softmax
from ..model import MaxentModel

SCORES_TYPE = "struct<prediction: double, probability: array<double>, raw: array<double>>"


@dataclass
class Scorer:
    """What the UDF closure carries: the model and its vocabulary.

    Attributes
    ----------
    model : MaxentModel
    names : pa.Array
        Names of the atomic predicates the model uses.
    ids : ndarray of int64
        Their predicate ids, aligned with ``names``.
    classes : ndarray of int64, shape (K,)
        Output class index of each model label (the prediction column's value).
    n_classes : int
        Length of the probability and rawPrediction vectors.
    """

    model: MaxentModel
    names: pa.Array
    ids: np.ndarray
    classes: np.ndarray
    n_classes: int

    @staticmethod
    def of(model: MaxentModel, classes: np.ndarray, n_classes: int) -> Scorer:
        used = sorted((i, n) for i, n in model.feature_names.items() if i < model.n_atoms)
        return Scorer(
            model,
            pa.array([n for _, n in used], pa.string()),
            np.asarray([i for i, _ in used], dtype=np.int64),
            np.asarray(classes, dtype=np.int64),
            int(n_classes),
        )

    def matrix(self, names: pa.Array, values: pa.Array, n_rows: int) -> sp.csr_matrix:
        """Predicate values of rows given as list arrays of names and values
        (null lists: no features); names the model does not use are dropped,
        repeated ones summed (as ``prepare`` does)."""
        lengths = pc.fill_null(pc.list_value_length(names), 0).to_numpy(zero_copy_only=False)
        flat = pc.list_flatten(names)
        vals = pc.list_flatten(values).to_numpy(zero_copy_only=False).astype(np.float64)
        pos = pc.index_in(flat, value_set=self.names)
        known = pos.is_valid().to_numpy(zero_copy_only=False)
        rows = np.repeat(np.arange(n_rows), lengths)[known]
        cols = self.ids[pos.drop_null().to_numpy(zero_copy_only=False)]
        X = sp.csr_matrix((vals[known], (rows, cols)), shape=(n_rows, self.model.n_atoms))
        X.sum_duplicates()
        return X

    def multiclass(self, names: pa.Array, values: pa.Array) -> pa.StructArray:
        """prediction, probability and raw scores of each row, by output
        class. The raw scores are S[i, k] = w . f(x_i, k) + b_k less their
        row mean, so softmax(raw) = probability and, with two classes, raw =
        [-d/2, d/2] grows with p(class 1) as BinaryClassificationEvaluator
        expects; a class the model never saw has probability 0 and raw -inf."""
        m = len(names)
        K = self.model.space.n_labels
        block = MulticlassBlock(self.matrix(names, values, m), np.zeros(m, np.int64), np.ones(m), K)
        expanded = self.model.expand(block)
        assert isinstance(expanded, MulticlassBlock), "expand keeps the block's shape"
        S = multiclass_scores(expanded, self.model.space, self.model.weights, self.model.scaling)
        P = row_softmax(S)[1]
        raw = np.full((m, self.n_classes), -np.inf)
        prob = np.zeros((m, self.n_classes))
        raw[:, self.classes], prob[:, self.classes] = S - S.mean(axis=1)[:, None], P
        offsets = pa.array(np.arange(0, m * self.n_classes + 1, self.n_classes, dtype=np.int32))
        return pa.StructArray.from_arrays(
            [
                pa.array(self.classes[S.argmax(axis=1)].astype(np.float64)),
                pa.ListArray.from_arrays(offsets, pa.array(prob.ravel())),
                pa.ListArray.from_arrays(offsets, pa.array(raw.ravel())),
            ],
            names=["prediction", "probability", "raw"],
        )

    def candidates(self, names: pa.Array, values: pa.Array) -> np.ndarray:
        """Score w . f(y) of each candidate row of a candidate-set model (it
        depends on the row alone; p(y | x) normalizes over the row's group)."""
        m = len(names)
        block = CandidateBlock(
            self.matrix(names, values, m), np.array([0, m]), np.zeros(m, bool), np.ones(1)
        )
        expanded = self.model.expand(block)
        assert isinstance(expanded, CandidateBlock), "expand keeps the block's shape"
        return candidate_scores(expanded, self.model.space, self.model.weights, self.model.scaling)


def score_column(scorer: Scorer, names, values):
    """A struct column (prediction, probability, raw) of a multiclass model,
    from the (names, values) columns of ``names_and_values``."""
    from pyspark.sql.functions import arrow_udf

    assert scorer.model.space.shape == MULTICLASS, "candidate-set models score rows one by one"

    @arrow_udf(SCORES_TYPE)  # type: ignore[call-overload]
    def score(n: pa.Array, v: pa.Array) -> pa.Array:
        return scorer.multiclass(n, v)

    return score(names, values)


def candidate_score_column(scorer: Scorer, names, values):
    """A double column: the score w . f(y) of each candidate row of a
    candidate-set model."""
    from pyspark.sql.functions import arrow_udf

    assert scorer.model.space.shape != MULTICLASS, "multiclass models: score_column"

    @arrow_udf("double")  # type: ignore[call-overload]
    def score(n: pa.Array, v: pa.Array) -> pa.Array:
        return pa.array(scorer.candidates(n, v), pa.float64())

    return score(names, values)


__all__ = ["Scorer", "score_column", "candidate_score_column", "SCORES_TYPE"]
