"""Bayes-factor selection on the Spark backend: the same selection as in-process."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.config import train_config
from sparkmaxent.train import train

from .helpers import written_multiclass


@pytest.mark.slow  # ~45 s on a loaded 2-core machine: OptMAP's L-BFGS passes on Spark
def test_spark_backend_selects_what_local_selects(spark, tmp_path):
    p = written_multiclass(str(tmp_path), 60, active_per_event=5, n_copies=1)
    cfg = train_config(method="bayes-factor", per_round=3, max_rounds=2, plots=False)
    local = train(LocalBackend([p.block], p.space), cfg)
    with SparkBackend(
        spark, p.directory, p.info, bias=True, partitions=2, name="test-bayes"
    ) as backend:
        res = train(backend, cfg)
        assert backend.live_broadcasts == 0
    assert res.report["selected"] == local.report["selected"]
    np.testing.assert_allclose(res.weights.values, local.weights.values, rtol=1e-6)
    assert res.report.objective == pytest.approx(local.report.objective, rel=1e-8)
