"""Training: ``train()`` runs a method of the registry (registry.py) over a
backend and reports on it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from .backends import Backend
from .blas import blas_threads
from .choice import folds, path
from .config import TrainConfig
from .errors import NumericError, check_finite
from .kernels import MomentsTask, Weights
from .kernels.conjunctions import Conjunctions
from .registry import METHODS, method
from .selection.base import FitResult, TrainingContext, evaluate
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
) -> FitResult:
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
    warm_start : Weights or None
        Warm start of grafting (``TrainingContext.start``); other methods
        ignore it.
    warm_conjunctions : Conjunctions or None
        The conjunctions ``warm_start`` is over when it is a combination-
        features model (``FitResult.conjunctions``), e.g. the previous point
        of a descending gamma1 grid.

    Raises
    ------
    NumericError
        If a pass's loss or gradient, a round's result, or the final
        objective or weights are not finite (nothing is returned to save).
    """
    start, passes0 = time.perf_counter(), backend.passes
    backend, heldout, config, auto = folds.automatic_choice(backend, heldout, config)
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
    )
    log.info(
        "training %s on %d candidate features (%s events)",
        config.method,
        backend.space.n_features,
        backend.space.shape,
    )
    try:
        with blas_threads(config.selection.blas_threads):
            fit = method(config.method).fit_function()
            if config.choice.folds > 1:
                result = folds.fit_folds(ctx, fit)
            else:
                result = (path.fit_path if config.choice.path else fit)(ctx)
    except NumericError as e:  # name the method once, whichever pass raised
        if str(e).startswith(config.method):
            raise
        raise NumericError(f"{config.method}: {e}") from e
    report = result.report
    if auto:
        report["folds"].update(auto)
    # the last gate before a model exists: never hand back NaN weights or objective
    check_finite(
        f"{config.method}: the trained model",
        objective=report.get("objective"),
        weights=result.weights.values,
        bias=result.weights.bias,
    )
    if result.stop is not None:
        report.update(stopped=result.stop.message, stop_reason=result.stop.reason.value)
    report.update(
        method=config.method,
        nonzero_weights=result.weights.nnz,
        candidate_features=backend.space.n_features,
        passes=backend.passes - passes0,
        wall_s=round(time.perf_counter() - start, 3),
    )
    refitted = report.get("refit", {}).get("chosen_fit")
    if refitted is not None:  # the model saw the held-out events: the chosen fit's figures
        report.update(
            heldout_accuracy=refitted["heldout_accuracy"], heldout_loss=refitted["heldout_loss"]
        )
    elif heldout is not None:
        stats = evaluate(heldout, result.weights, scaling, result.conjunctions)
        report.update(heldout_accuracy=stats.accuracy, heldout_loss=stats.mean_loss)
    result.scaling = scaling
    report["unconverged"] = unconverged(report, result.stop)
    for reason in report["unconverged"]:
        log.warning("%s: not converged: %s", config.method, reason)
    report["warnings"] = budget_warnings(report, result.stop)
    for warning in report["warnings"]:
        log.warning("%s: %s", config.method, warning)
    log.info(
        "done: objective %.10g, %d non-zero weights, %d passes, %.1fs",
        report.get("objective", float("nan")),
        report["nonzero_weights"],
        report["passes"],
        report["wall_s"],
    )
    return result


#: Run-control caps (``train.selection``): a run they end is the run asked for.
RUN_CAPS = (StopReason.MAX_ROUNDS, StopReason.MAX_SECONDS)


def unconverged(report: dict, stop: Stop | None) -> list[str]:
    """Why a run stopped without meeting its own criterion ([] when it met
    it), from its report and its ``stop``: L-BFGS not converged (smooth
    methods, which have no stop), a round's solver not converged (the
    rounds' ``converged``), or the KKT certificate failed (grafting family).
    A stop at a run-control cap (``max_rounds``, ``max_seconds``:
    ``RUN_CAPS``) is the run the user asked for, with a saved model: its
    certificate is reported but not held against it (``budget_warnings``
    says so). The CLI exits 4 on any reason (cli.py)."""
    reasons = []
    reason = stop.reason if stop is not None else None
    if stop is None and report.get("converged") is False:
        reasons.append(f"L-BFGS did not converge: {report.get('optimizer_message', '')}")
    rounds = [
        str(r.get("round")) for r in report.get("rounds") or [] if r.get("converged") is False
    ]
    if rounds:
        reasons.append(f"the solver did not converge in round(s) {', '.join(rounds)}")
    kkt = report.get("kkt")
    if kkt and not kkt.get("passed") and reason not in RUN_CAPS:
        reasons.append(
            f"KKT certificate failed: max zero-weight |gradient| {kkt['max_zero_gradient']:.4g} "
            f"(bound {kkt['bound']:.4g}), max active violation "
            f"{kkt['max_active_violation']:.3g} (tol {kkt['tol']:.3g})"
        )
    return reasons


def budget_warnings(report: dict, stop: Stop | None) -> list[str]:
    """What the report warns of (not an error, exit 0): a run ended by its
    time budget ``max_seconds`` saved the model it had (a stage method with
    held-out data: its best held-out stage so far; else its last round),
    which a resumed run with a larger budget can improve."""
    if stop is None or stop.reason is not StopReason.MAX_SECONDS:
        return []
    kept = "the best held-out stage so far" if report.get("choice") else "the last round"
    return [
        f"time budget reached ({stop.message}): the model is {kept}; --resume with a larger "
        "train.selection.max_seconds continues the run"
    ]


__all__ = [
    "METHODS",
    "FitResult",
    "TrainingContext",
    "budget_warnings",
    "evaluate",
    "train",
    "unconverged",
]
