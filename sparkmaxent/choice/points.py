"""One point of a regularization path (choice/path.py): a warm-started
fit at one penalty (grafting at gamma1, optionally an elastic-net mix; l2 at
gamma2) on a pass budget, and the refit of the chosen point on the training
and held-out events together (``train.choice.refit``); a user's grid of
penalties checked, and whether the time budget lets another point start."""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable

from ..backends.union import UnionBackend, close_union, union_of
from ..errors import ConfigError
from ..kernels import Weights
from ..methods.baselines import fit_smooth
from ..methods.grafting import fit_grafting_family
from ..selection.base import FitResult, TrainingContext
from ..selection.deadline import refit_reserve_s
from ..solvers import ConvergenceWarning
from .sections import ChosenFit, PathPoint, PathRefit, RefitSkipped

log = logging.getLogger(__name__)

#: asked with a point's weights when its pass budget is spent: go on without
#: it (True), on that many more passes (a number > 0: grafting), or stop (False)?
KeepGoing = Callable[[Weights], bool | int]
#: fit_point(ctx, gamma, start, previous gamma, pass budget, keep_going) of a path
PointFit = Callable[
    [TrainingContext, float, Weights, float | None, int | None, KeepGoing | None], FitResult
]


def mixed_point(mix: float) -> PointFit:
    """A grafting point at gamma1 with gamma2 = gamma1 mix / (1 - mix): the
    penalty lambda ((1 - mix) ||w||_1 + mix / 2 ||w||^2) of glmnet's
    elastic net at alpha = 1 - mix, lambda = gamma1 / (1 - mix)."""

    def fit(ctx, gamma, start, previous, budget, keep_going):
        graft = dataclasses.replace(ctx.config.grafting, elastic_l2=gamma * mix / (1 - mix))
        at = dataclasses.replace(ctx, config=dataclasses.replace(ctx.config, grafting=graft))
        return grafting_point(at, gamma, start, previous, budget, keep_going)

    return fit


def refit(ctx: TrainingContext, chosen: FitResult, fit_point: PointFit | None = None) -> FitResult:
    """The chosen penalty fitted again on the training and held-out events
    together (``train.choice.refit``; LogisticRegressionCV's refit=True,
    glmnet keeps lambda alike: the loss is a mean over events, so the same
    gamma means the same strength on more data), warm-started from the
    chosen point. In process and on Spark, the held-out events are shared
    out among the training blocks (``backends.union.union_of``; closed
    after the refit). The report is the
    refit's, with ``path`` and ``refit``: the chosen point's objective,
    weights and held-out figures beside the refit's. Skipped
    (``refit.skipped`` says why) when the grafting test would be block-wise
    over two distributed parts (a ``UnionBackend``: other backend kinds):
    its summaries do not add up over them."""
    if not ctx.config.choice.refit:
        return chosen
    assert ctx.heldout is not None, "a path has held-out data"
    whole = dataclasses.replace(ctx, backend=union_of(ctx.backend, ctx.heldout))
    try:
        return refit_on(whole, chosen, fit_point)
    finally:
        close_union(whole.backend)


def refit_on(whole: TrainingContext, chosen: FitResult, fit_point: PointFit | None) -> FitResult:
    """``refit`` on ``whole``, the context over the training and held-out
    events together (``union_of``)."""
    path = chosen.report["path"]
    point = path.chosen_point
    parameter, gamma = path.parameter, point.gamma
    space = whole.backend.space
    # with combination features: the atoms' and the chosen model's conjunctions' features
    n_features = space.n_features + len(chosen.conjunctions or ()) * space.n_labels
    split = isinstance(whole.backend, UnionBackend)  # no block-wise test over two parts
    if split and parameter == "l1" and n_features > whole.config.grafting.dense_test_max:
        reason = (
            f"{n_features} candidates > train.grafting.dense_test_max: "
            "the block-wise gradient test of training + held-out events is not available"
        )
        log.warning("no refit after the path: %s", reason)
        chosen.report["refit"] = RefitSkipped(reason)
        return chosen
    if fit_point is None:
        fit_point = grafting_point if parameter == "l1" else l2_point
    passes0 = whole.backend.passes
    log.info("refitting %s %.4g on the training and held-out events", parameter, gamma)
    result = fit_point(whole, gamma, chosen.weights, gamma, None, None)
    rep = result.report
    section = PathRefit(
        parameter,
        gamma,
        objective=rep.get("objective"),
        features=int(result.weights.nnz),
        passes=whole.backend.passes - passes0,
        converged=bool(rep.get("converged")),
        chosen_fit=ChosenFit(
            chosen.report.get("objective"),
            int(chosen.weights.nnz),
            dict(point.heldout),
        ),
        kkt_passed=None if result.certificate is None else result.certificate.passed,
    )
    stopped = "" if result.stop is None else result.stop.reason.value
    section.kept, section.why = kept_fit(point, section, stopped)
    log.info(
        "refit: %d features (chosen fit: %d), objective %.6g on training + held-out; "
        "kept the %s: %s",
        result.weights.nnz,
        chosen.weights.nnz,
        rep.get("objective", float("nan")),
        section.kept,
        section.why,
    )
    kept = result if section.kept == "refit" else chosen
    kept.report["path"], kept.report["refit"] = path, section
    return kept


def kept_fit(point: PathPoint, refit: PathRefit, stopped: str) -> tuple[str, str]:
    """Which fit a path's choice returns, and why: the refit when it is
    certified (KKT over all candidates; l2: converged), as
    LogisticRegressionCV's refit=True; an uncertified refit (ended by
    ``stopped``, e.g. the time budget) never replaces a certified chosen
    fit, whose held-out score is the one the choice was made on: the
    refit's own cannot be measured (it trained on the held-out events), and
    a refit cut in its first rounds holds only part of the model. With
    neither certified, the refit (it saw every event)."""
    done = refit.kkt_passed if refit.kkt_passed is not None else refit.converged
    if done:
        return "refit", "certified on the training and held-out events"
    chosen_done = point.kkt_passed if point.kkt_passed is not None else point.converged
    ended = f" (stopped: {stopped})" if stopped else ""
    if chosen_done:
        return "chosen fit", (
            f"the refit ended uncertified{ended}; the chosen point's fit is certified on the "
            "training events, and its held-out score is the one chosen"
        )
    return "refit", f"neither certified{ended}; the refit saw the held-out events too"


def round_size(ctx: TrainingContext, previous: float | None) -> int:
    """Candidates a path point's rounds add: ``n_best`` from the bias-only
    model (``previous`` None), and from a warm start (a later point or the
    refit) every candidate above gamma. That is the round size the
    sequential strong rule gave before (Tibshirani et al. 2012: its set
    |dL/dw_j| > 2 gamma - previous holds every candidate above gamma, as
    gamma <= previous), without its pass. Rounds of the n best by
    |gradient| only (as many as the warm start's weights, a working set
    that may double a round) took more rounds and passes for the same
    optimum: most of a round's new weights are dropped again either way
    (one predicate's labels carry one signal)."""
    if previous is None:
        return ctx.config.grafting.n_best
    return max(ctx.config.grafting.n_best, ctx.backend.space.n_features)


def grafting_point(
    ctx: TrainingContext,
    gamma: float,
    start: Weights,
    previous: float | None,
    budget: int | None,
    keep_going: KeepGoing | None,
) -> FitResult:
    """A grafting run at ``gamma`` from ``start``, each round adding
    ``round_size`` candidates; the point ends when the KKT certificate over
    all candidates passes, so the l1 optimum is the one of any round size.
    A spent budget that ``keep_going`` lifts leaves the run going on in
    the same loop (``Grafting.round``)."""
    cfg = ctx.config.grafting
    n_best = round_size(ctx, previous)
    grafting = dataclasses.replace(cfg, l1=gamma, n_best=n_best)
    return fit_grafting_family(
        point_context(ctx, grafting=grafting), ctx.config.method, start, budget, keep_going
    )


def l2_point(
    ctx: TrainingContext,
    gamma: float,
    start: Weights,
    previous: float | None,
    budget: int | None,
    keep_going: KeepGoing | None,
) -> FitResult:
    """An l2 fit at ``gamma`` from ``start``; a budget caps its L-BFGS
    iterations (one pass each, but for line-search steps). A spent budget
    that ``keep_going`` lifts goes on from the budgeted fit's weights (one
    pass at them again: L-BFGS restarts with an empty memory). Its
    iterations stop once ``ctx.deadline`` (``train.selection.max_seconds``;
    a path point's: less the refit's reserve) has run out."""
    stop = None if not ctx.deadline.bounded else lambda: ctx.deadline.remaining() <= 0
    if budget is None or budget >= ctx.config.max_iter:
        with warnings.catch_warnings():  # stopping at the time budget is no failure
            if stop is not None:
                warnings.simplefilter("ignore", ConvergenceWarning)
            return fit_smooth(point_context(ctx, l2=gamma), None, gamma, start, stop=stop)
    with warnings.catch_warnings():  # stopping at the budget is no failure
        warnings.simplefilter("ignore", ConvergenceWarning)
        at = point_context(ctx, l2=gamma, max_iter=budget)
        result = fit_smooth(at, None, gamma, start, stop=stop)
    rep = result.report
    rep["budget_spent"] = not rep["converged"] and rep["iterations"] >= budget
    if not rep["budget_spent"] or keep_going is None or not keep_going(result.weights):
        return result
    with warnings.catch_warnings():
        if stop is not None:
            warnings.simplefilter("ignore", ConvergenceWarning)
        rest = fit_smooth(point_context(ctx, l2=gamma), None, gamma, result.weights, stop=stop)
    for key in ("iterations", "evaluations"):
        rest.report[key] += rep[key]
    rest.report["trace"] = rep["trace"] + rest.report["trace"]
    rest.report["continued_after"] = rep["evaluations"]
    return rest


def point_context(ctx: TrainingContext, **changes) -> TrainingContext:
    """The context of one path point: its penalty, no checkpoints or plots
    of its own (a path is not resumable point by point), and no held-out
    pass per round (the path scores each point once)."""
    return dataclasses.replace(
        ctx,
        config=dataclasses.replace(ctx.config, **changes),
        heldout=None,
        output_dir=None,
        resume=False,
        on_round=None,
    )


def checked_grid(values: list, name: str, zero: bool = False) -> list[float]:
    """A user's grid ``train.choice.<name>`` (positive numbers; ``zero``: or
    0), strongest penalty first."""
    if not all(isinstance(v, (int, float)) and (v > 0 or zero and v == 0) for v in values):
        what = "non-negative" if zero else "positive"
        raise ConfigError(f"train.choice.{name}: expected {what} numbers, got {values!r}")
    return sorted((float(v) for v in values), reverse=True)


def path_reserve_s(ctx: TrainingContext) -> float:
    """Seconds a time-bound path keeps for the refit of its chosen point
    (``refit_reserve_s``), a refit pass counted at the costliest point's
    seconds a pass so far (``Deadline.pass_s``, which ``choice.path``
    records after each point), else at the run's mean seconds a training
    pass so far (no pass yet: 0); at most the costliest point's own
    seconds (``Deadline.point_s``). A refit starts from the chosen point's
    weights, so it costs about one point's fit, while newton-cg passes
    vary widely in cost (a direction pass runs CG to its forcing term):
    passes at the costliest pass's seconds over-reserve and cut the path
    early. A refit that the cap cuts uncertified does not replace a
    certified chosen fit (``kept_fit``)."""
    passes, deadline = ctx.backend.passes, ctx.deadline
    mean = deadline.elapsed() / passes if passes else 0.0
    reserve = refit_reserve_s(ctx.config.choice, deadline, lambda: max(deadline.pass_s, mean))
    return min(reserve, deadline.point_s) if deadline.point_s > 0 else reserve


def within_reserve(ctx: TrainingContext) -> TrainingContext:
    """``ctx`` with a time budget that ends ``path_reserve_s`` early: a
    path point's rounds stop while the refit's time is still left."""
    left, reserve = ctx.deadline.remaining(), path_reserve_s(ctx)
    if not reserve or left <= 0:
        return ctx
    return dataclasses.replace(ctx, deadline=ctx.deadline.part(max(0.0, 1 - reserve / left)))


def time_spent(ctx: TrainingContext, point_s: float = 0.0) -> bool:
    """Whether the run's time budget is spent for another point
    (``train.selection.max_seconds`` covers every point of a path and its
    refit): no point starts unless the seconds left, less the refit's
    reserve (``path_reserve_s``), hold ``point_s`` (the last point's
    seconds: a point is guessed to take as long as the one before, as
    ``selection.loop.limit_reached`` guesses a round)."""
    left, reserve = ctx.deadline.remaining(), path_reserve_s(ctx)
    if left - reserve > point_s:
        return False
    log.info(
        "path stopped: train.selection.max_seconds = %g: %.4g s left, %.4g s kept for the "
        "refit, the last point took %.4g s",
        ctx.deadline.seconds,
        max(left, 0.0),
        reserve,
        point_s,
    )
    return True
