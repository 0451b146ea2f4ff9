"""Exact compact pickling of pass results (kernels/packing.py)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from sparkmaxent.backends.local import summarize_all
from sparkmaxent.kernels import MULTICLASS, LossGrad, Space, Weights, loss_grad
from sparkmaxent.kernels.packing import pack_nonzero, unpack_nonzero
from sparkmaxent.methods.gradient_test import finished

from .helpers import random_multiclass


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


@pytest.mark.parametrize(
    "a",
    [
        np.zeros(0),
        np.zeros(9),
        np.array([0.0, -0.0, 1.5, 0.0, 5e-324, np.nan, -np.inf, 2.0]),
        np.random.default_rng(1).normal(size=1001),
    ],
)
def test_pack_round_trip_is_exact(a):
    """Non-zeros (NaN included) come back bit for bit, zeros (-0.0 too) as 0.0."""
    packed = pack_nonzero(a)
    assert len(packed["values"]) == np.count_nonzero(a)
    np.testing.assert_array_equal(bits(unpack_nonzero(packed)), bits(a + 0.0))


def test_full_gradient_pickles_the_block_predicates_only_and_back_bitwise():
    """A block's partial gradient over all candidates is zero at the
    predicates it never holds: the pickle ships the rest, and unpickles to
    the same bits (the driver sums exactly what the kernel computed)."""
    rng = np.random.default_rng(5)
    block = random_multiclass(rng, m=30, P=400, K=6, density=0.02)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    held = np.unique(block.X.indices)
    assert 0 < len(held) < space.n_predicates * 0.6
    ids = np.sort(rng.choice(space.n_features, size=25, replace=False))
    lg = loss_grad(block, space, Weights(ids, rng.normal(size=25), rng.normal(size=6)))
    data = pickle.dumps(lg, protocol=pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(data)
    np.testing.assert_array_equal(bits(back.grad), bits(lg.grad))
    assert (back.loss, back.weight, back.correct) == (lg.loss, lg.weight, lg.correct)
    np.testing.assert_array_equal(back.grad_bias, lg.grad_bias)
    dense = pickle.dumps(lg.grad, protocol=pickle.HIGHEST_PROTOCOL)
    assert len(data) < 8 * len(held) * space.n_labels + len(dense) / 8 + 1000 < len(dense)
    # the merged sums are those of the unpickled parts
    merged = back.merge(pickle.loads(data))
    np.testing.assert_array_equal(bits(merged.grad), bits(lg.grad + lg.grad))


def test_loss_grad_without_bias_pickles():
    lg = LossGrad(1.0, 2.0, 1.0, np.array([0.0, 3.0]), None)
    back = pickle.loads(pickle.dumps(lg))
    assert back.grad_bias is None and back.grad.tolist() == [0.0, 3.0]


def test_gradient_test_pieces_ship_non_zeros_and_sum_to_the_same_summary():
    """The block-wise test's pieces (GradientTestTask.split) pickle as
    LossGrads, non-zeros only; summed after a round trip through pickle, as
    a shuffle ships them, they summarize exactly as in-process."""
    from sparkmaxent.kernels.topk import GradientTestTask

    rng = np.random.default_rng(9)
    blocks = [random_multiclass(rng, m=30, P=300, K=5, density=0.02) for _ in range(3)]
    space = Space(MULTICLASS, 300, 5, bias=True)
    weights = Weights(np.array([3, 40, 777]), np.array([0.5, -1.0, 0.25]), np.zeros(5))
    task = GradientTestTask(space, weights, None, 1e-4, 1e-3, 7, 400)
    partials = [task.partial(b) for b in blocks]
    shipped: dict = {}
    for lg in partials:
        for key, piece in task.split(lg):
            data = pickle.dumps(piece, protocol=pickle.HIGHEST_PROTOCOL)
            if key >= 0:
                assert len(data) < 8 * np.count_nonzero(piece.grad) + 400 / 8 + 1000 < 8 * 400
            back = pickle.loads(data)
            shipped[key] = back if key not in shipped else shipped[key].merge(back)
    total = partials[0].merge(partials[1]).merge(partials[2])
    weight = total.weight
    expected = finished(summarize_all(task, total, weight), space, weights.ids)
    got = None
    for key, value in shipped.items():
        piece = task.summarize(key, value, weight)
        got = piece if got is None else got.merge(piece)
    got = finished(got, space, weights.ids)
    np.testing.assert_array_equal(got.top_ids, expected.top_ids)
    np.testing.assert_array_equal(got.top_grad, expected.top_grad)
    np.testing.assert_array_equal(got.active_grad, expected.active_grad)
    assert (got.max_inactive, got.n_over) == (expected.max_inactive, expected.n_over)
    assert len(expected.top_ids) > 0
