"""Bayes-factor selection on the Spark backend: the same selection as in-process."""
from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.config import TrainConfig
from sparkmaxent.data import synthetic
from sparkmaxent.data.load import write_events
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.kernels import MULTICLASS, Space
from sparkmaxent.train import train


@pytest.mark.slow  # ~45 s on a loaded 2-core machine: OptMAP's L-BFGS passes on Spark
def test_spark_backend_selects_what_local_selects(spark, tmp_path):
    data = synthetic.generate(synthetic.SyntheticSpec(
        n_events=1500, n_predicates=60, n_labels=3, active_per_event=5, n_support=6,
        n_copies=1, n_conjunctions=0, min_support_count=60, seed=9))
    block = data.block()
    info = write_events(block, str(tmp_path), DatasetInfo(MULTICLASS, 60, data.label_names),
                        n_files=2)
    cfg = TrainConfig(method="bayes-factor", bf_per_round=3, max_rounds=2, plots=False)
    local = train(LocalBackend([block], Space(MULTICLASS, 60, 3, bias=True)), cfg)
    with SparkBackend(spark, str(tmp_path), info, bias=True, partitions=2,
                      name="test-bayes") as backend:
        res = train(backend, cfg)
        assert backend.live_broadcasts == 0
    assert res.report["selected"] == local.report["selected"]
    np.testing.assert_allclose(res.weights.values, local.weights.values, rtol=1e-6)
    assert res.report["objective"] == pytest.approx(local.report["objective"], rel=1e-8)
