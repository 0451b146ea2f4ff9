"""Baseline training in-process: optimality, agreement with scikit-learn,
standardization and save/load round trips."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.config import train_config
from sparkmaxent.kernels import CANDIDATES, MULTICLASS, Space
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.model import MaxentModel
from sparkmaxent.problem import Objective
from sparkmaxent.train import train

from .helpers import random_candidates, random_multiclass


def multiclass_problem(seed=0, m=300, P=20, K=3):
    rng = np.random.default_rng(seed)
    block = random_multiclass(rng, m=m, P=P, K=K, density=0.25)
    block = type(block)(X=block.X, y=block.y, c=np.ones(m), n_labels=K)
    return block, Space(MULTICLASS, P, K, bias=True)


def test_l2_matches_scikit_learn_at_the_same_regularization():
    from sklearn.linear_model import LogisticRegression

    block, space = multiclass_problem()
    gamma2 = 0.01
    backend = LocalBackend(split_block(block, 3), space)
    res = train(backend, train_config(method="l2", l2=gamma2, gtol=1e-10))
    assert res.report.converged
    m = block.n_events
    sk = LogisticRegression(C=1.0 / (m * gamma2), tol=1e-12, max_iter=10000).fit(block.X, block.y)
    theta = np.concatenate([sk.coef_.T.ravel(), sk.intercept_])
    f_sk, _ = Objective(backend, None, l2=gamma2)(theta)
    assert res.report.objective == pytest.approx(f_sk, rel=1e-8)
    ours = res.weights.to_dense(space)
    np.testing.assert_allclose(ours[: space.n_features], sk.coef_.T.ravel(), atol=1e-4)


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
def test_stationary_point_and_report(shape):
    rng = np.random.default_rng(1)
    if shape == MULTICLASS:
        block, space = multiclass_problem(1)
    else:
        block = random_candidates(rng, m=80)
        space = Space(CANDIDATES, block.n_predicates, 1)
    backend = LocalBackend([block], space)
    res = train(backend, train_config(method="l2", l2=0.05, gtol=1e-9, ftol=1e-15))
    _, g = Objective(backend, None, l2=0.05)(res.weights.to_dense(space))
    assert np.abs(g).max() < 1e-7
    assert res.report.passes == res.report["evaluations"]
    assert 0 < res.report["train_accuracy"] <= 1


def test_cutoff_keeps_only_frequent_features():
    block, space = multiclass_problem(2)
    backend = LocalBackend([block], space)
    res = train(backend, train_config(method="cutoff", cutoff=26, l2=0.01))
    X = (block.X != 0).astype(float)
    Y = np.eye(space.n_labels)[block.y]
    counts = (X.T @ Y).ravel()
    allowed = set(np.flatnonzero(counts >= 26))
    assert 0 < len(allowed) < space.n_features
    assert set(res.weights.ids.tolist()) <= allowed
    assert res.report["active_features"] == len(allowed)


def test_standardized_model_scores_the_same_after_save_and_load(tmp_path):
    block, space = multiclass_problem(3)
    backend = LocalBackend([block], space)
    res = train(backend, train_config(method="l2", l2=0.01, standardize=True))
    assert res.scaling is not None
    names = {p: f"f{p}" for p in range(space.n_predicates)}
    model = MaxentModel(
        space,
        res.weights,
        ["a", "b", "c"],
        names,
        res.scaling,
        {"train": {"l2": 0.01}},
        res.report.to_json(),
    )
    model.save(str(tmp_path / "m"))
    with pytest.raises(FileExistsError):
        model.save(str(tmp_path / "m"))
    loaded = MaxentModel.load(str(tmp_path / "m"))
    pred0, P0 = model.predict(block)
    pred1, P1 = loaded.predict(block)
    np.testing.assert_allclose(P1, P0, rtol=1e-12)
    assert loaded.labels == ["a", "b", "c"]
    assert loaded.summary["objective"] == pytest.approx(res.report.objective)
    assert loaded.evaluate_block(block).accuracy == pytest.approx(res.report["train_accuracy"])


def test_standardization_does_not_change_the_mle_fit():
    """With an unpenalized bias, scaling only reparameterizes the MLE: the
    optimal probabilities are the same (up to optimizer tolerance)."""
    block, space = multiclass_problem(4, m=400, P=8)
    a = train(LocalBackend([block], space), train_config(method="l2", l2=0.0, gtol=1e-9))
    b = train(
        LocalBackend([block], space), train_config(method="l2", l2=0.0, gtol=1e-9, standardize=True)
    )
    assert b.report.objective == pytest.approx(a.report.objective, rel=1e-6)


def test_unknown_method_is_a_clear_error():
    block, space = multiclass_problem()
    with pytest.raises(ValueError, match="train.method: expected one of"):
        train(LocalBackend([block], space), train_config(method="nope"))


@pytest.mark.parametrize(
    "module",
    [
        "sparkmaxent.methods.ifs",
        "sparkmaxent.methods.bayes",
        "sparkmaxent.methods.grafting",
        "sparkmaxent.selection.loop",
        "sparkmaxent.train",
    ],
)
def test_every_selection_module_can_be_imported_first(module):
    """train imports the selection modules to register them and they import
    train: whichever is imported first, the cycle must close."""
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import {module}; import sparkmaxent.train as t; "
            "assert {'ifs', 'sgc', 'grafting', 'bayes-factor'} <= set(t.METHODS)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
