"""Smooth minimization with scipy's L-BFGS-B, checked and traced: a
non-finite value or gradient raises NumericError instead of ending in
scipy's "ABNORMAL" stop with a result."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from ..errors import check_finite
from .options import SolverOptions

log = logging.getLogger(__name__)


class ConvergenceWarning(UserWarning):
    """The optimizer stopped before meeting its tolerance."""


@dataclass
class OptimResult:
    """What ``minimize_lbfgs`` returns: the point, its value, the counts, and
    one diagnostics row per iteration."""

    theta: np.ndarray
    objective: float
    iterations: int
    evaluations: int
    converged: bool
    message: str
    trace: list[dict] = field(default_factory=list)


def minimize_lbfgs(
    fun: Callable[[np.ndarray], tuple[float, np.ndarray]],
    theta0: np.ndarray,
    options: SolverOptions = SolverOptions(),
    bounds=None,
    log_every: int = 10,
    stop: Callable[[], bool] | None = None,
) -> OptimResult:
    """Minimize ``fun`` (returning value and gradient from one call).

    Records one diagnostics dict per iteration, logs every ``log_every``
    iterations, and warns with scipy's reason when it stops unconverged.
    ``stop``: asked after every iteration; True ends the run there (e.g. a
    time budget), unconverged.

    Raises
    ------
    NumericError
        If ``fun`` returns a non-finite value or gradient, or the result is
        not finite.
    """
    trace: list[dict] = []
    start = time.perf_counter()
    n_evals = 0
    last = {}

    def counted(theta):
        nonlocal n_evals
        n_evals += 1
        f, g = fun(theta)
        check_finite(f"L-BFGS-B evaluation {n_evals}", objective=f, gradient=g)
        last["f"], last["g"] = f, g
        return f, g

    def callback(intermediate_result):
        it = len(trace) + 1
        g = last.get("g")
        row = {
            "iteration": it,
            "objective": float(intermediate_result.fun),
            "grad_max": float(np.abs(g).max()) if g is not None and g.size else 0.0,
            "evaluations": n_evals,
            "elapsed_s": round(time.perf_counter() - start, 3),
        }
        trace.append(row)
        if stop is not None and stop():
            raise StopIteration
        if log_every and it % log_every == 0:
            log.info(
                "iter %d objective %.10g |grad|max %.3g evals %d elapsed %.1fs",
                it,
                row["objective"],
                row["grad_max"],
                n_evals,
                row["elapsed_s"],
            )

    res = minimize(
        counted,
        theta0,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        callback=callback,
        options={
            "maxiter": options.max_iter,
            "maxcor": options.memory,
            "gtol": options.tol,
            "ftol": options.ftol,
            "maxls": 50,
            **({"maxfun": options.max_evaluations} if options.max_evaluations else {}),
        },
    )
    message = str(res.message)
    check_finite(f"L-BFGS-B ({message})", objective=res.fun, weights=res.x)
    if not res.success:
        warnings.warn(
            f"L-BFGS-B stopped without converging after {res.nit} iterations: {message}",
            ConvergenceWarning,
            stacklevel=2,
        )
    return OptimResult(
        theta=res.x,
        objective=float(res.fun),
        iterations=int(res.nit),
        evaluations=n_evals,
        converged=bool(res.success),
        message=message,
        trace=trace,
    )
