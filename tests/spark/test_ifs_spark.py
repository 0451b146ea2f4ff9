"""IFS and SGC on the Spark backend: the same selection as in-process."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.config import train_config
from sparkmaxent.train import train

from .helpers import written_multiclass


@pytest.mark.parametrize("stage_features", [1, 0])
@pytest.mark.parametrize("method", ["ifs", "sgc"])
def test_spark_backend_selects_what_local_selects(spark, tmp_path, method, stage_features):
    p = written_multiclass(str(tmp_path), 60, active_per_event=5)
    cfg = train_config(
        method=method,
        max_features=6,
        gain_threshold=0.0,
        batch=8,
        plots=False,
        stage_features=stage_features,
    )
    local = train(LocalBackend([p.block], p.space), cfg)
    with SparkBackend(
        spark, p.directory, p.info, bias=True, partitions=2, name=f"test-{method}"
    ) as backend:
        res = train(backend, cfg)
        assert backend.live_broadcasts == 0
    assert res.report["selected"] == local.report["selected"]
    # label names come from the dataset (no feature dictionary written here)
    assert res.report["selected_names"][0].split("|")[1] in p.label_names
    # one feature a stage: 1-D fits of the same sums; adaptive stages (1, 2,
    # then 3 features) end in a refit, equal to its solver's tolerance, as
    # the Bayes factor's OptMAP (test_bayes_spark.py)
    rtol, obj_rel = (1e-8, 1e-10) if stage_features == 1 else (1e-6, 1e-8)
    np.testing.assert_allclose(res.weights.values, local.weights.values, rtol=rtol)
    assert res.report.objective == pytest.approx(local.report.objective, rel=obj_rel)
    if stage_features == 0:
        assert [r.added for r in res.report.rounds] == [1, 2, 3]
