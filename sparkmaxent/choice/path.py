"""Regularization paths with warm starts and held-out choice
(``train.choice.path``), in the style of glmnet (Friedman, Hastie &
Tibshirani 2010, section 2.5) and scikit-learn's LogisticRegressionCV:
grafting over gamma1 (from gamma1_max, the largest |dL/dw_j| at the
bias-only model: Eq. 5 of Riezler & Vasserman 2004), optionally one path
per l2 mix or gamma2 (elastic net); l2 over gamma2 = 1 / (C W). Each point
is warm-started from the previous one and scored on the held-out data
(choice/heldout.py); a path stops by choice/stop_rule.py. A point after
the first runs on a pass budget (``cut_passes`` times the passes before
it): spent below the best so far, it is cut; else it goes on to the
optimum without paying a pass twice. ``max_weights`` stops a path after
its first denser point. The chosen penalty is then refitted on the
training and held-out events together (``refit``).
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from .. import registry, storage
from ..errors import ConfigError
from ..kernels import Weights
from ..kernels.conjunctions import Conjunctions
from ..kernels.loss import LossGradTask
from ..methods.baselines import fit_smooth
from ..methods.grafting import Grafting, variant
from ..problem.objective import checked_pass
from ..selection.base import FitResult, TrainingContext
from ..selection.reporting import PLOTS_DIR
from .heldout import PATH_PLOT, measure_weights, write_path_plot
from .mixes import elastic_paths, elastic_variants
from .points import (
    PointFit,
    checked_grid,
    grafting_point,
    l2_point,
    point_context,
    refit,
    round_size,
    time_spent,
    within_reserve,
)
from .sections import PathPoint, PathSection, VersusAtoms
from .stop_rule import Measure, choose, difference_se, stop_rule

log = logging.getLogger(__name__)

#: methods with a penalty path (registry.py); the stage methods choose a stage instead
PATH_METHODS = registry.names(lambda m: m.path is not None)
#: points a default grid may be extended by at least, while its last point is the best
MAX_EXTENSION = 10


def geometric_grid(top: float, ratio: float, points: int) -> list[float]:
    """``points`` values from top * ratio^(1/points) down to top * ratio,
    evenly spaced on a log scale (top itself, where the model is empty, is
    left out)."""
    return [float(top * ratio ** (i / points)) for i in range(1, points + 1)]


def null_model(ctx: TrainingContext) -> Weights:
    """The bias-only model (all-zero without a bias): where a path starts.

    In closed form from one pass: with only a per-label bias b (never
    penalized, problem/objective.py) the conditional likelihood is that of
    one multinomial over labels, whose maximum is softmax(b) = the labels'
    weighted frequencies, i.e. b_y = log(n_y) up to a constant (taken so
    that b sums to 0, where L-BFGS from b = 0 stays: the bias gradient
    sums to 0). The counts are read off the bias gradient at w = 0, b = 0:
    sum_i c_i (1/K - [y_i = y]) = W / K - n_y. A label of no training
    weight has no finite optimum (b_y -> -inf): then the iterative fit,
    which stops at a finite one."""
    space = ctx.backend.space
    if not space.n_bias:
        return Weights.zeros(space)
    zero = Weights.zeros(space)
    lg = checked_pass(
        ctx.backend.run(LossGradTask(space, zero, ctx.scaling, np.zeros(0, dtype=np.int64))),
        "loss pass",
    )
    assert lg.grad_bias is not None, "a space with a bias has a bias gradient"
    counts = lg.weight / space.n_labels - np.asarray(lg.grad_bias, dtype=np.float64)
    if not np.all(counts > 1e-12 * lg.weight):
        log.info("bias-only model: a label has no training weight; fitting it iteratively")
        return fit_smooth(ctx, np.zeros(0, dtype=np.int64), 0.0).weights
    bias = np.log(counts)
    return dataclasses.replace(zero, bias=bias - bias.mean())


def gamma1_max(ctx: TrainingContext, start: Weights) -> float:
    """max |dL/dw_j| over all candidates at ``start`` (one pass): the
    smallest gamma1 at which every weight stays 0."""
    return Grafting(ctx, variant(ctx.config.method, ctx.config)).gradient_test.test(start).best


def fit_path(ctx: TrainingContext) -> FitResult:
    """Fit ``ctx.config.method``'s path and return the chosen point, its
    report extended with ``path`` (every point, the choice marked)."""
    cfg = ctx.config
    if ctx.heldout is None:
        raise ConfigError(
            "train.choice.path: a path is chosen on held-out data; give data.heldout "
            "(--heldout), prepare with data.heldout_fraction (--heldout-fraction), or "
            "choose by k folds (train.choice.folds)"
        )
    entry = registry.method(cfg.method)
    if entry.path is None:
        raise ConfigError(
            f"train.choice.path: method {cfg.method!r} has no penalty path (paths: "
            f"{', '.join(PATH_METHODS)}); {', '.join(registry.names(lambda m: m.best_stage))} "
            "keep their best held-out stage (train.choice.best_stage)"
        )
    start = null_model(ctx)
    if entry.combination and cfg.grafting.combination_degree > 1:
        return combination_path(ctx, start)
    variants = elastic_variants(ctx)
    if variants:
        stops: list[str | None] = []  # each variant's path's stop, in the order run

        def run_variant(sub, fit_point, cap):
            parameter, grid, _, top, extend = path_plan(sub, start)
            result, measure = _run_points(sub, parameter, grid, fit_point, top, extend, start, cap)
            path = result.report["path"]
            stops.append(path.stop)
            return result, path, measure

        chosen, path, at, fit_point = elastic_paths(ctx, variants, run_variant)
        for run, stopped in zip(path.elastic or [], stops, strict=False):
            run.stop = stopped
        path.plot = _plot(ctx, path.points, path.chosen)
        return refit(at, chosen, fit_point)
    return refit(ctx, run_path(ctx, *path_plan(ctx, start), start=start))


class CombinationPoints:
    """Point fits of a combination-features path (Okanohara & Tsujii
    2009): each point is a combination grafting run warm-started from the
    previous point's weights *and* conjunctions (``start_conjunctions``),
    which this object carries from point to point (``conjunctions``: the
    last point's, what the held-out events are widened by when it is
    scored). Started with a model's conjunctions (the chosen point's), it
    is the refit's point fit. A warm-started point's rounds add every atom
    or formed conjunction above gamma1, as grafting points do
    (``round_size``); new conjunctions enter by the search's ``n_best`` in
    the first combination round and by ``conjunction_growth`` times the
    last round's batch in each later one that finds some
    (``Combination.batch``): a fixed ``n_best`` took a round per ``n_best``
    conjunctions, and the rounds of a point grew with the model."""

    def __init__(self, conjunctions: Conjunctions):
        self.conjunctions = conjunctions

    def __call__(self, ctx, gamma, start, previous, budget, keep_going) -> FitResult:
        from ..methods.combination import fit_combination

        size = round_size(ctx, previous)
        graft = dataclasses.replace(ctx.config.grafting, l1=gamma, n_best=size)
        at = point_context(ctx, grafting=graft)
        at = dataclasses.replace(at, start=start, start_conjunctions=self.conjunctions)
        cfg = ctx.config.grafting
        growth = cfg.conjunction_growth if previous is not None else 1.0
        result = fit_combination(at, search_best=cfg.n_best, growth=growth)
        assert result.conjunctions is not None, "a combination fit has conjunctions"
        self.conjunctions = result.conjunctions
        return result


def combination_path(ctx: TrainingContext, start: Weights) -> FitResult:
    """The gamma1 path of grafting with combination features: the default
    grid (from the atoms' gamma1_max: a conjunction may enter at the first
    point) or ``l1_grid``, each point warm-started from the previous one's
    weights and conjunctions and certified over every conjunction up to the
    degree, scored on the held-out events widened by its conjunctions;
    the same stop and choice as any path. The atoms' own path over the
    same grid is run beside it and the combination is kept only when its
    chosen point beats the atoms' by more than the standard error of the
    paired held-out difference (``versus_atoms``). Then the refit
    (``refit``) of the kept choice on the training and held-out events,
    warm-started from its weights (and conjunctions). Pure l1 (no mixes)
    and no pass budget (no cut)."""
    from ..methods.combination import HeldoutWithConjunctions

    points = CombinationPoints(Conjunctions.empty(ctx.backend.space.n_predicates))
    assert ctx.heldout is not None, "fit_path checks"
    heldout = HeldoutWithConjunctions(ctx.heldout, lambda: points.conjunctions)
    choice = dataclasses.replace(ctx.config.choice, cut_passes=0.0)
    plain = dataclasses.replace(ctx, config=dataclasses.replace(ctx.config, choice=choice))
    sub = dataclasses.replace(plain, heldout=heldout)
    parameter, grid, _, top, extend = path_plan(sub, start)
    alone = dataclasses.replace(plain, output_dir=None)  # one plot: the combination path's
    atoms = _run_points(alone, parameter, list(grid), grafting_point, top, extend, start)
    comb = _run_points(sub, parameter, list(grid), points, top, extend, start)
    chosen, kept = versus_atoms(comb, atoms)
    if kept == "atoms":
        return refit(ctx, chosen, grafting_point)
    assert chosen.conjunctions is not None, "a combination fit has conjunctions"
    return refit(ctx, chosen, CombinationPoints(chosen.conjunctions))


def versus_atoms(
    comb: tuple[FitResult, Measure], atoms: tuple[FitResult, Measure]
) -> tuple[FitResult, str]:
    """The combination path's chosen point if its held-out score beats the
    atoms' own path's chosen point by more than the standard error of the
    paired difference (the same held-out events scored by both:
    ``stop_rule.difference_se``), else the atoms' point: conjunctions are
    many more candidates, so on a small held-out part the best of the
    combination path is the more optimistic of the two (the winner's
    curse of a wider search); a gain within the noise keeps the simpler
    model, as the one-standard-error rule does (Hastie, Tibshirani &
    Friedman 2009, section 7.10). Both paths' choices go to the report's
    ``path.versus_atoms`` (the other path's points too)."""
    (c, cm), (a, am) = comb, atoms
    gain, se = cm.score - am.score, difference_se(cm, am)
    kept = "combination" if gain > se else "atoms"
    log.info(
        "combination path: held-out gain %.4g over the atoms' path, standard error of the "
        "difference %.4g: keeping the %s model",
        gain,
        se,
        kept,
    )
    chosen, other = (c, a) if kept == "combination" else (a, c)
    chosen.report["path"].versus_atoms = VersusAtoms(
        kept,
        float(gain),
        float(se),
        c.report["path"].chosen_point,
        a.report["path"].chosen_point,
        other.report["path"].points,
    )
    return chosen, kept


def path_plan(
    ctx: TrainingContext, start: Weights
) -> tuple[str, list[float], PointFit, float | None, bool]:
    """(parameter, grid, point fit, the penalty before the grid's first
    point, whether the grid is a default one that may extend) of
    ``ctx.config.method``'s path from ``start``."""
    cfg = ctx.config
    if registry.method(cfg.method).path == "l1":
        if cfg.choice.l1_grid:
            return "l1", checked_grid(cfg.choice.l1_grid, "l1_grid"), grafting_point, None, False
        top = gamma1_max(ctx, start)
        grid = geometric_grid(top, cfg.choice.l1_ratio, cfg.choice.points)
        return "l1", grid, grafting_point, top, True
    if cfg.choice.l2_grid:
        return "l2", checked_grid(cfg.choice.l2_grid, "l2_grid"), l2_point, None, False
    return "l2", l2_grid(ctx), l2_point, None, True


def l2_grid(ctx: TrainingContext) -> list[float]:
    """gamma2 = 1 / (C W) for C in logspace(-4, 4, points), strongest first."""
    space = ctx.backend.space
    lg = checked_pass(
        ctx.backend.run(
            LossGradTask(space, Weights.zeros(space), ctx.scaling, np.zeros(0, dtype=np.int64))
        ),
        "loss pass",
    )
    return [float(1.0 / (c * lg.weight)) for c in np.logspace(-4, 4, ctx.config.choice.points)]


def run_path(
    ctx: TrainingContext,
    parameter: str,
    grid: list[float],
    fit_point: PointFit,
    previous: float | None = None,
    extend: bool = False,
    *,
    start: Weights,
) -> FitResult:
    """Fit ``grid`` in order, each point warm-started from the last (and
    told the previous penalty: ``previous`` before the first), score each
    on the held-out data, and return the chosen point. With ``extend`` (a
    default grid), a path whose last point is still the best goes on down
    by the grid's own ratio, up to max(``points``, MAX_EXTENSION) more points.
    Every point after the first runs on a pass budget (``scored_point``)."""
    return _run_points(ctx, parameter, grid, fit_point, previous, extend, start)[0]


def _run_points(
    ctx: TrainingContext,
    parameter: str,
    grid: list[float],
    fit_point: PointFit,
    previous: float | None,
    extend: bool,
    start: Weights,
    cap: int | None = None,
) -> tuple[FitResult, Measure]:
    """``run_path``, with the chosen point's held-out measure; ``cap``: the
    path's pass budget (None: none), the points after the first within it,
    a point that spends it cut and the path ended there."""
    choice = ctx.config.choice
    rows: list[PathPoint] = []
    scores: list[float] = []  # of the points fitted: what the grid's extension reads
    results: list[FitResult] = []
    measures: list[Measure] = []
    rule = stop_rule(choice)
    weights, best = start, -np.inf
    grid = list(grid)
    stopped = "end of the grid"
    for gamma in extended_grid(grid, scores, extend, max(choice.points, MAX_EXTENSION)):
        budget, spent = None, sum(r.passes for r in rows)
        if rows and choice.cut_passes:
            budget = max(1, int(np.ceil(choice.cut_passes * spent)))
        left = None if cap is None or not rows else cap - spent  # the first point: no cap
        t0 = ctx.deadline.elapsed()
        result, row, measure = scored_point(
            within_reserve(ctx), fit_point, gamma, weights, previous, budget, best, left
        )
        point_s = ctx.deadline.elapsed() - t0
        ctx.deadline.note_point(point_s, row.passes)  # the refit's reserve and its cap
        previous = gamma
        weights = result.weights
        rule.add(gamma, measure, row.features, eligible=not row.cut)
        row.below_best_se = rule.gaps[-1]
        rows.append(row)
        scores.append(row.score)
        results.append(result)
        measures.append(measure)
        log.info(
            "path %s %.4g: %d features, objective %.6g, held-out %s %.6g (accuracy %.4f), "
            "%d passes%s",
            parameter,
            gamma,
            row.features,
            row.objective,
            choice.criterion,
            row.score,
            row.heldout["heldout_accuracy"],
            row.passes,
            " (cut: below the best after its pass budget)" if row.cut else "",
        )
        if not row.cut:
            best = max(best, row.score)
        why = rule.why()
        if why is not None:
            log.info("path stopped: %s", why.message)
            stopped = f"stop rule: {why.message}"
            break
        if cap is not None and sum(r.passes for r in rows) >= cap:
            log.info("path stopped: its budget of %d passes is spent", cap)
            stopped = f"pass budget of {cap} spent"
            break
        if choice.max_weights and row.features > choice.max_weights:
            # an elastic-net path improves until gamma1 ~ 0, i.e. every candidate
            log.info("path stopped: %d non-zero weights > max_weights", row.features)
            stopped = f"{row.features} non-zero weights > max_weights"
            break
        if time_spent(ctx, point_s):
            stopped = budget_stop(ctx, scores)
            break
    chosen = _chosen(ctx, parameter, grid, rows, results)
    path = chosen.report["path"]
    path.stop = stopped
    return chosen, measures[path.chosen]


def budget_stop(ctx: TrainingContext, scores: list[float]) -> str:
    """The stop reason of a path ended by ``train.selection.max_seconds``,
    saying whether held-out was still improving (the last point fitted is
    the best so far): then a longer budget would likely choose a weaker
    penalty, and the chosen point is the budget's, not the path's (an
    elastic-net mix's path runs on its share: ``choice.mixes.mix_share``)."""
    improving = len(scores) > 1 and int(np.argmax(scores)) == len(scores) - 1
    stopped = f"max_seconds = {ctx.config.selection.max_seconds:g}"
    if ctx.deadline.seconds < ctx.config.selection.max_seconds:
        stopped += f" (this path's share: {ctx.deadline.seconds:.4g} s)"
    if improving:
        stopped += ": cut while held-out was still improving (the last point is the best)"
        log.warning("path %s", stopped)
    return stopped


def scored_point(
    ctx: TrainingContext,
    fit_point: PointFit,
    gamma: float,
    start: Weights,
    previous: float | None,
    budget: int | None,
    best: float,
    limit: int | None = None,
) -> tuple[FitResult, PathPoint, Measure]:
    """Fit one point on a pass ``budget`` (None: none) and score it (its
    ``PathPoint`` and its measure for the stop rule). A
    point whose budget runs out is scored where it stopped: below ``best``,
    it is cut (kept in the path, never chosen); otherwise its fit goes on
    from there without a budget (early stopping on held-out data, as in
    successive halving: Jamieson & Talwalkar 2016). The point then reaches
    the optimum an unbudgeted fit reaches, certified alike, without paying
    the budget's passes again (``continued_after``: the passes spent when
    the budget ran out). ``limit`` (a path's pass budget left; None: none)
    bounds it all: the point is cut once it has spent ``limit`` passes."""
    passes0 = ctx.backend.passes
    stop: dict = {}
    if limit is not None:
        budget = min(budget, limit) if budget is not None else limit

    def keep_going(weights: Weights) -> bool | int:
        stop["scores"], stop["measure"] = measure_weights(ctx, weights)
        spent = ctx.backend.passes - passes0
        stop.setdefault("passes", spent)  # when the first budget ran out
        if not stop["scores"]["heldout_score"] >= best or limit is not None and spent >= limit:
            return False
        log.info("path point %.4g spent a budget of %d passes above the best: going on", gamma,
                 spent)  # fmt: skip
        return True if limit is None else limit - spent

    result = fit_point(ctx, gamma, start, previous, budget, keep_going)
    rep = result.report
    cut = bool(rep.get("budget_spent"))
    # a cut point's weights are those keep_going scored
    scores, measure = (
        (stop["scores"], stop["measure"]) if cut else measure_weights(ctx, result.weights)
    )
    row = PathPoint(
        "l1" if registry.method(ctx.config.method).path == "l1" else "l2",
        gamma,
        features=int(result.weights.nnz),
        objective=rep.get("objective"),
        passes=ctx.backend.passes - passes0,
        converged=bool(rep.get("converged")),
        budget=budget,
        cut=cut,
        continued_after=None if cut else stop.get("passes"),
        heldout=scores,
        kkt_passed=None if result.certificate is None else result.certificate.passed,
    )
    return result, row, measure


def extended_grid(grid: list[float], scores: list[float], extend: bool, limit: int):
    """The grid's values, then (``extend``) more at the same ratio while the
    last point fitted is the best so far (``scores``: the held-out scores of
    the points fitted, appended by the caller); appended to ``grid`` as they go."""
    yield from list(grid)
    if not extend or len(grid) < 2:
        return
    ratio = grid[-1] / grid[-2]
    for _ in range(limit):
        if not scores or int(np.argmax(scores)) != len(scores) - 1:
            return
        grid.append(grid[-1] * ratio)
        log.info("path: the last point is the best so far; extending the grid to %.4g", grid[-1])
        yield grid[-1]


def _chosen(
    ctx: TrainingContext,
    parameter: str,
    grid: list[float],
    rows: list[PathPoint],
    results: list[FitResult],
) -> FitResult:
    """The chosen point's result, its report carrying the whole path."""
    choice = ctx.config.choice
    i = choose(
        [np.nan if r.cut else r.score for r in rows],
        [r.se for r in rows],
        [r.features for r in rows],
        choice.one_se,
    )
    for j, row in enumerate(rows):
        row.chosen = j == i
    chosen = results[i]
    log.info(
        "chose %s %.4g (point %d of %d): %d features, held-out %s %.6g",
        parameter,
        rows[i].gamma,
        i + 1,
        len(rows),
        rows[i].features,
        choice.criterion,
        rows[i].score,
    )
    chosen.report["path"] = PathSection(
        parameter, choice.criterion, choice.one_se, grid, i, rows, _plot(ctx, rows, i)
    )
    return chosen


def _plot(ctx: TrainingContext, rows: list[PathPoint], i: int) -> str | None:
    """plots/path.png of a path's points ``rows``, point ``i`` marked (None
    without an output directory or with plots off)."""
    if not (ctx.output_dir and ctx.config.selection.plots):
        return None
    return write_path_plot(
        [r.gamma for r in rows],
        [r.score for r in rows],
        [r.features for r in rows],
        "gamma1" if rows[0].parameter == "l1" else "gamma2",
        i,
        ctx.config.choice.criterion,
        storage.join(ctx.output_dir, PLOTS_DIR, PATH_PLOT),
    )
