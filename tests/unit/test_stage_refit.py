"""The refit of a stage method's best held-out stage on the training and
held-out events together (train.choice.refit; choice/heldout.py
refit_stage): the same stages and choice, the chosen stage's active set
refitted under the method's own prior, as a direct fit of that set on all
the events would."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.sections import RefitSkipped, StageChoice, StageRefit
from sparkmaxent.config import ConfigError, train_config
from sparkmaxent.methods.baselines import fit_smooth
from sparkmaxent.selection.base import TrainingContext

from . import test_choice
from .test_choice import clocked, run

problem = test_choice.problem  # the planted problem's fixture

KEYS = {
    # stage refits to train.gtol too: the budget test counts their passes
    "sgc": dict(method="sgc", max_features=40, gtol=1e-9, stage_refit_gtol=0.0),
    "bayes-factor": dict(method="bayes-factor", per_round=3, max_features=30, gtol=1e-9),
}


@pytest.mark.parametrize("method", ["sgc", "bayes-factor"])
def test_stage_refit_fits_the_chosen_stage_on_training_and_held_out_events(problem, method):
    tr, he, space = problem
    chosen = run(problem, refit=False, **KEYS[method])
    res = run(problem, **KEYS[method])
    assert chosen.report.refit is None  # refit off: the chosen stage's fit, as before
    choice, refit = res.report.stage_choice, res.report.refit
    assert isinstance(choice, StageChoice) and isinstance(refit, StageRefit)
    # the same stages and the same choice
    assert choice == chosen.report.stage_choice
    assert [r.active for r in res.report.rounds] == [r.active for r in chosen.report.rounds]
    row = res.report.rounds[choice.chosen_round - 1]
    # the chosen stage's figures kept beside the refit's
    fit = refit.chosen_fit
    assert fit.stage == choice.chosen_round
    assert fit.features == chosen.weights.nnz == row.active
    assert fit.objective == pytest.approx(chosen.report.objective)
    accuracy = fit.heldout["heldout_accuracy"]
    assert accuracy == row.heldout_accuracy == chosen.report.heldout.accuracy
    assert res.report.heldout.accuracy == accuracy
    # the refit: the same features, the method's prior sigma^2 = 1 (sum
    # units) on all the events' weight, as a cold fit of that set would find
    assert np.array_equal(res.weights.active_ids(), chosen.weights.active_ids())
    total = float(tr.c.sum() + he.c.sum())
    assert refit.l2 == pytest.approx(1.0 / total)
    both = LocalBackend([tr, he], space)
    config = train_config(gtol=1e-9)
    cold = fit_smooth(TrainingContext(both, config), chosen.weights.active_ids(), refit.l2)
    assert refit.objective == pytest.approx(cold.objective, rel=1e-7)
    assert refit.objective < refit.start_objective
    assert refit.converged and refit.passes > 0
    assert not np.allclose(res.weights.values, chosen.weights.values)


def test_no_refit_without_held_out_data_or_a_chosen_stage(problem):
    alone = run(problem, heldout=False, method="sgc", max_features=10)
    assert alone.report.refit is None and alone.report.stage_choice is None
    last = run(problem, method="sgc", max_features=10, best_stage=False)
    assert last.report.refit is None


def test_bayes_factor_evidence_refits_the_chosen_variance_once(problem):
    keys = dict(
        method="bayes-factor", per_round=3, max_features=15, variance="evidence",
        evidence_points=2,
    )  # fmt: skip
    res = run(problem, **keys)
    s2 = res.report["evidence"]["grid"][res.report["evidence"]["chosen"]]
    tr, he, _ = problem
    assert res.report.refit.l2 == pytest.approx(1.0 / (s2 * float(tr.c.sum() + he.c.sum())))
    assert res.report["prior_variance"] == s2
    assert res.report.refit.features == res.weights.nnz


@pytest.mark.parametrize("method", ["sgc", "bayes-factor"])
def test_max_seconds_counts_the_setup_and_keeps_time_for_the_refit(problem, method):
    free = clocked(problem, **KEYS[method])
    rounds = free.report.rounds
    assert len(rounds) >= 4 and free.report.refit is not None
    # a budget that the setup takes most of: 1000 s of setup, four stages' worth after it
    budget = 1000.0 + rounds[3].elapsed_s
    res = clocked(problem, 1000.0, max_seconds=budget, refit_reserve_passes=10, **KEYS[method])
    assert res.report.stop.reason.value == "max_seconds"
    # stages stop early enough to leave the refit its reserve of passes
    assert 2 <= len(res.report.rounds) <= 3
    assert res.weights.nnz > 0
    # the whole train() call, setup, stages, refit and final figures, within the budget
    assert res.report.wall_s <= budget
    assert isinstance(res.report.refit, StageRefit) and res.report.refit.passes > 0


def test_a_run_whose_setup_spends_the_budget_ends_with_its_start_model(problem):
    res = clocked(problem, 1000.0, max_seconds=500.0, **KEYS["sgc"])
    assert res.report.stop.reason.value == "max_seconds"
    assert res.report.rounds == [] and res.report.refit is None


def test_a_refit_past_max_seconds_is_skipped_and_the_chosen_stage_kept(problem):
    # the first stage starts within the budget and ends past it: no time is left for a refit
    first = clocked(problem, max_rounds=1, **KEYS["sgc"]).report.rounds[0]
    res = clocked(problem, 1000.0, max_seconds=1000.0 + first.elapsed_s - 1.0, **KEYS["sgc"])
    assert isinstance(res.report.refit, RefitSkipped)
    assert res.report.refit.skipped.startswith("max_seconds")
    rounds = res.report.rounds
    assert res.report.stage_choice.chosen_round == len(rounds) == 1
    assert res.weights.nnz == rounds[0].active


def test_bayes_factor_variance_chosen_on_held_out_data_keeps_the_best_run(problem):
    keys = dict(method="bayes-factor", per_round=3, max_features=15, evidence_points=3)
    res = run(problem, variance="heldout", **keys)
    choice = res.report["evidence"]
    scores, grid = choice["heldout_score"], choice["grid"]
    assert len(scores) == 3 and choice["chosen"] == int(np.argmax(scores))
    s2 = grid[choice["chosen"]]
    assert res.report["prior_variance"] == s2
    # the kept run is the fixed-variance run at that sigma^2, refitted
    alone = run(problem, prior_variance=s2, **keys)
    assert res.report.stage_choice == alone.report.stage_choice
    assert scores[choice["chosen"]] == alone.report.stage_choice.heldout_score
    np.testing.assert_allclose(res.weights.values, alone.weights.values, rtol=1e-9)
    with pytest.raises(ConfigError, match="variance = heldout"):
        run(problem, heldout=False, variance="heldout", **keys)


def test_a_time_bound_refit_ends_its_l_bfgs_where_its_stop_says():
    # the refit's L-BFGS asks its stop (time left for another iteration?) after every iteration
    from sparkmaxent.solvers import ConvergenceWarning, SolverOptions, minimize_lbfgs

    def fun(x):
        return float(x @ x + np.sin(x).sum()), 2 * x + np.cos(x)

    free = minimize_lbfgs(fun, np.full(6, 3.0), SolverOptions(tol=1e-12))
    asked = []

    def stop():
        asked.append(1)
        return len(asked) >= 2

    with pytest.warns(ConvergenceWarning, match="StopIteration"):
        stopped = minimize_lbfgs(fun, np.full(6, 3.0), SolverOptions(tol=1e-12), stop=stop)
    assert free.converged and free.iterations > 2
    assert not stopped.converged and stopped.iterations == 2 and len(asked) == 2


@pytest.mark.parametrize("method", ["sgc", "bayes-factor"])
def test_the_refit_reserve_is_timed_once_and_is_no_training_pass(problem, method):
    # a budget that ends no stage early: the same stages as an unbounded run
    free = clocked(problem, **KEYS[method]).report
    bound = clocked(problem, max_seconds=1e9, refit_reserve_passes=10, **KEYS[method]).report
    assert len(bound["rounds"]) == len(free["rounds"]) >= 4
    # every stage's pass count as without a budget: the reserve's pass is no training pass
    assert [r["passes"] for r in bound["rounds"]] == [r["passes"] for r in free["rounds"]]
    # and it is run once (timed after the first stage), not once a stage
    assert bound["passes"] == free["passes"] + 1


def test_the_refit_takes_the_place_of_the_final_reestimation(problem):
    # reestimate_every: re-estimation every r stages and at the end; with a
    # refit of the chosen stage (the same features and penalty, train.l2, on
    # the training and held-out events) the final one on training alone is
    # not run: its passes would be spent on a fit the refit replaces
    tr, he, space = problem
    keys = dict(KEYS["sgc"], stage_features=1, max_features=12, reestimate_every=5, l2=1e-3)
    alone = run(problem, refit=False, **keys)
    res = run(problem, **keys)
    assert alone.report["final_reestimate"] and not res.report["final_reestimate"]
    assert res.report.stage_choice == alone.report.stage_choice
    assert res.report.refit.l2 == pytest.approx(1e-3)
    cold = fit_smooth(
        TrainingContext(LocalBackend([tr, he], space), train_config(gtol=1e-9)),
        res.weights.active_ids(),
        1e-3,
    )
    assert res.report.refit.objective == pytest.approx(cold.objective, rel=1e-7)
    # without the refit, the final re-estimation is the fit on training alone
    on_train = fit_smooth(
        TrainingContext(LocalBackend([tr], space), train_config(gtol=1e-9)),
        alone.weights.active_ids(),
        1e-3,
    )
    assert alone.report.objective == pytest.approx(on_train.report["loss"], rel=1e-6)


def test_a_fit_within_the_budget_caps_its_evaluations_at_the_seconds_left(problem):
    # fit_smooth_within: iterations capped at the seconds left over one pass's
    # seconds, less the last line search's passes; none left: no fit
    from sparkmaxent.methods.baselines import LAST_SEARCH, fit_smooth_within
    from sparkmaxent.selection.deadline import Deadline

    tr, _, space = problem
    config = train_config(gtol=1e-9)
    ids = np.arange(0, space.n_features, 3)
    start = fit_smooth(TrainingContext(LocalBackend([tr], space), config), ids, 1e-3).weights
    free_ctx = TrainingContext(LocalBackend([tr], space), config)
    free = fit_smooth_within(free_ctx, ids, 1e-4, start, pass_s=1.0)
    assert free is not None and free.report["evaluations"] > 8

    def within(seconds: float):
        ctx = TrainingContext(
            LocalBackend([tr], space), config, deadline=Deadline(seconds, lambda: 0.0)
        )
        return fit_smooth_within(ctx, ids, 1e-4, start, pass_s=1.0)

    capped = within(8.0)  # 8 passes' seconds: 6 evaluations and the last line search's 2
    assert capped is not None and capped.report["max_iter"] == 8 - LAST_SEARCH
    assert capped.report["evaluations"] <= 8  # within the budget's 8 passes
    assert capped.objective > free.objective
    assert within(LAST_SEARCH + 0.5) is None  # not even one evaluation fits
