"""The features a stage method's refit fits (train.choice.refit_all_labels;
choice/refit_labels.py): "auto" checked against both feature sets fitted
cold on the training events and scored on the held-out events in numpy,
the refit against a cold fit of the kept set on all the events."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.refit_labels import all_label_ids
from sparkmaxent.config import ConfigError, load_config, train_config
from sparkmaxent.kernels import MULTICLASS, MulticlassBlock, Space
from sparkmaxent.kernels.blocks import take_events
from sparkmaxent.methods.baselines import fit_smooth
from sparkmaxent.selection.base import TrainingContext

from . import test_choice
from .test_choice import run
from .test_stage_prior import GRID, KEYS, heldout_loglik

problem = test_choice.problem  # the planted problem's fixture: one label a predicate


@pytest.fixture(scope="module")
def every_label():
    """Data whose informative predicates weigh on every label (a normal
    weight per label, as words on genres), cut into training and held-out
    parts: there the pairs SGC and the Bayes factor choose miss evidence
    that every label's feature of their predicates carries."""
    rng = np.random.default_rng(0)
    n, P, K = 1200, 60, 4
    X = (rng.random((n, P)) < 0.1).astype(float)
    W = np.zeros((P, K))
    W[:10] = rng.normal(0, 1.5, (10, K))
    S = X @ W
    prob = np.exp(S - S.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(K, p=q) for q in prob])
    block = MulticlassBlock(X=sp.csr_matrix(X), y=y, c=np.ones(n), n_labels=K)
    return (
        take_events(block, np.arange(900)),
        take_events(block, np.arange(900, n)),
        Space(MULTICLASS, P, K, bias=True),
    )


def test_all_label_ids_are_every_label_of_each_predicate():
    space = Space(MULTICLASS, 10, 3, bias=True)
    ids = np.array([4, 5, 9, 29])  # predicates 1, 1, 3, 9
    assert all_label_ids(space, ids).tolist() == [3, 4, 5, 9, 10, 11, 27, 28, 29]


@pytest.mark.parametrize("method", ["sgc", "bayes-factor"])
@pytest.mark.parametrize("data, kept", [("problem", "chosen"), ("every_label", "all labels")])
def test_auto_keeps_the_better_held_out_fit_of_the_two_feature_sets(request, data, kept, method):
    problem = request.getfixturevalue(data)
    tr, he, space = problem
    keys = dict(KEYS[method], max_features=12)
    auto = run(problem, refit_all_labels="auto", **keys)
    labels = auto.report.refit.labels
    assert labels is not None
    chosen = run(problem, refit_all_labels=False, **keys)
    assert auto.report.stage_choice == chosen.report.stage_choice
    ids = chosen.report.refit.chosen_fit.features
    selected = np.sort(run(problem, refit=False, **keys).weights.active_ids())
    assert len(selected) == ids == labels.chosen_features
    every = all_label_ids(space, selected)
    assert labels.all_features == len(every) > len(selected)
    # each set: a cold fit on the training events under the method's prior
    # (sigma^2 = 1 in sum units: gamma2 = 1 / W), scored in numpy
    w_train = float(tr.c.sum())
    assert labels.l2 == pytest.approx(1.0 / w_train)
    on_train = TrainingContext(LocalBackend([tr], space), train_config(gtol=1e-9))
    scores = [
        heldout_loglik(he, space, fit_smooth(on_train, s, labels.l2).weights)
        for s in (selected, every)
    ]
    assert labels.chosen_heldout["heldout_score"] == pytest.approx(scores[0], abs=1e-5)
    assert labels.all_heldout["heldout_score"] == pytest.approx(scores[1], abs=1e-5)
    assert labels.gain == pytest.approx(scores[1] - scores[0], abs=1e-5)
    assert labels.se > 0
    assert labels.kept == ("all labels" if scores[1] > scores[0] else "chosen") == kept
    kept_ids = every if scores[1] > scores[0] else selected
    # the refit: the kept set on the training and held-out events, as a cold fit
    assert set(auto.weights.active_ids().tolist()) <= set(kept_ids.tolist())
    assert auto.report.refit.features == len(kept_ids)
    both = TrainingContext(LocalBackend([tr, he], space), train_config(gtol=1e-9))
    cold = fit_smooth(both, kept_ids, auto.report.refit.l2)
    assert auto.report.refit.objective == pytest.approx(cold.objective, rel=1e-7)
    # the fixed settings make no choice
    assert chosen.report.refit.labels is None
    assert run(problem, refit_all_labels=True, **keys).report.refit.labels is None


@pytest.mark.parametrize("method", ["sgc", "bayes-factor"])
def test_auto_with_a_grid_keeps_the_best_held_out_pair_of_feature_set_and_scale(problem, method):
    # train.choice.stage_prior_scales with auto: each feature set walks the grid,
    # and the (set, scale) pair of the best held-out score is refitted
    tr, he, space = problem
    res = run(problem, stage_prior_scales=GRID, **KEYS[method])
    refit, labels = res.report.refit, res.report.refit.labels
    assert labels is not None
    selected = np.sort(run(problem, refit=False, **KEYS[method]).weights.active_ids())
    every = all_label_ids(space, selected)
    w_train = float(tr.c.sum())
    on_train = TrainingContext(LocalBackend([tr], space), train_config(gtol=1e-9))

    def score(ids, l2):  # a cold fit on the training events, scored in numpy
        return heldout_loglik(he, space, fit_smooth(on_train, ids, l2).weights)

    scores = {}
    for kept, ids, points in (
        ("chosen", selected, refit.prior_points),
        ("all labels", every, labels.all_points),
    ):
        assert [p.scale for p in points] == GRID[: len(points)] and len(points) >= 3
        for p in points:
            assert p.l2 == pytest.approx(1.0 / (w_train * p.scale))
            scores[kept, p.scale] = score(ids, p.l2)
            assert p.heldout["heldout_score"] == pytest.approx(scores[kept, p.scale], abs=1e-5)
        best = max(points, key=lambda p: p.heldout["heldout_score"])
        assert [p.chosen for p in points] == [p is best for p in points]
    assert labels.chosen_scale == next(p.scale for p in refit.prior_points if p.chosen)
    assert labels.all_scale == next(p.scale for p in labels.all_points if p.chosen)
    pair = max(scores, key=lambda k: scores[k])
    assert (labels.kept, refit.prior_scale) == pair
    assert labels.gain == pytest.approx(
        scores["all labels", labels.all_scale] - scores["chosen", labels.chosen_scale], abs=1e-5
    )
    # the refit: the kept set at its scale on the training and held-out events, as a cold fit
    kept_ids = every if labels.kept == "all labels" else selected
    w_all = w_train + float(he.c.sum())
    assert refit.l2 == pytest.approx(1.0 / (w_all * refit.prior_scale))
    both = TrainingContext(LocalBackend([tr, he], space), train_config(gtol=1e-9))
    cold = fit_smooth(both, kept_ids, refit.l2)
    assert refit.objective == pytest.approx(cold.objective, rel=1e-7)
    if method != "sgc":
        return
    # on this planted problem SGC's stage: every label's features lose at the chosen
    # features' best scale, so a choice of the set at that scale keeps the chosen
    # features; at their own scale they win
    at_chosen_scale = score(every, 1.0 / (w_train * labels.chosen_scale))
    assert at_chosen_scale < scores["chosen", labels.chosen_scale]
    assert labels.kept == "all labels" and labels.all_scale != labels.chosen_scale


def test_refit_all_labels_takes_booleans_and_auto_and_refuses_the_rest():
    assert train_config().choice.refit_all_labels == "auto"  # a held-out choice by default
    assert train_config(refit_all_labels=True).choice.refit_all_labels == "true"
    assert train_config(refit_all_labels=False).choice.refit_all_labels == "false"
    config = load_config(overrides=["train.choice.refit_all_labels=true"])
    assert config.train.choice.refit_all_labels == "true"
    with pytest.raises(ConfigError, match="refit_all_labels: expected one of"):
        train_config(refit_all_labels="sometimes")
    with pytest.raises(ConfigError, match="refit_all_labels"):
        train_config(refit_all_labels=1)
