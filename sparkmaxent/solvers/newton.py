"""Box-constrained Newton with an exact curvature pass per iteration.

Solves, over theta = [weights, bias],

    minimize  phi(theta) = f(theta) + l1_per_weight . theta   s.t.  lower <= theta <= upper

with f, its gradient and its Hessian from one data pass
(``kernels/curvature.py``): the l1 problem of a grafting round once every
active weight is held in its orthant (Riezler & Vasserman 2004, section 5;
l1_per_weight = gamma1 * sign, problem/penalty.py). Each iteration follows
newGLMNET's outer loop (Yuan, Ho & Lin 2012, section 3): coordinate
descent on the quadratic model over the box, with projected Newton face
steps (Bertsekas 1982), then a backtracking line search whose cut steps
one ray pass evaluates at once, and an infinity-norm trust region.
Convergence is measured by the projected gradient; the pass predicted to
converge also brings the full gradient, the next round's gradient test.
The model solve on the driver (coordinate descent with face steps) lives
in ``box_cd.py``. Details: docs/methods/grafting.md, "The round solver".
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..problem.objective import Evaluation
from .box_cd import box_qp_cd, projected_gradient
from .global_cg import AcrossPasses, ProductPass
from .lbfgs import ConvergenceWarning
from .line_search import Points, acceptance, expects_cut, line_search, next_radius
from .options import SolverOptions
from .secant import SecantMemory

log = logging.getLogger(__name__)


@dataclass
class BoxResult:
    """What a box-constrained solver returns.

    Attributes
    ----------
    theta : ndarray, shape (n,)
    value : float
        phi(theta) = f(theta) + l1_per_weight . theta.
    violation : float
        Largest projected-gradient entry at ``theta``.
    last : Evaluation
        The evaluation at ``theta`` (its ``full_grad`` is set when the pass
        that produced it asked for the full gradient).
    iterations, evaluations : int
    converged : bool
    message : str
    trace : list of dict
    timed_out : bool
        Ended by the time budget (``time_left``) before converging: the
        last accepted iterate, usable but not certified.
    """

    theta: np.ndarray
    value: float
    violation: float
    last: Evaluation | None
    iterations: int
    evaluations: int
    converged: bool
    message: str
    trace: list[dict] = field(default_factory=list)
    timed_out: bool = False


#: a direction pass (theta, gradient, model box lower, upper, tolerance) ->
#: (d, inner work, d^T H d[, the blocks that solved]): the model solved without
#: the Hessian on the driver (without the count: one block, the exact step)
Direction = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float], tuple]


class _Passes:
    """``fun``, ``ray`` and ``direction`` with their calls counted: each is
    one pass. With a direction pass no evaluation asks for the Hessian."""

    def __init__(
        self,
        fun: Callable,
        ray: Callable | None,
        direction: Direction | None = None,
        points: Points | None = None,
        product: ProductPass | None = None,
        budget: int = 0,
        crawl_budget: int = 0,
    ):
        self.fun, self.ray, self.direction, self.product = fun, ray, direction, product
        self.points = points if direction is not None else None  # with a direction pass only
        # the late iterations' CG across product passes (``global_cg.py``)
        self.across = AcrossPasses(budget, crawl_budget) if direction and product else None
        self.count = 0
        self.blocks = 1  # the blocks that solved the last direction pass

    def at(self, theta: np.ndarray, full: bool, hessian: bool) -> Evaluation:
        """The objective at ``theta`` (``Objective.at``): one pass."""
        self.count += 1
        return self.fun(theta, full, hessian and self.direction is None)

    def direct(self, theta, grad, dlo, dhi, tol) -> tuple[np.ndarray, int, float]:
        """(d, inner work, d^T H d); the pass's block count kept in ``blocks``."""
        self.count += 1
        assert self.direction is not None, "direct is only used with a direction pass"
        out = self.direction(theta, grad, dlo, dhi, tol)
        self.blocks = int(out[3]) if len(out) > 3 else 1
        return out[0], out[1], out[2]

    def multiply(self, theta: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.count += 1
        assert self.product is not None, "multiply is only used with a product pass"
        return self.product(theta, v)

    def along(self, theta: np.ndarray, d: np.ndarray, steps: np.ndarray) -> np.ndarray:
        self.count += 1
        assert self.ray is not None, "along is only used with a ray pass"
        return self.ray(theta, d, steps)

    def at_points(self, thetas: list[np.ndarray]) -> list[Evaluation]:
        self.count += 1
        assert self.points is not None, "at_points is only used with a points pass"
        return self.points(thetas)


def _record(
    trace: list[dict],
    start: float,
    it: int,
    value: float,
    violation: float,
    step: float,
    ratio: float | None,
    sweeps: int,
    evals: int,
) -> None:
    """One iteration's row of the trace, and its debug log line."""
    trace.append(
        {
            "iteration": it,
            "value": value,
            "violation": violation,
            "step": step,
            "rho": ratio,
            "sweeps": sweeps,
            "evaluations": evals,
            "elapsed_s": round(time.perf_counter() - start, 3),
        }
    )
    log.debug(
        "newton iteration %d: value %.12g, violation %.3g, step %g, rho %s, "
        "%d sweeps, %d evaluations",
        it,
        value,
        violation,
        step,
        "-" if ratio is None else f"{ratio:.3g}",
        sweeps,
        evals,
    )


def _direction(
    hess: np.ndarray,
    grad: np.ndarray,
    theta: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    radius: float,
    violation: float,
    options: SolverOptions,
) -> tuple[np.ndarray, int]:
    """The Newton direction: the quadratic model minimized over the box and
    the trust region (over ``options.region``), to ``inner_ratio`` times the
    outer violation."""
    return box_qp_cd(
        hess, grad, *_model_box(theta, lower, upper, radius, options),
        _model_tol(violation, options), options.max_sweeps,
    )  # fmt: skip


def _model_box(
    theta: np.ndarray, lower: np.ndarray, upper: np.ndarray, radius: float, options: SolverOptions
) -> tuple[np.ndarray, np.ndarray]:
    """The step's bounds: the box, and the trust region over ``options.region``."""
    dlo, dhi = lower - theta, upper - theta
    inside = slice(options.region)
    dlo[inside], dhi[inside] = np.maximum(dlo[inside], -radius), np.minimum(dhi[inside], radius)
    return dlo, dhi


def _model_tol(violation: float, options: SolverOptions, ratio: float | None = None) -> float:
    """The model solve's tolerance: ``ratio`` (default ``inner_ratio``)
    times the outer violation."""
    return max((options.inner_ratio if ratio is None else ratio) * violation, 0.1 * options.tol)


def forcing(violation: float, previous: float, options: SolverOptions, blocks: int = 1) -> float:
    """The direction pass's forcing term: the outer violation's last
    contraction (violation / previous; 1 at the first iteration) within
    [``inner_ratio``, ``forcing_max``]. A partition's CG solved further than
    the outer iteration converges buys no outer progress (oversolving):
    Eisenstat & Walker (1996), choice 2 with exponent 1, safeguarded. Where
    the last direction pass averaged several ``blocks`` the term is at least
    ``forcing_blocks``: each block's CG runs only until its model gradient
    is that fraction of the outer violation. Run further, a block's CG goes
    on along the directions its own Hessian is nearly flat in and the
    whole data's is not (features with few events in the block, saturated
    labels), so the averaged step overshoots there: its full step is cut,
    the trust region shrinks to the cut step, and with it every weight's
    way to its orthant's 0 (a round that crawls at a fraction of its
    tolerance for a hundred iterations). CG's first products follow the
    well-determined directions, so stopping early keeps the step where the
    blocks agree (CG's early stop as regularization). Only for the face model
    (``cg_face``, ``_step``): the stop-at-bound CG restarts at every bound
    and, stopped early, gains too little a step."""
    contraction = violation / previous if np.isfinite(previous) and previous > 0 else 1.0
    low = max(options.inner_ratio, options.forcing_blocks) if blocks > 1 else options.inner_ratio
    return float(np.clip(contraction, low, max(low, options.forcing_max)))


def _step(
    passes: _Passes,
    ev: Evaluation,
    grad: np.ndarray,
    theta: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    radius: float,
    violation: float,
    options: SolverOptions,
    secant: SecantMemory | None = None,
    previous: float = np.inf,
) -> tuple[np.ndarray, int, float | None, Evaluation]:
    """The iteration's direction, its inner work (sweeps or products),
    d^T H d, and the evaluation at theta: from a direction pass when the
    solver has one, else from the exact Hessian (a curvature pass first
    when a cut step was accepted without it). A direction pass's step
    corrected by ``secant`` pairs (``secant.py``), and with the face model
    (``cg_face``) the plain one too, leaves d^T H d to the gradients at
    both ends of the step (None): the partitions' curvature is each one's
    own d_b^T H_b d_b, not the averaged step's, and with the face model the
    trust region is the face CG's Steihaug radius (TRON), which a rho from
    the partitions' curvature, low however short the step, kept shrinking.
    The stop-at-bound CG keeps the partitions' curvature: there a region
    grown by the gradients' rho cost rounds more passes
    (``benchmarks/round_cost.py``). Once ``passes.across`` is ready (the
    free set unchanged) the step is CG across product passes
    (``global_cg.py``), with the whole data's d^T H d."""
    if passes.direction is not None:
        dlo, dhi = _model_box(theta, lower, upper, radius, options)
        averaged = passes.blocks if options.cg_face else 1  # the face model's CG over blocks
        tol = max(
            _model_tol(violation, options, forcing(violation, previous, options, averaged)),
            options.forcing_floor * options.tol,
        )
        across = passes.across
        if across is not None and across.ready(theta, grad, lower, upper):
            d, work, curvature = across.step(passes.multiply, theta, grad, dlo, dhi, tol)
            return d, work, curvature, ev
        loops = secant.first_loop(grad) if secant is not None else None
        if loops is None:
            d, work, curvature = passes.direct(theta, grad, dlo, dhi, tol)
            return d, work, None if options.cg_face else curvature, ev
        assert secant is not None, "first_loop ran"
        r, work, _ = passes.direct(theta, loops[0], dlo, dhi, tol)
        return np.clip(secant.second_loop(r, loops[1]), dlo, dhi), work, None, ev
    if ev.hess is None:  # a cut step was accepted
        ev = passes.at(theta, False, True)
    assert ev.hess is not None, "an evaluation with hessian=True carries it"
    d, sweeps = _direction(ev.hess, grad, theta, lower, upper, radius, violation, options)
    return d, sweeps, float(d @ (ev.hess @ d)), ev


def minimize_box_newton(
    fun: Callable[[np.ndarray, bool, bool], Evaluation],
    theta0: np.ndarray,
    l1_per_weight: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    options: SolverOptions = SolverOptions(),
    first: Evaluation | None = None,
    ray: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None,
    direction: Direction | None = None,
    points: Points | None = None,
    product: ProductPass | None = None,
    time_left: Callable[[], float] | None = None,
) -> BoxResult:
    """Minimize f(theta) + l1_per_weight . theta over lower <= theta <= upper.

    Parameters
    ----------
    fun : callable (theta, full_gradient, hessian) -> Evaluation
        One pass: f and gradient at theta, with ``hessian`` also the Hessian
        (``Evaluation.hess``); with ``full_gradient`` also the gradient over
        every candidate feature.
    theta0 : ndarray, shape (n,)
        A feasible start.
    l1_per_weight, lower, upper : ndarray, shape (n,)
        gamma1 sign_j per weight (0 for the bias), the orthant box.
    first : Evaluation or None
        The evaluation at theta0 if already known (saves a pass).
    ray : callable (theta, d, steps) -> ndarray, or None
        One pass: f(theta + t d) for every t in ``steps`` (``line_search``);
        without it every trial step is a pass.
    direction : callable (theta, grad, dlo, dhi, tol) -> (d, work, d^T H d), or None
        One pass: the model's step over dlo <= d <= dhi computed where the
        data is (``kernels/direction.py``); the evaluations then never ask
        for the Hessian. None: the exact Hessian and ``box_qp_cd``.
    points : callable (list of theta) -> list of Evaluation, or None
        One pass: value and gradient at each theta (with ``direction``: the
        line search's first ``options.trial_points`` steps at once).
    product : callable (theta, v) -> (H v, H's diagonal), or None
        One pass (with ``direction``): the late iterations' CG across
        passes, at most ``options.global_cg`` an iteration (``global_cg.py``).
    time_left : callable () -> seconds, or None
        The run's time budget left (``selection/deadline.py``), asked
        between iterations: the round ends at the last accepted iterate
        (``timed_out``, no warning) when less is left than the last
        iteration took (``out_of_time``), so one long round cannot
        overrun the budget by more than an iteration's passes.
    """
    if np.any(theta0 < lower) or np.any(theta0 > upper):
        raise ValueError("expected a start inside the bounds, got one outside")
    start = time.perf_counter()
    passes = _Passes(fun, ray, direction, points, product, options.global_cg, options.crawl_cg)
    at = passes.at
    theta = theta0.copy()
    usable = first is not None and (first.hess is not None or direction is not None)
    ev = first if first is not None and usable else at(theta, False, True)
    value = ev.value + float(l1_per_weight @ theta)
    trace: list[dict] = []
    stalled, prev_violation, best_violation = 0, np.inf, np.inf
    radius, ratio = options.radius, None  # trust region |d_j| <= radius; rho of a full step
    converged, message, it = False, "maximum number of iterations reached", 0
    steps = options.backtrack ** np.arange(options.max_backtracks)  # 1, b, b^2, ...
    memory = options.secant_memory if direction else 0
    secant = SecantMemory(memory, options.secant_across) if memory else None
    clock = _IterationClock(time_left)
    for it in range(1, options.max_iter + 1):
        grad = ev.grad + l1_per_weight
        violation = float(np.abs(projected_gradient(grad, theta, lower, upper)).max(initial=0.0))
        if violation <= options.tol:
            converged, message = True, "projected gradient below tol"
            it -= 1
            break
        if clock.out_of_time():
            message = f"time budget spent at violation {violation:.3g}"
            it -= 1
            break
        d, sweeps, curvature, ev = _step(
            passes, ev, grad, theta, lower, upper, radius, violation, options, secant,
            prev_violation,
        )  # fmt: skip
        slope = float(grad @ d)
        if not slope < 0 and secant is not None and secant.used:
            secant.reset()  # the corrected step does not descend: the plain one
            continue
        if not slope < 0:
            message = f"no descent direction (slope {slope:.3g}) at violation {violation:.3g}"
            break
        accepted, step, noise = _search(
            passes, theta, d, l1_per_weight, lower, upper, steps, value, slope, violation,
            prev_violation, ratio, options,
        )  # fmt: skip
        length = float(np.abs(d[: options.region]).max(initial=0.0))  # in the region
        if accepted is None:
            # even the smallest trial step went too far (a direction along
            # which the model's curvature is near 0): retry inside half of it
            radius = steps[-1] * length / 2
            if radius > options.min_radius:
                continue
            message = f"line search failed at violation {violation:.3g}"
            break
        if secant is not None:
            secant.update(theta, accepted[0], ev.grad, accepted[1].grad, lower, upper)
        if passes.across is not None:  # a cut average after the product cap: the crawl
            passes.across.crawled(step, sweeps, options.max_products * passes.blocks, passes.blocks)
        if curvature is None:  # d^T H d from the gradients at both ends of the step
            curvature = float(d @ (accepted[1].grad - ev.grad)) / step
        kept = radius if options.cg_face and direction is not None else None  # TRON's region
        region = next_radius(step, length, slope, curvature, value, accepted[2], noise, kept)
        radius, ratio = secant.region(step, region, radius) if secant is not None else region
        progress = accepted[2] < value - noise or violation < 0.99 * best_violation
        stalled = 0 if progress else stalled + 1
        best_violation = min(best_violation, violation)
        theta, ev, value = accepted
        prev_violation = violation
        _record(trace, start, it, value, violation, step, ratio, sweeps, passes.count)
        if stalled >= options.stall:
            message = f"stalled for {stalled} iterations"
            break
    else:
        it = options.max_iter
    result = _result(
        theta, ev, value, l1_per_weight, lower, upper, it, passes.count, converged, message, trace,
        options.tol, quiet=clock.spent,
    )  # fmt: skip
    result.timed_out = clock.spent and not result.converged
    return result


def _search(
    passes: _Passes,
    theta: np.ndarray,
    d: np.ndarray,
    l1_per_weight: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    steps: np.ndarray,
    value: float,
    slope: float,
    violation: float,
    prev_violation: float,
    ratio: float | None,
    options: SolverOptions,
) -> tuple[tuple | None, float, float]:
    """The backtracking line search along ``d`` (``line_search.py``):
    (the accepted (theta, Evaluation, value) or None, its step, the
    objective's rounding noise in Armijo's test). The trial pass brings the
    full gradient when the next violation is predicted within tol (the
    violation's last contraction applied once more)."""
    want_full = violation * min(1.0, violation / prev_violation) <= options.tol
    acceptable, noise = acceptance(value, slope, options.armijo)
    along = passes.along if passes.ray is not None else None
    accepted, step = line_search(
        passes.at, along, theta, d, l1_per_weight, lower, upper, steps, acceptable, want_full,
        expects_cut(ratio, along), options.ray_steps,
        passes.at_points if passes.points is not None else None, options.trial_points,
    )  # fmt: skip
    return accepted, step, noise


class _IterationClock:
    """The time budget as the Newton loop reads it: ``time_left()`` (None:
    no budget) asked before each iteration; an iteration's cost is the
    drop of ``time_left`` since the one before (the budget's own clock, so
    a test's fake clock times it too). ``spent`` once it ran out."""

    def __init__(self, time_left: Callable[[], float] | None):
        self.time_left = time_left
        self.last: float | None = None
        self.spent = False

    def out_of_time(self) -> bool:
        """Whether less is left than the last iteration took (0 before the
        first: a round starts while any time is left)."""
        if self.time_left is None:
            return False
        left = float(self.time_left())
        cost = 0.0 if self.last is None else max(0.0, self.last - left)
        self.last = left
        self.spent = left <= cost
        return self.spent


def _result(
    theta: np.ndarray,
    ev: Evaluation,
    value: float,
    l1_per_weight: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    it: int,
    evals: int,
    converged: bool,
    message: str,
    trace: list[dict],
    tol: float,
    quiet: bool = False,
) -> BoxResult:
    """The BoxResult at the last point, warned about when not converged
    (``quiet``: not when the time budget ended it: a budget is no failure)."""
    violation = float(
        np.abs(projected_gradient(ev.grad + l1_per_weight, theta, lower, upper)).max(initial=0.0)
    )
    converged = converged or violation <= tol
    if not converged and not quiet:
        warnings.warn(
            f"Newton stopped at violation {violation:.3g} > tol {tol:.3g} "
            f"after {it} iterations: {message}",
            ConvergenceWarning,
            stacklevel=3,
        )
    log.debug(
        "newton: %d iterations, %d evaluations, value %.12g, violation %.3g",
        it,
        evals,
        value,
        violation,
    )
    return BoxResult(theta, value, violation, ev, it, evals, converged, message, trace)
