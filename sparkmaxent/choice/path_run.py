"""One held-out path (``train.choice.path``) point by point: each point
warm-started from the last, scored on the held-out data, stopped by
choice/stop_rule.py, by a pass budget or the time budget; a default grid
goes on down at its own ratio while held-out still improves
(``extended_grid``). A ``PathRun`` keeps its state, so a path that ended
at its share of ``train.selection.max_seconds`` can go on from its last
point when time is left (``PathRun.resume``: the chosen elastic-net mix's
path, choice/mixes.py). The choice within a path: ``chosen_point``."""

from __future__ import annotations

import logging

import numpy as np

from .. import registry, storage
from ..kernels import Weights
from ..selection.base import FitResult, TrainingContext
from ..selection.reporting import PLOTS_DIR
from .heldout import PATH_PLOT, measure_weights, write_path_plot
from .points import PointFit, time_spent, within_reserve
from .sections import PathPoint, PathSection
from .stop_rule import Measure, choose, stop_rule

log = logging.getLogger(__name__)

#: an extended grid ends below this fraction of its first value: a penalty that small is
#: nil against the loss to double precision (a guard against a path that never ends, not
#: a choice rule: held-out ends an extension long before)
PENALTY_FLOOR = 1e-12


class PathRun:
    """The points of one path fitted so far and why it ended (``stopped``).

    ``grid``: its values (a default one, ``extend``, grows while held-out
    improves); ``previous``: the penalty before the first point;
    ``start``: the weights the first point starts from; ``cap``: the
    path's pass budget (None: none; an elastic-net mix past the listed
    ones, ``choice.mixes.extension_cap``). A point that spends what is
    left of ``cap`` below the best so far is cut and the path ends there;
    while its held-out score is the best so far (and time is left) the
    path goes on past the cap, so the cap never ends a path that still
    improves."""

    def __init__(
        self,
        ctx: TrainingContext,
        parameter: str,
        grid: list[float],
        fit_point: PointFit,
        previous: float | None,
        extend: bool,
        start: Weights,
        cap: int | None = None,
    ):
        self.ctx, self.parameter, self.fit_point = ctx, parameter, fit_point
        self.grid, self.n_grid, self.extend = list(grid), len(grid), extend
        self.previous, self.weights, self.cap = previous, start, cap
        self.rows: list[PathPoint] = []
        self.scores: list[float] = []  # of the points fitted: what the extension reads
        self.results: list[FitResult] = []
        self.measures: list[Measure] = []
        self.rule = stop_rule(ctx.config.choice)
        self.best = -np.inf
        self.stopped: str | None = None
        self.by_time = False  # ended by the time budget: ``resume`` may go on
        self.past_cap = False  # went on past ``cap`` while held-out improved
        self.last_point_s = 0.0  # the last point's seconds: how long the next is guessed

    def run(self) -> PathRun:
        """Fit points until the path ends; ``stopped`` says why."""
        self.stopped, self.by_time = None, False
        patience = self.ctx.config.choice.patience
        while True:
            if len(self.rows) == len(self.grid):
                more = grid_extension(self.grid, self.scores, self.extend, patience)
                if more is None:
                    break
                self.grid.append(more)
                log.info("path: held-out still improves at the grid's end; extending it to "
                         "%.4g", more)  # fmt: skip
            self.stopped = self._point(self.grid[len(self.rows)])
            if self.stopped is not None:
                return self
        self.stopped = grid_end(self.scores, len(self.grid) - self.n_grid)
        return self

    def resume(self, ctx: TrainingContext) -> bool:
        """Go on from the last point under ``ctx`` (its time budget: what
        the other paths left), when the path ended by its time share;
        whether it fitted a point more (none when its grid is fitted and
        held-out no longer improves: then the path keeps its stop)."""
        assert self.by_time, "only a path that its time share ended goes on"
        n, stopped = len(self.rows), self.stopped
        self.ctx = ctx
        log.info("path: going on from %s %.4g with %.4g s left", self.parameter,
                 self.grid[n - 1], ctx.deadline.remaining())  # fmt: skip
        self.run()
        if len(self.rows) == n:
            self.stopped, self.by_time = stopped, True
        return len(self.rows) > n

    def _point(self, gamma: float) -> str | None:
        """Fit and score the point ``gamma``; why the path ends after it (None: it goes on)."""
        ctx, choice, rows = self.ctx, self.ctx.config.choice, self.rows
        budget, spent = None, sum(r.passes for r in rows)
        if rows and choice.cut_passes:
            budget = max(1, int(np.ceil(choice.cut_passes * spent)))
        left = None  # the first point: no cap; a cap spent while improving: none
        if self.cap is not None and rows and self.cap > spent:
            left = self.cap - spent
        t0 = ctx.deadline.elapsed()
        result, row, measure = scored_point(
            within_reserve(ctx), self.fit_point, gamma, self.weights, self.previous, budget,
            self.best, left,
        )  # fmt: skip
        point_s = self.last_point_s = ctx.deadline.elapsed() - t0
        ctx.deadline.note_point(point_s, row.passes)  # the refit's reserve and its cap
        self.previous, self.weights = gamma, result.weights
        self.rule.add(gamma, measure, row.features, eligible=not row.cut)
        row.below_best_se = self.rule.gaps[-1]
        rows.append(row)
        self.scores.append(row.score)
        self.results.append(result)
        self.measures.append(measure)
        log.info(
            "path %s %.4g: %d features, objective %.6g, held-out %s %.6g (accuracy %.4f), "
            "%d passes%s",
            self.parameter,
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
            self.best = max(self.best, row.score)
        return self._why_end(row, point_s)

    def _why_end(self, row: PathPoint, point_s: float) -> str | None:
        """Why the path ends after its last point ``row`` (None: it goes on)."""
        ctx, choice = self.ctx, self.ctx.config.choice
        why = self.rule.why()
        if why is not None:
            log.info("path stopped: %s", why.message)
            return f"stop rule: {why.message}"
        improving = self.rule.best() == len(self.rows) - 1
        if self.cap is not None and sum(r.passes for r in self.rows) >= self.cap:
            if not improving:
                log.info("path stopped: its budget of %d passes is spent", self.cap)
                past = " (went on past it while held-out improved)" if self.past_cap else ""
                return f"pass budget of {self.cap} spent{past}"
            if not self.past_cap:
                log.info("path: its budget of %d passes is spent while held-out still "
                         "improves: going on", self.cap)  # fmt: skip
            self.past_cap = True
        if choice.max_weights and row.features > choice.max_weights:
            # an elastic-net path improves until gamma1 ~ 0, i.e. every candidate
            log.info("path stopped: %d non-zero weights > max_weights", row.features)
            return f"{row.features} non-zero weights > max_weights"
        if time_spent(ctx, point_s):
            self.by_time = True
            return budget_stop(ctx, self.scores)
        return None

    def chosen(self) -> tuple[FitResult, Measure]:
        """The chosen point's result (its report's ``path``: every point,
        the choice marked, why the path ended) and its held-out measure."""
        result = chosen_point(self.ctx, self.parameter, self.grid[: len(self.rows)], self.rows,
                              self.results)  # fmt: skip
        path = result.report["path"]
        path.stop = self.stopped
        return result, self.measures[path.chosen]


def run_points(
    ctx: TrainingContext,
    parameter: str,
    grid: list[float],
    fit_point: PointFit,
    previous: float | None,
    extend: bool,
    start: Weights,
    cap: int | None = None,
) -> tuple[FitResult, Measure]:
    """A whole path (``PathRun``): its chosen point and that point's measure."""
    return PathRun(ctx, parameter, grid, fit_point, previous, extend, start, cap).run().chosen()


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
    bounds it all: a point still below ``best`` when it has spent ``limit``
    passes is cut; one at or above it goes on (a path's pass budget never
    cuts a point that improves on the path)."""
    passes0 = ctx.backend.passes
    stop: dict = {}
    if limit is not None:
        budget = min(budget, limit) if budget is not None else limit

    def keep_going(weights: Weights) -> bool | int:
        stop["scores"], stop["measure"] = measure_weights(ctx, weights)
        spent = ctx.backend.passes - passes0
        stop.setdefault("passes", spent)  # when the first budget ran out
        if not stop["scores"]["heldout_score"] >= best:
            return False
        log.info("path point %.4g spent a budget of %d passes above the best: going on", gamma,
                 spent)  # fmt: skip
        return True if limit is None or spent >= limit else limit - spent

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


def grid_extension(
    grid: list[float], scores: list[float], extend: bool, patience: int
) -> float | None:
    """The next value of a grid whose values are all fitted (None: it
    ends): with ``extend`` (a default grid), one more at the grid's own
    ratio while held-out still improves, i.e. while the best of the points
    fitted (``scores``; the first of ties, so a plateau is no improvement)
    is one of the last max(1, ``patience``) points, the patience the stop
    rule gives a path (``train.choice.patience``). No fixed count: the
    stop rule, the pass and time budgets and ``max_weights`` end it as they
    end any path; ``PENALTY_FLOOR`` guards against a path that never ends."""
    if not extend or len(grid) < 2 or not scores:
        return None
    if len(scores) - 1 - int(np.argmax(scores)) >= max(1, patience):
        return None
    ratio = grid[-1] / grid[-2]
    if grid[-1] * ratio < grid[0] * PENALTY_FLOOR:
        return None
    return grid[-1] * ratio


def extended_grid(grid: list[float], scores: list[float], extend: bool, patience: int):
    """The grid's values, then those ``grid_extension`` adds (``scores``:
    of the points fitted, appended by the caller), each appended to
    ``grid`` as it goes."""
    yield from list(grid)
    while (more := grid_extension(grid, scores, extend, patience)) is not None:
        grid.append(more)
        log.info("path: held-out still improves at the grid's end; extending it to %.4g", more)
        yield more


def grid_end(scores: list[float], extended: int) -> str:
    """The stop reason of a path that fitted its whole (``extended``:
    by that many points) grid: saying so when its last point is still the
    best (held-out was improving when the grid ended: a user grid, or the
    extension's floor), where a longer grid would likely choose a weaker
    penalty."""
    stopped = "end of the grid" + (f" (extended by {extended} points)" if extended else "")
    if len(scores) > 1 and int(np.argmax(scores)) == len(scores) - 1:
        stopped += ": ended while held-out was still improving (the last point is the best)"
        log.warning("path %s", stopped)
    return stopped


def chosen_point(
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
        parameter, choice.criterion, choice.one_se, grid, i, rows, path_plot(ctx, rows, i)
    )
    return chosen


def path_plot(ctx: TrainingContext, rows: list[PathPoint], i: int) -> str | None:
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
