"""Grafting on the Spark backend: the same model as in-process, and the same
optimum as Spark MLlib's multinomial l1 logistic regression."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.config import train_config
from sparkmaxent.problem import Objective
from sparkmaxent.train import train

from .helpers import written_multiclass

GAMMA = 2e-3


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    p = written_multiclass(str(tmp_path_factory.mktemp("grafting-mc")), 40, active_per_event=6)
    return p.directory, p.info, p.block, p.space


def config(**kw):
    return train_config(**{"method": "grafting", "l1": GAMMA, "n_best": 10, "gtol": 1e-10, **kw})


@pytest.fixture(scope="module")
def local_result(problem):
    _, _, block, space = problem
    return train(LocalBackend([block], space), config())


def test_spark_backend_grafts_the_same_model_as_local(spark, problem, local_result):
    directory, info, _, _ = problem
    with SparkBackend(
        spark, directory, info, bias=True, partitions=2, name="test-graft"
    ) as backend:
        res = train(backend, config())
        assert backend.live_broadcasts == 0
    assert res.report.certificate.passed
    assert res.report.objective == pytest.approx(local_result.report.objective, rel=1e-9)
    assert res.weights.ids.tolist() == local_result.weights.ids.tolist()
    np.testing.assert_allclose(
        res.weights.values, local_result.weights.values, rtol=1e-6, atol=1e-9
    )
    # the thresholded test's second passes depend on how the events are
    # split into blocks (kernels/thresholded.py); every other pass is the same
    fetches = [r.report["gradient_test"]["fetch_passes"] for r in (res, local_result)]
    assert res.report["passes"] - fetches[0] == local_result.report["passes"] - fetches[1]


def test_matches_spark_mllib_multinomial_l1(spark, problem, local_result):
    """MLlib's objective with elasticNetParam=1 and standardization=False is
    ours (loss averaged over event weight, unpenalized intercepts): at the
    same gamma both reach the same optimum and support."""
    from pyspark.ml.classification import LogisticRegression
    from pyspark.ml.linalg import Vectors

    _, _, block, space = problem
    X = block.X
    rows = [
        (
            float(block.y[i]),
            Vectors.sparse(
                X.shape[1],
                X.indices[X.indptr[i] : X.indptr[i + 1]].tolist(),
                X.data[X.indptr[i] : X.indptr[i + 1]].tolist(),
            ),
        )
        for i in range(block.n_events)
    ]
    frame = spark.createDataFrame(rows, ["label", "features"]).repartition(2)
    mllib = LogisticRegression(
        family="multinomial",
        regParam=GAMMA,
        elasticNetParam=1.0,
        standardization=False,
        fitIntercept=True,
        maxIter=2000,
        tol=1e-12,
    ).fit(frame)
    W = mllib.coefficientMatrix.toArray()  # (K, P)
    theta = np.concatenate([W.T.ravel(), mllib.interceptVector.toArray()])
    f_mllib = Objective(LocalBackend([block], space), None)(theta)[0] + GAMMA * np.abs(W).sum()
    ours = local_result.report.objective
    assert ours == pytest.approx(f_mllib, rel=1e-6)
    assert ours <= f_mllib + 1e-12
    mllib_support = set(np.flatnonzero(np.abs(W.T.ravel()) > 1e-8).tolist())
    assert set(local_result.weights.ids.tolist()) == mllib_support
    np.testing.assert_allclose(
        local_result.weights.to_dense(space)[: space.n_features], W.T.ravel(), atol=1e-3
    )


def test_newton_cg_on_spark_grafts_the_optimum_of_exact_newton(spark, problem, local_result):
    """The Hessian-free solver over 2 partitions (each its own Newton step,
    averaged): the certified optimum of the exact solver in-process."""
    directory, info, _, _ = problem
    with SparkBackend(
        spark, directory, info, bias=True, partitions=2, name="test-graft-cg"
    ) as backend:
        res = train(backend, config(solver="newton-cg"))
        assert backend.live_broadcasts == 0
    assert res.report.certificate.passed and res.report["solvers"].keys() == {"newton-cg"}
    assert res.report.objective == pytest.approx(local_result.report.objective, rel=1e-9)
    assert res.weights.ids.tolist() == local_result.weights.ids.tolist()


def path_config(**kw):
    """A two-point held-out grafting path (pure l1) with the Hessian-free solver."""
    return config(
        path=True, l1_grid=[4e-3, 2e-3], l2_mixes=[0.0], folds=1, solver="newton-cg", **kw
    )


def test_two_partition_path_points_reach_the_in_process_optimum(spark, problem):
    """Each point of a held-out path on 2 partitions (the rule off: each its
    own Newton step, averaged) is certified at the objective in-process
    finds with one block."""
    directory, info, block, space = problem
    local = train(LocalBackend([block], space), path_config(), LocalBackend([block], space))
    with (
        SparkBackend(spark, directory, info, bias=True, partitions=2, name="t-path") as events,
        SparkBackend(spark, directory, info, bias=True, partitions=2, name="t-held") as held,
    ):
        assert events.partitions == 2
        res = train(events, path_config(), held)
    ours, theirs = res.report.path, local.report.path
    assert ours is not None and theirs is not None
    assert [p.gamma for p in ours.points] == [p.gamma for p in theirs.points]
    for mine, other in zip(ours.points, theirs.points):
        assert mine.kkt_passed and other.kkt_passed and mine.converged
        assert mine.objective == pytest.approx(other.objective, rel=1e-8)
        assert mine.features == other.features
    assert ours.chosen == theirs.chosen


@pytest.mark.parametrize("min_events, expected", [(1000, 1), (500, 2), (0, 2)])
def test_few_events_are_cached_in_fewer_partitions(
    spark, problem, local_result, min_events, expected
):
    """data.min_partition_events: 1,500 events hold one partition of at
    least 1,000 (the rule's default), two of 500 (no more than asked);
    with one partition the Hessian-free rounds are in-process's with one
    block, pass for pass."""
    directory, info, block, space = problem
    with SparkBackend(
        spark, directory, info, bias=True, partitions=2, min_partition_events=min_events,
        name="t-few",
    ) as backend:  # fmt: skip
        assert backend.partitions == expected
        res = train(backend, config(solver="newton-cg"))
    assert res.report.certificate.passed
    assert res.report.objective == pytest.approx(local_result.report.objective, rel=1e-9)
    if expected == 1:
        alone = train(LocalBackend([block], space), config(solver="newton-cg"))
        assert res.report.objective == alone.report.objective
        assert [r.passes for r in res.report.rounds] == [r.passes for r in alone.report.rounds]
