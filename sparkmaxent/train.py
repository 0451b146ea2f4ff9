"""Training: a registry of methods over a backend, one report per run.

Baselines of the foundation (DESIGN.md section 1):

* ``mle``    minimize L(w) over all candidate features;
* ``l2``     minimize L(w) + gamma2/2 ||w||^2 (Gaussian prior) over all;
* ``cutoff`` the l0 baseline: keep features whose empirical count is at least
  ``cutoff`` (Koeling 2000; Zhou et al. 2003 use cutoff 7), then ``l2`` (or
  MLE when l2 = 0) over those only.

Feature-selection methods register themselves here with ``@register``
(``sparkmaxent/selection``: ``grafting``, ``mle-ifs``, ``l2-ifs``, ``ifs``,
``sgc``, ``sgc-lookahead``, ``bayes-factor``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .backends import Backend
from .config import TrainConfig
from .kernels import MomentsTask, Scaling, Weights
from .kernels.predict import EvalStats, EvalTask
from .kernels.stats import FeatureCountTask
from .problem import Objective
from .solvers import SolverOptions, minimize_lbfgs

log = logging.getLogger(__name__)


@dataclass
class TrainingContext:
    """Inputs of a training run (unchanged while it runs).

    ``output_dir``, ``resume`` and ``on_round`` concern selection methods:
    where their round checkpoints and plots go, whether to continue from the
    checkpoint there, and a hook called with the loop state after every
    round's checkpoint (tests use it to interrupt a run).
    """

    backend: Backend
    config: TrainConfig
    scaling: Scaling | None = None
    heldout: Backend | None = None
    output_dir: str | None = None
    resume: bool = False
    on_round: Callable | None = None


@dataclass
class FitResult:
    """What a method returns: the weights and a JSON-able report (train()
    adds the standardization the weights are relative to)."""

    weights: Weights
    report: dict = field(default_factory=dict)
    scaling: Scaling | None = None


Method = Callable[[TrainingContext], FitResult]
METHODS: dict[str, Method] = {}


def register(name: str) -> Callable[[Method], Method]:
    def deco(fn: Method) -> Method:
        METHODS[name] = fn
        return fn
    return deco


def lbfgs_options(cfg: TrainConfig) -> SolverOptions:
    return SolverOptions(max_iter=cfg.max_iter, memory=cfg.memory, tol=cfg.gtol, ftol=cfg.ftol)


def fit_smooth(ctx: TrainingContext, ids: np.ndarray | None, l2: float,
               start: Weights | None = None) -> FitResult:
    """Minimize L(w) + l2/2 ||w||^2 over ``ids`` (None: all features) with
    L-BFGS; one loss+gradient pass per evaluation."""
    obj = Objective(ctx.backend, ids, l2=l2, scaling=ctx.scaling)
    theta0 = obj.theta(start) if start is not None else np.zeros(obj.n_weights + ctx.backend.space.n_bias)
    res = minimize_lbfgs(obj, theta0, lbfgs_options(ctx.config))
    weights = obj.weights(res.theta).sparse()
    last = obj.last
    report = {
        "objective": res.objective, "l2": l2, "active_features": int(obj.n_weights),
        "loss": last.loss / last.weight if last else None,
        "train_accuracy": last.correct / last.weight if last else None,
        "iterations": res.iterations, "evaluations": res.evaluations,
        "converged": res.converged, "optimizer_message": res.message, "trace": res.trace,
    }
    return FitResult(weights, report)


@register("mle")
def fit_mle(ctx: TrainingContext) -> FitResult:
    return fit_smooth(ctx, None, 0.0)


@register("l2")
def fit_l2(ctx: TrainingContext) -> FitResult:
    return fit_smooth(ctx, None, ctx.config.l2)


@register("cutoff")
def fit_cutoff(ctx: TrainingContext) -> FitResult:
    if ctx.config.cutoff < 1:
        raise ValueError(f"method 'cutoff' needs train.cutoff >= 1, got {ctx.config.cutoff}")
    counts = ctx.backend.run(FeatureCountTask()).counts
    ids = np.flatnonzero(counts >= ctx.config.cutoff)
    log.info("count cutoff %d keeps %d of %d features", ctx.config.cutoff, len(ids), len(counts))
    result = fit_smooth(ctx, ids, ctx.config.l2)
    result.report["cutoff"] = ctx.config.cutoff
    return result


def evaluate(backend: Backend, weights: Weights, scaling: Scaling | None) -> EvalStats:
    """Accuracy, loss and confusion of ``weights`` on a backend's events."""
    return backend.run(EvalTask(backend.space, weights, scaling))


def train(backend: Backend, config: TrainConfig, heldout: Backend | None = None,
          output_dir: str | None = None, resume: bool = False,
          on_round: Callable | None = None) -> FitResult:
    """Run ``config.method`` on the backend's events and report on it.

    Parameters
    ----------
    output_dir : str or None
        Selection methods checkpoint every round into
        ``<output_dir>/checkpoint`` and write plots to ``<output_dir>/plots``.
    resume : bool
        Continue a selection run from the checkpoint in ``output_dir``.
    on_round : callable or None
        Called with the selection loop's state after every round.
    """
    if config.method not in METHODS:
        raise ValueError(f"unknown training method {config.method!r}: expected one of {sorted(METHODS)}")
    start, passes0 = time.perf_counter(), backend.passes
    scaling = None
    if config.standardize:
        scaling = backend.run(MomentsTask()).scaling()
    ctx = TrainingContext(backend, config, scaling, heldout, output_dir, resume, on_round)
    log.info("training %s on %d candidate features (%s events)", config.method,
             backend.space.n_features, backend.space.shape)
    result = METHODS[config.method](ctx)
    report = result.report
    report.update(method=config.method, nonzero_weights=result.weights.nnz,
                  candidate_features=backend.space.n_features,
                  passes=backend.passes - passes0, wall_s=round(time.perf_counter() - start, 3))
    if heldout is not None:
        stats = evaluate(heldout, result.weights, scaling)
        report.update(heldout_accuracy=stats.accuracy, heldout_loss=stats.mean_loss)
    result.scaling = scaling
    log.info("done: objective %.10g, %d non-zero weights, %d passes, %.1fs",
             report.get("objective", float("nan")), report["nonzero_weights"], report["passes"],
             report["wall_s"])
    return result


# Selection methods register themselves on import (after ``register`` exists).
from .selection import bayes as _bayes  # noqa: E402,F401
from .selection import grafting as _grafting  # noqa: E402,F401
from .selection import ifs as _ifs  # noqa: E402,F401
