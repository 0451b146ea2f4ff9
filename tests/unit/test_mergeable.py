"""Pass results merged field by field (kernels/mergeable.py ``Summed``):
on planted partitions of one block, any order of merging gives the same
sums (to rounding) as the tree reduction and as the whole block; fields
with their own rule (a maximum, a union) follow it; None stays None."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pytest

from sparkmaxent.backends.base import merge_all
from sparkmaxent.kernels import MULTICLASS, Weights
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.kernels.curvature import CurvatureTask
from sparkmaxent.kernels.direction import HessianProductTask, hessian_operator
from sparkmaxent.kernels.gains import EmpiricalExpectationTask, GainDerivativesTask
from sparkmaxent.kernels.loss import LossGrad, LossGradTask
from sparkmaxent.kernels.mergeable import Summed, merged_by
from sparkmaxent.kernels.predict import EvalTask
from sparkmaxent.kernels.proposals import EventSignatureTask, ProposalTask
from sparkmaxent.kernels.stats import CountTask, FeatureCountTask, MomentsTask

from .helpers import random_block


def _planted(shape: str, seed: int = 3):
    """A random block, its four partitions, weights on a third of the
    features and some candidate ids of the rest."""
    rng = np.random.default_rng(seed)
    block, space = random_block(rng, shape)
    n = space.n_features
    ids = np.sort(rng.choice(n, size=n // 3, replace=False)).astype(np.int64)
    bias = rng.normal(size=space.n_labels) if space.bias else None
    weights = Weights(ids, rng.normal(scale=0.5, size=len(ids)), bias)
    others = np.setdiff1d(np.arange(n), ids)[:5]
    return block, split_block(block, 4), space, weights, ids, others


def _tasks(space, weights, ids, others, block):
    dim = len(hessian_operator(block, space, weights, ids[:4], None)[2])
    vector = np.linspace(-1.0, 1.0, dim)
    tasks = {
        "loss": LossGradTask(space, weights),
        "loss at ids": LossGradTask(space, weights, grad_ids=ids),
        "moments": MomentsTask(),
        "feature counts": FeatureCountTask(),
        "count": CountTask(),
        "expectations": EmpiricalExpectationTask(space),
        "evaluation": EvalTask(space, weights),
        "gain derivatives": GainDerivativesTask(space, weights, None, others, np.full(5, 0.3)),
        "curvature": CurvatureTask(space, weights, ids[:4]),
        "hessian product": HessianProductTask(space, weights, ids[:4], vector),
        "signatures": EventSignatureTask(space, others, 16),
    }
    if space.shape == MULTICLASS:
        tasks["proposals"] = ProposalTask(space, weights)
    return tasks


def _assert_same(a, b, what: str) -> None:
    assert type(a) is type(b), what
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            _assert_same(getattr(a, f.name), getattr(b, f.name), f"{what}.{f.name}")
    elif a is None or b is None:
        assert a is None and b is None, what
    else:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("shape", ["multiclass", "candidates"])
def test_merging_planted_partitions_is_associative_and_adds_up_to_the_whole_block(shape):
    block, parts, space, weights, ids, others = _planted(shape)
    for name, task in _tasks(space, weights, ids, others, block).items():
        a, b, c, d = (task(p) for p in parts)
        left = a.merge(b).merge(c).merge(d)
        right = a.merge(b.merge(c.merge(d)))
        _assert_same(left, right, name)
        _assert_same(left, merge_all([a, b, c, d]), name)
        whole = task(block)
        if name == "count":
            assert (left.events, left.blocks) == (whole.events, 4)
        elif name == "signatures":  # bits of events by their index in a block: not the whole's
            assert left.bits.shape == whole.bits.shape
        elif name == "hessian product":
            assert left.products == 4 * whole.products
            _assert_same(dataclasses.replace(left, products=whole.products), whole, name)
        else:
            _assert_same(left, whole, name)


@dataclass
class _Sums(Summed):
    total: np.ndarray
    weight: float
    inner: LossGrad
    optional: np.ndarray | None
    largest: np.ndarray = field(metadata=merged_by(np.maximum))
    ids: np.ndarray = field(metadata=merged_by(np.union1d))


def _sums(seed: int, optional: bool = True) -> _Sums:
    rng = np.random.default_rng(seed)
    inner = LossGrad(1.0 * seed, 2.0, 0.5, rng.normal(size=3), None)
    ids = np.sort(rng.choice(10, size=4, replace=False))
    extra = rng.normal(size=2) if optional else None
    return _Sums(rng.normal(size=3), float(seed), inner, extra, rng.normal(size=3), ids)


def test_each_field_merges_by_its_sum_its_own_merge_or_its_rule():
    a, b = _sums(1), _sums(2)
    m = a.merge(b)
    np.testing.assert_array_equal(m.total, a.total + b.total)
    assert m.weight == 3.0
    np.testing.assert_array_equal(m.inner.grad, a.inner.grad + b.inner.grad)
    assert m.inner.loss == 3.0 and m.inner.grad_bias is None
    np.testing.assert_array_equal(m.optional, a.optional + b.optional)
    np.testing.assert_array_equal(m.largest, np.maximum(a.largest, b.largest))
    np.testing.assert_array_equal(m.ids, np.union1d(a.ids, b.ids))
    # None merges with None only: a part without a field another part has is a bug
    assert _sums(1, optional=False).merge(_sums(2, optional=False)).optional is None
    with pytest.raises(ValueError, match="'optional' set in one of them only"):
        a.merge(_sums(2, optional=False))
