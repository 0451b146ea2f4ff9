"""The data fit over a set of features, computed over the blocks through a
backend, with the smooth part of the penalty (``penalty.py``) added:

    C(w) = L(w) + (gamma2 / 2) ||w||_2^2

with L the event-weight-averaged negative conditional log-likelihood, so
gamma2 means what Spark MLlib's regParam (elasticNetParam=0) and
scikit-learn's 1 / (C * sum of sample weights) mean. The bias is never
penalized. One call is one pass over the data returning loss and gradient;
every pass's loss, gradient and Hessian must be finite, else NumericError
(``errors.check_finite``). A ray pass's trial values are not checked: a
non-finite one is a step the line search rejects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backends import Backend
from ..errors import check_finite, check_total_weight
from ..kernels import LossGrad, LossGradTask, Scaling, Weights
from ..kernels.curvature import Curvature, CurvatureTask
from ..kernels.direction import HessianProductTask, LocalDirectionTask
from ..kernels.loss import PointsTask, RayTask
from ..kernels.thresholded import ThresholdedGradient, WithPartialTask


@dataclass
class Evaluation:
    """One pass, normalized: C and its derivatives at theta = [w over ids, bias].

    Attributes
    ----------
    value : float
        C(theta) = L + gamma2/2 ||w||^2 (no l1 term: solvers add it).
    grad : ndarray, shape (n_weights + n_bias,)
    hess : ndarray, shape (n_weights + n_bias,) * 2, or None
        Hessian of C (candidate sets: its PSD part, see kernels/curvature.py).
    full_grad : ndarray, shape (n_features,), or None
        dC/dw_j for every candidate feature j (the gradient test), when asked for.
    lossgrad : LossGrad
        The raw sums of the pass (loss, weight, correct).
    partial : ThresholdedGradient or None
        In place of ``full_grad`` on an Objective with a ``PartialCut``: the
        thresholded test's partials at the pass's weights.
    """

    value: float
    grad: np.ndarray
    hess: np.ndarray | None
    full_grad: np.ndarray | None
    lossgrad: LossGrad
    partial: ThresholdedGradient | None = None


@dataclass(frozen=True)
class PartialCut:
    """How an Objective's full-gradient passes ship the gradient test: as
    the thresholded test's partials (``kernels/thresholded.py``) at cut
    ``gamma1_cut`` (``partial_cut`` times gamma1_tested), at most ``keep``
    entries a block, the test's active features the non-zero weights when
    the round ``prunes`` zeros (else all)."""

    gamma1_cut: float
    keep: int | None
    prunes: bool


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
    partials : PartialCut or None
        Full-gradient passes ship the thresholded test's partials
        (``Evaluation.partial``) instead of the dense gradient.
    """

    def __init__(
        self,
        backend: Backend,
        ids: np.ndarray | None,
        l2: float = 0.0,
        scaling: Scaling | None = None,
        partials: PartialCut | None = None,
    ):
        if l2 < 0:
            raise ValueError(f"expected l2 >= 0, got {l2}")
        self.backend = backend
        self.space = backend.space
        self.ids = None if ids is None else np.asarray(ids, dtype=np.int64)
        self.n_weights = self.space.n_features if ids is None else len(ids)
        self.l2 = l2
        self.scaling = scaling
        self.partials = partials
        self.evaluations = 0
        self.last: LossGrad | None = None

    def weights(self, theta: np.ndarray) -> Weights:
        n = self.n_weights
        return Weights(
            self.ids,
            np.asarray(theta[:n], dtype=np.float64),
            np.asarray(theta[n:], dtype=np.float64) if self.space.bias else None,
        )

    def theta(self, weights: Weights) -> np.ndarray:
        """The parameter vector of ``weights`` restricted to ``self.ids``."""
        dense = weights.to_dense(self.space)
        w = dense[: self.space.n_features] if self.ids is None else dense[self.ids]
        return np.concatenate([w, dense[self.space.n_features :]])

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        self.evaluations += 1
        weights = self.weights(theta)
        lg = self.backend.run(LossGradTask(self.space, weights, self.scaling, self.ids))
        self.last = checked_pass(lg, "loss+gradient pass")
        w = weights.values
        f = self.value(lg, w)
        g = lg.grad / lg.weight + self.l2 * w
        if lg.grad_bias is not None:
            g = np.concatenate([g, lg.grad_bias / lg.weight])
        return f, g

    def at(
        self, theta: np.ndarray, full_gradient: bool = False, hessian: bool = True
    ) -> Evaluation:
        """C at ``theta``, in one pass: value, gradient, optionally the
        Hessian over ``ids`` (+ bias) and the gradient over all candidate
        features (named ``at``, not evaluate: evaluate is a model's metrics).

        Needs ``ids`` (the Hessian is dense over them)."""
        ids = self.require_ids("curvature passes")
        self.evaluations += 1
        weights = self.weights(theta)
        # Full-gradient passes score with the non-zero weights only, so the
        # same weights give bitwise the same gradient whichever pass computes
        # it (a resumed run then repeats an uninterrupted one exactly).
        scoring = weights.sparse() if full_gradient else weights
        task: CurvatureTask | LossGradTask = (
            CurvatureTask(self.space, scoring, ids, self.scaling, full_gradient)
            if hessian
            else LossGradTask(self.space, scoring, self.scaling, None if full_gradient else ids)
        )
        cut = self.partials if full_gradient else None
        part: ThresholdedGradient | None = None
        hess: np.ndarray | None = None
        if cut is not None:  # the test's partials in place of the dense gradient
            test_ids = scoring.active_ids() if cut.prunes else ids
            both = self.backend.run(WithPartialTask(task, ids, test_ids, cut.gamma1_cut, cut.keep))
            lg, part = both.lg, both.partial
            hess = None if both.hess_upper is None else Curvature(lg, both.hess_upper).hess
            check_finite("full-gradient pass", gradient=part.sums, active_gradient=part.active)
        elif isinstance(task, CurvatureTask):
            cv = self.backend.run(task)
            lg, hess = cv.lg, cv.hess
        else:
            lg = self.backend.run(task)
        self.last = checked_pass(lg, "curvature pass" if hessian else "full-gradient pass", hess)
        n, w = self.n_weights, weights.values
        full = None
        if full_gradient and part is None:
            full = lg.grad / lg.weight
            full[self.ids] += self.l2 * w
            g = full[self.ids]
        else:
            g = lg.grad / lg.weight + self.l2 * w
        if lg.grad_bias is not None:
            g = np.concatenate([g, lg.grad_bias / lg.weight])
        if hess is not None:
            hess /= lg.weight  # in place: the pass's own (n, n) array, no copy of it
            hess[np.arange(n), np.arange(n)] += self.l2
        return Evaluation(self.value(lg, w), g, hess, full, lg, part)

    def at_points(self, thetas: list[np.ndarray]) -> list[Evaluation]:
        """One pass: value and gradient over ``ids`` (+ bias) at each of
        ``thetas`` (``kernels.loss.PointsTask``), each what ``at``
        without the Hessian or the full gradient returns there."""
        ids = self.require_ids("trial passes")
        self.evaluations += 1
        points = [self.weights(theta) for theta in thetas]
        sums = self.backend.run(PointsTask(self.space, tuple(points), self.scaling, ids))
        out = []
        for lg, weights in zip(sums.points, points):
            checked_pass(lg, "trial pass")
            g = lg.grad / lg.weight + self.l2 * weights.values
            if lg.grad_bias is not None:
                g = np.concatenate([g, lg.grad_bias / lg.weight])
            out.append(Evaluation(self.value(lg, weights.values), g, None, None, lg))
        return out

    def ray(self, theta: np.ndarray, direction: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """C(theta + t * direction) for every t in ``steps``, in one pass
        (``kernels.loss.ray_losses``): a line search's trial steps at once."""
        self.evaluations += 1
        steps = np.asarray(steps, dtype=np.float64)
        task = RayTask(
            self.space, self.weights(theta), self.weights(direction), steps, self.scaling
        )
        ray = self.backend.run(task)
        w, dw = theta[: self.n_weights], direction[: self.n_weights]
        # ||w + t dw||^2 expanded, so each step costs no vector of its own
        norms = float(w @ w) + 2 * steps * float(w @ dw) + steps**2 * float(dw @ dw)
        return ray.loss / ray.weight + 0.5 * self.l2 * norms

    def direction(
        self,
        theta: np.ndarray,
        grad: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        tol: float,
        max_products: int,
        through: bool = False,
        face: bool = False,
    ) -> tuple[np.ndarray, int, float, int]:
        """One pass: the Newton step of C's quadratic model at theta over
        lower <= d <= upper without forming the Hessian
        (``kernels.direction.LocalDirectionTask``: each block's own
        direction from the gradient ``grad`` of C, averaged coordinate by
        coordinate with the blocks' curvature as weights; ``through``: their
        CG run through the box before projecting; ``face``: their model
        solved face by face, ``kernels.box_face``); returns (d, the blocks'
        Hessian products, d^T H d as the blocks see it, the blocks that
        solved)."""
        ids = self.require_ids("direction passes")
        self.evaluations += 1
        task = LocalDirectionTask(
            self.space, self.weights(theta), ids, grad, lower, upper, tol, max_products,
            self.l2, self.scaling, through, face,
        )  # fmt: skip
        part = self.backend.run(task)
        weight = check_total_weight(part.weight)
        d = part.combined()
        check_finite("direction pass", direction=d)
        return d, part.products, part.curvature / weight, part.blocks

    def hessian_product(
        self, theta: np.ndarray, vector: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """One pass: H v with C's Hessian at theta over [w over ids, bias],
        and H's diagonal (``kernels.direction.HessianProductTask``)."""
        ids = self.require_ids("product passes")
        self.evaluations += 1
        task = HessianProductTask(self.space, self.weights(theta), ids, vector, self.scaling)
        part = self.backend.run(task)
        weight = check_total_weight(part.weight)
        ridge = np.zeros(len(vector))
        ridge[: self.n_weights] = self.l2
        product = part.product / weight + ridge * vector
        diagonal = part.diagonal / weight + ridge
        check_finite("product pass", product=product, diagonal=diagonal)
        return product, diagonal

    def require_ids(self, what: str) -> np.ndarray:
        """``ids``: curvature passes and gradient tests need an Objective
        over explicit feature ids (their sums are split at them)."""
        if self.ids is None:
            raise ValueError(
                f"expected an Objective over explicit feature ids for {what}, "
                "got one over all features"
            )
        return self.ids

    def value(self, lg: LossGrad, w: np.ndarray) -> float:
        """C from a pass's sums ``lg`` at weights ``w`` (no l1 term)."""
        return lg.loss / lg.weight + 0.5 * self.l2 * float(w @ w)


def checked_pass(lg: LossGrad, where: str, hess: np.ndarray | None = None) -> LossGrad:
    """``lg`` once its total weight is positive and its sums (and ``hess``)
    are finite: InputError / NumericError naming the pass otherwise."""
    check_total_weight(lg.weight)
    check_finite(where, loss=lg.loss, gradient=lg.grad, bias_gradient=lg.grad_bias, hessian=hess)
    return lg
