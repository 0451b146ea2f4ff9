"""A grafting round starts from the gradient test it follows
(``GradientTest.round_start``): the evaluation at the round's first point
read off the test, with no pass of the round's own."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.config import train_config
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.kernels.loss import LossGradTask
from sparkmaxent.methods.gradient_test import GradientTest, make_gradient_test, theta
from sparkmaxent.problem import Penalty
from sparkmaxent.selection.base import TrainingContext
from sparkmaxent.train import train

from .test_grafting import planted

#: each of the three implementations of the test (methods/gradient_test.py)
TESTS = {
    "dense": dict(partial_cut=0.0),
    "thresholded": dict(partial_cut=0.5),
    "block-wise": dict(dense_test_max=0, test_block_size=97),
}


def _some_weights(backend, cfg):
    """Weights a few rounds into a run (non-zero weights and biases)."""
    res = train(backend, train_config(cfg, max_rounds=2))
    assert len(res.weights.values) > 0
    return res.weights


@pytest.mark.parametrize("kind", sorted(TESTS))
def test_the_round_start_is_the_objective_at_the_rounds_first_point(kind):
    # independent: the same point evaluated by a pass of its own over the
    # round's ids, as the solver computed it before
    _, block, space = planted(seed=4, m=2000, P=120)
    backend = LocalBackend(split_block(block, 2), space)
    l1 = 2e-3
    cfg = train_config(method="grafting", l1=l1, n_best=7, gtol=1e-9, **TESTS[kind])
    penalty = Penalty(gamma1=l1)
    weights = _some_weights(backend, cfg)
    gt = make_gradient_test(TrainingContext(backend, cfg), penalty)
    test = gt.test(weights)
    assert len(test.new) > 0
    ids = np.union1d(weights.active_ids(), test.new)
    start = gt.round_start(weights, test, ids)
    assert start is not None and start.hess is None
    values = np.zeros(len(ids))
    values[np.searchsorted(ids, weights.active_ids())] = weights.values
    theta0 = np.concatenate([values, weights.bias])
    passes = backend.passes
    own = gt.objective(ids).at(theta0, full_gradient=False, hessian=False)
    assert backend.passes == passes + 1
    assert start.value == pytest.approx(own.value, rel=1e-12)
    np.testing.assert_allclose(start.grad, own.grad, rtol=1e-9, atol=1e-15)
    assert np.array_equal(theta(weights)[: len(weights.values)], weights.values)


def test_a_test_without_its_active_gradient_gives_no_start():
    _, block, space = planted(seed=4, m=800, P=60, K=3, n_support=4)
    backend = LocalBackend([block], space)
    cfg = train_config(method="grafting", l1=2e-3, n_best=3)
    gt = make_gradient_test(TrainingContext(backend, cfg), Penalty(gamma1=2e-3))
    weights = _some_weights(backend, cfg)
    test = gt.test(weights)
    bare = dataclasses.replace(test, active_grad=None)
    assert gt.round_start(weights, bare, np.union1d(weights.active_ids(), test.new)) is None


class _Counting(LocalBackend):
    """Counts the passes of loss and gradient over a round's ids alone (the
    round's first pass before ``round_start``)."""

    round_passes = 0

    def run(self, task):
        if isinstance(task, LossGradTask) and task.grad_ids is not None:
            self.round_passes += 1
        return super().run(task)


@pytest.mark.parametrize("kind", sorted(TESTS))
def test_rounds_started_from_the_test_reach_the_same_certified_optimum_in_fewer_passes(
    kind, monkeypatch
):
    _, block, space = planted(seed=5, m=3000, P=200, n_copies=0)  # a unique support
    cfg = train_config(
        method="grafting", l1=1e-3, n_best=20, gtol=1e-9, solver="newton-cg", **TESTS[kind]
    )
    runs = {}
    for name in ("own pass", "from the test"):
        if name == "own pass":  # the round's solver evaluates its first point itself
            monkeypatch.setattr(GradientTest, "round_start", lambda *a: None)
        else:
            monkeypatch.undo()
        backend = _Counting(split_block(block, 3), space)
        runs[name] = (train(backend, cfg), backend)
    (old, old_b), (new, new_b) = runs["own pass"], runs["from the test"]
    for res in (old, new):
        assert res.report.certificate.passed and res.report.converged
    assert new.weights.ids.tolist() == old.weights.ids.tolist()
    np.testing.assert_allclose(new.weights.values, old.weights.values, atol=1e-5)
    assert new.report.objective == pytest.approx(old.report.objective, rel=1e-10)
    rounds = len(old.report.rounds)
    assert rounds >= 3
    # the old path's first pass of each round is a loss+gradient pass over its ids
    assert old_b.round_passes >= rounds
    assert new_b.round_passes < old_b.round_passes
    assert new_b.passes < old_b.passes
