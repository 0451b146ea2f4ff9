"""The loss kernel by request (kernels/loss.py): one public function per kind
of pass (full gradient, active-set loss and gradient, gradient at a subset,
with the probabilities for curvature) over the shared sweeps
(kernels/sweep.py), each bit for bit what the others give where they
overlap, on planted data of both event shapes."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.kernels import CANDIDATES, MULTICLASS
from sparkmaxent.kernels.loss import (
    active_loss_grad,
    full_loss_grad,
    loss_grad,
    loss_grad_at,
    loss_grad_proba,
)
from sparkmaxent.kernels.params import Scaling, Space, Weights

from .helpers import random_candidates, random_multiclass


def _planted(shape: str, scaled: bool, seed: int = 3):
    rng = np.random.default_rng(seed)
    if shape == MULTICLASS:
        block = random_multiclass(rng, m=301, P=30, K=5)
        space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    else:
        block = random_candidates(rng, m=120, D=25)
        space = Space(CANDIDATES, block.F.shape[1], 1)
    ids = np.sort(rng.choice(space.n_features, size=20, replace=False))
    bias = rng.normal(size=space.n_bias) if space.n_bias else None
    weights = Weights(ids, rng.normal(size=len(ids)), bias)
    scaling = None
    if scaled:
        n = space.n_predicates
        scaling = Scaling(mean=0.1 * rng.normal(size=n), inv_scale=rng.uniform(0.5, 2.0, size=n))
    return block, space, weights, scaling


def _same(a, b) -> None:
    assert (a.loss, a.weight, a.correct) == (b.loss, b.weight, b.correct)
    np.testing.assert_array_equal(a.grad, b.grad)
    if a.grad_bias is None:
        assert b.grad_bias is None
    else:
        np.testing.assert_array_equal(a.grad_bias, b.grad_bias)


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
@pytest.mark.parametrize("scaled", [False, True])
def test_each_kind_of_pass_agrees_with_the_others_bit_for_bit(shape, scaled):
    block, space, weights, scaling = _planted(shape, scaled)
    subset = weights.ids[::-3]  # a few of the weights, in another order
    full = full_loss_grad(block, space, weights, scaling)
    assert len(full.grad) == space.n_features
    _same(loss_grad(block, space, weights, scaling), full)
    # the gradient at a subset: the full pass's values there, bit for bit
    at = loss_grad_at(block, space, weights, scaling, subset)
    np.testing.assert_array_equal(at.grad, full.grad[subset])
    assert (at.loss, at.correct) == (full.loss, full.correct)
    # the probabilities kept: the same sums as the pass that keeps none
    with_proba, proba = loss_grad_proba(block, space, weights, scaling)
    _same(with_proba, full)
    assert proba.shape == (
        (block.n_events, space.n_labels) if shape == MULTICLASS else (block.F.shape[0],)
    )
    active = active_loss_grad(block, space, weights, scaling, weights.ids)
    _same(loss_grad(block, space, weights, scaling, weights.ids), active)
    assert active.loss == full.loss and active.correct == full.correct
    np.testing.assert_allclose(active.grad, full.grad[weights.ids], rtol=1e-12, atol=1e-12)
    if shape == CANDIDATES or not scaled:  # centering adds the bias sums chunk by chunk
        _same(loss_grad_proba(block, space, weights, scaling, weights.ids)[0], active)


def test_dense_weights_take_the_gradient_at_a_subset_of_the_full_pass():
    block, space, weights, scaling = _planted(MULTICLASS, scaled=True)
    dense = Weights(None, weights.to_dense(space)[: space.n_features], weights.bias)
    full = full_loss_grad(block, space, dense, scaling)
    subset = weights.ids[::2]
    active = active_loss_grad(block, space, dense, scaling, subset)  # no active set: at
    _same(active, loss_grad_at(block, space, dense, scaling, subset))
    np.testing.assert_array_equal(active.grad, full.grad[subset])


def test_unseen_labels_are_refused_by_every_kind_of_pass():
    block, space, weights, _ = _planted(MULTICLASS, scaled=False)
    block.y[0] = -1
    for run in (
        lambda: full_loss_grad(block, space, weights),
        lambda: active_loss_grad(block, space, weights, None, weights.ids),
        lambda: loss_grad_at(block, space, weights, None, weights.ids),
        lambda: loss_grad_proba(block, space, weights),
    ):
        with pytest.raises(ValueError, match="label -1"):
            run()
