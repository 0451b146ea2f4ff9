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
from sparkmaxent.config import train_config
from sparkmaxent.methods.baselines import fit_smooth
from sparkmaxent.selection.base import TrainingContext

from . import test_choice
from .test_choice import run

problem = test_choice.problem  # the planted problem's fixture

KEYS = {
    "sgc": dict(method="sgc", max_features=40, gtol=1e-9),
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
    assert [r["active"] for r in res.report.fit["rounds"]] == [
        r["active"] for r in chosen.report.fit["rounds"]
    ]
    row = res.report.fit["rounds"][choice.chosen_round - 1]
    # the chosen stage's figures kept beside the refit's
    fit = refit.chosen_fit
    assert fit.stage == choice.chosen_round
    assert fit.features == chosen.weights.nnz == row["active"]
    assert fit.objective == pytest.approx(chosen.report.objective)
    accuracy = fit.heldout["heldout_accuracy"]
    assert accuracy == row["heldout_accuracy"] == chosen.report.heldout.accuracy
    assert res.report.heldout.accuracy == accuracy
    # the refit: the same features, the method's prior sigma^2 = 1 (sum
    # units) on all the events' weight, as a cold fit of that set would find
    assert np.array_equal(res.weights.active_ids(), chosen.weights.active_ids())
    total = float(tr.c.sum() + he.c.sum())
    assert refit.l2 == pytest.approx(1.0 / total)
    both = LocalBackend([tr, he], space)
    config = train_config(gtol=1e-9)
    cold = fit_smooth(TrainingContext(both, config), chosen.weights.active_ids(), refit.l2)
    assert refit.objective == pytest.approx(cold.report["objective"], rel=1e-7)
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
    assert res.report["refit"]["l2"] == pytest.approx(1.0 / (s2 * float(tr.c.sum() + he.c.sum())))
    assert res.report["prior_variance"] == s2
    assert res.report["refit"]["features"] == res.weights.nnz


def test_a_refit_past_max_seconds_is_skipped_and_the_chosen_stage_kept(problem):
    # the first stage spends the whole budget: no time is left for a refit
    res = run(problem, method="sgc", max_features=40, max_seconds=1e-6)
    assert isinstance(res.report.refit, RefitSkipped)
    assert res.report.refit.skipped.startswith("max_seconds")
    rounds = res.report.fit["rounds"]
    assert res.report.stage_choice.chosen_round == len(rounds) == 1
    assert res.weights.nnz == rounds[0]["active"]
