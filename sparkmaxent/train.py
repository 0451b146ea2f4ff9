"""Training: ``train()`` runs a method of the registry (registry.py) over a
backend and reports on it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from .backends import Backend
from .backends.union import close_union
from .blas import blas_threads
from .choice import folds, path
from .config import TrainConfig
from .errors import NumericError, check_finite
from .kernels import MomentsTask, Scaling, Space, Weights
from .kernels.conjunctions import Conjunctions
from .registry import METHODS, method
from .report import RUN_CAPS, HeldoutFigures, RunReport
from .selection.base import FitResult, TrainingContext, evaluate_backend
from .selection.checkpoint import seconds_spent
from .selection.deadline import Deadline
from .selection.stops import Stop, StopReason

log = logging.getLogger(__name__)


def train(
    backend: Backend,
    config: TrainConfig,
    heldout: Backend | None = None,
    output_dir: str | None = None,
    resume: bool = False,
    on_round: Callable | None = None,
    warm_start: Weights | None = None,
    warm_conjunctions: Conjunctions | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> TrainResult:
    """Run ``config.method`` on the backend's events and report on it
    (``TrainResult``: the method's result and the run's ``RunReport``).

    Parameters
    ----------
    output_dir : str or None
        Selection methods checkpoint every round into
        ``<output_dir>/checkpoint`` and write plots to ``<output_dir>/plots``.
    resume : bool
        Continue a selection run from the checkpoint in ``output_dir``.
    on_round : callable or None
        Called with the selection loop's state after every round.
    warm_start : Weights or None
        Warm start of grafting (``TrainingContext.start``); other methods
        ignore it.
    warm_conjunctions : Conjunctions or None
        The conjunctions ``warm_start`` is over when it is a combination-
        features model (``FitResult.conjunctions``), e.g. the previous point
        of a descending gamma1 grid.
    clock : callable
        The clock of the run's time budget (``train.selection.max_seconds``,
        counted from here: selection/deadline.py) and of ``wall_s``.

    Raises
    ------
    NumericError
        If a pass's loss or gradient, a round's result, or the final
        objective or weights are not finite (nothing is returned to save).
    """
    # a resumed run's budget counts its earlier sessions (a k-fold choice splits what is left)
    earlier = seconds_spent(output_dir) if resume else 0.0
    deadline = Deadline(config.selection.max_seconds, clock, earlier)
    passes0 = backend.passes
    given = backend
    backend, heldout, config, auto = folds.automatic_choice(backend, heldout, config)
    try:
        scaling = None
        if config.standardize:
            scaling = backend.run(MomentsTask()).scaling()
        ctx = TrainingContext(
            backend,
            config,
            scaling,
            heldout,
            output_dir,
            resume,
            on_round,
            warm_start,
            warm_conjunctions,
            deadline,
        )
        log.info(
            "training %s on %d candidate features (%s events)",
            config.method,
            backend.space.n_features,
            backend.space.shape,
        )
        try:
            with blas_threads(config.selection.blas_threads):
                fit = method(config.method).fit_function(config.grafting.combination_degree > 1)
                if config.choice.folds > 1:
                    result = folds.fit_folds(ctx, fit)
                else:
                    result = (path.fit_path if config.choice.path else fit)(ctx)
        except NumericError as e:  # name the method once, whichever pass raised
            if str(e).startswith(config.method):
                raise
            raise NumericError(f"{config.method}: {e}") from e
        result.scaling = scaling
        wall_s = round(deadline.elapsed(), 3)
        return TrainResult(
            result, run_report(result, config, backend, heldout, auto, passes0, wall_s)
        )
    finally:
        if backend is not given:  # the training and held-out parts joined
            close_union(backend)


def run_report(
    result: FitResult,
    config: TrainConfig,
    backend: Backend,
    heldout: Backend | None,
    auto: dict,
    passes0: int,
    wall_s: float,
) -> RunReport:
    """The run's report around the method's section: checked finite (the
    last gate before a model exists), the held-out figures, and why it did
    not converge; logged."""
    report = RunReport(
        method=config.method,
        fit=result.report,
        nonzero_weights=result.weights.nnz,
        candidate_features=backend.space.n_features,
        passes=backend.passes - passes0,
        wall_s=wall_s,
        stop=result.stop,
        automatic_folds=auto,
    )
    check_finite(
        f"{config.method}: the trained model",
        objective=report.objective,
        weights=result.weights.values,
        bias=result.weights.bias,
    )
    # a refitted model saw the held-out events: the chosen fit's figures
    report.heldout = report.refit_heldout
    if report.heldout is None and heldout is not None:
        stats = evaluate_backend(heldout, result.weights, result.scaling, result.conjunctions)
        report.heldout = HeldoutFigures(stats.accuracy, stats.mean_loss)
    report.unconverged = unconverged(report)
    for reason in report.unconverged:
        log.warning("%s: not converged: %s", config.method, reason)
    report.warnings = budget_warnings(report)
    for warning in report.warnings:
        log.warning("%s: %s", config.method, warning)
    objective = report.objective
    log.info(
        "done: objective %.10g, %d non-zero weights, %d passes, %.1fs",
        float("nan") if objective is None else objective,
        report.nonzero_weights,
        report.passes,
        report.wall_s,
    )
    return report


@dataclass
class TrainResult:
    """What ``train()`` returns: the method's result (weights, scaling,
    conjunctions, stop) and the run's typed report (``report.RunReport``)."""

    fit: FitResult
    report: RunReport

    @property
    def weights(self) -> Weights:
        return self.fit.weights

    @property
    def scaling(self) -> Scaling | None:
        return self.fit.scaling

    @property
    def conjunctions(self) -> Conjunctions | None:
        return self.fit.conjunctions

    @property
    def stop(self) -> Stop | None:
        return self.fit.stop

    def space(self, atoms: Space) -> Space:
        """The weights' space, given the data's (``FitResult.space``)."""
        return self.fit.space(atoms)


def unconverged(report: RunReport) -> list[str]:
    """Why a run stopped without meeting its own criterion ([] when it met
    it): L-BFGS not converged (smooth methods, which have no stop), a
    round's solver not converged (the rounds' ``converged``), or the KKT
    certificate failed (grafting family). A stop at a run-control cap
    (``max_rounds``, ``max_seconds``: ``RUN_CAPS``) is the run the user
    asked for, with a saved model: its certificate is reported but not held
    against it (``budget_warnings`` says so). The CLI exits 4 on any reason
    (cli.py)."""
    reasons = []
    if report.stop is None and report.converged is False:
        reasons.append(f"L-BFGS did not converge: {report.optimizer_message}")
    rounds = report.unconverged_rounds
    if rounds:
        reasons.append(
            f"the solver did not converge in round(s) {', '.join(str(r) for r in rounds)}"
        )
    kkt = report.certificate
    if kkt is not None and not kkt.passed and not report.stopped_at_cap:
        reasons.append(
            f"KKT certificate failed: max zero-weight |gradient| {kkt.max_zero_gradient:.4g} "
            f"(bound {kkt.bound:.4g}), max active violation "
            f"{kkt.max_active_violation:.3g} (tol {kkt.tol:.3g})"
        )
    return reasons


def budget_warnings(report: RunReport) -> list[str]:
    """What the report warns of (not an error, exit 0): a run ended by its
    time budget ``max_seconds`` saved the model it had (a stage method with
    held-out data: its best held-out stage so far; else its last round),
    which a resumed run with a larger budget can improve."""
    stop = report.stop
    if stop is None or stop.reason is not StopReason.MAX_SECONDS:
        return []
    kept = "the best held-out stage so far" if report.stage_choice else "the last round"
    return [
        f"time budget reached ({stop.message}): the model is {kept}; --resume with a larger "
        "train.selection.max_seconds continues the run"
    ]


__all__ = [
    "METHODS",
    "RUN_CAPS",
    "FitResult",
    "RunReport",
    "TrainResult",
    "TrainingContext",
    "budget_warnings",
    "evaluate_backend",
    "train",
    "unconverged",
]
