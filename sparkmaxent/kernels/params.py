"""The candidate feature space, sparse weights over it, and standardization.

Feature numbering (docs/design.md, notation): for multiclass events a feature is a
(predicate p, label k) pair with id ``j = p * n_labels + k``; for candidate
sets a feature id is the column of the candidate feature vectors. Multiclass
models may also carry a per-label bias (intercept) that is never penalized,
as in scikit-learn's ``fit_intercept=True`` and Spark MLlib.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..shapes import CANDIDATES, SHAPES

# Below this fill ratio the multiclass weight matrix is kept sparse.
DENSE_FILL = 1.0 / 16


@dataclass(frozen=True)
class Space:
    """Shape of a model's candidate feature space.

    Attributes
    ----------
    shape : {"multiclass", "candidates"}
    n_predicates : int
        Predicates P (multiclass) or features D (candidate sets).
    n_labels : int
        Labels K (multiclass); 1 for candidate sets.
    bias : bool
        Whether a per-label unpenalized bias is part of the model
        (multiclass only).
    """

    shape: str
    n_predicates: int
    n_labels: int
    bias: bool = False

    def __post_init__(self):
        if self.shape not in SHAPES:
            raise ValueError(f"expected event shape in {SHAPES}, got {self.shape!r}")
        if self.shape == CANDIDATES and (self.n_labels != 1 or self.bias):
            raise ValueError("candidate-set models have n_labels=1 and no bias")

    @property
    def n_features(self) -> int:
        """Number of candidate features (excluding the bias)."""
        return self.n_predicates * self.n_labels

    @property
    def n_bias(self) -> int:
        return self.n_labels if self.bias else 0

    @property
    def n_params(self) -> int:
        """Length of the dense parameter vector ``[w, b]``."""
        return self.n_features + self.n_bias

    def split(self, feature_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Predicate and label of each feature id."""
        ids = np.asarray(feature_ids, dtype=np.int64)
        return ids // self.n_labels, ids % self.n_labels


@dataclass(frozen=True)
class Scaling:
    """Standardization x' = (x - mean) * inv_scale, per predicate.

    ``inv_scale`` is 0 for predicates of zero variance (they carry no
    information), as in Spark MLlib. Centering is applied implicitly (it
    would destroy sparsity): for multiclass events it shifts each label's
    score by a constant; for candidate sets it shifts all candidates of an
    event alike and so cancels in the softmax, which the kernels exploit.

    Attributes
    ----------
    mean : ndarray, shape (n_predicates,)
    inv_scale : ndarray, shape (n_predicates,)
    """

    mean: np.ndarray
    inv_scale: np.ndarray


@dataclass(frozen=True)
class Weights:
    """Sparse weights over a Space: the active features and the bias.

    Attributes
    ----------
    ids : ndarray of int64, shape (n_active,), or None
        Feature ids, strictly increasing; None means dense weights over all
        ``space.n_features`` features (saves shipping the ids every pass).
    values : ndarray of float64, shape (n_active,) or (n_features,)
    bias : ndarray of float64, shape (n_labels,) or None
    """

    ids: np.ndarray | None
    values: np.ndarray
    bias: np.ndarray | None = None

    @staticmethod
    def zeros(space: Space) -> Weights:
        return Weights(
            np.zeros(0, dtype=np.int64),
            np.zeros(0),
            np.zeros(space.n_labels) if space.bias else None,
        )

    @staticmethod
    def from_dense(space: Space, theta: np.ndarray, sparse: bool = True) -> Weights:
        """From a dense parameter vector ``[w (n_features), b (n_bias)]``;
        with ``sparse`` only the non-zero weights are kept."""
        w = np.asarray(theta[: space.n_features], dtype=np.float64)
        bias = np.array(theta[space.n_features :], dtype=np.float64) if space.bias else None
        if not sparse:
            return Weights(None, w.copy(), bias)
        ids = np.flatnonzero(w)
        return Weights(ids, w[ids], bias)

    def sparse(self) -> Weights:
        """The same weights with only non-zero entries listed."""
        ids = self.active_ids()
        keep = self.values != 0
        return Weights(ids[keep], self.values[keep], self.bias)

    def active_ids(self) -> np.ndarray:
        return np.arange(len(self.values), dtype=np.int64) if self.ids is None else self.ids

    def to_dense(self, space: Space) -> np.ndarray:
        theta = np.zeros(space.n_params)
        theta[self.active_ids()] = self.values
        if space.bias:
            theta[space.n_features :] = self.bias
        return theta

    @property
    def nnz(self) -> int:
        return int(np.count_nonzero(self.values))

    def matrix(self, space: Space):
        """The weights as a (n_predicates, n_labels) matrix: dense when
        filled enough, else CSR."""
        shape = (space.n_predicates, space.n_labels)
        if self.ids is None:
            return self.values.reshape(shape)
        p, k = space.split(self.ids)
        if len(self.ids) >= DENSE_FILL * space.n_features:
            W = np.zeros(shape)
            W[p, k] = self.values
            return W
        return sp.csr_matrix((self.values, (p, k)), shape=shape)
