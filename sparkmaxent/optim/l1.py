"""The l1 (and elastic-net) problem over an active set, its solvers, and the
KKT certificate over every candidate feature.

    C(w) = L(w) + gamma1 ||w||_1 + gamma2/2 ||w||_2^2        (DESIGN.md section 1)

Sign handling (Riezler & Vasserman 2004, section 5, after Perkins et al.
2003): every active weight is confined to one orthant for the duration of a
round, the sign it has, or for a weight that just entered the active set
with value 0 the sign opposite to its gradient, -sign(dL/dw_j), the
direction in which C decreases. Inside its orthant |w_j| = sign_j w_j is
linear, so a round's problem is smooth with box constraints:

    minimize  L(w) + gamma2/2 ||w||^2 + gamma1 sign . w   s.t.  sign_j w_j >= 0

A weight the optimizer drives to the boundary (exactly 0) is pruned from the
active set after the round (footnote 2); it can re-enter with either sign at
a later gradient test. With gamma1 = 0 (the mle-ifs / l2-ifs variants) the
bounds are infinite.

Solvers (registry ``SOLVERS``): ``newton`` (exact Hessian block per pass and
coordinate descent on the quadratic model, optim/newton.py) and ``lbfgs-b``
(scipy's L-BFGS-B on the same box problem: one loss+gradient pass per
evaluation). ``auto`` picks Newton while the Hessian block is small enough.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..kernels import Weights
from .lbfgs import LbfgsOptions, minimize_lbfgs
from .newton import BoxResult, NewtonOptions, minimize_box_newton, projected_gradient
from .objective import Evaluation, Objective

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BoxProblem:
    """The smooth box problem of one round over theta = [w (n), bias].

    Attributes
    ----------
    lin : ndarray, shape (n + n_bias,)
        gamma1 * sign for weights, 0 for the bias.
    lower, upper : ndarray, shape (n + n_bias,)
        Orthant bounds (0 on the side the sign excludes), infinite for the
        bias and when gamma1 = 0.
    """

    lin: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def orthant_problem(signs: np.ndarray, l1: float, n_bias: int) -> BoxProblem:
    """Box problem for weights confined to the orthants ``signs`` (+-1 each).

    Parameters
    ----------
    signs : ndarray of float, shape (n,)
        +1 or -1 per active weight; ignored when ``l1 == 0``.
    l1 : float
        gamma1 >= 0.
    n_bias : int
    """
    if l1 < 0:
        raise ValueError(f"expected l1 >= 0, got {l1}")
    n = len(signs)
    lin = np.zeros(n + n_bias)
    lower = np.full(n + n_bias, -np.inf)
    upper = np.full(n + n_bias, np.inf)
    if l1 > 0:
        signs = np.asarray(signs, dtype=np.float64)
        if not np.all(np.abs(signs) == 1):
            raise ValueError("expected every active weight to have sign +1 or -1, got a 0")
        lin[:n] = l1 * signs
        lower[:n] = np.where(signs > 0, 0.0, -np.inf)
        upper[:n] = np.where(signs < 0, 0.0, np.inf)
    return BoxProblem(lin, lower, upper)


@dataclass(frozen=True)
class SolverOptions:
    """Settings shared by the solvers.

    tol : projected-gradient tolerance of a round's optimum.
    max_iter : Newton iterations, or L-BFGS-B iterations.
    memory, ftol : L-BFGS-B history and relative-decrease stop.
    full_gradient : Newton's last pass may bring the gradient over every
        candidate (the next gradient test); off when that gradient is too
        large for the driver (the block-wise test, kernels/topk.py).
    ray_first_at_start : Newton tries its first full step in the ray pass
        (``NewtonOptions``): worth it when that step is likely to be cut.
    """

    tol: float = 1e-7
    max_iter: int = 1000
    memory: int = 10
    ftol: float = 1e-12
    full_gradient: bool = True
    ray_first_at_start: bool = False


def solve_newton(obj: Objective, theta0: np.ndarray, box: BoxProblem, options: SolverOptions,
                 first: Evaluation | None = None) -> BoxResult:
    """Box-constrained Newton, one curvature pass per iteration."""
    def evaluate(theta, full, hessian):
        return obj.evaluate(theta, full_gradient=full and options.full_gradient, hessian=hessian)

    return minimize_box_newton(evaluate, theta0, box.lin, box.lower, box.upper,
                               NewtonOptions(tol=options.tol, max_iter=options.max_iter,
                                             ray_first_at_start=options.ray_first_at_start), first,
                               ray=obj.ray)


def solve_lbfgsb(obj: Objective, theta0: np.ndarray, box: BoxProblem, options: SolverOptions,
                 first: Evaluation | None = None) -> BoxResult:
    """scipy's L-BFGS-B on the box problem, one loss+gradient pass per evaluation."""
    last: dict = {}

    def fun(theta):
        f, g = obj(theta)
        last.update(theta=theta.copy(), f=f, g=g)
        return f + float(box.lin @ theta), g + box.lin

    bounds = list(zip(box.lower.tolist(), box.upper.tolist()))
    res = minimize_lbfgs(fun, theta0, LbfgsOptions(max_iter=options.max_iter, memory=options.memory,
                                                   gtol=options.tol, ftol=options.ftol),
                         bounds=bounds, log_every=0)
    if last and np.array_equal(last["theta"], res.theta):
        grad = last["g"] + box.lin
        violation = float(np.abs(projected_gradient(grad, res.theta, box.lower, box.upper)).max(initial=0.0))
        ev = Evaluation(last["f"], last["g"], None, None, obj.last)
    else:  # scipy returned an earlier point than the last evaluated
        violation, ev = float("nan"), None
    return BoxResult(res.theta, res.objective, violation, ev, res.iterations, res.evaluations,
                     res.converged, res.message, res.trace)


Solver = Callable[[Objective, np.ndarray, BoxProblem, SolverOptions, "Evaluation | None"], BoxResult]
SOLVERS: dict[str, Solver] = {"newton": solve_newton, "lbfgs-b": solve_lbfgsb}


def choose_solver(name: str, n_params: int, newton_max: int) -> str:
    """Resolve ``auto``: Newton while the dense Hessian block (n_params^2
    doubles, per partition) stays small, L-BFGS-B beyond."""
    if name == "auto":
        return "newton" if n_params <= newton_max else "lbfgs-b"
    if name not in SOLVERS:
        raise ValueError(f"unknown solver {name!r}: expected 'auto' or one of {sorted(SOLVERS)}")
    return name


def kkt_certificate(full_grad: np.ndarray, weights: Weights, grad_bias: np.ndarray | None,
                    l1: float, tol: float, bound: float | None = None) -> dict:
    """Optimality conditions of C over *all* candidate features.

    For the l1 problem (subdifferential of gamma1 |w_j|)::

        |dC/dw_j + gamma1 sign(w_j)| <= tol            for w_j != 0
        |dC/dw_j| <= bound (1 + tol)                    for w_j == 0
        |dC/db_k| <= tol                                for the bias

    with ``bound = gamma1`` (grafting). For the thresholded variants without
    l1 (mle-ifs, l2-ifs) ``bound`` is the gradient-test threshold: the
    certificate then says no candidate passes the test and the active
    weights are stationary.

    Parameters
    ----------
    full_grad : ndarray, shape (n_features,)
        dC/dw_j of the smooth part L + gamma2/2 ||w||^2 at ``weights``.
    weights : Weights
    grad_bias : ndarray, shape (K,), or None
    """
    bound = l1 if bound is None else bound
    ids = weights.active_ids()
    inactive = np.ones(len(full_grad), dtype=bool)
    inactive[ids] = False
    score = np.abs(full_grad[inactive])
    return kkt_from_parts(full_grad[ids], weights, float(score.max(initial=0.0)),
                          int(np.count_nonzero(score > bound * (1 + tol))), len(full_grad),
                          grad_bias, l1, tol, bound)


def kkt_from_parts(active_grad: np.ndarray, weights: Weights, max_inactive: float,
                   inactive_over: int, n_features: int, grad_bias: np.ndarray | None,
                   l1: float, tol: float, bound: float | None = None) -> dict:
    """``kkt_certificate`` from what the block-wise gradient test keeps
    (kernels/topk.py): dC/dw_j of the active features only, and over the
    inactive ones the largest |dC/dw_j| and how many exceed bound (1 + tol).

    Parameters
    ----------
    active_grad : ndarray, shape (n_active,)
        dC/dw_j at ``weights.active_ids()``, in that order.
    """
    bound = l1 if bound is None else bound
    nz = weights.values != 0
    nz_sign = np.sign(weights.values[nz])
    active_violation = float(np.abs(active_grad[nz] + l1 * nz_sign).max(initial=0.0))
    # zero weights: the inactive features and active ones at exactly 0
    zero_active = np.abs(active_grad[~nz])
    max_zero = max(max_inactive, float(zero_active.max(initial=0.0)))
    over = inactive_over + int(np.count_nonzero(zero_active > bound * (1 + tol)))
    bias_violation = float(np.abs(grad_bias).max(initial=0.0)) if grad_bias is not None else 0.0
    passed = (max_zero <= bound * (1 + tol) and active_violation <= tol and bias_violation <= tol)
    # one figure for comparing solvers: the largest violation of the three
    # conditions (absolute, gradient units; 0 at an exact optimum)
    violation = max(max_zero - bound, active_violation, bias_violation, 0.0)
    return {"passed": bool(passed), "violation": violation, "tol": tol, "l1": l1, "bound": bound,
            "nonzero_weights": int(nz.sum()), "features_checked": int(n_features),
            "max_active_violation": active_violation, "max_zero_gradient": max_zero,
            "max_bias_gradient": bias_violation, "zero_weights_over_bound": over}
