"""Model choice by k-fold cross-validation on the training data
(``train.choice.folds = k``), as scikit-learn's LogisticRegressionCV does
it: the path point (grafting, l2 with ``train.choice.path``) or the stage
count (ifs, sgc, bayes-factor) with the best mean fold score is chosen
(``choice/heldout.py``'s criterion and rule; the standard error of the
mean over folds for the one-SE rule), then the model is refitted on all
the training data there.

Folds are whole groups, label-stratified and seeded (``fold_of_groups``,
as data/split.py's held-out split: units are groups, stratified by label
(a unit of one multiclass event: its label; a longer unit or a candidate
set: one stratum), ordered within a stratum by a seeded hash of the group
id; the i-th unit of a stratum goes to fold i mod k, so each fold holds
each label within one unit of 1/k); a fold's training and validation backends are the
training backend with each block cut to the fold's events
(``backends/subset.py``). Every fold fits the same grid, computed once on
all the training data, point by point and without cuts, so the fold
scores line up; a default grid goes on down while its last point has the
best mean fold score, and the path stops by the rule of a held-out path
(choice/stop_rule.py) with the folds as its units: the difference of
two points' mean fold scores is paired fold by fold. A grafting path runs
one such path per l2 mix and chooses among them as on held-out data
(choice/mixes.py), the standard errors those of the mean over folds.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from .. import registry
from ..backends.subset import FoldBackend
from ..backends.union import union_of
from ..errors import ConfigError
from ..hashing import GOLDEN, mix64
from ..kernels import Weights
from ..kernels.predict import EventScoresTask
from ..selection.base import FitResult, Method, TrainingContext
from .mixes import elastic_paths, elastic_variants
from .path import MAX_EXTENSION, PATH_METHODS, extended_grid, null_model, path_plan, scored_point
from .points import PointFit, time_spent
from .sections import PathPoint, PathSection
from .stop_rule import Measure, choose, stop_rule

log = logging.getLogger(__name__)


def _hash(values: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of int64 values xor a seed: a fixed, seeded order."""
    with np.errstate(over="ignore"):
        z = values.astype(np.uint64) ^ np.uint64(seed * GOLDEN % 2**64)
        return mix64(z + np.uint64(GOLDEN))


def fold_of_groups(
    group: np.ndarray, y: np.ndarray, k: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct groups, sorted; the fold 0..k-1 of each), from every
    event's ``group`` and label ``y`` (-1 for candidate sets: one stratum)."""
    if k < 2:
        raise ValueError(f"expected k >= 2 folds, got {k}")
    units, inverse, size = np.unique(group, return_inverse=True, return_counts=True)
    first_label = np.full(len(units), np.iinfo(np.int64).max)
    np.minimum.at(first_label, inverse, y.astype(np.int64))
    stratum = np.where(size == 1, first_label, -1)
    order = np.lexsort((units, _hash(units, seed), stratum))
    s = stratum[order]
    starts = np.r_[0, np.flatnonzero(s[1:] != s[:-1]) + 1]
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    fold = np.empty(len(units), dtype=np.int64)
    fold[order] = rank % k
    return units, fold


#: methods that choose a stage count by folds (registry.py; the path methods choose a point)
STAGE_METHODS = registry.names(lambda m: m.best_stage)


def automatic_folds(backend, heldout, config) -> tuple[int, int]:
    """(k, events) of ``train.choice.folds = 0``: k = ``auto_folds`` for an
    ``l2`` path over at most ``kfold_max_events`` events, or a ``grafting``
    path (with its l2 mixes) over at most ``kfold_max_events_grafting``, the
    held-out ones included, every event in a group (folds are groups); else
    k = 0 (the held-out part). Combination features keep the held-out part
    (their path is run against the atoms' on it). Counting costs one pass
    per backend."""
    choice = config.choice
    entry = registry.method(config.method)
    if choice.folds or not choice.path or entry.path is None:
        return 0, 0
    limit = choice.kfold_max_events_grafting if entry.path == "l1" else choice.kfold_max_events
    if not limit or entry.combination and config.grafting.combination_degree > 1:
        return 0, 0
    counts = [grouped_events(b) for b in (backend, heldout) if b is not None]
    events = sum(n for n, _ in counts)
    if not all(grouped for _, grouped in counts):  # folds are made of groups
        return 0, events
    return (choice.auto_folds if 0 < events <= limit else 0), events


def automatic_choice(backend, heldout, config) -> tuple:
    """(backend, heldout, config, report entries) of a run: with automatic
    folds (``automatic_folds``) the training and held-out backends joined
    (``backends.union.union_of``: in process, the held-out events shared out
    among the training blocks, as for a refit; a held-out block of its own
    spoils the Hessian-free round solver's combined Newton step and a fold
    path's points stall on it), no held-out part and
    ``folds = k``; else as given, entries {}."""
    k, events = automatic_folds(backend, heldout, config)
    if not k:
        return backend, heldout, config, {}
    log.info(
        "%d events <= train.choice.kfold_max_events%s: choosing by %d folds%s",
        events,
        "_grafting" if registry.method(config.method).path == "l1" else "",
        k,
        " of the training and held-out events" if heldout is not None else "",
    )
    config = dataclasses.replace(config, choice=dataclasses.replace(config.choice, folds=k))
    if heldout is not None:
        backend, heldout = union_of(backend, heldout), None
    return backend, heldout, config, {"automatic": True, "events": events}


def grouped_events(backend) -> tuple[int, bool]:
    """(events, whether every event carries a group id) of a backend: one pass."""
    space = backend.space
    ev = backend.run(EventScoresTask(space, Weights.zeros(space), None))
    return len(ev.c), bool(np.all(ev.group >= 0))


def fit_folds(ctx: TrainingContext, method: Method) -> FitResult:
    """Choose by k folds and refit on all the data (see the module doc);
    ``method`` is ``ctx.config.method``'s fit (the stage methods')."""
    cfg = ctx.config
    if not (cfg.method in STAGE_METHODS or (cfg.choice.path and cfg.method in PATH_METHODS)):
        raise ConfigError(
            f"train.choice.folds: method {cfg.method!r} has nothing to choose; folds "
            f"choose a path point ({', '.join(PATH_METHODS)} with train.choice.path) "
            f"or a stage ({', '.join(STAGE_METHODS)})"
        )
    folds = fold_backends(ctx)
    if cfg.method in STAGE_METHODS:
        return _stage_folds(ctx, folds, method)
    return _path_folds(ctx, folds)


def fold_backends(ctx: TrainingContext) -> list[tuple[FoldBackend, FoldBackend]]:
    """(training part, validation part) of each fold: one pass reads every
    event's group and label."""
    k, space = ctx.config.choice.folds, ctx.backend.space
    ev = ctx.backend.run(EventScoresTask(space, Weights.zeros(space), ctx.scaling))
    if np.any(ev.group < 0):
        raise ConfigError("train.choice.folds: the training events carry no group ids")
    units, fold = fold_of_groups(ev.group, ev.y, k, ctx.config.choice.fold_seed)
    if len(units) < k:
        raise ConfigError(f"train.choice.folds: {k} folds of {len(units)} groups of events")
    log.info("k-fold choice: %d folds of %d groups", k, len(units))
    return [
        (
            FoldBackend(ctx.backend, units[fold == f], False),
            FoldBackend(ctx.backend, units[fold == f], True),
        )
        for f in range(k)
    ]


def _fold_ctx(ctx: TrainingContext, train, validation) -> TrainingContext:
    """A fold's context: its parts, no early stop, cut, choice or output."""
    choice = dataclasses.replace(
        ctx.config.choice, patience=0, cut_passes=0.0, folds=0, best_stage=False
    )
    return dataclasses.replace(
        ctx,
        backend=train,
        heldout=validation,
        config=dataclasses.replace(ctx.config, choice=choice),
        output_dir=None,
        resume=False,
        on_round=None,
    )


def _mean_choice(scores: np.ndarray, sizes: np.ndarray, one_se: bool) -> tuple[int, dict]:
    """The chosen column of (fold x point) ``scores`` and the figures of the choice."""
    k = scores.shape[0]
    mean = scores.mean(axis=0)
    se = scores.std(axis=0, ddof=1) / np.sqrt(k)
    i = choose(mean.tolist(), se.tolist(), sizes.tolist(), one_se)
    return i, {
        "k": k,
        "chosen": i,
        "mean_score": mean.tolist(),
        "se": se.tolist(),
        "fold_scores": scores.tolist(),
    }


def _path_folds(ctx: TrainingContext, folds) -> FitResult:
    """The path's choice by k folds: one fold path (``_fold_path``) per
    elastic-net variant, the variants chosen among as on held-out data
    (``mixes.elastic_paths``: denser mixes while they gain beyond the
    noise, then the sparsest within one standard error of the best, the
    errors those of the mean over folds), or one path; then the chosen
    setting refitted on all the training data, warm-started from the mean
    of the folds' weights at the chosen point."""
    cfg = ctx.config
    start = null_model(ctx)
    fold_starts = [null_model(_fold_ctx(ctx, train, validation)) for train, validation in folds]

    def run_variant(sub, fit_point, cap):
        return _fold_path(sub, folds, start, fold_starts, fit_point, cap)

    variants = elastic_variants(ctx)
    if variants:
        (entries, weights), path, at, fit_point = elastic_paths(ctx, variants, run_variant)
        entries["elastic"] = [v.to_json() for v in path.elastic or []]
        entries["elastic_not_run"] = path.elastic_not_run
    else:
        at, fit_point = ctx, path_plan(ctx, start)[2]
        (entries, weights), path, _ = run_variant(ctx, fit_point, None)
    gamma = path.chosen_point.gamma
    log.info(
        "k-fold choice: %s %.4g%s (point %d of %d); refitting on all the data",
        path.parameter,
        gamma,
        "".join(f", {k} {v:g}" for k, v in path.what.items()),
        path.chosen + 1,
        len(path.points),
    )
    result = fit_point(at, gamma, weights, gamma, None, None)
    result.report["folds"] = {
        **entries,
        **path.what,
        "criterion": cfg.choice.criterion,
        "seed": cfg.choice.fold_seed,
    }
    return result


def _fold_path(
    ctx: TrainingContext,
    folds,
    start: Weights,
    fold_starts: list[Weights],
    fit_point: PointFit,
    cap: int | None,
) -> tuple[tuple[dict, Weights], PathSection, Measure]:
    """One path by k folds: every fold fits the same grid (computed once on
    all the training data from ``start``) point by point, each from its own
    previous point (from ``fold_starts`` first); a default grid whose last
    point has the best mean fold score goes on down at its own ratio
    (``extended_grid``, as a held-out path does), and the path stops by the
    held-out rule (``stop_rule``) read over the folds, or once its points
    spent ``cap`` passes (None: no cap). Returns (the report's ``folds``
    entries and the mean of the folds' weights at the chosen point; the
    path, one ``PathPoint`` of mean fold figures a point; the chosen point's
    measure, its units the fold scores)."""
    choice = ctx.config.choice
    parameter, grid, _, previous, extend = path_plan(ctx, start)
    fctxs = [_fold_ctx(ctx, train, validation) for train, validation in folds]
    warm = [(w, previous) for w in fold_starts]
    scores: list[list[float]] = []  # point x fold
    rows: list[PathPoint] = []
    means: list[float] = []  # mean fold score per point: what the extension reads
    mean_weights: list[Weights] = []
    rule = stop_rule(choice)  # the folds are its units: paired over folds
    limit, n_default = max(choice.points, MAX_EXTENSION), len(grid)
    for gamma in extended_grid(grid, means, extend, limit):
        fits = []
        for f, fctx in enumerate(fctxs):
            result, row, _ = scored_point(fctx, fit_point, gamma, *warm[f], None, -np.inf)
            warm[f] = (result.weights, gamma)
            fits.append(row)
        scores.append([r.score for r in fits])
        measure = Measure.of_units(scores[-1])
        rows.append(mean_point(parameter, gamma, fits, measure))
        means.append(measure.score)
        mean_weights.append(mean_of(ctx.backend.space, [w for w, _ in warm]))
        log.info(
            "k-fold path %s %.4g: %d features, mean held-out %s %.6g (accuracy %.4f; folds %s), "
            "%d passes",
            parameter,
            gamma,
            rows[-1].features,
            choice.criterion,
            means[-1],
            rows[-1].heldout["heldout_accuracy"],
            [round(s, 6) for s in scores[-1]],
            rows[-1].passes,
        )
        rule.add(gamma, measure, rows[-1].features)
        rows[-1].below_best_se = rule.gaps[-1]
        why = rule.why()
        if why is not None:
            log.info("k-fold path stopped: %s", why.message)
            break
        if cap is not None and sum(r.passes for r in rows) >= cap:
            log.info("k-fold path stopped: its budget of %d passes is spent", cap)
            break
        if time_spent(ctx):
            break
    del grid[len(rows) :]  # the points fitted
    table = np.asarray(scores).T  # fold x point
    i, entries = _mean_choice(table, np.asarray([r.features for r in rows]), choice.one_se)
    for j, row in enumerate(rows):
        row.chosen = j == i
    entries.update(
        parameter=parameter,
        grid=grid,
        extended_by=len(grid) - n_default,
        mean_accuracy=[r.heldout["heldout_accuracy"] for r in rows],
        features=[r.features for r in rows],
        passes=[r.passes for r in rows],
    )
    path = PathSection(parameter, choice.criterion, choice.one_se, grid, i, rows, None)
    return (entries, mean_weights[i]), path, Measure.of_units(table[:, i])


def mean_point(parameter: str, gamma: float, fits: list[PathPoint], measure: Measure) -> PathPoint:
    """A k-fold path's point: the folds' points at ``gamma`` (``fits``) in
    one row, their mean score and its standard error over the folds
    (``measure``), mean accuracy and non-zero weights, summed passes."""
    kkt = [r.kkt_passed for r in fits]
    return PathPoint(
        parameter,
        gamma,
        features=int(round(np.mean([r.features for r in fits]))),
        objective=None,
        passes=sum(r.passes for r in fits),
        converged=all(r.converged for r in fits),
        budget=None,
        cut=False,
        continued_after=None,
        heldout={
            "heldout_score": measure.score,
            "heldout_se": measure.se,
            "heldout_accuracy": float(np.mean([r.heldout["heldout_accuracy"] for r in fits])),
        },
        kkt_passed=None if None in kkt else all(kkt),
    )


def mean_of(space, weights: list[Weights]) -> Weights:
    """The mean of the folds' weights (their supports' union): the refit's
    warm start, close to the fit on all the data."""
    return Weights.from_dense(space, np.mean([w.to_dense(space) for w in weights], axis=0))


def _stage_folds(ctx: TrainingContext, folds, method: Method) -> FitResult:
    cfg = ctx.config
    scores, sizes = [], []
    for f, (train, validation) in enumerate(folds):
        # the folds and the final run split the time budget left
        fold = dataclasses.replace(
            _fold_ctx(ctx, train, validation), deadline=ctx.deadline.part(1 / (len(folds) + 1 - f))
        )
        rounds = method(fold).report["rounds"]
        scores.append([r.heldout_score for r in rounds])
        sizes.append([r.active for r in rounds])
        log.info("fold %d of %d: %d stages", f + 1, len(folds), len(rounds))
    n = min(len(s) for s in scores)
    if n == 0:
        raise ConfigError(f"train.choice.folds: a fold of {cfg.method} ran no stage")
    table = np.asarray([s[:n] for s in scores])
    i, report = _mean_choice(table, np.mean([s[:n] for s in sizes], axis=0), cfg.choice.one_se)
    log.info("k-fold choice: %d stages; refitting on all the data", i + 1)
    selection = dataclasses.replace(cfg.selection, max_rounds=i + 1)
    choice = dataclasses.replace(cfg.choice, folds=0, best_stage=False)
    refit = dataclasses.replace(
        ctx, config=dataclasses.replace(cfg, selection=selection, choice=choice)
    )
    result = method(refit)
    result.report["folds"] = {
        **report,
        "criterion": cfg.choice.criterion,
        "seed": cfg.choice.fold_seed,
        "parameter": "stages",
        "chosen_stages": i + 1,
    }
    return result
