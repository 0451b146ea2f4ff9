"""train.selection.blas_threads: the BLAS thread limit holds during a fit
and is lifted after it."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.config import train_config
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.train import train

from .test_train import multiclass_problem

threadpoolctl = pytest.importorskip("threadpoolctl")


def blas_thread_counts() -> set[int]:
    return {p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"}


def fit(blas_threads: int):
    """A grafting fit (Newton rounds), with the BLAS threads seen at every round."""
    block, space = multiclass_problem(seed=3, m=200, P=15, K=3)
    seen: list[set[int]] = []
    cfg = train_config(method="grafting", l1=1e-3, n_best=3, blas_threads=blas_threads)
    res = train(
        LocalBackend(split_block(block, 2), space),
        cfg,
        on_round=lambda s: seen.append(blas_thread_counts()),
    )
    return res, seen


def test_the_limit_holds_in_every_round_and_is_lifted_after():
    if not blas_thread_counts():
        pytest.skip("no BLAS library that threadpoolctl controls")
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        assert blas_thread_counts() == {2}
        limited, seen = fit(1)
        assert len(seen) >= 2 and all(counts == {1} for counts in seen)
        assert blas_thread_counts() == {2}
        default, seen0 = fit(0)
        assert all(counts == {2} for counts in seen0)
    # the limit changes how fast, not what is found
    assert limited.report.objective == pytest.approx(default.report.objective, rel=1e-9)
    np.testing.assert_array_equal(limited.weights.active_ids(), default.weights.active_ids())
