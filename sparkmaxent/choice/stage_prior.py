"""The prior strength of a stage method's chosen stage, chosen on held-out
data before its refit (``train.choice.stage_prior_scales``).

SGC / IFS (Berger et al. 1996; Zhou et al. 2003) and the Bayes factor
(Daume III 2004) choose *which* features enter; the strength of the
Gaussian prior their weights are fitted under is a fixed default
(``train.ifs.gain_prior_variance``, ``train.bayes.prior_variance``, sigma^2
= 1 in sum units). That default is right for no particular corpus: the
l2 anchor, LogisticRegressionCV, chooses its C (the same sigma^2 in sum
units) on held-out data, and a model of a chosen subset of features wants
its own strength too (fewer features explain less of the data, so their
weights may need a weaker prior than all of them; short events with
little evidence per weight, a stronger one). So the chosen stage's
features (the set is fixed) are fitted on the training events under the
method's prior variance times each ``scale`` of the grid, strongest prior
first, each fit warm-started from the previous one (L-BFGS,
``baselines.fit_smooth``, as the refit), and scored on the held-out part
(``train.choice.criterion``); the paths' stop rule (``train.choice
.patience``, ``choice/stop_rule.py``) ends the walk once the scores fall
beyond the noise, and the best scale is kept. The refit on the training
and held-out events then uses it (``choice.heldout.refit_stage``). Only
held-out data decide; the test data are never seen.

The choice keeps ``train.choice.refit_reserve_passes`` passes' seconds of
``train.selection.max_seconds`` for the refit that follows it; when the
time runs out, the best scale so far is kept.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import numpy as np

from ..errors import ConfigError
from ..kernels import Weights
from ..kernels.loss import LossGradTask
from ..methods.baselines import fit_smooth_within
from ..problem.objective import checked_pass
from ..selection.base import TrainingContext
from .sections import PriorPoint
from .stop_rule import Measure, StopRule

#: a fit's held-out figures and its measure for the stop rule
MeasureFit = Callable[[TrainingContext, Weights], tuple[dict, Measure]]

log = logging.getLogger(__name__)


@dataclasses.dataclass
class PriorChoice:
    """The chosen ``scale`` of the method's prior variance, the tried
    points (the chosen one marked), the training fit at that scale (a
    warm start for the refit), and that fit's held-out figures and
    measure (to compare it with another feature set's, ``refit_labels``)."""

    scale: float
    points: list[PriorPoint]
    weights: Weights
    row: dict
    measure: Measure


def scale_grid(scales: list) -> list[float]:
    """``train.choice.stage_prior_scales`` (positive numbers) in walking
    order: strongest prior (smallest variance) first."""
    if not all(isinstance(v, (int, float)) and v > 0 for v in scales):
        raise ConfigError(
            f"train.choice.stage_prior_scales: expected positive numbers, got {scales!r}"
        )
    return sorted(float(v) for v in scales)


def choose_stage_prior(
    ctx: TrainingContext,
    weights: Weights,
    penalty: Callable[[float], float],
    reserve_s: float,
    measure: MeasureFit,
    ids: np.ndarray | None = None,
) -> PriorChoice | None:
    """The prior scale of the chosen stage's features (module doc):
    ``weights`` the chosen stage, ``penalty(W)`` the method's gamma2 on
    events of weight W, ``reserve_s`` the seconds kept for the refit,
    ``measure(ctx, weights)`` the held-out figures and stop-rule measure
    of a fit (``heldout.measure_weights``); ``ids``: another feature set
    to walk (every label's of the chosen predicates, ``refit_labels``),
    warm-started from ``weights`` (default: the active set of ``weights``).
    None when no scale is to be chosen (an empty grid, nothing to fit) or
    no fit fits in the time left."""
    grid = scale_grid(ctx.config.choice.stage_prior_scales)
    ids = weights.active_ids() if ids is None else ids
    if not grid or not len(ids) or ctx.heldout is None:
        return None
    left = ctx.deadline.remaining()
    if left - reserve_s <= 0:
        return None
    # the choice's own budget: what is left less the refit's reserve
    share = 1.0 if not ctx.deadline.bounded else max(0.0, 1 - reserve_s / left)
    part = dataclasses.replace(ctx, deadline=ctx.deadline.part(share))
    t0 = part.deadline.elapsed()
    lg = checked_pass(
        ctx.backend.run(LossGradTask(ctx.backend.space, weights, ctx.scaling, ids[:0])),
        "prior choice loss pass",
    )
    pass_s, base = part.deadline.elapsed() - t0, penalty(float(lg.weight))
    choice = ctx.config.choice
    rule = StopRule(patience=choice.patience, margin=choice.patience_se)
    points: list[PriorPoint] = []
    fits: list[Weights] = []
    measures: list[tuple[dict, Measure]] = []
    start = weights
    for scale in grid:
        l2 = base / scale
        passes0 = ctx.backend.passes
        fit = fit_smooth_within(part, ids, l2, start, pass_s)
        if fit is None:
            break
        row, held = measure(ctx, fit.weights)
        rule.add(scale, held, int(fit.weights.nnz))
        points.append(
            PriorPoint(scale, l2, ctx.backend.passes - passes0, bool(fit.report["converged"]), row)
        )
        fits.append(fit.weights)
        measures.append((row, held))
        start = fit.weights
        log.info(
            "prior scale %g (gamma2 %.4g): held-out %s %.6g, %d passes",
            scale,
            l2,
            choice.criterion,
            row["heldout_score"],
            points[-1].passes,
        )
        if not rule.go_on() or part.deadline.remaining() <= 0:
            break
    if not points:
        return None
    best = rule.choice()
    for i, (p, gap) in enumerate(zip(points, rule.gaps)):
        p.below_best_se, p.chosen = gap, i == best
    log.info(
        "chose the prior scale %g of %s for %d features",
        points[best].scale,
        [p.scale for p in points],
        len(ids),
    )
    return PriorChoice(points[best].scale, points, fits[best], *measures[best])


def stage_prior_weights(choice: PriorChoice | None, weights: Weights) -> Weights:
    """Where the refit starts: the chosen scale's training fit (same ids,
    closer to the refit's optimum), else the chosen stage's ``weights``."""
    if choice is None:
        return weights
    ids = weights.active_ids()
    at = dict(zip(choice.weights.active_ids().tolist(), choice.weights.values.tolist()))
    values = np.array([at.get(int(j), 0.0) for j in ids], dtype=float)
    return Weights(ids.copy(), values, choice.weights.bias)
