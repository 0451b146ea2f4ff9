"""Which features a stage method's refit fits
(``train.choice.refit_all_labels``): the chosen stage's own, or every
label's feature of each predicate it chose, or (``auto``) the better of
the two on held-out data.

SGC / IFS (Berger et al. 1996; Zhou et al. 2003) and the Bayes factor
(Daume III 2004) choose (predicate, label) pairs one by one, so a
predicate that predicts one label gets no weight against the others;
fitting every label of the chosen predicates keeps the selection a choice
of predicates (the sparsity is in the predicates) and lets the refit's
Gaussian prior share the evidence out among the labels. Which of the two
generalizes depends on the data (many labels and few events a label
favour the pairs' sparsity less), so ``auto`` decides as the rest of the
choice does, on held-out data only: both feature sets are fitted on the
training events under the refit's prior (its gamma2 on the training
events' weight, the scale chosen by ``choice.stage_prior``), each
warm-started (the all-labels fit from the pairs' fit, the new weights
at 0), and the one of the better held-out score (``train.choice
.criterion``) is refitted on the training and held-out events, from its
training fit. The choice keeps the refit's reserve of
``train.selection.max_seconds``; when either fit does not fit in the
time left, the chosen stage's own features are refitted."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import numpy as np

from ..kernels import MULTICLASS, Space, Weights
from ..kernels.loss import LossGradTask
from ..methods.baselines import fit_smooth_within
from ..problem.objective import checked_pass
from ..selection.base import TrainingContext
from .sections import LabelsChoice
from .stage_prior import PriorChoice, choose_stage_prior
from .stop_rule import Measure, difference_se

#: a fit's held-out figures and its measure (``heldout.measure_weights``)
MeasureFit = Callable[[TrainingContext, Weights], tuple[dict, Measure]]

log = logging.getLogger(__name__)


def all_label_ids(space: Space, ids: np.ndarray) -> np.ndarray:
    """Every label's feature (p, k) of each predicate p of the multiclass
    features ``ids`` (feature id p * K + k), sorted."""
    K = space.n_labels
    predicates = np.unique(ids // K)
    return (predicates[:, None] * K + np.arange(K)[None, :]).ravel().astype(np.int64)


def refit_features(
    ctx: TrainingContext,
    weights: Weights,
    start: Weights,
    penalty: Callable[[float], float],
    prior: PriorChoice | None,
    pass_s: float,
    reserve_s: float,
    measure: MeasureFit,
) -> tuple[np.ndarray, Weights, LabelsChoice | None, float]:
    """(the feature ids the refit fits, its warm start, the held-out
    choice or None, the scale of the method's prior variance it is refitted
    under) for the chosen stage ``weights`` (module doc): ``start`` the
    refit's warm start otherwise, ``penalty(W)`` the method's gamma2 on
    events of weight W, ``prior`` the scale chosen for the chosen stage's
    features (``stage_prior.choose_stage_prior``; None: scale 1),
    ``pass_s`` the seconds of a pass, ``reserve_s`` the seconds kept for
    the refit."""
    ids = weights.active_ids()
    scale = prior.scale if prior is not None else 1.0
    space, mode = ctx.backend.space, ctx.config.choice.refit_all_labels
    if mode == "false" or space.shape != MULTICLASS or not len(ids):
        return ids, start, None, scale
    every = all_label_ids(space, ids)
    if mode == "true":
        return every, start, None, scale
    if len(every) == len(ids) or ctx.heldout is None:
        return ids, start, None, scale  # nothing to choose between
    if prior is not None:
        return _joint_choice(ctx, weights, ids, every, start, penalty, prior, reserve_s, measure)
    scaled = lambda weight: penalty(weight) / scale  # noqa: E731
    got = _held_out_choice(ctx, ids, every, start, scaled, pass_s, reserve_s, measure)
    return (*got, scale)


def _log_choice(ctx, ids, every, gain, se, kept) -> None:
    log.info(
        "refit features: every label of the %d chosen features' predicates (%d features) "
        "gains %.4g held-out %s (standard error %.4g): refitting %s",
        len(ids),
        len(every),
        gain,
        ctx.config.choice.criterion,
        se,
        "every label's features" if kept == "all labels" else "the chosen stage's features",
    )


def _joint_choice(ctx, weights, ids, every, start, penalty, prior, reserve_s, measure):
    """``refit_features``'s ``auto`` with a grid of prior scales: every
    label's features walk the grid too (``choose_stage_prior``, warm-started
    from the chosen features' best fit), and the (feature set, scale) pair
    of the best held-out score is kept: a larger set may want another
    prior than the chosen stage's features."""
    passes0 = ctx.backend.passes + ctx.heldout.passes
    walk = choose_stage_prior(ctx, prior.weights, penalty, reserve_s, measure, ids=every)
    if walk is None:
        log.warning("refit features: no time left to fit every label's features; chosen kept")
        return ids, start, None, prior.scale
    gain = float(walk.measure.score - prior.measure.score)
    se = float(difference_se(walk.measure, prior.measure))
    kept = "all labels" if gain > 0 else "chosen"
    _log_choice(ctx, ids, every, gain, se, kept)
    at = walk if kept == "all labels" else prior
    choice = LabelsChoice(
        kept,
        next(p.l2 for p in at.points if p.chosen),
        int(len(ids)),
        int(len(every)),
        prior.row,
        walk.row,
        gain,
        se,
        ctx.backend.passes + ctx.heldout.passes - passes0,
        chosen_scale=prior.scale,
        all_scale=walk.scale,
        all_points=walk.points,
    )
    if kept == "all labels":
        return every, walk.weights, choice, walk.scale
    return ids, start, choice, prior.scale


def _held_out_choice(ctx, ids, every, start, penalty, pass_s, reserve_s, measure):
    """``refit_features``'s ``auto``: both sets fitted on the training
    events and scored on the held-out ones, the better kept."""
    left = ctx.deadline.remaining()
    if ctx.deadline.bounded and left - reserve_s <= 0:
        return ids, start, None
    share = 1.0 if not ctx.deadline.bounded else max(0.0, 1 - reserve_s / left)
    part = dataclasses.replace(ctx, deadline=ctx.deadline.part(share))
    passes0 = ctx.backend.passes + ctx.heldout.passes
    lg = checked_pass(
        ctx.backend.run(LossGradTask(ctx.backend.space, start, ctx.scaling, ids[:0])),
        "refit features loss pass",
    )
    l2 = penalty(float(lg.weight))
    fits, rows, measures = [], [], []
    for which in (ids, every):
        fit = fit_smooth_within(part, which, l2, fits[-1].weights if fits else start, pass_s)
        if fit is None:
            log.warning("refit features: no time left to fit both sets; the chosen stage's kept")
            return ids, start, None
        row, held = measure(ctx, fit.weights)
        fits.append(fit)
        rows.append(row)
        measures.append(held)
    gain = float(measures[1].score - measures[0].score)
    se = float(difference_se(measures[1], measures[0]))
    kept = "all labels" if gain > 0 else "chosen"
    _log_choice(ctx, ids, every, gain, se, kept)
    choice = LabelsChoice(
        kept,
        float(l2),
        int(len(ids)),
        int(len(every)),
        rows[0],
        rows[1],
        gain,
        se,
        ctx.backend.passes + ctx.heldout.passes - passes0,
    )
    fit = fits[1] if kept == "all labels" else fits[0]
    return (every if kept == "all labels" else ids), fit.weights, choice
