"""Small datasets handled in the driver's process (``data.in_process_max_events``):
the same fingerprints, model and scores as the Spark path."""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np
import pytest

from sparkmaxent import api
from sparkmaxent.backends.spark import read_events_frame
from sparkmaxent.config import Config
from sparkmaxent.config.load import train_config
from sparkmaxent.data import synthetic
from sparkmaxent.data.prepare import prepare
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.plan import ExecutionPlan, Limits

SPARK_ONLY = 0
IN_PROCESS = 10**6


def test_small_datasets_go_in_process_only_below_the_limit():
    assert Limits(5000).events(5000) and not Limits(5000).events(5001)
    assert not Limits(0).events(10)  # 0: never
    assert Limits(100, 8).input_bytes(800) and not Limits(100, 8).input_bytes(801)
    assert not Limits(0).input_bytes(0)

    def plan(kind: str) -> ExecutionPlan:
        return ExecutionPlan(Limits(100), kind, partitions=4)

    assert plan("spark").backend_for("train", 10) == "local"
    assert plan("spark").backend_for("train", 1000) == "spark"
    assert plan("local").backend_for("train", 1000) == "local"
    p = plan("spark")
    p.backend_for("train", 1000), p.backend_for("heldout", 10)
    assert p.scores_in_process("evaluate", 10) and not p.scores_in_process("predict", 10, True)
    assert p.line() == (
        "plan: train on spark (4 partitions), heldout in-process, evaluate in-process, "
        "predict on spark"
    )
    assert p.to_dict()["train"] == {"engine": "spark", "backend": "spark", "partitions": 4}
    assert p.to_dict()["heldout"] == {"engine": "in-process", "backend": "local"}


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """Generated train/test files in the maxent format, 400 and 100 events."""
    d = tmp_path_factory.mktemp("in-process")
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=500,
            n_predicates=60,
            n_labels=3,
            active_per_event=6,
            n_support=6,
            n_copies=0,
            n_conjunctions=0,
            min_support_count=20,
            seed=4,
        )
    )
    train, test = synthetic.train_test_split(data, 0.2, seed=1)
    paths = {"train": str(d / "train.txt"), "test": str(d / "test.txt")}
    synthetic.write_maxent_text(train, paths["train"])
    synthetic.write_maxent_text(test, paths["test"])
    return d, paths


def _prepared(spark, d, paths, limit):
    out = {}
    for split in ("train", "test"):
        out[split] = str(d / f"{split}-{limit}")
        prepare(
            spark,
            [paths[split]],
            out[split],
            "maxent",
            merge_duplicates=split == "train",
            vocabulary=None if split == "train" else out["train"],
            overwrite=True,
            in_process_max_events=limit,
        )
    return out


@pytest.mark.slow  # each path end to end; the stages' equality is also in test_local_prepare
@pytest.mark.ci
def test_in_process_path_gives_the_spark_paths_dataset_model_and_scores(spark, texts, caplog):
    d, paths = texts
    on_spark = _prepared(spark, d, paths, SPARK_ONLY)
    here = _prepared(spark, d, paths, IN_PROCESS)
    for split in ("train", "test"):
        a, b = DatasetInfo.load(on_spark[split]), DatasetInfo.load(here[split])
        assert a.events_fingerprint and a.events_fingerprint == b.events_fingerprint
        assert a.vocabulary_fingerprint == b.vocabulary_fingerprint

    def run(limit, method):
        cfg = Config()
        cfg = dataclasses.replace(
            cfg,
            data=dataclasses.replace(cfg.data, in_process_max_events=limit),
            # SGC one feature a stage: its weights are 1-D fits (below)
            train=train_config(
                method=method, l2=1e-3, max_features=8, plots=False, stage_features=1
            ),
        )
        with caplog.at_level(logging.INFO, logger="sparkmaxent"):
            caplog.clear()
            model, report = api.train_model(spark, cfg, on_spark["train"])
            went_local = "plan: train in-process" in caplog.text
        if went_local:
            assert report["plan"] == {"train": {"engine": "in-process", "backend": "local"}}
        else:  # data.partitions = 0: the count of the Parquet scan, named in the line,
            # at most one partition per data.min_partition_events events
            train = on_spark["train"]
            info = DatasetInfo.load(train)
            n = read_events_frame(spark, train, info).rdd.getNumPartitions()
            n = min(n, max(1, info.n_events // cfg.data.min_partition_events))
            assert report.plan.line() == f"plan: train on spark ({n} partitions)"
            assert report.plan.line() in caplog.text and cfg.data.partitions == 0
            assert report["plan"] == {
                "train": {"engine": "spark", "backend": "spark", "partitions": n}
            }
        scores = api.evaluate_model(spark, model, on_spark["test"], in_process_max_events=limit)
        return model, report, scores, went_local

    for method in ("sgc", "l2"):
        m0, r0, s0, local0 = run(SPARK_ONLY, method)
        m1, r1, s1, local1 = run(IN_PROCESS, method)
        assert not local0 and local1
        np.testing.assert_array_equal(m0.weights.ids, m1.weights.ids)
        assert r1["objective"] == pytest.approx(r0["objective"], rel=1e-9)
        # SGC's weights are 1-D fits of the same sums: equal to 1e-9; l2's
        # come from L-BFGS, whose iterates part at rounding level and meet
        # again only to its tolerance (gtol 1e-7)
        tol = 1e-9 if method == "sgc" else 1e-6
        np.testing.assert_allclose(m1.weights.values, m0.weights.values, rtol=tol, atol=tol)
        np.testing.assert_allclose(m1.weights.bias, m0.weights.bias, rtol=tol, atol=tol)
        assert s0 == s1 and 0.3 < s0["accuracy"] <= 1.0


def test_pipeline_reports_its_phases(spark, texts):
    d, paths = texts
    cfg = Config()
    cfg = dataclasses.replace(
        cfg,
        data=dataclasses.replace(
            cfg.data, format="maxent", train_inputs=[paths["train"]], test_inputs=[paths["test"]]
        ),
        train=train_config(method="l2", plots=False),
    )
    full = api.pipeline(spark, cfg, os.path.join(d, "pipe"), phases={"spark_start_s": 1.5})
    phases = full["phases_s"]
    assert set(phases) == {"spark_start_s", "prepare_s", "train_s", "evaluate_s"}
    assert phases["spark_start_s"] == 1.5
    # Each figure is rounded to the millisecond: three phases and the wall
    # time can each be off by half of one.
    rounding = 0.5e-3 * 4
    assert sum(v for k, v in phases.items() if k != "spark_start_s") <= full["wall_s"] + rounding
    assert full["test"]["events"] == 100
    # the run's plan, decided from the datasets' sizes: all in-process here
    local = {"engine": "in-process", "backend": "local"}
    here = {"engine": "in-process"}
    assert full["plan"] == {"prepare": here, "train": local, "evaluate": here}
    assert full["train"]["plan"] == full["plan"]


def test_evaluate_and_predict_of_small_text_in_process_equal_spark(spark, texts, monkeypatch):
    """evaluate and predict of a text file prepare it with the model's
    vocabulary in this process below data.in_process_max_events (no Spark
    prepare), with the Spark path's accuracy and predictions."""
    from sparkmaxent.data import prepare as prep

    d, paths = texts
    train = _prepared(spark, d, paths, IN_PROCESS)["train"]
    cfg = dataclasses.replace(Config(), train=train_config(method="l2", l2=1e-3, plots=False))
    model, _ = api.train_model(spark, cfg, train)
    model_dir = str(d / "model-eval")
    model.save(model_dir, overwrite=True)
    calls: list = []
    real = prep.build_local
    monkeypatch.setattr(prep, "build_local", lambda *a, **k: calls.append(1) or real(*a, **k))
    scores, rows = {}, {}
    for limit in (SPARK_ONLY, IN_PROCESS):
        data = api.prepared_for_model(
            spark, model_dir, paths["test"], "maxent", str(d / f"work-{limit}"),
            in_process_max_events=limit,
        )  # fmt: skip
        assert DatasetInfo.load(data).n_events == 100
        scores[limit] = api.evaluate_model(spark, model, data, in_process_max_events=limit)
        run_cfg = dataclasses.replace(
            cfg, data=dataclasses.replace(cfg.data, in_process_max_events=limit)
        )
        out = str(d / f"pred-{limit}")
        api.predict(spark, model, model_dir, paths["test"], out, "maxent", cfg=run_cfg)
        rows[limit] = spark.read.parquet(out).orderBy("event_id").collect()
    assert len(calls) == 2  # evaluate's and predict's prepare, both in this process
    assert scores[IN_PROCESS] == scores[SPARK_ONLY] and 0.3 < scores[SPARK_ONLY]["accuracy"]
    assert len(rows[IN_PROCESS]) == 100
    assert [r.asDict() for r in rows[IN_PROCESS]] == [r.asDict() for r in rows[SPARK_ONLY]]


def test_text_to_score_is_prepared_in_process_only_within_the_bytes_per_event_bound(
    spark, texts, monkeypatch
):
    from sparkmaxent.data import prepare as prep

    d, paths = texts
    train = _prepared(spark, d, paths, IN_PROCESS)["train"]
    cfg = dataclasses.replace(Config(), train=train_config(method="l2", l2=1e-3, plots=False))
    model, _ = api.train_model(spark, cfg, train)
    model_dir = str(d / "model-bytes")
    model.save(model_dir, overwrite=True)
    calls: list = []
    real = prep.build_local
    monkeypatch.setattr(prep, "build_local", lambda *a, **k: calls.append(1) or real(*a, **k))
    size = os.path.getsize(paths["test"])  # 100 events
    for per_event, local in ((size // 100 + 1, True), (size // 100 - 1, False)):
        calls.clear()
        data = api.prepared_for_model(
            spark, model_dir, paths["test"], "maxent", str(d / f"work-bytes-{per_event}"),
            in_process_max_events=100, in_process_bytes_per_event=per_event,
        )  # fmt: skip
        assert DatasetInfo.load(data).n_events == 100 and bool(calls) is local
