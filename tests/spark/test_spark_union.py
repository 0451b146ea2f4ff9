"""Training and held-out events joined as one Spark backend
(backends/spark_union.py, ``union_of`` of two ``SparkBackend``): every
trainable event once, each training block with a share of the held-out
events, untrainable held-out events left out, the same blocks run to run,
one pass counter (the training part's), and a path refit that reaches the
in-process refit's certified objective, block-wise test included."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.backends.spark_union import SparkUnion
from sparkmaxent.backends.union import UnionBackend, union_of
from sparkmaxent.config import train_config
from sparkmaxent.data.load import write_events
from sparkmaxent.kernels import Weights
from sparkmaxent.kernels.blocks import concat_blocks, split_block, take_events
from sparkmaxent.kernels.loss import LossGradTask
from sparkmaxent.kernels.stats import CountTask
from sparkmaxent.train import train

from .helpers import written_multiclass

N_TRAIN, N_UNSEEN = 1200, 30


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """1,200 training and 300 held-out events (30 of a label unseen in
    training, y = -1), written as two datasets with one dictionary."""
    root = tmp_path_factory.mktemp("spark-union")
    p = written_multiclass(str(root / "all"), 40, active_per_event=6)
    idx = np.arange(p.block.n_events)
    tr = take_events(p.block, idx < N_TRAIN)
    he = take_events(p.block, idx >= N_TRAIN)
    he.y[:N_UNSEEN] = -1
    write_events(tr, str(root / "train"), p.info, n_files=2)
    write_events(he, str(root / "held"), p.info, n_files=2)
    return str(root / "train"), str(root / "held"), p.info, tr, he, p.space


def rows(blocks) -> list:
    """Every event of ``blocks`` as (label, weight, columns, values), sorted."""
    out = []
    for b in blocks:
        X = b.X.tocsr()
        for i in range(b.n_events):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            out.append(
                (int(b.y[i]), float(b.c[i]), X.indices[lo:hi].tolist(), X.data[lo:hi].tolist())
            )
    return sorted(out)


def backends(spark, parts, partitions, min_events, tag):
    train_dir, held_dir, info, *_ = parts
    kw = dict(bias=True, partitions=partitions, min_partition_events=min_events)
    return (
        SparkBackend(spark, train_dir, info, name=f"{tag}-tr", **kw),
        SparkBackend(spark, held_dir, info, name=f"{tag}-he", **kw),
    )


@pytest.mark.parametrize("partitions, min_events, expected", [(2, 0, 2), (2, 1000, 1)])
def test_joined_backend_holds_every_trainable_event_once(
    spark, parts, partitions, min_events, expected
):
    _, _, _, tr, he, space = parts
    first, second = backends(spark, parts, partitions, min_events, "t-join")
    with first, second:
        first.passes = 7
        union = union_of(first, second)
        assert isinstance(union, SparkUnion) and first.passes == 7
        assert union.partitions == expected == union.rdd.getNumPartitions()
        assert union.n_events == N_TRAIN + he.n_events - N_UNSEEN
        blocks = union.rdd.collect()
        assert len(blocks) == union.n_blocks == expected
        # all events once: the training ones and the held-out ones of seen labels
        trainable = take_events(he, he.y >= 0)
        assert rows(blocks) == rows([tr, trainable])
        assert all(b.y.min() >= 0 for b in blocks)
        # every block is a training block with a share of the held-out events
        own = first.rdd.collect()
        assert all(b.n_events > o.n_events for b, o in zip(blocks, own, strict=True))
        # a fixed partitioning gives the same blocks again
        again = union_of(first, second)
        for a, b in zip(blocks, again.rdd.collect(), strict=True):
            assert (a.X != b.X).nnz == 0 and np.array_equal(a.y, b.y)
        again.close()
        # the sums of a pass over both parts, counted once, on the training part
        rng = np.random.default_rng(0)
        ids = np.sort(rng.choice(space.n_features, 40, replace=False))
        w = Weights(ids, rng.normal(0, 0.3, 40), np.zeros(space.n_labels))
        task = LossGradTask(space, w, None, np.zeros(0, dtype=np.int64))
        together = union.run(task)
        assert first.passes == 8 and second.passes == 0
        apart = UnionBackend(first, second).run(task)
        assert together.weight == pytest.approx(apart.weight, rel=1e-12)
        assert together.loss == pytest.approx(apart.loss, rel=1e-12)
        np.testing.assert_allclose(together.grad, apart.grad, rtol=1e-10, atol=1e-12)
        # a derived copy counts its own passes and releases only its blocks
        copy = union.derived(lambda b: b, space, "test")
        assert type(copy) is SparkBackend and copy.passes == 0
        copy.run(task)
        assert copy.passes == 1 and first.passes == 9
        copy.close()
        union.run(task)
        union.close()
        # the parts stay open for their owners
        first.run(task)
        assert second.run(CountTask()).events == he.n_events
        assert first.passes == 11


def test_a_closed_part_is_refused(spark, parts):
    first, second = backends(spark, parts, 2, 0, "t-bad")
    with first, second:
        second.close()
        with pytest.raises(RuntimeError, match="closed"):
            union_of(first, second)


def on_spark_and_in_process(spark, parts, keys, tag):
    """``train`` with ``keys`` on the two Spark parts (2 partitions each)
    and in process on the same events; the joined blocks a Spark refit
    builds are released when it ends (only the two parts stay cached)."""
    _, _, _, tr, he, space = parts
    cached = len(spark.sparkContext._jsc.getPersistentRDDs())
    first, second = backends(spark, parts, 2, 0, tag)
    with first, second:
        on_spark = train(first, train_config(**keys), second)
        assert len(spark.sparkContext._jsc.getPersistentRDDs()) == cached + 2
    local = train(
        LocalBackend(split_block(tr, 2), space), train_config(**keys), LocalBackend([he], space)
    )
    return on_spark, local


def mean_loss_on_all(parts, weights) -> float:
    """The mean loss of ``weights`` over the training and trainable held-out
    events in one in-process block: independent of both unions."""
    _, _, _, tr, he, space = parts
    whole = LocalBackend([concat_blocks([tr, take_events(he, he.y >= 0)])], space)
    lg = whole.run(LossGradTask(space, weights, None, np.zeros(0, dtype=np.int64)))
    return lg.loss / lg.weight


def test_spark_path_refit_reaches_the_in_process_refit(spark, parts):
    """The path and its refit on Spark (2 partitions, the block-wise
    gradient test: dense_test_max below the candidates) against the
    in-process run on the same events: the same choice and the refit's
    certified objective; the joined blocks released after the refit."""
    keys = dict(method="grafting", path=True, points=5, gtol=1e-9, l2_mixes=[0.0], folds=1)
    keys.update(dense_test_max=10)
    on_spark, local = on_spark_and_in_process(spark, parts, keys, "t-refit")
    assert on_spark.report["gradient_test"]["path"] == "block-wise"
    a, b = on_spark.report.refit, local.report.refit
    # the same grid point (its gamma from sums over other blocks: equal to rounding)
    chosen = on_spark.report.path.chosen_point.gamma
    assert chosen == pytest.approx(local.report.path.chosen_point.gamma, rel=1e-12)
    assert a.kkt_passed and b.kkt_passed
    assert a.objective == pytest.approx(b.objective, rel=1e-7)
    assert a.features == b.features
    # independent of both unions: the objective of the refit's weights over
    # the training and trainable held-out events, in one in-process block
    gamma = on_spark.report.path.chosen_point.gamma
    objective = (
        mean_loss_on_all(parts, on_spark.weights) + gamma * np.abs(on_spark.weights.values).sum()
    )
    assert a.objective == pytest.approx(objective, rel=1e-9)


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_spark_stage_refit_reaches_the_in_process_refit(spark, parts):
    """A stage method's refit of its best held-out stage (choice/heldout.py)
    on Spark, over the joined backend: the same stages and choice as in
    process, the refit's objective equal to the solver's tolerance, and the
    joined blocks released afterwards (the parts stay cached)."""
    keys = dict(method="sgc", max_features=12, gtol=1e-9, stage_refit_gtol=0.0)
    on_spark, local = on_spark_and_in_process(spark, parts, keys, "t-stage")
    a, b = on_spark.report.refit, local.report.refit
    assert a is not None and b is not None and a.converged and b.converged
    spark_choice, local_choice = on_spark.report.stage_choice, local.report.stage_choice
    assert spark_choice.heldout_score == pytest.approx(local_choice.heldout_score, rel=1e-12)
    # the same stage (its held-out score from sums over other blocks: equal to rounding)
    assert replace(spark_choice, heldout_score=local_choice.heldout_score) == local_choice
    assert a.objective == pytest.approx(b.objective, rel=1e-7)
    assert np.array_equal(on_spark.weights.active_ids(), local.weights.active_ids())
    # independent of both unions: the refit's objective recomputed over the
    # training and trainable held-out events in one in-process block
    values = on_spark.weights.values
    objective = mean_loss_on_all(parts, on_spark.weights) + 0.5 * a.l2 * float(values @ values)
    assert a.objective == pytest.approx(objective, rel=1e-9)
