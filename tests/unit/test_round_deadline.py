"""The round solver and the time budget (``train.selection.max_seconds``):
``minimize_box_newton``'s ``time_left`` ends a round between iterations at
its last accepted iterate, and a grafting run whose one round would take
longer than the budget ends within about an iteration's passes of it with
a model, reported as uncertified. The refit after a time-bound path: its
reserve, and an uncertified refit that never replaces a certified chosen
fit; a path's stop reason. Fake clocks only (1 s a pass)."""

from __future__ import annotations

import dataclasses
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.points import kept_fit, path_reserve_s
from sparkmaxent.choice.sections import ChosenFit, PathPoint, PathRefit
from sparkmaxent.config import train_config
from sparkmaxent.selection.deadline import Deadline
from sparkmaxent.selection.stops import StopReason
from sparkmaxent.solvers.newton import minimize_box_newton
from sparkmaxent.solvers.options import SolverOptions
from sparkmaxent.train import train

from . import test_choice
from .helpers import PassClock
from .test_budget_split import ManualClock
from .test_grafting import grafting_config, planted
from .test_newton import LogisticBox


class CountingBox(LogisticBox):
    """``LogisticBox`` whose passes (evaluations and rays) tick a clock of 1 s a pass."""

    def __init__(self):
        super().__init__()
        self.passes = 0

    def fun(self, theta, full, hessian):
        self.passes += 1
        return super().fun(theta, full, hessian)

    def ray(self, theta, d, steps):
        self.passes += 1
        return super().ray(theta, d, steps)

    def run(self, theta0, budget: float | None):
        time_left = None if budget is None else (lambda: budget - self.passes)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a time budget's stop warns of nothing
            return minimize_box_newton(
                self.fun, theta0, self.l1_per_weight, self.lower, self.upper,
                SolverOptions(tol=1e-12), ray=self.ray, time_left=time_left,
            )  # fmt: skip


FAR = np.array([3.0, -3.0, 3.0, 5.0, -5.0, 5.0])


def test_no_budget_and_an_ample_one_change_nothing():
    free, ample = CountingBox().run(FAR, None), CountingBox().run(FAR, 10_000.0)
    assert free.converged and ample.converged and not ample.timed_out
    np.testing.assert_array_equal(free.theta, ample.theta)
    assert free.evaluations == ample.evaluations


@pytest.mark.parametrize("budget", [3.0, 5.0, 8.0])
def test_a_spent_budget_ends_the_round_at_its_last_iterate_between_iterations(budget):
    full = CountingBox().run(FAR, None)
    assert full.evaluations > 10  # the whole solve is far longer than each budget
    box = CountingBox()
    res = box.run(FAR, budget)
    assert res.timed_out and not res.converged and "time budget" in res.message
    # within the budget plus one iteration's passes (the last iteration
    # started while more was left than the one before it took)
    most = max((b["evaluations"] - a["evaluations"] for a, b in zip(res.trace, res.trace[1:])),
               default=res.evaluations)  # fmt: skip
    assert box.passes <= budget + most
    # a usable iterate: feasible, its value and violation those at theta,
    # and better than the start
    assert np.all(res.theta >= box.lower) and np.all(res.theta <= box.upper)
    assert res.value == pytest.approx(box.value(res.theta) + box.l1_per_weight @ res.theta)
    assert res.value < box.value(FAR) + box.l1_per_weight @ FAR
    assert res.iterations == len(res.trace) < full.iterations


def test_a_budget_spent_before_the_round_returns_the_start():
    box = CountingBox()
    res = box.run(FAR, 0.0)
    assert res.timed_out and res.iterations == 0 and box.passes == 1  # the start's evaluation
    np.testing.assert_array_equal(res.theta, FAR)


def test_a_grafting_run_whose_round_outlasts_the_budget_ends_near_it_with_a_model():
    """One round adding every candidate at a tight tolerance takes many
    passes; a budget of a third of them used to be overrun by the whole
    round (the loop checks the clock between rounds only). Now the round
    ends between its iterations: the run ends within a few passes of the
    budget, with weights, the stop ``max_seconds``, the round's solve
    reported as stopped (converged None) and the certificate failing."""
    _, block, space = planted(seed=2, m=3000, P=200, K=4)
    # every candidate in the first round, solved to the final tolerance
    keys = dict(n_best=10_000, l1=1e-4, solver="newton-cg", round_tol_ratio=1e-12)

    def clocked(**more):
        backend = LocalBackend([block], space)
        clock = PassClock(backend)
        return train(backend, grafting_config(**keys, **more), clock=clock), clock

    whole, _ = clocked(max_rounds=1)
    round_passes = whole.report.rounds[0].round_passes
    assert round_passes >= 12
    budget = round_passes / 3
    res, clock = clocked(max_seconds=budget)
    # past the budget by at most an iteration (a direction and a trial
    # pass, backtracks aside) and the certificate's pass after the loop
    assert clock() <= budget + 3 + 1
    assert clock() < round_passes
    assert res.weights.nnz > 0
    assert res.stop is not None and res.stop.reason == StopReason.MAX_SECONDS
    assert res.report.rounds[0].solve.converged is None
    assert not res.report.converged and not res.report.certificate.passed


# ---- the refit after a time-bound path (choice/points.py) and the path's stop


problem = test_choice.problem  # the planted problem's fixture


def _point(certified: bool) -> PathPoint:
    return PathPoint("l1", 1e-3, 10, 0.5, 30, certified, None, False, None, {"heldout_score": -0.4},
                     kkt_passed=certified)  # fmt: skip


def _refit(certified: bool) -> PathRefit:
    return PathRefit("l1", 1e-3, 0.4, 12, 9, certified, ChosenFit(0.5, 10), kkt_passed=certified)


def test_an_uncertified_refit_never_replaces_a_certified_chosen_fit():
    assert kept_fit(_point(True), _refit(True), "")[0] == "refit"
    kept, why = kept_fit(_point(True), _refit(False), "max_seconds")
    assert kept == "chosen fit" and "uncertified" in why and "max_seconds" in why
    assert kept_fit(_point(False), _refit(False), "max_seconds")[0] == "refit"
    # l2 (no certificate): its convergence decides
    l2 = dataclasses.replace(_refit(False), kkt_passed=None, converged=True)
    assert kept_fit(_point(True), l2, "")[0] == "refit"


def test_the_refit_reserve_counts_a_pass_at_the_costliest_points_seconds_up_to_a_points():
    clock = ManualClock()
    deadline = Deadline(1000.0, clock)
    config = train_config(method="grafting", path=True, max_seconds=1000.0, refit_reserve_passes=10)
    ctx = SimpleNamespace(config=config, deadline=deadline, backend=SimpleNamespace(passes=100))
    clock.now = 100.0  # 1 s a pass on the run's mean
    assert path_reserve_s(ctx) == pytest.approx(10.0)
    deadline.note_point(60.0, 10)
    deadline.note_point(20.0, 5)  # a cheaper point later: the costliest of each is kept
    assert deadline.pass_s == 6.0 and deadline.point_s == 60.0
    assert path_reserve_s(ctx) == pytest.approx(60.0)
    # at most the costliest point's own seconds: a warm-started refit costs about a point
    deadline.note_point(45.0, 3)  # 15 s a pass: 10 passes would be 150 s
    assert deadline.pass_s == 15.0 and path_reserve_s(ctx) == pytest.approx(60.0)
    deadline.note_point(300.0, 100)  # a point dearer than the passes' reserve: the passes'
    assert path_reserve_s(ctx) == pytest.approx(150.0)
    # a mix's share notes its points on the whole budget too, and starts from its points
    share = deadline.part(0.5)
    share.note_point(400.0, 1)
    assert deadline.point_s == 400.0 and share.part(0.5).point_s == 400.0


def test_a_time_bound_path_keeps_the_chosen_fit_when_its_refit_is_cut_and_says_why(problem):
    """At budgets from a quarter to all of a free path's seconds, with a
    reserve of 2 refit passes (too few to certify the refit), the run ends
    within max_seconds and a pass; a refit cut uncertified returns the
    chosen point's fit (its weights, its features) and says so (with
    neither certified, at the smallest budgets, the refit); a path the
    budget cut at its best point says held-out was still improving."""
    tr, he, space = problem

    def clocked_path(**more):
        train_part, heldout = LocalBackend([tr], space), LocalBackend([he], space)
        config = train_config(method="grafting", path=True, l2_mixes=[0.0], **more)
        return train(train_part, config, heldout, clock=PassClock(train_part, heldout))

    free = clocked_path()
    assert free.report.refit.kept == "refit" and free.report.refit.kkt_passed
    assert not free.report.path.stop.startswith("max_seconds")
    kept, stops = set(), []
    for budget in np.arange(0.25, 1.0, 0.125) * free.report.wall_s:
        res = clocked_path(max_seconds=float(budget), refit_reserve_passes=2)
        refit, path = res.report.refit, res.report.path
        assert res.report.wall_s <= budget + 1 and res.weights.nnz > 0
        kept.add(refit.kept)
        if refit.kept == "chosen fit":
            assert not refit.kkt_passed and path.chosen_point.kkt_passed
            assert res.weights.nnz == refit.chosen_fit.features == path.chosen_point.features
        else:  # certified, or neither was (a point the budget cut)
            assert refit.kkt_passed or not path.chosen_point.kkt_passed
            assert res.weights.nnz == refit.features
        stops.append(path.stop)
        scores = [p.score for p in path.points]
        best_last = len(scores) > 1 and int(np.argmax(scores)) == len(scores) - 1
        if path.stop.startswith("max_seconds") and best_last:
            assert "still improving" in path.stop
    assert kept == {"refit", "chosen fit"}  # both cases met at these budgets
    assert any("still improving" in s for s in stops)


def test_a_part_notes_a_measured_pass_in_the_budget_it_is_part_of():
    clock = ManualClock()
    whole = Deadline(100.0, clock)
    whole.note_point(2.0, 1)
    share = whole.part(0.5)
    assert share.pass_s == 2.0  # what the whole budget measured so far
    share.note_point(10.0, 2)
    assert whole.pass_s == 5.0 and share.pass_s == 5.0
    share.note_point(1.0, 1)
    assert whole.pass_s == 5.0
