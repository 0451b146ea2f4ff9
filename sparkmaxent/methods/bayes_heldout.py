"""Bayes-factor rounds when held-out data decide the stop (an extension of
Daume III 2004, Figure 1; docs/methods/bayes-factor.md, "Past the rule").

With a held-out part, the best held-out stage kept and the held-out stop
rule on (``beyond_rule``), the method's own stop (no proposal beats
beta_0, section 4) becomes one candidate stage and the run goes on while
held-out data improve. Rounds then grow while the best held-out score
improves and go back to the best stage with half as many picks when it
does not (``round_plan``, ``start_from``), as SGC's stages do, and a round
of any size rescores its proposals about ``train.bayes.heldout_rescorings``
times (``picks_per_rescoring``). Without held-out data none of this
applies: every round takes at most ``per_round`` picks from the last
round, and the rule ends the run.
"""

from __future__ import annotations

import logging

from ..choice.heldout import best_stage_weights, not_improving
from ..config.method_sections import BayesConfig
from ..kernels import Weights
from ..selection.base import LoopState, TrainingContext
from .round_details import BayesRound

log = logging.getLogger(__name__)


def beyond_rule(ctx: TrainingContext) -> bool:
    """Whether the rule's stop is a candidate stage rather than the end
    (``train.bayes.beyond_rule`` with a held-out best stage and the
    held-out stop rule, ``train.choice.patience``, to end the run)."""
    cfg = ctx.config
    return bool(
        cfg.bayes.beyond_rule
        and ctx.heldout is not None
        and cfg.choice.best_stage
        and cfg.choice.patience
    )


def past_rule(state: LoopState) -> bool:
    """Whether an earlier round of this run went on past the rule's stop."""
    return any(r.detail_as(BayesRound).beyond_rule for r in state.trace)


def picks_per_rescoring(cfg: BayesConfig, limit: int, grow: bool) -> int:
    """The picks a round takes together after each rescoring (Eq. 14) of
    a round of at most ``limit`` picks. With held-out data deciding the
    stop (``grow``), ``limit / heldout_rescorings`` rounded up, so that a
    round of any size rescores about ``heldout_rescorings`` times (a
    rescoring is one pass over the events; rounds of thousands of picks
    would otherwise pay thousands of passes); without, ``limit /
    per_round`` (one pick per rescoring at the default round size, as
    Figure 1)."""
    if grow:
        return -(-limit // cfg.heldout_rescorings)
    return max(1, limit // cfg.per_round)


def round_plan(ctx: TrainingContext, state: LoopState) -> tuple[int, int | None]:
    """Picks this round takes at most, and the stage it starts from when
    it goes back to the best one (None: from the last round). Without
    held-out data deciding the stop (``beyond_rule``): ``per_round``
    picks, from the last round. With it, rounds grow while held-out
    improves and back off when it does not (as SGC's stages grow):
    after a round that improved the best held-out score, twice the last
    round's picks, but at most half of the smallest round that did not
    improve it (a size that overshot is not tried again); after one
    that did not, half of the picks it took (fewer than its size when its
    proposals ran out) taken from the best stage instead, not on top of
    the overshoot; within ``per_round`` and ``train.bayes.round_growth_cap``
    times it. A round that did not improve with at most ``per_round``
    picks goes on from itself (from the best stage it would take the same
    picks again): the held-out stop rule (``train.choice.patience``)
    decides how far."""
    per_round = ctx.config.bayes.per_round
    if not state.trace or not beyond_rule(ctx):
        return per_round, None
    cap = per_round * ctx.config.bayes.round_growth_cap
    last = state.trace[-1].detail_as(BayesRound).round_size
    best = state.best
    if best is None or best.round != state.round:  # the last round did not improve
        # what it took: its proposals may have run out below its size, and half a
        # size above them would take the same picks from the best stage again
        took = min(last, state.trace[-1].added)
        if took > per_round:
            assert best is not None, "a held-out run's first round is its best stage"
            return max(took // 2, per_round), best.round
        return per_round, None
    overshot = [r.detail_as(BayesRound).round_size for r in not_improving(state.trace)]
    ceiling = min(overshot) // 2 if overshot else cap
    return int(min(max(min(2 * last, ceiling), per_round), cap)), None


def start_from(
    ctx: TrainingContext, state: LoopState, back_to: int | None, loss
) -> tuple[Weights, float]:
    """The weights a round starts from and their mean training loss: the
    last round's, or the best held-out stage's (round ``back_to``).
    ``loss(weights)``: the mean training loss, for a run's first round."""
    if back_to is None:
        if not state.trace:
            return state.weights, loss(state.weights)
        return state.weights, state.trace[-1].detail_as(BayesRound).loss
    row = next(r for r in state.trace if r.round == back_to)
    log.info("going back to stage %d (%d features), the best held-out", back_to, row.active)
    return best_stage_weights(ctx.backend.space, state), row.detail_as(BayesRound).loss
