"""The round loop every feature-selection method shares.

A selection method (grafting, IFS/SGC, Bayes factor) supplies one
``round(state) -> RoundOutcome``: test candidates, grow the active set,
re-optimize. This loop does the rest, the same way for all of them: one
progress line and one trace row per round, a checkpoint after every round
(selection/checkpoint.py) and resuming from it, the run-control caps
(``max_rounds``, ``max_seconds``), and the plots at the end.
"""

from __future__ import annotations

import logging
from typing import Protocol

import numpy as np

from .. import storage
from ..backends.union import close_union, union_of
from ..choice.heldout import BEST_KEYS, keep_if_best, measure_weights, refit_follows, stage_rule
from ..choice.stop_rule import StopRule
from ..errors import InputError, check_finite
from ..kernels import Weights
from ..kernels.loss import LossGradTask
from .base import LoopState, RoundDetail, RoundOutcome, RoundRecord, TrainingContext
from .checkpoint import Checkpoint, checkpoint_dir, data_fingerprint, run_digest
from .deadline import Deadline, refit_reserve_s
from .reporting import PLOTS_DIR, write_plots
from .stops import Stop, StopReason, stop

log = logging.getLogger(__name__)


class RoundMethod(Protocol):
    def round(self, state: LoopState) -> RoundOutcome:
        """Run one round from ``state`` (not modified)."""
        ...


def limit_reached(
    cfg,
    state: LoopState,
    deadline: Deadline,
    reserve_s: float = 0.0,
    since: LoopState | None = None,
    after_passes: int = 0,
) -> Stop | None:
    """The run-control cap (``max_rounds``, ``max_seconds``) that ends the
    loop before the method stops by itself; None while none is reached. The
    time budget ``deadline`` (``ctx.deadline``: counted from ``train()``'s
    start, a resumed run's earlier sessions included) also ends it when the
    next round would end past the cap less ``reserve_s`` (a budget, not a
    point to overrun by a round; the reserve keeps time for the stage refit,
    ``ReserveOnce``, timed once) and less ``after_passes`` training passes
    at the last round's seconds a pass (the passes the caller runs on the
    kept weights after the loop). The next round is guessed to take as long
    as the last one plus what the last one grew over the one before (rounds
    grow with the model), from the rows' own ``round_s`` and
    ``round_passes``. ``since``: the state where this session's loop
    started (rows of earlier sessions, a resumed run's, are not used)."""
    if cfg.selection.max_rounds and state.round >= cfg.selection.max_rounds:
        return stop(StopReason.MAX_ROUNDS, limit=cfg.selection.max_rounds)
    if deadline.bounded:
        left = deadline.remaining()
        if left <= 0:
            return stop(StopReason.MAX_SECONDS, limit=deadline.seconds)
        first = since.round if since is not None else 0
        rounds = [r for r in state.trace[-2:] if r.round > first]  # this session's last two
        if rounds and rounds[-1].round_passes:
            last_s = rounds[-1].round_s
            next_s = last_s + max(0.0, last_s - rounds[0].round_s)  # one round: no growth
            after_s = after_passes * last_s / rounds[-1].round_passes
            if next_s + reserve_s + after_s > left:
                return stop(StopReason.MAX_SECONDS, limit=deadline.seconds)
    return None


def refit_timing(ctx: TrainingContext, weights: Weights) -> tuple[float, float]:
    """Seconds of joining the training and held-out events as the stage
    refit does (``union_of``, the backend ``choice.heldout.refit_stage``
    runs on: on Spark one cached ``SparkUnion``, a job a pass, where a
    ``UnionBackend`` runs two) and of one refit pass on them (the loss at
    ``weights``), measured by doing both; the joined blocks are released
    after."""
    assert ctx.heldout is not None, "refit_follows checks that there is held-out data"
    t0 = ctx.deadline.elapsed()
    whole = union_of(ctx.backend, ctx.heldout)
    t1 = ctx.deadline.elapsed()
    try:
        whole.run(LossGradTask(whole.space, weights, ctx.scaling, np.zeros(0, dtype=np.int64)))
    finally:
        close_union(whole)
    return t1 - t0, ctx.deadline.elapsed() - t1


class ReserveOnce:
    """The seconds a time-bound stage run keeps for the refit of its chosen
    stage (``refit_reserve_s``; 0 without held-out data, a best-stage
    choice or ``refit``), a refit pass timed once, after the loop's first
    round (a refit pass costs about the same at every stage: its events
    are the same, only a few weights change), and kept for the rest of the
    run: ``refit_reserve_s`` at the seconds of a pass on the joined events
    the refit runs on, plus the seconds of joining them (``refit_timing``).
    ``passes``: the passes the measuring ran, which are no training pass
    (the loop leaves them out of its count)."""

    def __init__(self, ctx: TrainingContext, stage_choice: bool):
        self.ctx, self.stage_choice = ctx, stage_choice
        self.seconds: float | None = None
        self.passes = 0

    def __call__(self, weights: Weights) -> float:
        if self.seconds is None:
            passes0 = self.ctx.backend.passes
            follows = self.stage_choice and refit_follows(self.ctx)
            self.seconds = self._measured(weights) if follows else 0.0
            self.passes = self.ctx.backend.passes - passes0
        return self.seconds

    def _measured(self, weights: Weights) -> float:
        join_s = 0.0

        def pass_s() -> float:
            nonlocal join_s
            join_s, seconds = refit_timing(self.ctx, weights)
            return seconds

        reserve = refit_reserve_s(self.ctx.config.choice, self.ctx.deadline, pass_s)
        return reserve + join_s


def run_rounds(
    ctx: TrainingContext,
    method: RoundMethod,
    name: str,
    score_name: str = "max_gradient",
    score_label: str = "candidate |gradient|",
    start: Weights | None = None,
    stage_choice: bool = False,
    after_passes: int = 0,
    detail: type[RoundDetail] | None = None,
) -> LoopState:
    """Run ``method`` round after round until it stops or a cap
    (``max_rounds``, ``max_seconds``: ``limit_reached``), or, for a stage
    method (``stage_choice``) keeping its best held-out stage, the
    held-out stop rule of paths (``choice.stage_rule``, a stage a point).

    Parameters
    ----------
    ctx : TrainingContext
        Backend, configuration, scaling, held-out backend, and
        ``output_dir`` / ``resume`` / ``on_round`` for checkpoints.
    method : RoundMethod
    name : str
        Method name (stored in the checkpoint).
    score_name : str
        Trace key of ``RoundOutcome.score``.
    score_label : str
        How progress lines and plots name it.
    start : Weights or None
        Initial weights (all-zero with the bias at 0 by default).
    stage_choice : bool
        Stop by the held-out rule (``train.choice.patience``, ``patience_se``;
        ifs, sgc, bayes-factor).
    after_passes : int
        Training passes the caller runs on the kept weights after the loop
        (a report's loss pass, an evidence pass): ``max_seconds`` keeps
        time for them (``limit_reached``).
    detail : type or None
        The type of the method's own trace entries
        (``RoundOutcome.detail``), to read a checkpoint's rows back.

    Returns
    -------
    LoopState
        The final state; ``state.trace`` is the per-round trace and
        ``state.stop`` why the loop ended.
    """
    cfg = ctx.config
    checkpoint = (
        Checkpoint(
            checkpoint_dir(ctx.output_dir),
            run_digest(cfg, ctx.backend.space),
            data_fingerprint(ctx.backend),
        )
        if ctx.output_dir
        else None
    )
    state = _start_state(ctx, checkpoint, name, start, score_name, detail)
    state.earlier_s = state.elapsed_s  # a resumed run's earlier sessions
    rule = stage_rule(ctx, state) if stage_choice else None
    passes0, base_passes = ctx.backend.passes, state.passes
    reserve_s = ReserveOnce(ctx, stage_choice)

    def counters() -> None:
        state.passes = base_passes + ctx.backend.passes - passes0 - reserve_s.passes
        state.elapsed_s = round(state.earlier_s + ctx.deadline.elapsed(), 3)

    counters()  # the method's setup counts against max_seconds
    since = LoopState(state.round, state.weights, state.passes, state.elapsed_s)
    mark = (state.elapsed_s, state.passes)  # where the next round's row counts from

    def limit() -> Stop | None:
        ran = state.round > since.round  # the reserve is measured after the first round
        reserve = reserve_s(state.weights) if ran else 0.0
        counters()
        return limit_reached(cfg, state, ctx.deadline, reserve, since, after_passes)

    capped: Stop | None = None
    while not state.done and (capped := limit()) is None:
        outcome = method.round(state)
        counters()
        if outcome.stop is not None:
            state.done, state.stop = True, outcome.stop
            if outcome.certificate is not None:
                state.certificate = outcome.certificate
            best = "" if np.isnan(outcome.score) else f" (max {score_label} {outcome.score:.4g})"
            log.info(
                "round %d: %s%s; %d passes, %.1fs",
                state.round + 1,
                outcome.note or outcome.stop.message,
                best,
                state.passes,
                state.elapsed_s,
            )
        else:
            # a round's result becomes the state (and checkpoint) only if it is finite
            check_finite(
                f"{name} round {state.round + 1}",
                objective=outcome.objective,
                weights=outcome.weights.values,
                bias=outcome.weights.bias,
            )
            _record_round(ctx, state, outcome, score_name, score_label, rule, mark)
            mark = (state.elapsed_s, state.passes)
            why = rule.why() if rule is not None else None
            if why is not None:
                state.done, state.stop = True, why
                log.info("round %d: stopped: %s", state.round, why.message)
        if checkpoint is not None:
            checkpoint.save(state, name)
        if outcome.stop is not None:
            break
        if ctx.on_round is not None:
            ctx.on_round(state)
    counters()
    if state.stop is None:  # the loop ended at a cap
        state.stop = capped
    if checkpoint is not None and state.round == since.round:  # no round: the budget was spent
        checkpoint.save(state, name)
    if ctx.output_dir and cfg.selection.plots and state.trace:
        write_plots(state.trace, storage.join(ctx.output_dir, PLOTS_DIR), score_name, score_label)
    return state


def _start_state(
    ctx: TrainingContext,
    checkpoint: Checkpoint | None,
    name: str,
    start: Weights | None,
    score_name: str,
    detail: type[RoundDetail] | None,
) -> LoopState:
    """The checkpointed state when resuming (if there is one), else round 0."""
    if ctx.resume:
        if checkpoint is None:
            raise InputError("resume needs an output directory holding a checkpoint, got none")
        state = checkpoint.load(name, score_name, detail)
        if state is not None:
            log.info(
                "resuming %s after round %d (%d active features, %d passes so far)",
                name,
                state.round,
                len(state.weights.values),
                state.passes,
            )
            return state
        log.info("no checkpoint in %s: starting from round 0", checkpoint.directory)
    return LoopState(
        round=0, weights=start if start is not None else Weights.zeros(ctx.backend.space)
    )


def _record_round(
    ctx: TrainingContext,
    state: LoopState,
    outcome: RoundOutcome,
    score_name: str,
    score_label: str,
    rule: StopRule | None,
    mark: tuple[float, int],
) -> None:
    """Take a round's weights into ``state``, add its trace row (with the
    held-out score, when there is a held-out set, fed to the stop ``rule``;
    its own seconds and passes counted from ``mark``, the run's
    ``(elapsed_s, passes)`` at the row before) and log its progress line."""
    state.round += 1
    state.weights = outcome.weights
    if outcome.arrays is not None:  # the best stage's weights stay (choice.keep_if_best)
        kept = {k: v for k, v in state.arrays.items() if k in BEST_KEYS}
        state.arrays = {**outcome.arrays, **kept}
    row = RoundRecord(
        round=state.round,
        active=int(len(outcome.weights.values)),
        added=outcome.added,
        removed=outcome.removed,
        objective=outcome.objective,
        score_name=score_name,
        score=outcome.score,
        passes=state.passes,
        elapsed_s=state.elapsed_s,
        round_passes=state.passes - mark[1],
        round_s=state.elapsed_s - mark[0],
        solve=outcome.solve,
        detail=outcome.detail,
    )
    held = f", {outcome.note}" if outcome.note else ""
    if ctx.heldout is not None:
        scores, measure = measure_weights(ctx, state.weights)
        row.heldout = scores
        held += f", held-out accuracy {row.heldout_accuracy:.4f}"
        keep_if_best(state, scores, measure)
        if rule is not None:
            rule.add(state.round, measure, row.active)
            row.below_best_se = rule.gaps[-1]
    state.trace.append(row)
    log.info(
        "round %d: %d active (+%d, -%d), objective %.10g, max %s %.4g%s, %d passes, %.1fs",
        state.round,
        row.active,
        outcome.added,
        outcome.removed,
        outcome.objective,
        score_label,
        outcome.score,
        held,
        state.passes,
        state.elapsed_s,
    )


# ---- helpers the selection methods share -------------------------------------

#: Relative tolerance under which two gains count as tied.
TIE_RTOL = 1e-12


def best_of(gains: np.ndarray, ids: np.ndarray) -> int:
    """Position of the largest gain; gains within TIE_RTOL (relative) of it
    tie, and ties go to the lowest id. Ties are common: with two labels the
    features (p, 0) and (p, 1) are mirror images with the same gain, which
    the closed form and the Newton fit reproduce only to rounding."""
    top = gains.max()
    tied = np.flatnonzero(gains >= top - TIE_RTOL * abs(top))
    return int(tied[np.argmin(ids[tied])])


def add_feature(weights: Weights, j: int, alpha: float) -> Weights:
    """The weights with feature j added at alpha (or incremented, if present)."""
    ids = weights.active_ids()
    pos = int(np.searchsorted(ids, j))
    if pos < len(ids) and ids[pos] == j:
        values = weights.values.copy()
        values[pos] += alpha
        return Weights(ids.copy(), values, weights.bias)
    return Weights(np.insert(ids, pos, j), np.insert(weights.values, pos, alpha), weights.bias)


def add_features(weights: Weights, ids, alphas) -> Weights:
    """The weights with features ``ids`` added at ``alphas`` (or incremented,
    if present): ``add_feature`` for many at once, one sort."""
    every = np.concatenate([weights.active_ids(), np.asarray(ids, dtype=np.int64)])
    values = np.concatenate([weights.values, np.asarray(alphas, dtype=np.float64)])
    unique, where = np.unique(every, return_inverse=True)
    return Weights(unique, np.bincount(where, weights=values, minlength=len(unique)), weights.bias)
