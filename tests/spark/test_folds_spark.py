"""k-fold choice (train.choice.folds) on the Spark backend: the fold
backends cut the executors' cached blocks, and give the choice the
in-process backend gives on the same blocks."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.config import train_config
from sparkmaxent.train import train

from .helpers import written_multiclass


@pytest.mark.slow  # 189 training passes, each a Spark job
@pytest.mark.ci  # CI's slow step runs it
def test_spark_folds_choose_as_in_process(spark, tmp_path):
    p = written_multiclass(str(tmp_path / "folds"), 40, active_per_event=6)
    cfg = train_config(
        method="grafting", path=True, l1_grid=[4e-3, 1e-3], folds=2, n_best=10, gtol=1e-10
    )
    with SparkBackend(spark, p.directory, p.info, bias=True, partitions=2, name="folds") as b:
        res = train(b, cfg)
        blocks = b.rdd.collect()  # the events as Spark partitioned them (a hash of each)
    # the same blocks in process: a Hessian-free round averages the blocks'
    # own Newton steps, so other blocks reach the same optimum by other steps
    local = train(LocalBackend(blocks, p.space), cfg)
    got, want = res.report["folds"], local.report["folds"]
    np.testing.assert_allclose(got["fold_scores"], want["fold_scores"], rtol=1e-10)
    assert got["chosen"] == want["chosen"]
    assert res.report.objective == pytest.approx(local.report.objective, rel=1e-9)
