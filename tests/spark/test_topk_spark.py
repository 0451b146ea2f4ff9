"""The block-wise gradient test on Spark: partial gradients summed per
feature block across executors give the dense test's selection, KKT
figures and grafted model."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.config import train_config
from sparkmaxent.methods.gradient_test import blockwise_summary, select_candidates
from sparkmaxent.problem import Objective, kkt_certificate, kkt_from_parts
from sparkmaxent.train import train

from .helpers import written_multiclass

GAMMA = 2e-3
P, K = 60, 3


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    p = written_multiclass(
        str(tmp_path_factory.mktemp("topk-mc")), P, active_per_event=6, n_files=3, n_labels=K
    )
    return p.directory, p.info, p.block, p.space


@pytest.fixture(scope="module")
def backend(spark, problem):
    directory, info, _, _ = problem
    with SparkBackend(spark, directory, info, bias=True, partitions=3, name="test-topk") as b:
        yield b


def config(**kw):
    return train_config(**{"method": "grafting", "l1": GAMMA, "n_best": 4, "gtol": 1e-10, **kw})


def test_block_pass_selects_what_the_dense_pass_selects(backend, problem):
    _, _, block, space = problem
    w = train(LocalBackend([block], space), config(max_rounds=1)).weights
    assert len(w.ids) > 0
    theta = np.concatenate([w.values, w.bias])
    obj = Objective(backend, w.ids)
    bound = GAMMA * (1 + 1e-6)
    passes = backend.passes
    value, summary = blockwise_summary(obj, theta, bound, 5, 7)  # 26 feature blocks of 7
    assert backend.passes == passes + 1 and backend.live_broadcasts == 0
    ev = obj.at(theta, full_gradient=True, hessian=False)
    ids, best = select_candidates(ev.full_grad, w.ids, bound, 5)
    assert len(ids) == 5
    np.testing.assert_array_equal(summary.top_ids, ids)
    # sums over 3 partitions: added in another order than the tree reduction's
    np.testing.assert_allclose(summary.top_grad, ev.full_grad[ids], rtol=1e-12)
    np.testing.assert_allclose(summary.active_grad, ev.full_grad[w.ids], rtol=1e-12, atol=1e-17)
    assert summary.max_inactive == pytest.approx(best, rel=1e-12)
    assert value == pytest.approx(ev.value, rel=1e-14)
    assert summary.lg.weight == ev.lossgrad.weight == backend.weight
    np.testing.assert_allclose(summary.lg.grad_bias, ev.lossgrad.grad_bias, rtol=1e-12, atol=1e-15)
    grad_bias = ev.lossgrad.grad_bias / ev.lossgrad.weight
    dense = kkt_certificate(ev.full_grad, w, grad_bias, GAMMA, 1e-6)
    parts = kkt_from_parts(
        summary.active_grad,
        w,
        summary.max_inactive,
        summary.n_over,
        summary.n_features,
        summary.lg.grad_bias / summary.lg.weight,
        GAMMA,
        1e-6,
    )
    assert parts.zero_weights_over_bound == dense.zero_weights_over_bound > 5
    assert parts.features_checked == dense.features_checked == space.n_features
    for key in ("max_zero_gradient", "max_active_violation", "max_bias_gradient"):
        assert getattr(parts, key) == pytest.approx(getattr(dense, key), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("rounds", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_short_grafting_run_block_path_equals_dense_path(backend, problem, rounds):
    dense = train(backend, config(max_rounds=rounds))
    tiled = train(backend, config(max_rounds=rounds, dense_test_max=0, test_block_size=11))
    assert tiled.report["rounds_run"] == rounds
    assert backend.live_broadcasts == 0
    assert tiled.report["gradient_test"]["path"] == "block-wise"
    assert tiled.report["gradient_test"]["blocks"] == 17
    added = [r.added for r in dense.report.rounds]
    assert [r.added for r in tiled.report.rounds] == added
    np.testing.assert_array_equal(tiled.weights.ids, dense.weights.ids)
    np.testing.assert_allclose(tiled.weights.values, dense.weights.values, rtol=1e-7, atol=1e-10)
    assert tiled.report.objective == pytest.approx(dense.report.objective, rel=1e-10)
    a, b = tiled.report.certificate, dense.report.certificate
    assert a.passed == b.passed
    assert a.zero_weights_over_bound == b.zero_weights_over_bound
    assert a.max_zero_gradient == pytest.approx(b.max_zero_gradient, rel=1e-6)


def test_the_frame_backends_block_pass_gives_the_rdd_backends_summary(spark, backend, problem):
    """Both Spark backends ship the test's pieces (LossGrads, non-zeros only)
    through their shuffles and summarize them alike."""
    from sparkmaxent.backends.frame import FrameBackend

    directory, info, block, space = problem
    w = train(LocalBackend([block], space), config(max_rounds=1)).weights
    theta = np.concatenate([w.values, w.bias])
    bound = GAMMA * (1 + 1e-6)
    value, rdd = blockwise_summary(Objective(backend, w.ids), theta, bound, 5, 7)
    with FrameBackend(spark, directory, info, bias=True, partitions=3) as fb:
        value_f, frame = blockwise_summary(Objective(fb, w.ids), theta, bound, 5, 7)
    assert value_f == pytest.approx(value, rel=1e-14)
    assert len(rdd.top_ids) == 5
    np.testing.assert_array_equal(frame.top_ids, rdd.top_ids)
    np.testing.assert_allclose(frame.top_grad, rdd.top_grad, rtol=1e-12)
    np.testing.assert_allclose(frame.active_grad, rdd.active_grad, rtol=1e-12, atol=1e-17)
    assert (frame.n_over, frame.n_features) == (rdd.n_over, rdd.n_features)
    assert frame.max_inactive == pytest.approx(rdd.max_inactive, rel=1e-12)
