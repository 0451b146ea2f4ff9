"""The thresholded gradient test on Spark (kernels/thresholded.py): partials
pickled compactly through both Spark backends give the dense test of the
same backend bit for bit, the local test to rounding, and the same grafted
model."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.config import train_config
from sparkmaxent.kernels import Weights
from sparkmaxent.kernels.thresholded import ThresholdedTestTask
from sparkmaxent.methods.grafting import Grafting, variant
from sparkmaxent.selection.base import TrainingContext
from sparkmaxent.train import train

from ..unit.test_thresholded import _assert_same_test
from .helpers import written_multiclass

P, K = 80, 3


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    p = written_multiclass(
        str(tmp_path_factory.mktemp("thr-mc")), P, active_per_event=6, n_files=3, n_labels=K
    )
    return p.directory, p.info, p.block, p.space


@pytest.fixture(scope="module")
def backend(spark, problem):
    directory, info, _, _ = problem
    with SparkBackend(spark, directory, info, bias=True, partitions=3, name="test-thr") as b:
        yield b


def config(**kw):
    return train_config(**{"method": "grafting", "l1": 2e-3, "n_best": 4, "gtol": 1e-10, **kw})


def _test(backend, weights, cut, **kw):
    cfg = config(partial_cut=cut, **kw)
    method = Grafting(TrainingContext(backend, cfg), variant("grafting", cfg))
    return method.gradient_test.test(weights), method


def _weights(space, seed=0, n=15):
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(space.n_features, n, replace=False)).astype(np.int64)
    return Weights(ids, rng.normal(scale=0.3, size=n), rng.normal(scale=0.1, size=space.n_labels))


@pytest.mark.parametrize("cut, n_best, keep", [(0.5, 4, 8), (0.99, 200, 8), (0.5, 4, 1)])
def test_thresholded_test_on_spark_is_the_dense_test_there_and_the_local_one(
    backend, problem, cut, n_best, keep
):
    """``keep`` 1: each block ships at most n_best entries (capped partials)."""
    _, _, block, space = problem
    weights = _weights(space)
    thr, method = _test(backend, weights, cut, n_best=n_best, partial_keep=keep)
    dense, _ = _test(backend, weights, 0.0, n_best=n_best)
    _assert_same_test(thr, dense, method, weights)
    if n_best == 200:  # every passing feature among the n best: some fetched
        assert method.gradient_test.fetch_passes >= 1
    if keep == 1:  # some partition's block did cap what it shipped
        gamma1_cut = cut * method.gradient_test.gamma1_tested
        part = backend.run(ThresholdedTestTask(space, weights, None, gamma1_cut, n_best))
        assert part.cut > gamma1_cut * part.weight
    local, _ = _test(LocalBackend([block], space), weights, cut, n_best=n_best)
    np.testing.assert_array_equal(local.new, thr.new)
    np.testing.assert_allclose(local.new_grad, thr.new_grad, rtol=1e-12)
    assert local.value == pytest.approx(thr.value, rel=1e-13)
    assert backend.live_broadcasts == 0


def test_the_frame_backends_thresholded_test_is_its_dense_test(spark, problem):
    from sparkmaxent.backends.frame import FrameBackend

    directory, info, _, space = problem
    weights = _weights(space, seed=1)
    with FrameBackend(spark, directory, info, bias=True, partitions=3) as fb:
        thr, method = _test(fb, weights, 0.9, n_best=200)
        dense, _ = _test(fb, weights, 0.0, n_best=200)
        _assert_same_test(thr, dense, method, weights)
        assert method.gradient_test.fetch_passes >= 1


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_grafting_on_spark_with_thresholded_partials_grafts_the_dense_model(backend):
    dense = train(backend, config(partial_cut=0.0))
    thr = train(backend, config(partial_cut=0.5))
    assert dense.report.certificate.passed and thr.report.certificate == dense.report.certificate
    assert thr.report.objective == dense.report.objective
    np.testing.assert_array_equal(thr.weights.ids, dense.weights.ids)
    np.testing.assert_array_equal(thr.weights.values, dense.weights.values)
    assert [r.added for r in thr.report.rounds] == [r.added for r in dense.report.rounds]
    assert thr.report["gradient_test"]["partials"] == "thresholded"
