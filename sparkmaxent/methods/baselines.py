"""The baselines: ``mle`` (L(w) over all candidates), ``l2`` (L(w) +
gamma2/2 ||w||^2, a Gaussian prior) and ``cutoff``, the l0 baseline: keep
features whose empirical count is at least ``train.cutoff`` (Koeling 2000;
Zhou et al. 2003 use 7), then l2 (MLE when l2 = 0) over those."""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable

import numpy as np

from ..config import TrainConfig
from ..kernels import Weights
from ..kernels.stats import FeatureCountTask
from ..problem import Objective, orthant_problem
from ..selection.base import FitResult, TrainingContext
from ..solvers import SOLVERS, ConvergenceWarning, SolverOptions, choose_solver, minimize_lbfgs

log = logging.getLogger(__name__)


def lbfgs_options(cfg: TrainConfig) -> SolverOptions:
    return SolverOptions(max_iter=cfg.max_iter, memory=cfg.memory, tol=cfg.gtol, ftol=cfg.ftol)


def fit_smooth(
    ctx: TrainingContext,
    ids: np.ndarray | None,
    l2: float,
    start: Weights | None = None,
    max_evaluations: int = 0,
    stop: Callable[[], bool] | None = None,
) -> FitResult:
    """Minimize L(w) + l2/2 ||w||^2 over ``ids`` (None: all features) with
    L-BFGS; one loss+gradient pass per evaluation (about ``max_evaluations``
    at most, when not 0: ``SolverOptions.max_evaluations``; ``stop``: asked
    after every iteration, True ends the fit there)."""
    obj = Objective(ctx.backend, ids, l2=l2, scaling=ctx.scaling)
    theta0 = (
        obj.theta(start)
        if start is not None
        else np.zeros(obj.n_weights + ctx.backend.space.n_bias)
    )
    options = dataclasses.replace(lbfgs_options(ctx.config), max_evaluations=max_evaluations)
    res = minimize_lbfgs(obj, theta0, options, stop=stop)
    weights = obj.weights(res.theta).sparse()
    last = obj.last
    report = {
        "objective": res.objective,
        "l2": l2,
        "active_features": int(obj.n_weights),
        "loss": last.loss / last.weight if last else None,
        "train_accuracy": last.correct / last.weight if last else None,
        "iterations": res.iterations,
        "evaluations": res.evaluations,
        "converged": res.converged,
        "optimizer_message": res.message,
        "trace": res.trace,
    }
    return FitResult(weights, report)


#: passes a time-bound fit keeps for the line search of its last iteration
LAST_SEARCH = 2


def fit_smooth_within(
    ctx: TrainingContext,
    ids: np.ndarray | None,
    l2: float,
    start: Weights,
    pass_s: float,
) -> FitResult | None:
    """``fit_smooth`` within the time budget ``ctx.deadline`` (a resumed
    run's earlier sessions counted): its iterations capped at the seconds
    left over ``pass_s``, the seconds of one loss+gradient pass on
    ``ctx.backend`` (timed by the caller), less the last line search's
    passes; None when not even one evaluation fits. Unbounded: ``fit_smooth``.
    The report's ``max_iter`` is the iteration cap it ran under."""
    config = ctx.config
    if not ctx.deadline.bounded:
        fit = fit_smooth(ctx, ids, l2, start)
        fit.report["max_iter"] = config.max_iter
        return fit
    evaluations = int(ctx.deadline.remaining() / max(pass_s, 1e-9)) - LAST_SEARCH
    if evaluations < 1:
        return None
    config = dataclasses.replace(config, max_iter=min(config.max_iter, evaluations))
    with warnings.catch_warnings():  # a fit cut by the budget is no failure
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = fit_smooth(
            dataclasses.replace(ctx, config=config),
            ids,
            l2,
            start,
            evaluations,
            # the time of an iteration's passes, line search included, still left
            stop=lambda: ctx.deadline.remaining() < LAST_SEARCH * pass_s,
        )
    fit.report["max_iter"] = config.max_iter
    return fit


def refit_active(
    ctx: TrainingContext, weights: Weights, l2: float, tol: float = 0.0
) -> tuple[Weights, dict]:
    """MAP weights of the active set of ``weights`` (and the bias) under
    L(w) + l2/2 ||w||^2, warm-started, by a grafting round's solver on the
    unbounded problem (``train.selection.solver``: Newton, a curvature pass
    per iteration and a handful per refit, or L-BFGS), to the largest
    gradient entry ``tol`` (0: ``train.gtol``). Bayes-factor's OptMAP
    (Daume 2004, section 3.5) and the refit after a multi-feature SGC / IFS
    stage."""
    cfg = ctx.config
    space = ctx.backend.space
    ids, n = weights.active_ids(), len(weights.values)
    solver = choose_solver(cfg.selection.solver, n + space.n_bias, cfg.selection.newton_max_active)
    obj = Objective(ctx.backend, ids, l2=l2, scaling=ctx.scaling)
    res = SOLVERS[solver](
        obj,
        obj.theta(weights),
        orthant_problem(np.zeros(n), 0.0, space.n_bias),
        SolverOptions(
            tol=tol or cfg.gtol,
            max_iter=cfg.max_iter,
            memory=cfg.memory,
            ftol=cfg.ftol,
            full_gradient=False,
        ),
    )
    w = res.theta[:n].copy()
    report = {
        "objective": res.value,
        "loss": res.value - 0.5 * l2 * float(w @ w),
        "evaluations": res.evaluations,
        "converged": res.converged,
        "solver": solver,
    }
    return Weights(ids.copy(), w, res.theta[n:].copy() if space.bias else None), report


def fit_mle(ctx: TrainingContext) -> FitResult:
    return fit_smooth(ctx, None, 0.0)


def fit_l2(ctx: TrainingContext) -> FitResult:
    return fit_smooth(ctx, None, ctx.config.l2)


def fit_cutoff(ctx: TrainingContext) -> FitResult:
    counts = ctx.backend.run(FeatureCountTask()).counts
    ids = np.flatnonzero(counts >= ctx.config.cutoff)
    log.info("count cutoff %d keeps %d of %d features", ctx.config.cutoff, len(ids), len(counts))
    result = fit_smooth(ctx, ids, ctx.config.l2)
    result.report["cutoff"] = ctx.config.cutoff
    return result
