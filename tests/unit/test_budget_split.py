"""One ``train.selection.max_seconds`` shared by several runs: the folds of
a k-fold stage choice and its final run (choice/folds.py), and the runs of
the Bayes factor's sigma^2 grid (``train.bayes.variance = "evidence"`` or
``"heldout"``, methods/bayes.py), each given an equal share of the seconds
left when it starts (``Deadline.part``). Fake clocks only: a manual one
that the fake runs advance, and ``PassClock`` (1 s a pass)."""

from __future__ import annotations

import dataclasses
import math
import shutil

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.folds import fit_folds
from sparkmaxent.config import train_config
from sparkmaxent.kernels import Weights
from sparkmaxent.selection import loop
from sparkmaxent.selection.base import FitResult, LoopState, RoundRecord, TrainingContext
from sparkmaxent.selection.checkpoint import seconds_spent
from sparkmaxent.selection.deadline import Deadline, refit_reserve_s
from sparkmaxent.selection.loop import ReserveOnce, limit_reached
from sparkmaxent.selection.stops import StopReason
from sparkmaxent.train import train

from . import test_choice
from .helpers import PassClock, runs_past_budget
from .test_choice import _with_groups

problem = test_choice.problem  # the planted problem's fixture


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_part_is_a_share_of_the_seconds_left_from_now_on_the_same_clock():
    clock = ManualClock(10.0)
    whole = Deadline(100.0, clock)
    clock.now = 40.0  # 30 s spent, 70 left
    part = whole.part(1 / 2)
    assert part.clock is clock and part.seconds == pytest.approx(35.0)
    assert part.elapsed() == 0.0 and part.remaining() == pytest.approx(35.0)
    clock.now = 75.0  # the part is spent exactly when its share is
    assert part.remaining() == pytest.approx(0.0) and whole.remaining() == pytest.approx(35.0)
    # a spent budget gives a part that is bounded and spent, never unbounded
    clock.now = 200.0
    spent = whole.part(1.0)
    assert spent.bounded and spent.remaining() <= 1e-9
    # no budget: every part is unbounded too
    free = Deadline(0.0, clock).part(1 / 3)
    assert not free.bounded and free.remaining() == math.inf


def test_a_resumed_budget_counts_its_earlier_sessions_and_its_parts_split_what_is_left():
    clock = ManualClock(5.0)
    whole = Deadline(100.0, clock, earlier=60.0)  # a resume: 60 s spent before
    assert whole.remaining() == pytest.approx(40.0) and whole.elapsed() == 0.0
    clock.now = 15.0  # 10 s of this session: 30 left
    part = whole.part(1 / 3)
    assert part.seconds == pytest.approx(10.0) and part.remaining() == pytest.approx(10.0)
    clock.now = 20.0
    assert whole.remaining() == pytest.approx(25.0) and part.remaining() == pytest.approx(5.0)


def test_the_refit_reserve_is_its_passes_at_the_callers_seconds_a_pass_and_timed_only_if_kept():
    timed = []

    def pass_s() -> float:
        timed.append(1)
        return 0.5

    def reserve(seconds: float, **choice) -> float:
        keys = {"refit_reserve_passes": 4, **choice}
        config = train_config(method="grafting", max_seconds=seconds, **keys)
        return refit_reserve_s(config.choice, Deadline(seconds, ManualClock()), pass_s)

    assert reserve(100.0) == pytest.approx(2.0) and len(timed) == 1
    # no budget, no refit, or no reserve passes: nothing kept, no pass timed
    assert reserve(0.0) == 0.0 and reserve(100.0, refit=False) == 0.0
    assert reserve(100.0, refit_reserve_passes=0) == 0.0 and len(timed) == 1


def test_the_stage_reserve_is_timed_on_the_joined_events_the_refit_runs_on(problem):
    # the refit runs on union_of's joined backend (a pass counts once, on the
    # training part): 1 s a pass over any part, so a reserve timed on a
    # UnionBackend (a pass on each part) would keep 2 s a refit pass
    tr, he, space = problem
    train_part, heldout = LocalBackend([tr], space), LocalBackend([he], space)
    clock = PassClock(train_part, heldout)
    config = train_config(method="grafting", max_seconds=100.0, refit_reserve_passes=10)
    assert config.choice.best_stage and config.choice.refit
    ctx = TrainingContext(train_part, config, heldout=heldout, deadline=Deadline(100.0, clock))
    weights = Weights(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(space.n_labels))
    reserve = ReserveOnce(ctx, stage_choice=True)
    assert reserve(weights) == pytest.approx(10.0)
    assert reserve.passes == 1 and heldout.passes == 0
    assert reserve(weights) == pytest.approx(10.0) and train_part.passes == 1  # timed once


def test_the_stage_reserve_counts_the_joining_of_the_events(problem):
    # joining the parts (on Spark: caching the joined blocks) is the refit's
    # too; the measuring releases what it joined
    tr, he, space = problem
    manual = ManualClock()
    train_part = LocalBackend([tr], space)

    class Joined:
        """A joined backend (not an in-process one: ``close_union`` closes it)."""

        def __init__(self):
            self.inner, self.space = LocalBackend([tr, he], space), space
            self.passes, self.closed = 0, False

        def run(self, task):
            self.passes += 1
            return self.inner.run(task)

        def close(self) -> None:
            self.closed = True

    joined: list[Joined] = []

    def union(first, second):
        assert first is train_part and second is heldout
        manual.now += 3.0  # the join's seconds
        joined.append(Joined())
        return joined[-1]

    config = train_config(method="grafting", max_seconds=100.0, refit_reserve_passes=10)
    heldout = LocalBackend([he], space)
    ctx = TrainingContext(train_part, config, heldout=heldout, deadline=Deadline(100.0, manual))
    weights = Weights(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(space.n_labels))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loop, "union_of", union)
        assert ReserveOnce(ctx, stage_choice=True)(weights) == pytest.approx(3.0)
    assert len(joined) == 1 and joined[0].passes == 1 and joined[0].closed


class FakeStageMethod:
    """A stage method that records the budget each call gets, spends
    ``spend`` of it on the shared manual clock, and reports ``stages``
    held-out scores rising to a peak at stage 3."""

    def __init__(self, clock: ManualClock, spend: float, stages: int = 5):
        self.clock, self.spend, self.stages = clock, spend, stages
        self.calls: list[tuple[float, float]] = []  # (clock, seconds left) at each call

    def __call__(self, ctx: TrainingContext) -> FitResult:
        left = ctx.deadline.remaining()
        self.calls.append((self.clock(), left))
        self.clock.now += self.spend * (left if ctx.deadline.bounded else 0.0)
        rounds = [
            RoundRecord(
                s,
                2 * s,
                2,
                0,
                1.0,
                "gain",
                1.0,
                heldout={"heldout_score": -abs(s - 3) + 0.01 * len(self.calls)},
            )
            for s in range(1, self.stages + 1)
        ]
        return FitResult(Weights.zeros(ctx.backend.space), {"rounds": rounds})


def _fold_ctx(problem, clock, seconds: float, folds: int = 3) -> TrainingContext:
    tr, _, space = problem
    block = _with_groups(tr, np.arange(tr.n_events))
    config = train_config(method="sgc", folds=folds, max_seconds=seconds)
    return TrainingContext(LocalBackend([block], space), config, deadline=Deadline(seconds, clock))


@pytest.mark.parametrize("spend", [1.0, 0.5])
def test_k_fold_choice_gives_each_fold_and_the_final_run_a_share_of_what_is_left(problem, spend):
    clock, budget, k = ManualClock(), 400.0, 3
    ctx = _fold_ctx(problem, clock, budget, k)
    method = FakeStageMethod(clock, spend)
    fit_folds(ctx, method)
    assert len(method.calls) == k + 1  # k folds, then the final run on all the data
    shares = [left for _, left in method.calls]
    for i, (now, share) in enumerate(method.calls):
        # an equal share of what is left when the run starts; the final run all of it
        assert share == pytest.approx((budget - now) / (k + 1 - i))
    assert clock.now <= budget + 1e-9  # the runs together keep within the budget
    if spend == 1.0:  # folds that use their whole share leave the final run a full one
        assert shares == pytest.approx([budget / (k + 1)] * (k + 1))
    else:  # folds that finish early leave more to the ones after them
        assert all(b > a for a, b in zip(shares, shares[1:], strict=False))


def test_a_resumed_k_fold_choice_splits_the_seconds_left_after_its_earlier_sessions(problem):
    clock, budget, earlier, k = ManualClock(), 400.0, 240.0, 3
    ctx = _fold_ctx(problem, clock, budget, k)
    ctx = dataclasses.replace(ctx, deadline=Deadline(budget, clock, earlier))
    method = FakeStageMethod(clock, 1.0)
    fit_folds(ctx, method)
    for i, (now, share) in enumerate(method.calls):
        assert share == pytest.approx((budget - earlier - now) / (k + 1 - i))
    assert earlier + clock.now <= budget + 1e-9  # both sessions together keep within it


def test_a_resumed_k_fold_stage_run_keeps_both_sessions_within_max_seconds(problem, tmp_path):
    tr, _, space = problem
    block = _with_groups(tr, np.arange(tr.n_events))
    keys = dict(method="sgc", stage_features=1, folds=3, refit=False)
    out = str(tmp_path / "run")

    def clocked_run(resume=False, **more):  # a fresh backend: each session's clock starts at 0
        backend = LocalBackend([block], space)
        config = train_config(**keys, **more)
        return train(backend, config, output_dir=out, resume=resume, clock=PassClock(backend))

    free = clocked_run(max_rounds=40)
    shutil.rmtree(out)
    first_budget = free.report.wall_s / 3
    first = clocked_run(max_seconds=first_budget)
    spent = seconds_spent(out)
    assert 0 < spent <= first.report.wall_s <= first_budget
    second = clocked_run(max_seconds=2 * first_budget, resume=True)
    assert second.weights.nnz > 0
    # the resumed session's folds split the seconds left after the first session
    assert spent + second.report.wall_s <= 2 * first_budget


def test_k_fold_choice_without_a_budget_leaves_every_run_unbounded(problem):
    clock = ManualClock()
    method = FakeStageMethod(clock, 0.0)
    fit_folds(_fold_ctx(problem, clock, 0.0), method)
    assert len(method.calls) == 4 and all(left == math.inf for _, left in method.calls)


def test_a_time_bound_k_fold_stage_choice_ends_within_max_seconds(problem):
    tr, _, space = problem
    block = _with_groups(tr, np.arange(tr.n_events))
    keys = dict(method="sgc", stage_features=1, folds=3, refit=False)

    def clocked_run(**more):
        backend = LocalBackend([block], space)
        config = train_config(**keys, **more)
        return train(backend, config, clock=PassClock(backend))

    free = clocked_run(max_rounds=40)
    budget = free.report.wall_s / 3  # far less than the folds and the final run need
    res = clocked_run(max_seconds=budget)
    folds = res.report["folds"]
    assert folds["k"] == 3 and res.weights.nnz > 0
    assert res.report.wall_s <= budget
    # every fold ran stages within its share, fewer than the free folds ran
    assert 1 <= len(folds["mean_score"]) < len(free.report["folds"]["mean_score"])
    assert res.report["stages"] == folds["chosen_stages"]


@pytest.mark.parametrize(
    "variance,refit", [("evidence", False), ("heldout", False), ("evidence", True)]
)
def test_the_sigma2_grid_runs_share_max_seconds(problem, variance, refit):
    # 1 s a pass; each grid run's round times are relative to its own part.
    # At the default margin_fraction the last run's rounds fill its part to
    # the second: the report's loss pass and the evidence pass after it must
    # have been kept within the part (they once ended the run 2 s over)
    tr, he, space = problem
    keys = dict(
        method="bayes-factor",
        per_round=2,
        evidence_points=3,
        refit=refit,
        refit_reserve_passes=10,
        patience=0,
    )

    def clocked_run(**more):
        train_part, heldout = LocalBackend([tr], space), LocalBackend([he], space)
        clock = PassClock(train_part, heldout)
        seen: list[tuple[int, float, float]] = []  # (round, elapsed in its run, clock)
        record = lambda state: seen.append((state.round, state.elapsed_s, clock()))  # noqa: E731
        config = train_config(variance=variance, folds=1, **keys, **more)
        res = train(train_part, config, heldout, on_round=record, clock=clock)
        runs: list[list[tuple[int, float, float]]] = []
        for row in seen:  # a run's rounds count from 1
            if row[0] == 1:
                runs.append([])
            runs[-1].append(row)
        return res, runs

    free, free_runs = clocked_run()
    budget = free.report.wall_s / 2
    res, runs = clocked_run(max_seconds=budget)
    assert len(runs) == 3  # every sigma^2 of the grid ran at least one stage
    assert len(res.report["evidence"]["grid"]) == 3
    for n, run in enumerate(runs):
        start = run[0][2] - run[0][1]  # the run's clock reading when its part began
        share = (budget - start) / (3 - n)
        # the run started its last stage within its share, and stopped
        # short of its free run (the budget cut it)
        assert all(elapsed <= share for _, elapsed, _ in run[:-1])
        assert len(run) <= len(free_runs[n])
    assert sum(len(r) for r in runs) < sum(len(r) for r in free_runs)
    assert res.report.wall_s <= budget
    if refit:  # the last run kept its 10 refit passes for the chosen run's refit
        assert res.report.refit.passes >= 10  # (6 when the grid did not keep them)


def _after_two_rounds(first_s: float, second_s: float) -> tuple[LoopState, Deadline]:
    """A loop state after two rounds of 5 training passes each, lasting
    ``first_s`` and ``second_s``, on a budget with 20 s left."""
    clock = ManualClock()
    deadline = Deadline(first_s + second_s + 20.0, clock)
    clock.now = first_s + second_s
    none = Weights(np.zeros(0, dtype=np.int64), np.zeros(0), None)
    state = LoopState(round=2, weights=none, passes=10)
    state.trace = [
        RoundRecord(1, 1, 1, 0, 1.0, "beta", 1.0, 5, first_s, round_passes=5, round_s=first_s),
        RoundRecord(2, 2, 1, 0, 1.0, "beta", 1.0, 10, first_s + second_s, 5, second_s),
    ]
    return state, deadline


def test_the_loop_keeps_time_for_the_passes_after_it_and_for_rounds_that_grow():
    cfg = train_config(method="bayes-factor", max_seconds=100)
    state, deadline = _after_two_rounds(15.0, 15.0)  # 15 s rounds: 3 s a pass
    assert limit_reached(cfg, state, deadline) is None  # 15 s fits in 20
    assert limit_reached(cfg, state, deadline, after_passes=1) is None  # 15 + 3 fits
    capped = limit_reached(cfg, state, deadline, after_passes=2)  # 15 + 6 does not
    assert capped is not None and capped.reason is StopReason.MAX_SECONDS
    assert limit_reached(cfg, state, deadline, reserve_s=3.0, after_passes=1) is not None
    # a round 3 s longer than the one before: the next one is guessed 3 s longer still
    state, deadline = _after_two_rounds(12.0, 15.0)
    assert limit_reached(cfg, state, deadline) is None  # 18 fits in 20
    assert limit_reached(cfg, state, deadline, after_passes=1) is not None  # 18 + 3 does not
    state, deadline = _after_two_rounds(18.0, 15.0)  # a shorter round: guessed as long
    assert limit_reached(cfg, state, deadline, after_passes=1) is None


_REESTIMATE = dict(reestimate_every=10, max_rounds=30)
#: Each method's keys for a run of several rounds on the planted problem.
_ROUNDS = {
    "bayes-factor": dict(per_round=2, refit=False, patience=0, folds=1),
    "grafting": dict(n_best=2),
    "sgc": dict(stage_features=1, refit=False, patience=0, folds=1),
    # re-estimation every 10 stages and at the end (no refit follows: train only)
    "sgc reestimate": dict(stage_features=1, refit=False, patience=0, folds=1, **_REESTIMATE),
    # with the chosen stage's refit (training + held-out) in place of the final one
    "sgc reestimate refit": dict(stage_features=1, patience=0, folds=1, **_REESTIMATE),
}


@pytest.mark.parametrize(
    "method",
    [
        "bayes-factor",
        pytest.param("grafting", marks=[pytest.mark.slow, pytest.mark.ci]),
        pytest.param("sgc", marks=pytest.mark.slow),
        "sgc reestimate",
        "sgc reestimate refit",
    ],
)
def test_a_time_bound_run_ends_within_max_seconds_at_every_budget(problem, method):
    # the round after which the budget is cut falls anywhere in a round as
    # the budget varies; the pass after the rounds must fit too (the Bayes
    # factor's loss pass of its kept stage, grafting's certificate pass,
    # SGC's final re-estimation of its kept stage)
    tr, he, space = problem

    def clocked_run(**more):
        train_part, heldout = LocalBackend([tr], space), LocalBackend([he], space)
        config = train_config(method=method.split()[0], **_ROUNDS[method], **more)
        held = heldout if method != "grafting" else None
        return train(train_part, config, held, clock=PassClock(train_part, heldout))

    free = clocked_run()
    assert len(free.report.rounds) >= 3
    _, over = runs_past_budget(clocked_run, free.report.wall_s, np.arange(0.3, 0.9, 0.05))
    assert over == []


def test_each_round_row_counts_its_own_seconds_and_passes_from_the_row_before(problem, tmp_path):
    # 1 s a pass, and 100 s more after every round (its bookkeeping): a
    # row counts from the row before; rows read back from a checkpoint
    # (an earlier session's) hold no counts, the resumed session's first
    # row counts from its loop's start
    tr, _, space = problem

    def session(max_rounds: int, resume: bool) -> list[RoundRecord]:
        backend = LocalBackend([tr], space)
        passes = PassClock(backend)
        traces: list[list[RoundRecord]] = []

        def on_round(state: LoopState) -> None:
            traces.append(list(state.trace))

        config = train_config(method="grafting", n_best=2, max_rounds=max_rounds)
        clock = lambda: passes() + 100.0 * len(traces)  # noqa: E731
        train(backend, config, None, str(tmp_path), resume, on_round, clock=clock)
        return traces[-1]

    first = session(3, resume=False)
    rows = session(5, resume=True)
    assert [r.round for r in rows] == [1, 2, 3, 4, 5]
    assert all((r.round_passes, r.round_s) == (0, 0.0) for r in rows[:3])
    assert first[0].round_passes == first[0].passes > 0
    assert first[0].round_s == pytest.approx(first[0].passes)
    for before, row in [*zip(first, first[1:]), (rows[3], rows[4])]:
        assert row.round_passes == row.passes - before.passes > 0
        assert row.round_s == pytest.approx(row.elapsed_s - before.elapsed_s)
        assert row.round_s == pytest.approx(row.round_passes + 100.0)
    assert rows[3].round_passes == rows[3].passes - rows[2].passes > 0
    assert rows[3].round_s == pytest.approx(rows[3].round_passes)  # no bookkeeping before it


def test_a_time_bound_path_keeps_time_for_its_points_and_refit_at_every_budget(problem):
    # a point does not start unless the time left (less the refit's reserve)
    # holds a point as long as the last one, and a point's rounds stop with
    # the reserve still left: the refit runs on it and the run ends in time
    tr, he, space = problem

    def clocked_path(**more):
        train_part, heldout = LocalBackend([tr], space), LocalBackend([he], space)
        config = train_config(method="grafting", path=True, refit_reserve_passes=20, **more)
        return train(train_part, config, heldout, clock=PassClock(train_part, heldout))

    free = clocked_path()
    assert len(free.report.path.points) >= 4
    results, over = runs_past_budget(clocked_path, free.report.wall_s, np.arange(0.3, 0.9, 0.1))
    assert over == []
    # every refit ran on its reserve, not on one pass past the budget
    assert min(res.report.refit.passes for res in results) > 1


def test_a_time_bound_l2_path_ends_within_max_seconds_at_every_budget(problem):
    # an l2 path point's L-BFGS iterations and its refit's stop once the
    # budget has run out (a point's: less the refit's reserve), so the run
    # ends within max_seconds plus at most one iteration's passes, with a model
    tr, he, space = problem

    def clocked_path(**more):
        train_part, heldout = LocalBackend([tr], space), LocalBackend([he], space)
        config = train_config(method="l2", path=True, refit_reserve_passes=5, **more)
        return train(train_part, config, heldout, clock=PassClock(train_part, heldout))

    free = clocked_path()
    # 5 s of slack: an iteration's line search (a few passes)
    _, over = runs_past_budget(clocked_path, free.report.wall_s, np.arange(0.2, 0.9, 0.1), slack=5)
    assert over == []
