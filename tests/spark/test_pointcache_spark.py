"""The operator cache on Spark's Python workers (``kernels/pointcache.py``):
product passes at one point are served from it on the executors, whichever
worker a block's task lands on (the store they share, backends/opstore.py),
give the in-process sums, and a moved point is never served the old
operator; on the RDD backend and on the DataFrame one."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.frame import FrameBackend
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.data.load import write_events
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.kernels import MULTICLASS, Space
from sparkmaxent.problem import Objective

from ..unit.helpers import random_multiclass


def _executor_hits(backend) -> dict[int, tuple[int, int, int]]:
    """The lookups of the operator cache of every Python worker a job of
    many small tasks reaches, by process id: (served by its own entries,
    built, served from the shared store)."""

    def hits(_):
        import os

        from sparkmaxent.kernels.pointcache import OPERATORS

        return os.getpid(), (OPERATORS.hits, OPERATORS.misses, OPERATORS.shared)

    return dict(backend.spark.sparkContext.parallelize(range(32), 32).map(hits).collect())


def _stored(backend, clear: bool = False) -> set[int]:
    """The operators the executor's shared store holds, as its workers see
    it (after emptying it, with ``clear``)."""

    def count(_):
        from sparkmaxent.backends.spark import share_operators
        from sparkmaxent.kernels.pointcache import OPERATORS

        share_operators()
        if OPERATORS.store is None:
            return -1
        if clear:
            OPERATORS.store.clear()
        return len(OPERATORS.store)

    return set(backend.spark.sparkContext.parallelize(range(4), 4).map(count).collect())


def _grown(before: dict, after: dict, k: int) -> int:
    return sum(after[pid][k] - before.get(pid, (0, 0, 0))[k] for pid in after)


@pytest.mark.parametrize("backend_class", [SparkBackend, FrameBackend])
def test_product_passes_on_spark_reuse_the_workers_operators_and_give_the_local_sums(
    spark, tmp_path, backend_class
):
    # data of its own per backend: both backends' passes run on the same
    # Python workers (one pool), whose own entries would serve the other's
    # lookups at the same point and leave the cleared store empty
    rng = np.random.default_rng(8 if backend_class is SparkBackend else 9)
    block = random_multiclass(rng, m=300, P=14, K=3)
    info = DatasetInfo(MULTICLASS, block.n_predicates, ["a", "b", "c"])
    write_events(block, str(tmp_path), info, n_files=2)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids = np.sort(rng.choice(space.n_features, size=10, replace=False))
    theta = rng.normal(size=len(ids) + space.n_bias) * 0.5
    vectors = rng.normal(size=(6, len(theta)))
    local = Objective(LocalBackend([block], space), ids)
    with backend_class(spark, str(tmp_path), info, bias=True, partitions=2) as backend:
        spark_obj = Objective(backend, ids)
        assert _stored(backend, clear=True) == {0}  # what earlier tests stored: gone
        before = _executor_hits(backend)
        for v in vectors:
            got, diag = spark_obj.hessian_product(theta, v)
            want, want_diag = local.hessian_product(theta, v)
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(diag, want_diag, rtol=1e-9, atol=1e-12)
        after = _executor_hits(backend)
        # 12 lookups (6 passes x 2 partitions) at one point: each block's
        # operator is built there once on the executor, whichever worker its
        # tasks land on; the lookups after it are served (a worker's own
        # entry, or the store when it did not build it)
        if backend_class is SparkBackend:  # the DataFrame's passes run on its UDF workers
            assert _grown(before, after, 1) <= 2, (before, after)
            assert _grown(before, after, 0) + _grown(before, after, 2) > 0, (before, after)
        assert _stored(backend) == {2}  # each block's operator at the point, one file each
        moved = theta + 0.2
        got, _ = spark_obj.hessian_product(moved, vectors[0])
        want, _ = local.hessian_product(moved, vectors[0])
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        assert _stored(backend) == {2}  # the moved point's: each block's old point dropped
        assert not np.allclose(got, spark_obj.hessian_product(theta, vectors[0])[0])
