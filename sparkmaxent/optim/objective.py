"""The regularized objective over a set of features (DESIGN.md section 1).

    C(w) = L(w) + (gamma2 / 2) ||w||_2^2

with L the event-weight-averaged negative conditional log-likelihood, so
gamma2 means what Spark MLlib's regParam (elasticNetParam=0) and
scikit-learn's 1 / (C * sum of sample weights) mean. The bias is never
penalized. One call is one pass over the data returning loss and gradient.
"""
from __future__ import annotations

import numpy as np

from ..backends import Backend
from ..kernels import LossGrad, LossGradTask, Scaling, Weights


class Objective:
    """C(theta) and its gradient, theta = [w over ``ids``, bias].

    Parameters
    ----------
    backend : Backend
    ids : ndarray of int64 or None
        The features the weights range over; None for all of them.
    l2 : float
        gamma2 >= 0.
    scaling : Scaling or None
    """

    def __init__(self, backend: Backend, ids: np.ndarray | None, l2: float = 0.0,
                 scaling: Scaling | None = None):
        if l2 < 0:
            raise ValueError(f"expected l2 >= 0, got {l2}")
        self.backend = backend
        self.space = backend.space
        self.ids = None if ids is None else np.asarray(ids, dtype=np.int64)
        self.n_weights = self.space.n_features if ids is None else len(self.ids)
        self.l2 = l2
        self.scaling = scaling
        self.evaluations = 0
        self.last: LossGrad | None = None

    def weights(self, theta: np.ndarray) -> Weights:
        n = self.n_weights
        return Weights(self.ids, np.asarray(theta[:n], dtype=np.float64),
                       np.asarray(theta[n:], dtype=np.float64) if self.space.bias else None)

    def theta(self, weights: Weights) -> np.ndarray:
        """The parameter vector of ``weights`` restricted to ``self.ids``."""
        dense = weights.to_dense(self.space)
        w = dense[: self.space.n_features] if self.ids is None else dense[self.ids]
        return np.concatenate([w, dense[self.space.n_features:]])

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        self.evaluations += 1
        weights = self.weights(theta)
        lg = self.backend.run(LossGradTask(self.space, weights, self.scaling, self.ids))
        if lg.weight <= 0:
            raise ValueError("the training events have zero total weight")
        self.last = lg
        w = weights.values
        f = lg.loss / lg.weight + 0.5 * self.l2 * float(w @ w)
        g = lg.grad / lg.weight + self.l2 * w
        if lg.grad_bias is not None:
            g = np.concatenate([g, lg.grad_bias / lg.weight])
        return f, g
