"""Elastic-net mixes in a path choice (``train.choice.l2_mixes``,
``elastic_grid``): which gamma1 paths run (one per l2 mix or gamma2), when
a denser mix is tried, the pass budget of a mix past the listed ones, and
which variant is kept (the sparsest within one standard error of the
best). The variants' paths are run by the caller: on held-out data
(choice/path.py) or by k folds (choice/folds.py)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import registry
from ..errors import ConfigError
from ..selection.base import TrainingContext
from ..selection.deadline import Deadline
from .points import (
    PointFit,
    checked_grid,
    grafting_point,
    mixed_point,
    path_reserve_s,
    time_spent,
)
from .sections import PathPoint, PathSection, PathVariant
from .stop_rule import Measure, accuracy_gain, choose, difference_se

log = logging.getLogger(__name__)


#: (what the variant is, e.g. {"l2_mix": 0.5}; its context; its point fit)
Variant = tuple[dict, TrainingContext, PointFit]
#: run_variant(its context, its point fit, its pass budget or None): the
#: variant's path, as (what the caller keeps of it: on held-out data the
#: chosen point's fit; its path; the chosen point's measure)
RunVariant = Callable[[TrainingContext, PointFit, int | None], tuple[Any, PathSection, Measure]]


def elastic_variants(ctx: TrainingContext) -> list[Variant]:
    """The gamma1 paths a grafting path choice runs: one per gamma2 of
    ``elastic_grid`` (the user's), else one per l2 mix of ``l2_mixes``
    (gamma2 = gamma1 x mix / (1 - mix) along the path: glmnet's alpha =
    1 - mix) when a mix is not 0 and no ``elastic_l2`` is set; [] for a
    single path."""
    cfg = ctx.config
    if registry.method(cfg.method).path != "l1":
        return []
    if cfg.choice.elastic_grid:
        out: list[Variant] = []
        for gamma2 in checked_grid(cfg.choice.elastic_grid, "elastic_grid", zero=True):
            graft = dataclasses.replace(cfg.grafting, elastic_l2=gamma2)
            sub = dataclasses.replace(ctx, config=dataclasses.replace(cfg, grafting=graft))
            out.append(({"elastic_l2": gamma2}, sub, grafting_point))
        return out
    mixes = cfg.choice.l2_mixes
    if not all(isinstance(m, (int, float)) and 0 <= m < 1 for m in mixes):
        raise ConfigError(f"train.choice.l2_mixes: expected numbers in [0, 1), got {mixes!r}")
    if cfg.grafting.elastic_l2 or not any(mixes):
        return []  # the one elastic_l2 given, or pure l1
    return [({"l2_mix": float(m)}, ctx, mixed_point(float(m))) for m in sorted(set(mixes))]


def elastic_paths(
    ctx: TrainingContext, variants: list[Variant], run_variant: RunVariant
) -> tuple[Any, PathSection, TrainingContext, PointFit]:
    """Elastic net (Zou & Hastie 2005): one gamma1 path per variant (a
    gamma2 of ``elastic_grid`` or an l2 mix of ``l2_mixes``) from the
    bias-only model, each run by ``run_variant`` (on held-out data,
    choice/path.py, or by k folds, choice/folds.py); of their chosen points the sparsest within one
    standard error of the best (``sparsest_within_noise``; glmnet chooses
    alpha and lambda on held-out data alike). l2 mixes run from pure l1 up
    while the last gains beyond the noise (``denser_mix_gains``,
    ``mix_stop``), past ``l2_mixes`` up to ``mix_max`` (``denser_mix``), each
    such path on a pass budget (``extension_cap``). Under
    ``train.selection.max_seconds`` each path runs within an equal share of
    the time left among the paths still to come (``mix_share``). The report's ``path``
    is the chosen variant's, ``path.elastic`` one row per variant run,
    ``path.elastic_not_run`` the rest. Returns the chosen variant's run
    (what ``run_variant`` keeps, its path) with its context and point fit
    (the refit's)."""
    fitted: list[tuple[Any, PathSection, TrainingContext, PointFit]] = []
    summary: list[PathVariant] = []
    measures: list[Measure] = []
    listed = len(variants)
    for what, sub, fit_point in variants:  # strongest l2 part first; denser mixes appended
        cap = extension_cap(ctx, summary, listed)
        share = mix_share(ctx, variants, len(summary))
        at = dataclasses.replace(sub, output_dir=None, deadline=share)  # one plot: the choice's
        kept, path, measure = run_variant(at, fit_point, cap)
        measures.append(measure)
        point = path.chosen_point
        path.what = what
        passes = sum(p.passes for p in path.points)
        seconds = share.seconds if share.bounded else None
        row = PathVariant(what, len(path.points), dataclasses.replace(point), passes, cap, seconds)
        summary.append(row)
        log.info(
            "elastic net %s: chose gamma1 %.4g, %d features, held-out %.6g",
            what,
            point.gamma,
            point.features,
            point.score,
        )
        fitted.append((kept, path, dataclasses.replace(sub, output_dir=ctx.output_dir), fit_point))
        if "l2_mix" in what and ctx.config.choice.mix_stop and not denser_mix_gains(measures):
            break
        if time_spent(ctx):
            break
        variants += denser_mix(ctx, variants, measures)
    points = [v.point for v in summary]
    i, gaps = sparsest_within_noise(points, measures)
    i, accuracy = denser_by_accuracy(i, points, measures, ctx.config.choice.mix_accuracy_gain)
    for j, run in enumerate(summary):
        run.point.chosen = j == i
        run.point.below_best_se = gaps[j]
        run.accuracy_gain = accuracy[j]
    best = fitted[i]
    path = best[1]
    path.elastic = summary
    path.elastic_not_run = [what for what, _, _ in variants[len(summary) :]]
    return best


def extension_cap(ctx: TrainingContext, done: list[PathVariant], listed: int) -> int | None:
    """The pass budget of the next variant's path: None for the ``listed``
    ones, else (a mix past ``l2_mixes``, toward l2) ``cut_passes`` times the
    passes of every path ``done`` (as a point's cut, for a whole path: near
    l2 a mix's points hold many times the weights of the listed mixes')."""
    if len(done) < listed or not ctx.config.choice.cut_passes:
        return None
    return max(1, int(np.ceil(ctx.config.choice.cut_passes * sum(v.path_passes for v in done))))


def mixes_to_come(ctx: TrainingContext, variants: list[Variant], done: int) -> int:
    """Time shares still to hand out (``done`` paths have run): one for
    each of the rest of ``variants`` and, of an l2 mix list, one more for
    the denser mixes ``denser_mix`` may append up to
    ``train.choice.mix_max`` together (whether they run depends on
    held-out gains not yet seen). One share for all of them, not one each:
    counted each, they took so much of a tight budget from the densest
    listed mix on Brown genres that its path ended while its held-out
    score still rose; the first extension then has half of what is left,
    the next the rest."""
    left = len(variants) - done
    mix = variants[-1][0].get("l2_mix") if variants else None
    if mix is None:
        return left
    return left + int(round(1 - (1 - mix) / 10, 12) <= ctx.config.choice.mix_max)


def mix_share(ctx: TrainingContext, variants: list[Variant], done: int) -> Deadline:
    """The time budget of the next variant's path: an equal share of the
    seconds left (less the refit's reserve, ``points.path_reserve_s``)
    among the shares still to come (``mixes_to_come``), from now; unbounded
    without ``train.selection.max_seconds``. A path that ends early leaves
    its time to the later ones (each share is of what is left), so the
    denser mixes, whose paths hold more weights and cost more a point,
    get at least their share and whatever the sparser ones left: with
    the whole budget to the first paths, the mixes that l2-like data
    want would start with nothing left."""
    deadline = ctx.deadline
    if not deadline.bounded:
        return deadline
    left = deadline.remaining()
    usable = max(0.0, left - path_reserve_s(ctx))
    share = usable / max(1, mixes_to_come(ctx, variants, done))
    return deadline.part(share / left if left > 0 else 0.0)


def denser_mix_gains(measures: list[Measure]) -> bool:
    """Whether the last (densest) l2 mix's chosen point beats every sparser
    mix's by more than its standard error (``train.choice.mix_stop``): only
    then is a denser mix tried (one that does not is not chosen either:
    ``sparsest_within_noise``; the gain of more l2 is taken to shrink as
    the mix grows, as a path's past its best gamma1)."""
    if len(measures) < 2:
        return True
    last, best = measures[-1], max(measures[:-1], key=lambda m: m.score)
    gain = last.score - best.score
    if gain > last.se:
        return True
    if gain > 0:
        log.info(
            "elastic net: the last l2 mix gains %.4g held-out over the best sparser mix, "
            "within its standard error %.4g: no denser mix is tried",
            gain,
            last.se,
        )
    else:
        log.info(
            "elastic net: the last l2 mix scores %.4g held-out below the best sparser mix "
            "(standard error %.4g): no denser mix is tried",
            -gain,
            last.se,
        )
    return False


def denser_mix(ctx: TrainingContext, variants: list[Variant], measures: list) -> list[Variant]:
    """[the next l2 mix 1 - (1 - m) / 10] once the densest mix m of
    ``variants`` has run and beat every sparser one beyond its standard
    error (``denser_mix_gains``), if it is at most ``train.choice.mix_max``;
    else []. As a default gamma1 grid extends while its last point is the
    best, the mixes go on toward l2 while the densest is the choice."""
    what, sub, _ = variants[-1]
    mix = what.get("l2_mix")
    if mix is None or len(measures) != len(variants) or len(measures) < 2:
        return []  # a gamma2 grid, the densest mix not run yet, or nothing to beat
    denser = round(1 - (1 - mix) / 10, 12)
    if denser > ctx.config.choice.mix_max or not denser_mix_gains(measures):
        return []
    log.info("elastic net: the densest l2 mix %g still gains; trying %g", mix, denser)
    return [({"l2_mix": denser}, sub, mixed_point(denser))]


def sparsest_within_noise(
    points: list[PathPoint], measures: list[Measure]
) -> tuple[int, list[float]]:
    """The variant chosen among paths' chosen ``points`` (their held-out
    score, its standard error and their features): the one with the
    fewest non-zero weights whose score is at least the best minus the
    best's standard error (the one-standard-error rule across variants:
    a denser elastic net is kept only when its gain is beyond the noise of
    the held-out part; Hastie, Tibshirani & Friedman 2009, section 7.10).
    Also each variant's gap below the best in standard errors of the
    *paired* difference (``measures``: the same held-out events scored by
    both; ``stop_rule.difference_se``), for the report: far narrower than
    one score's error, it finds nearly every gain of a denser mix real, and
    as a choice rule it would keep the densest mix on every corpus."""
    scores = [p.score for p in points]
    best = int(np.nanargmax(scores))
    gaps = []
    for score, measure in zip(scores, measures, strict=True):
        se = difference_se(measure, measures[best])
        diff = scores[best] - score
        gaps.append(float(diff / se) if se > 0 else (np.inf if diff > 0 else 0.0))
    chosen = choose(scores, [p.se for p in points], [p.features for p in points], True)
    return chosen, gaps


def denser_by_accuracy(
    chosen: int, points: list[PathPoint], measures: list[Measure], tolerance: float
) -> tuple[int, list[tuple[float, float] | None]]:
    """Held-out accuracy as a second signal across variants
    (``train.choice.mix_accuracy_gain``): the variant ``chosen`` by the
    log-likelihood rule (``sparsest_within_noise``) gives way to the
    sparsest denser variant whose held-out score is still within one
    standard error of the best one's and whose held-out accuracy beats the
    chosen one's by more than ``tolerance`` plus one standard error of the
    paired difference (the same held-out events scored by both:
    ``stop_rule.accuracy_gain``). The one-standard-error rule keeps the
    sparse variant whenever the held-out part cannot tell the
    log-likelihoods apart; on a few dozen held-out long documents it cannot,
    while the denser mix classifies more of them right. A gain must be
    real (beyond the paired noise) and worth having (more than
    ``tolerance``, an accuracy a sparse model may give up), so that where
    accuracy is flat across mixes (short events with informative
    predicates) the sparse variant stays. Returns the variant kept and,
    per variant, its (accuracy gain over ``chosen``, standard error) or
    None (not comparable: no per-event hits, k folds)."""
    gains = [accuracy_gain(m, measures[chosen]) if j != chosen else None
             for j, m in enumerate(measures)]  # fmt: skip
    if tolerance >= 1:
        return chosen, gains
    scores = [p.score for p in points]
    best = int(np.nanargmax(scores))
    floor = scores[best] - points[best].se
    denser = sorted(
        (j for j, p in enumerate(points) if p.features > points[chosen].features),
        key=lambda j: points[j].features,
    )
    for j in denser:
        gain = gains[j]
        if gain is None or not scores[j] >= floor or not gain[0] - gain[1] > tolerance:
            continue
        log.info(
            "elastic net: variant %d gains %.4g held-out accuracy over the log-likelihood's "
            "choice (standard error of the paired difference %.4g, beyond %.4g): keeping it",
            j,
            gain[0],
            gain[1],
            tolerance,
        )
        return j, gains
    return chosen, gains
