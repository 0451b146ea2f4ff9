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

from ..data.indexing import presence
from ..kernels import MULTICLASS, Scaling, Space, Weights
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
    compact : tuple of (Space, Weights, Scaling or None), or None
        A multiclass model without conjunctions restricted to the used
        predicates (predicate j is ``names[j]``), weights dense: each batch's
        matrix then has one column per used predicate and the scores are one
        sparse-by-dense product (``kernels.loss.multiclass_scores``). A
        predicate the model does not use has no weight in any label, so the
        scores are those of the full model.
    thresholds : ndarray or None
        MLlib's ``thresholds`` (one per output class).
    binary : bool
        The model was trained on binary predicates (``prepare(binary=True)``):
        a row's summed values are scored as their presence
        (``data.indexing.presence``), as its training data was prepared.
    """

    model: MaxentModel
    names: pa.Array
    ids: np.ndarray
    classes: np.ndarray
    n_classes: int
    compact: tuple[Space, Weights, Scaling | None] | None = None
    thresholds: np.ndarray | None = None
    binary: bool = False

    @staticmethod
    def of(
        model: MaxentModel,
        classes: np.ndarray,
        n_classes: int,
        thresholds: np.ndarray | None = None,
        binary: bool = False,
    ) -> Scorer:
        """``thresholds`` (one per output class): MLlib's ``thresholds``
        Param, the prediction is the class of largest p_k / t_k; ``binary``:
        score presence (:attr:`Scorer.binary`)."""
        used = sorted((i, n) for i, n in model.feature_names.items() if i < model.n_atoms)
        ids = np.asarray([i for i, _ in used], dtype=np.int64)
        return Scorer(
            model,
            pa.array([n for _, n in used], pa.string()),
            ids,
            np.asarray(classes, dtype=np.int64),
            int(n_classes),
            _compact(model, ids),
            None if thresholds is None else np.asarray(thresholds, dtype=np.float64),
            bool(binary),
        )

    def linear(self) -> tuple[np.ndarray, np.ndarray]:
        """(W, b) with scores S[i, k] = x_i . W[:, k] + b[k] on the raw
        predicate values, x_i over ``names`` (standardization folded in:
        w' = w inv_scale, b' = b - sum_j w'_j mean_j), by model label. Only a
        model without conjunctions has this form (ValueError)."""
        if self.compact is None:
            raise ValueError(
                "this model scores conjunctions of predicates (or names a predicate it "
                "cannot name): it has no linear form over its predicates"
            )
        space, weights, scaling = self.compact
        W = weights.values.reshape(space.n_predicates, space.n_labels).copy()
        b = np.zeros(space.n_labels) if weights.bias is None else weights.bias.astype(float)
        if scaling is not None:
            W *= scaling.inv_scale[:, None]
            b = b - scaling.mean @ W
        return W, b

    def predictions(self, prob: np.ndarray, S: np.ndarray) -> np.ndarray:
        """The predicted output class of each row: argmax of the scores, or
        with ``thresholds`` of p_k / t_k as MLlib's
        ``ProbabilisticClassificationModel`` (a zero threshold wins where
        p_k > 0); ``prob`` by output class."""
        if self.thresholds is None:
            return self.classes[S.argmax(axis=1)].astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = np.nan_to_num(prob / self.thresholds, nan=0.0, posinf=np.inf)
        return scaled.argmax(axis=1).astype(np.float64)

    def matrix(self, names: pa.Array, values: pa.Array | None, n_rows: int) -> sp.csr_matrix:
        """Predicate values of rows given as list arrays of names and values
        (null lists: no features; no ``values``: 1.0 each); names the model
        does not use are dropped, repeated ones summed (as ``prepare``
        does; with ``binary`` then scored as their presence). Columns are
        predicate ids, or positions in ``names`` with a ``compact`` model."""
        flat = pc.list_flatten(names)
        pos = pc.index_in(flat, value_set=self.names)
        known = pos.is_valid().to_numpy(zero_copy_only=False)
        rows = pc.list_parent_indices(names).to_numpy()[known]
        cols = pos.drop_null().to_numpy(zero_copy_only=False).astype(np.int64)
        if values is None:
            vals = np.ones(len(cols))
        else:
            vals = pc.list_flatten(values).to_numpy(zero_copy_only=False).astype(np.float64)[known]
        width = len(self.ids) if self.compact is not None else self.model.n_atoms
        indptr = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
        X = sp.csr_matrix(
            (vals, cols if self.compact is not None else self.ids[cols], indptr),
            shape=(n_rows, width),
        )
        X.sum_duplicates()
        if self.binary:
            X.data = presence(X.data)
        return X

    def scores(self, names: pa.Array, values: pa.Array | None) -> np.ndarray:
        """S[i, k] = w . f(x_i, k) + b_k of each row, by model label."""
        m = len(names)
        K = self.model.space.n_labels
        block = MulticlassBlock(self.matrix(names, values, m), np.zeros(m, np.int64), np.ones(m), K)
        if self.compact is not None:
            return multiclass_scores(block, *self.compact)
        expanded = self.model.expand(block)
        assert isinstance(expanded, MulticlassBlock), "expand keeps the block's shape"
        return multiclass_scores(expanded, self.model.space, self.model.weights, self.model.scaling)

    def multiclass(self, names: pa.Array, values: pa.Array | None) -> pa.StructArray:
        """prediction, probability and raw scores of each row, by output
        class. The raw scores are S[i, k] = w . f(x_i, k) + b_k less their
        row mean, so softmax(raw) = probability and, with two classes, raw =
        [-d/2, d/2] grows with p(class 1) as BinaryClassificationEvaluator
        expects; a class the model never saw has probability 0 and raw -inf."""
        S = self.scores(names, values)
        m = len(S)
        P = row_softmax(S)[1]
        centered = S - S.mean(axis=1)[:, None]
        if np.array_equal(self.classes, np.arange(self.n_classes)):
            raw, prob = centered, P  # every class is a model label, in order
        else:
            raw = np.full((m, self.n_classes), -np.inf)
            prob = np.zeros((m, self.n_classes))
            raw[:, self.classes], prob[:, self.classes] = centered, P
        offsets = pa.array(np.arange(0, m * self.n_classes + 1, self.n_classes, dtype=np.int32))
        return pa.StructArray.from_arrays(
            [
                pa.array(self.predictions(prob, S)),
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


def score_column(scorer: Scorer, names, values=None):
    """A struct column (prediction, probability, raw) of a multiclass model,
    from the (names, values) columns of ``names_and_values`` (no ``values``:
    binary predicates, and no values column to ship to the UDF)."""
    from pyspark.sql.functions import arrow_udf

    assert scorer.model.space.shape == MULTICLASS, "candidate-set models score rows one by one"

    if values is None:

        @arrow_udf(SCORES_TYPE)  # type: ignore[call-overload]
        def score_names(n: pa.Array) -> pa.Array:
            return scorer.multiclass(n, None)

        return score_names(names)

    @arrow_udf(SCORES_TYPE)  # type: ignore[call-overload]
    def score(n: pa.Array, v: pa.Array) -> pa.Array:
        return scorer.multiclass(n, v)

    return score(names, values)


def _compact(model: MaxentModel, ids: np.ndarray) -> tuple[Space, Weights, Scaling | None] | None:
    """``Scorer.compact`` of a multiclass model without conjunctions (else None)."""
    space = model.space
    if space.shape != MULTICLASS or model.conjunctions is not None:
        return None
    K = space.n_labels
    p, k = space.split(model.weights.active_ids())
    at = np.minimum(np.searchsorted(ids, p), max(len(ids) - 1, 0))
    found = ids[at] == p if len(ids) else np.zeros(len(p), bool)
    if np.any(model.weights.values[~found] != 0):
        return None  # a weighted predicate without a name: score with the full model
    W = np.zeros((len(ids), K))
    W[at[found], k[found]] = model.weights.values[found]
    compact = Space(MULTICLASS, len(ids), K, space.bias)
    scaling = model.scaling
    if scaling is not None:
        scaling = Scaling(scaling.mean[ids], scaling.inv_scale[ids])
    return compact, Weights(None, W.ravel(), model.weights.bias), scaling


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
