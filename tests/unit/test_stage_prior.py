"""The prior strength of a stage method's chosen stage, chosen on held-out
data before its refit (train.choice.stage_prior_scales; choice/stage_prior.py):
each scale's fit of the chosen features checked against a cold fit on the
training events and a held-out log-likelihood computed here with numpy,
the choice their argmax, and the refit at the chosen scale."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.stage_prior import scale_grid
from sparkmaxent.config import ConfigError, load_config, train_config
from sparkmaxent.methods.baselines import fit_smooth
from sparkmaxent.selection.base import TrainingContext

from . import test_choice
from .test_choice import run

problem = test_choice.problem  # the planted problem's fixture

#: a grid around the method's prior (the key's default is [], no choice)
GRID = [0.0625, 0.25, 1.0, 4.0, 16.0, 64.0]
KEYS = {
    "sgc": dict(method="sgc", max_features=40, gtol=1e-9),
    "bayes-factor": dict(method="bayes-factor", per_round=3, max_features=30, gtol=1e-9),
}


def heldout_loglik(block, space, weights) -> float:
    """Mean held-out log-likelihood of ``weights``, in numpy (no kernel)."""
    S = block.X @ weights.matrix(space)
    S = S.toarray() if hasattr(S, "toarray") else np.asarray(S)
    if weights.bias is not None:
        S = S + weights.bias
    ll = S[np.arange(len(block.y)), block.y] - logsumexp(S, axis=1)
    return float(block.c @ ll / block.c.sum())


@pytest.mark.parametrize("method", ["sgc", "bayes-factor"])
def test_the_chosen_scale_is_the_best_held_out_fit_of_the_chosen_features(problem, method):
    tr, he, space = problem
    # the chosen stage's own features (every label's: test_refit_labels.py)
    keys = dict(KEYS[method], refit_all_labels=False)
    res = run(problem, stage_prior_scales=GRID, **keys)
    fixed = run(problem, **keys)
    refit = res.report.refit
    points = refit.prior_points
    # walked strongest prior first, the same stage chosen as without a choice
    assert [p.scale for p in points] == GRID[: len(points)]
    assert len(points) >= 3
    assert res.report.stage_choice == fixed.report.stage_choice
    ids = fixed.weights.active_ids()
    assert np.array_equal(res.weights.active_ids(), ids)
    # each point: a cold fit of the chosen features on the training events under
    # the method's prior (sigma^2 = 1, sum units) times the scale, scored in numpy
    w_train, w_all = float(tr.c.sum()), float(tr.c.sum() + he.c.sum())
    on_train = TrainingContext(LocalBackend([tr], space), train_config(gtol=1e-9))
    scores = []
    for p in points:
        assert p.l2 == pytest.approx(1.0 / (w_train * p.scale))
        cold = fit_smooth(on_train, ids, p.l2)
        scores.append(heldout_loglik(he, space, cold.weights))
        assert p.heldout["heldout_score"] == pytest.approx(scores[-1], abs=1e-5)
    best = int(np.argmax(scores))
    assert [p.chosen for p in points] == [i == best for i in range(len(points))]
    assert refit.prior_scale == points[best].scale
    # on this planted problem the choice moves the prior off the method's own
    assert refit.prior_scale != 1.0
    assert max(scores) > scores[[p.scale for p in points].index(1.0)]
    # the refit: the chosen scale on the training and held-out events, as a cold fit
    assert refit.l2 == pytest.approx(1.0 / (w_all * refit.prior_scale))
    assert fixed.report.refit.l2 == pytest.approx(1.0 / w_all)
    both = TrainingContext(LocalBackend([tr, he], space), train_config(gtol=1e-9))
    cold = fit_smooth(both, ids, refit.l2)
    assert refit.objective == pytest.approx(cold.objective, rel=1e-7)
    assert not np.allclose(res.weights.values, fixed.weights.values, rtol=1e-3)


def test_the_walk_stops_by_the_held_out_rule_past_the_best(problem):
    # a grid running far past the best: the stop rule (patience 2) ends it
    scales = [4.0**k for k in range(-3, 8)]
    res = run(problem, stage_prior_scales=scales, refit_all_labels=False, **KEYS["sgc"])
    points = res.report.refit.prior_points
    best = [p.chosen for p in points].index(True)
    assert len(points) < len(scales)
    assert len(points) - 1 - best >= 2 and points[-1].below_best_se > 1.0


def test_an_empty_grid_keeps_the_methods_prior_and_the_report_says_so(problem):
    assert train_config().choice.stage_prior_scales == []  # the default: no choice
    res = run(problem, **KEYS["sgc"])
    assert res.report.refit.prior_scale == 1.0 and res.report.refit.prior_points == []
    doc = res.report.refit.to_json()
    assert doc["prior_scale"] == 1.0 and doc["prior_points"] == []


def test_train_choice_stage_prior_scales_round_trips_and_is_checked(tmp_path, problem):
    path = tmp_path / "c.toml"
    path.write_text('[train]\nmethod = "sgc"\n[train.choice]\nstage_prior_scales = [2.0, 0.5]\n')
    config = load_config(str(path)).train
    assert config.choice.stage_prior_scales == [2.0, 0.5]
    assert scale_grid(config.choice.stage_prior_scales) == [0.5, 2.0]
    with pytest.raises(ConfigError, match="train.choice.stage_prior_scales"):
        run(problem, stage_prior_scales=[1.0, 0.0], **KEYS["sgc"])


def test_refit_all_labels_refits_every_label_of_the_chosen_predicates(problem):
    # train.choice.refit_all_labels: the same stages and choice; the refit fits
    # (p, k) for every label k of each predicate p the chosen stage holds, as a
    # cold fit of those features on the training and held-out events would
    tr, he, space = problem
    keys = dict(KEYS["sgc"], max_features=12)
    chosen = run(problem, **keys)
    res = run(problem, refit_all_labels=True, **keys)
    assert res.report.stage_choice == chosen.report.stage_choice
    K = space.n_labels
    predicates = np.unique(chosen.weights.active_ids() // K)
    ids = (predicates[:, None] * K + np.arange(K)).ravel()
    assert len(ids) > chosen.weights.nnz
    assert set(res.weights.active_ids().tolist()) == set(ids.tolist())
    assert res.report.refit.features == len(ids)
    both = TrainingContext(LocalBackend([tr, he], space), train_config(gtol=1e-9))
    cold = fit_smooth(both, ids, res.report.refit.l2)
    assert res.report.refit.objective == pytest.approx(cold.objective, rel=1e-7)
    assert res.report.refit.objective < chosen.report.refit.objective
    assert res.report.refit.labels is None  # a fixed setting: no held-out choice
