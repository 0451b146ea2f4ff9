"""The box-constrained solvers of a round's problem (``problem.penalty.BoxProblem``):

    minimize  C(theta) + l1_per_weight . theta   s.t.  lower <= theta <= upper

with C the objective (``problem.objective``) and the box the one the
penalty implies for the round's orthants (Riezler & Vasserman 2004,
section 5). Registry ``SOLVERS``: ``newton`` (exact Hessian block per pass
and coordinate descent on the quadratic model, ``newton.py``, ``box_cd.py``),
``newton-cg`` (the same iterations, each step from the partitions'
Hessian-vector products, ``kernels/direction.py``) and
``lbfgs-b`` (scipy's L-BFGS-B on the same box problem: one loss+gradient
pass per evaluation). ``choose_solver`` resolves ``auto``: Newton while the
Hessian block is small enough, newton-cg beyond.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

import numpy as np

from ..problem.objective import Evaluation, Objective
from ..problem.penalty import BoxProblem
from .lbfgs import minimize_lbfgs
from .newton import BoxResult, minimize_box_newton, projected_gradient
from .options import SolverOptions


def solve_newton(
    obj: Objective,
    theta0: np.ndarray,
    box: BoxProblem,
    options: SolverOptions,
    first: Evaluation | None = None,
    time_left: Callable[[], float] | None = None,
) -> BoxResult:
    """Box-constrained Newton, one curvature pass per iteration."""

    def at(theta, full, hessian):
        return obj.at(theta, full_gradient=full and options.full_gradient, hessian=hessian)

    return minimize_box_newton(
        at, theta0, box.l1_per_weight, box.lower, box.upper, options, first, ray=obj.ray,
        time_left=time_left,
    )  # fmt: skip


def solve_newton_cg(
    obj: Objective,
    theta0: np.ndarray,
    box: BoxProblem,
    options: SolverOptions,
    first: Evaluation | None = None,
    time_left: Callable[[], float] | None = None,
) -> BoxResult:
    """Hessian-free Newton: the same outer iterations, each step computed
    where the data is by projected CG with Hessian-vector products
    (``kernels/direction.py``); a pass ships n-vectors, never the Hessian.
    ``options.cg_face`` None: face by face on rounds of ``face_from``
    parameters or more (``face_model``)."""
    options = face_model(options, len(theta0))

    def at(theta, full, hessian):
        return obj.at(theta, full_gradient=full and options.full_gradient, hessian=False)

    def direction(theta, grad, dlo, dhi, tol):
        return obj.direction(
            theta, grad, dlo, dhi, tol, options.max_products, options.cg_through, options.cg_face
        )

    return minimize_box_newton(
        at, theta0, box.l1_per_weight, box.lower, box.upper, options, first, ray=obj.ray,
        direction=direction, points=obj.at_points, product=obj.hessian_product,
        time_left=time_left,
    )  # fmt: skip


def face_model(options: SolverOptions, n_params: int) -> SolverOptions:
    """``options`` with ``cg_face`` resolved for a round of ``n_params``
    parameters: as set, or (None) on from ``face_from`` of them."""
    if options.cg_face is not None:
        return options
    return dataclasses.replace(options, cg_face=n_params >= options.face_from)


def solve_lbfgsb(
    obj: Objective,
    theta0: np.ndarray,
    box: BoxProblem,
    options: SolverOptions,
    first: Evaluation | None = None,
    time_left: Callable[[], float] | None = None,
) -> BoxResult:
    """scipy's L-BFGS-B on the box problem, one loss+gradient pass per evaluation."""
    last: dict = {}

    def fun(theta):
        f, g = obj(theta)
        last.update(theta=theta.copy(), f=f, g=g)
        return f + float(box.l1_per_weight @ theta), g + box.l1_per_weight

    bounds = list(zip(box.lower.tolist(), box.upper.tolist()))
    stop = None if time_left is None else lambda: time_left() <= 0
    res = minimize_lbfgs(fun, theta0, options, bounds=bounds, log_every=0, stop=stop)
    if last and np.array_equal(last["theta"], res.theta):
        grad = last["g"] + box.l1_per_weight
        violation = float(
            np.abs(projected_gradient(grad, res.theta, box.lower, box.upper)).max(initial=0.0)
        )
        assert obj.last is not None, "fun() evaluated obj"
        ev = Evaluation(last["f"], last["g"], None, None, obj.last)
    else:  # scipy returned an earlier point than the last evaluated
        violation, ev = float("nan"), None
    return BoxResult(
        res.theta,
        res.objective,
        violation,
        ev,
        res.iterations,
        res.evaluations,
        res.converged,
        res.message,
        res.trace,
        timed_out=not res.converged and stop is not None and stop(),
    )


class Solver(Protocol):
    def __call__(
        self,
        obj: Objective,
        theta0: np.ndarray,
        box: BoxProblem,
        options: SolverOptions,
        first: Evaluation | None = None,
        time_left: Callable[[], float] | None = None,
    ) -> BoxResult: ...


SOLVERS: dict[str, Solver] = {
    "newton": solve_newton,
    "newton-cg": solve_newton_cg,
    "lbfgs-b": solve_lbfgsb,
}


def choose_solver(name: str, n_params: int, newton_max: int) -> str:
    """Resolve ``auto``: exact Newton while the dense Hessian block (n_params^2
    doubles, per partition) stays small, Hessian-free Newton beyond (its
    round costs linearly in n_params; benchmarks/round_cost.py)."""
    if name == "auto":
        return "newton" if n_params <= newton_max else "newton-cg"
    if name not in SOLVERS:
        raise ValueError(f"unknown solver {name!r}: expected 'auto' or one of {sorted(SOLVERS)}")
    return name


__all__ = ["SOLVERS", "Solver", "choose_solver", "face_model", "solve_newton", "solve_lbfgsb"]
