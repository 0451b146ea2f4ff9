"""Model choice on held-out data: a named criterion with its standard
error, the choice of a point (argmax, or the one-standard-error rule of
Breiman et al. 1984 / Hastie, Tibshirani & Friedman 2009, section 7.10),
the best stage of a selection run, and the plot of a path.

Criteria (``train.choice.criterion``), each to maximize:

- ``loglik``: mean held-out log-likelihood (minus ``heldout_loss``);
- ``accuracy``: weighted fraction of events whose top label is correct;
- ``chunk_f1``: CoNLL chunk F1 of IOB tags, sentences put back together
  by ``group`` / ``event_id`` (``evaluate.score_tagging``).

Standard errors are those of a mean over events (loglik, accuracy), with
the effective number of events (sum c)^2 / sum c^2; for chunk F1 the
binomial sqrt(F (1 - F) / gold chunks), an approximation.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import numpy as np

from .. import storage
from ..backends import Backend
from ..backends.union import close_union, union_of
from ..errors import ConfigError
from ..kernels import Scaling, Space, Weights
from ..kernels.loss import LossGradTask
from ..kernels.predict import EventScores, EventScoresTask
from ..methods.baselines import fit_smooth_within
from ..plots import new_figure, save_png
from ..problem.objective import checked_pass
from ..selection.base import BestStage, LoopState, RoundRecord, TrainingContext
from ..selection.deadline import refit_reserve_s
from .refit_labels import refit_features
from .sections import ChosenFit, RefitSkipped, StageChoice, StageRefit
from .stage_prior import choose_stage_prior, stage_prior_weights
from .stop_rule import Measure, StopRule, stop_rule

log = logging.getLogger(__name__)

#: Keys of LoopState.arrays holding the best stage's weights and per-event
#: held-out scores (checkpointed).
BEST_KEYS = (
    "choice_ids",
    "choice_values",
    "choice_bias",
    "choice_units",
    "choice_unit_weights",
)
PATH_PLOT = "path.png"


def heldout_labels(backend) -> list[str]:
    """The label names of a backend's dataset (chunk F1 needs them)."""
    info = getattr(backend, "info", None)
    return list(info.labels) if info is not None and info.labels else []


def criterion_score(scores: EventScores, criterion: str, labels: list[str]) -> dict:
    """Held-out accuracy, mean loss, and the criterion's score and standard
    error from per-event results."""
    c, known = scores.c, ~np.isnan(scores.loss)
    weight = float(c.sum())
    n_eff = weight**2 / float(c @ c) if weight else 0.0
    accuracy = float(c @ scores.hit) / weight if weight else float("nan")
    wk = float(c[known].sum())
    mean_loss = float(c[known] @ scores.loss[known]) / wk if wk else float("nan")
    if criterion == "loglik":
        var = float(c[known] @ (scores.loss[known] - mean_loss) ** 2) / wk if wk else 0.0
        score, se = -mean_loss, float(np.sqrt(var / max(n_eff, 1.0)))
    elif criterion == "accuracy":
        score, se = accuracy, float(np.sqrt(accuracy * (1 - accuracy) / max(n_eff, 1.0)))
    elif criterion == "chunk_f1":
        score, se = _chunk_f1(scores, labels)
    else:
        raise ConfigError(f"train.choice.criterion: unknown criterion {criterion!r}")
    return {
        "heldout_accuracy": accuracy,
        "heldout_loss": mean_loss,
        "heldout_score": score,
        "heldout_se": se,
    }


def _chunk_f1(scores: EventScores, labels: list[str]) -> tuple[float, float]:
    from ..evaluate import is_iob, score_tagging

    if not labels or not is_iob(labels) or np.any(scores.group < 0):
        raise ConfigError(
            "train.choice.criterion: chunk_f1 needs IOB chunk tags (B-X, I-X, O) on "
            "multiclass events that carry their sentence (conll format)"
        )
    names = np.asarray(labels + ["<unseen>"], dtype=object)
    gold = names[np.where(scores.y >= 0, scores.y, len(labels))]
    chunks = score_tagging(
        scores.group, scores.event_id, gold, names[scores.pred], labels, chunks=True
    )["chunks"]
    f1 = float(chunks["f1"])
    return f1, float(np.sqrt(f1 * (1 - f1) / max(int(chunks["n_gold"]), 1)))


def criterion_measure(scores: EventScores, criterion: str, row: dict) -> Measure:
    """The stop rule's measure of a held-out pass (choice/stop_rule.py):
    ``row``'s score and standard error (``criterion_score``) and, for
    loglik and accuracy, the per-event scores they are the weighted mean
    of, ordered by (group, event_id) when the events carry them so that
    two passes pair event by event whatever order the blocks came back in
    (chunk F1 is no mean over events: no units), with each event's hit
    (top label correct) in the same order, which the choice across l2
    mixes reads (``choice.mixes.denser_by_accuracy``)."""
    if criterion == "loglik":
        units = -scores.loss
    elif criterion == "accuracy":
        units = scores.hit.astype(float)
    else:
        return Measure(row["heldout_score"], row["heldout_se"])
    c, hits = scores.c, scores.hit.astype(float)
    if len(units) and np.all(scores.group >= 0) and np.all(scores.event_id >= 0):
        order = np.lexsort((scores.event_id, scores.group))
        units, c, hits = units[order], c[order], hits[order]
    return Measure(row["heldout_score"], row["heldout_se"], units, c, hits)


def measure_weights(ctx: TrainingContext, weights: Weights) -> tuple[dict, Measure]:
    """Held-out results of ``weights`` under the configured criterion
    (``criterion_score``) and their measure for the stop rule
    (``criterion_measure``); one pass."""
    assert ctx.heldout is not None, "callers check that there is held-out data"
    scores = ctx.heldout.run(EventScoresTask(ctx.heldout.space, weights, ctx.scaling))
    criterion = ctx.config.choice.criterion
    row = criterion_score(scores, criterion, heldout_labels(ctx.heldout))
    return row, criterion_measure(scores, criterion, row)


def score_on(backend, weights: Weights, scaling: Scaling | None, criterion: str) -> dict:
    scores = backend.run(EventScoresTask(backend.space, weights, scaling))
    return criterion_score(scores, criterion, heldout_labels(backend))


def keep_if_best(state: LoopState, row: dict, measure: Measure) -> None:
    """Remember the state's weights as the best stage when ``row``'s
    held-out score beats the best so far (kept in ``state.arrays``, so a
    checkpoint carries them), with the per-event scores of ``measure``
    that later stages are paired with (``stage_rule``)."""
    if state.best is not None and not row["heldout_score"] > state.best.score:
        return
    w = state.weights
    state.best = BestStage(state.round, float(row["heldout_score"]))
    none = np.zeros(0)
    state.arrays.update(
        choice_ids=w.active_ids().copy(),
        choice_values=w.values.copy(),
        choice_bias=w.bias.copy() if w.bias is not None else none,
        choice_units=measure.units if measure.units is not None else none,
        choice_unit_weights=measure.weights if measure.weights is not None else none,
    )


def not_improving(trace: list[RoundRecord]) -> list[RoundRecord]:
    """The stages whose held-out score did not beat the best before them
    (``keep_if_best``'s test; the first always does)."""
    best, rows = None, []
    for r in trace:
        if best is None or r.heldout_score > best:
            best = r.heldout_score
        else:
            rows.append(r)
    return rows


def stage_rule(ctx: TrainingContext, state: LoopState) -> StopRule | None:
    """The held-out stop rule of a stage run keeping its best stage (the
    paths' rule, ``stopping.stop_rule``: a stage per point), replayed over
    the stages already run (a resumed run: the best stage's per-event
    scores come from its checkpoint); None when the run does not keep its
    best stage or ``train.choice.patience`` is 0."""
    cfg = ctx.config.choice
    if ctx.heldout is None or not cfg.best_stage or not cfg.patience:
        return None
    rule = stop_rule(cfg)
    chosen = state.best.round if state.best is not None else None
    for row in state.trace:
        units = state.arrays.get("choice_units") if row.round == chosen else None
        if units is not None and len(units):
            measure = Measure(
                row.heldout_score, row.heldout_se, units, state.arrays["choice_unit_weights"]
            )
        else:
            measure = Measure(row.heldout_score, row.heldout_se)
        rule.add(row.round, measure, row.active)
    return rule


def best_stage_weights(space: Space, state: LoopState) -> Weights:
    """The weights of the best held-out stage so far (``keep_if_best``)."""
    a = state.arrays
    bias = a["choice_bias"] if space.bias else None
    return Weights(a["choice_ids"], a["choice_values"], bias)


def best_stage(ctx: TrainingContext, state: LoopState) -> tuple[Weights, StageChoice | None]:
    """The weights a stage method's run keeps: the best held-out stage
    (``train.choice.best_stage``), else the last; and the choice's report
    (None when no choice was made)."""
    cfg = ctx.config.choice
    if ctx.heldout is None or not cfg.best_stage or state.best is None:
        return state.weights, None
    if cfg.one_se:
        log.warning("train.choice.one_se applies to paths; a stage run keeps its best stage")
    weights = best_stage_weights(ctx.backend.space, state)
    chosen = state.best.round
    for row in state.trace:
        row.chosen = row.round == chosen
    choice = StageChoice(cfg.criterion, chosen, state.best.score, state.round)
    log.info(
        "kept stage %d of %d: best held-out %s %.6g",
        chosen,
        state.round,
        cfg.criterion,
        choice.heldout_score,
    )
    if ctx.output_dir and ctx.config.selection.plots and state.trace:
        from ..selection.reporting import PLOTS_DIR

        write_path_plot(
            [r.round for r in state.trace],
            [r.heldout_score for r in state.trace],
            [r.active for r in state.trace],
            "stage",
            chosen - 1,
            cfg.criterion,
            storage.join(ctx.output_dir, PLOTS_DIR, PATH_PLOT),
        )
    return weights, choice


def write_path_plot(
    x: list[float],
    scores: list[float],
    features: list[int],
    x_label: str,
    chosen: int,
    criterion: str,
    path: str,
) -> str | None:
    """PNG of a path: held-out ``scores`` and ``features`` (non-zero weights)
    against the path's penalty ``x`` (log scale) or stage (``x_label``
    "stage"), point ``chosen`` marked. Needs matplotlib; without it, None."""
    fig = new_figure("path plot")
    if fig is None:
        return None
    log_x = x_label != "stage"
    for i, (y, label) in enumerate(
        ((scores, f"held-out {criterion}"), (features, "non-zero weights"))
    ):
        ax = fig.add_subplot(1, 2, i + 1)
        ax.plot(x, y, marker="o", markersize=3)
        ax.axvline(x[chosen], color="tab:red", linestyle="--", label="chosen")
        if log_x:
            ax.set_xscale("log")
        ax.set_xlabel(x_label)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend()
    return save_png(fig, path)


#: the penalty of a stage refit given the event weight W it is fitted on:
#: gamma2 in the mean units of L (a prior sigma^2 in sum units is 1 / (sigma^2 W))
StagePenalty = Callable[[float], float]


def refit_follows(ctx: TrainingContext) -> bool:
    """Whether a stage run's chosen stage is refitted on the training and
    held-out events after it (``refit_stage``): held-out data, the best
    stage kept and ``train.choice.refit`` on."""
    choice = ctx.config.choice
    return ctx.heldout is not None and choice.best_stage and choice.refit


def refit_stage(
    ctx: TrainingContext,
    weights: Weights,
    choice: StageChoice | None,
    trace: list[RoundRecord],
    penalty: StagePenalty,
) -> tuple[Weights, StageRefit | RefitSkipped | None]:
    """The best stage's active features refitted on the training and
    held-out events together (``train.choice.refit``, as the paths'
    ``points.refit`` and LogisticRegressionCV's refit=True): the MAP
    weights of the same feature set, or of every label's feature of its
    predicates (``train.choice.refit_all_labels``, chosen on held-out data
    by ``choice.refit_labels``), and the bias, under the stage
    method's own prior, ``penalty(W)`` on the union's event weight W, its
    variance times the scale chosen on held-out data for the kept feature
    set (``choice.stage_prior``; 1 with ``train.choice.stage_prior_scales`` =
    []), warm-started from the kept set's training fit at that scale (else
    the chosen stage) by L-BFGS (``baselines.fit_smooth``; far fewer passes
    than the rounds' Newton-CG on long documents). Within
    ``train.selection.max_seconds`` (``ctx.deadline``, a resumed run's
    earlier sessions counted), the refit's iterations
    are capped at the seconds left over the time of its first pass (none
    left: no refit, ``skipped`` says so).
    Returns the weights and the report's ``refit`` (the refit's objective,
    loss and passes beside the chosen stage's fit and held-out figures);
    (``weights``, None) when no stage was chosen on held-out data or the
    refit is off."""
    if choice is None or not refit_follows(ctx):
        return weights, None
    assert ctx.heldout is not None, "refit_follows checks that there is held-out data"
    # in process and on Spark, the held-out events shared out among the
    # training blocks, as the paths' refit (``union_of``)
    whole = union_of(ctx.backend, ctx.heldout)
    try:
        return _refit_stage_on(whole, ctx, weights, choice, trace, penalty)
    finally:
        close_union(whole)


def _refit_stage_on(
    whole: Backend,
    ctx: TrainingContext,
    weights: Weights,
    choice: StageChoice,
    trace: list[RoundRecord],
    penalty: StagePenalty,
) -> tuple[Weights, StageRefit | RefitSkipped]:
    """``refit_stage`` on ``whole``, the training and held-out events together."""
    passes0, t0 = whole.passes, ctx.deadline.elapsed()
    lg = checked_pass(
        whole.run(LossGradTask(whole.space, weights, ctx.scaling, np.zeros(0, dtype=np.int64))),
        "refit loss pass",
    )
    pass_s = ctx.deadline.elapsed() - t0
    # the prior's strength chosen on held-out data (choice/stage_prior.py), the
    # refit's reserve of passes kept for it
    reserve = refit_reserve_s(ctx.config.choice, ctx.deadline, lambda: pass_s)
    chosen_from = whole.passes
    prior = choose_stage_prior(ctx, weights, penalty, reserve, measure_weights)
    # which features, at which scale: the chosen stage's or all labels of its
    # predicates, each at its own best scale of the grid (refit_labels.py)
    ids, start, labels, scale = refit_features(
        ctx,
        weights,
        stage_prior_weights(prior, weights),
        penalty,
        prior,
        pass_s,
        reserve,
        measure_weights,
    )
    passes0 += whole.passes - chosen_from  # the choices' passes are their points'
    l2 = penalty(float(lg.weight)) / scale
    values = weights.values
    log.info(
        "refitting stage %d's %d features on the training and held-out events (gamma2 %.4g)",
        choice.chosen_round,
        len(values),
        l2,
    )
    # L-BFGS-B checks its cap between iterations: the last line search's passes kept
    on_whole = dataclasses.replace(ctx, backend=whole)
    fit = fit_smooth_within(on_whole, ids, l2, start, pass_s)
    if fit is None:
        log.warning("no refit of the chosen stage: train.selection.max_seconds is spent")
        cap = ctx.deadline.seconds
        return weights, RefitSkipped(f"max_seconds = {cap:g} spent by the selection")
    rep = fit.report
    row = next(r for r in trace if r.round == choice.chosen_round)
    refit = StageRefit(
        l2,
        objective=rep["objective"],
        loss=rep["loss"],
        start_objective=lg.loss / lg.weight + 0.5 * l2 * float(values @ values),
        features=int(fit.weights.nnz),
        passes=whole.passes - passes0,
        converged=bool(rep["converged"]),
        iterations=rep["iterations"],
        max_iter=rep["max_iter"],
        chosen_fit=ChosenFit(
            row.objective,
            int(len(values)),
            dict(row.heldout),
            stage=choice.chosen_round,
        ),
        prior_scale=scale,
        prior_points=prior.points if prior is not None else [],
        labels=labels,
    )
    log.info(
        "refit: objective %.6g on training + held-out (%.6g at the chosen stage's weights), "
        "%d passes",
        refit.objective,
        refit.start_objective,
        refit.passes,
    )
    return fit.weights, refit
