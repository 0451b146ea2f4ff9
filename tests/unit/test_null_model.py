"""The bias-only model a path starts from (``choice.path.null_model``): in
closed form (log label frequencies) it is the optimum the iterative fit
reaches at the same (zero) prior on the bias, with event weights too; a
label of no training weight falls back to the iterative fit."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.path import null_model
from sparkmaxent.config import train_config
from sparkmaxent.kernels import CANDIDATES, MULTICLASS, Space
from sparkmaxent.kernels.blocks import take_events
from sparkmaxent.methods.baselines import fit_smooth
from sparkmaxent.problem.objective import Objective
from sparkmaxent.selection.base import TrainingContext

from .helpers import random_block, random_multiclass


def context(blocks, space) -> TrainingContext:
    return TrainingContext(LocalBackend(blocks, space), train_config(gtol=1e-10))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_closed_form_bias_only_model_is_the_fitted_one(seed):
    rng = np.random.default_rng(seed)
    block = random_multiclass(rng, m=200)  # weighted events, every label seen
    assert np.all(np.bincount(block.y, minlength=block.n_labels) > 0)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    halves = [take_events(block, np.arange(0, block.n_events // 2)),
              take_events(block, np.arange(block.n_events // 2, block.n_events))]  # fmt: skip
    ctx = context(halves, space)
    closed = null_model(ctx)
    fitted = fit_smooth(ctx, np.zeros(0, dtype=np.int64), 0.0).weights
    assert closed.nnz == 0 and fitted.nnz == 0
    assert np.allclose(closed.bias, fitted.bias, atol=1e-5)
    # the label frequencies, independently: softmax(b) = weighted label shares
    share = np.bincount(block.y, weights=block.c, minlength=space.n_labels) / block.c.sum()
    p = np.exp(closed.bias) / np.exp(closed.bias).sum()
    assert np.allclose(p, share, rtol=1e-10)
    # an optimum: the bias gradient is zero there
    obj = Objective(ctx.backend, np.zeros(0, dtype=np.int64), l2=0.0, scaling=ctx.scaling)
    _, grad = obj(obj.theta(closed))
    assert np.max(np.abs(grad)) < 1e-12


def test_a_label_without_training_weight_falls_back_to_the_iterative_fit():
    rng = np.random.default_rng(3)
    block, space = random_block(rng, MULTICLASS)
    keep = np.flatnonzero(block.y != 0)  # label 0 never seen
    ctx = context([take_events(block, keep)], space)
    start = null_model(ctx)
    assert np.all(np.isfinite(start.bias))
    assert start.bias[0] < start.bias[1:].min()


def test_a_model_without_a_bias_starts_from_zero():
    rng = np.random.default_rng(4)
    block, space = random_block(rng, CANDIDATES)
    start = null_model(context([block], space))
    assert start.nnz == 0 and start.bias is None
