"""The DataFrame backend (backends/frame.py) in a classic session: the
sums, gradient test and grafted model of the RDD backend and of the
in-process one; its bookkeeping (passes, tags, cache, timeouts); the
factory's choice by session kind."""

from __future__ import annotations

import time

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.factory import make_backend
from sparkmaxent.backends.frame import TREE_ABOVE, FrameBackend
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.config import train_config
from sparkmaxent.data.load import read_blocks
from sparkmaxent.errors import StalledError
from sparkmaxent.kernels import LossGradTask, MomentsTask, Weights
from sparkmaxent.kernels.stats import Count, CountTask
from sparkmaxent.methods.gradient_test import blockwise_summary, select_candidates
from sparkmaxent.plan import ExecutionPlan, Limits
from sparkmaxent.problem import Objective
from sparkmaxent.session_kind import is_connect
from sparkmaxent.train import train

from .helpers import written_multiclass

GAMMA = 2e-3


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    return written_multiclass(
        str(tmp_path_factory.mktemp("frame-mc")), 40, active_per_event=6, n_files=3
    )


def grafting(**kw):
    return train_config(**{"method": "grafting", "l1": GAMMA, "n_best": 5, "gtol": 1e-10, **kw})


class SlowCount:
    """A pass that takes ``seconds`` per block."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, block):
        time.sleep(self.seconds)
        return CountTask()(block)


def test_grafting_on_the_frame_backend_is_the_rdd_backends_bit_for_bit(spark, problem):
    """Same partitions, same blocks, same merge order: the same numbers."""
    with FrameBackend(spark, problem.directory, problem.info, bias=True, partitions=2) as fb:
        assert fb.n_events == 1500 and fb.partitions == 2
        assert fb.weight == pytest.approx(problem.block.c.sum(), rel=1e-12)
        a = train(fb, grafting())
        assert fb.passes == a.report["passes"] > 3
    with SparkBackend(spark, problem.directory, problem.info, bias=True, partitions=2) as sb:
        b = train(sb, grafting())
    assert a.report.certificate.passed
    assert a.weights.ids.tolist() == b.weights.ids.tolist()
    np.testing.assert_allclose(a.weights.values, b.weights.values, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.weights.bias, b.weights.bias, rtol=1e-9, atol=1e-12)
    assert a.report.objective == pytest.approx(b.report.objective, rel=1e-12)
    assert a.report["passes"] == b.report["passes"]


def test_many_partitions_merge_in_a_tree_stage_to_the_local_sums(spark, problem):
    local = LocalBackend(read_blocks(problem.directory, problem.info), problem.space)
    n = TREE_ABOVE + 4
    with FrameBackend(spark, problem.directory, problem.info, bias=True, partitions=n) as fb:
        assert fb.partitions == n
        assert fb.run(CountTask()) == Count(1500, pytest.approx(1500.0), n)
        ms, ml = fb.run(MomentsTask()), local.run(MomentsTask())
        np.testing.assert_allclose(ms.total, ml.total, rtol=1e-12)
        rng = np.random.default_rng(3)
        theta = rng.normal(scale=0.3, size=problem.space.n_features + problem.space.n_bias)
        fs, gs = Objective(fb, None, l2=0.1)(theta)
        fl, gl = Objective(local, None, l2=0.1)(theta)
        assert fs == pytest.approx(fl, rel=1e-12)
        np.testing.assert_allclose(gs, gl, rtol=1e-9, atol=1e-15)
        # the block-wise gradient test: keyed pieces summed per feature block
        w = train(local, grafting(max_rounds=1)).weights
        obj = Objective(fb, w.ids)
        theta = np.concatenate([w.values, w.bias])
        value, summary = blockwise_summary(obj, theta, GAMMA * (1 + 1e-6), 5, 7)
        dense = Objective(local, w.ids).at(theta, full_gradient=True, hessian=False)
        assert value == pytest.approx(dense.value, rel=1e-12)
        ids, _ = select_candidates(dense.full_grad, w.ids, GAMMA * (1 + 1e-6), 5)
        np.testing.assert_array_equal(summary.top_ids, ids)
        np.testing.assert_allclose(summary.active_grad, dense.full_grad[w.ids], rtol=1e-9)


def test_passes_run_under_the_backends_job_group_and_close_unpersists(spark, problem):
    sc = spark.sparkContext
    sc.setJobGroup("caller", "the caller's group")
    fb = FrameBackend(spark, problem.directory, problem.info, partitions=2)
    assert fb.blocks.is_cached
    space = fb.space
    cached = len(sc.statusTracker().getJobIdsForGroup(fb.job_group))
    fb.run(LossGradTask(space, Weights.zeros(space)))
    assert fb.passes == 1 and cached >= 1
    assert len(sc.statusTracker().getJobIdsForGroup(fb.job_group)) > cached
    assert sc.getLocalProperty("spark.jobGroup.id") == "caller"  # restored
    for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
        sc.setLocalProperty(key, None)  # the session is shared: leave no group behind
    blocks = fb.blocks
    fb.close()
    fb.close()  # idempotent
    assert not blocks.is_cached
    with pytest.raises(RuntimeError, match="closed"):
        fb.run(CountTask())


def test_a_pass_past_its_timeout_is_interrupted_as_stalled(spark, problem):
    with FrameBackend(
        spark, problem.directory, problem.info, partitions=2, pass_timeout_s=2.0
    ) as fb:
        t0 = time.monotonic()
        with pytest.raises(StalledError, match="spark.pass_timeout_s = 2 s"):
            fb.run(SlowCount(60.0))
        assert time.monotonic() - t0 < 50
        fb.pass_timeout_s = 0.0  # a loaded machine may take 2 s for any pass
        assert fb.run(CountTask()).events == 1500  # the backend still works


def test_factory_picks_the_backend_by_session_kind(spark, problem):
    assert not is_connect(spark)
    plan = ExecutionPlan(Limits(100), "spark-frame")
    assert plan.backend_for("train", 10) == "local"
    assert plan.backend_for("train", 1000) == "spark-frame"
    kinds = {"spark": SparkBackend, "spark-rdd": SparkBackend, "spark-frame": FrameBackend}
    for kind, cls in kinds.items():
        with make_backend(kind, problem.directory, spark=spark, partitions=1) as backend:
            assert type(backend) is cls
            assert backend.n_events == 1500
