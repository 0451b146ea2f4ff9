"""The round solver and the time budget (``train.selection.max_seconds``):
``minimize_box_newton``'s ``time_left`` ends a round between iterations at
its last accepted iterate, and a grafting run whose one round would take
longer than the budget ends within about an iteration's passes of it with
a model, reported as uncertified. Fake clocks only (1 s a pass)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.selection.stops import StopReason
from sparkmaxent.solvers.newton import minimize_box_newton
from sparkmaxent.solvers.options import SolverOptions
from sparkmaxent.train import train

from .helpers import PassClock
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
                self.fun, theta0, self.lin, self.lower, self.upper,
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
    assert res.value == pytest.approx(box.value(res.theta) + box.lin @ res.theta)
    assert res.value < box.value(FAR) + box.lin @ FAR
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
