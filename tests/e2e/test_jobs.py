"""The jobs end to end, in the test run's Spark session: pipeline (prepare +
train + evaluate on synthetic data), train, predict and evaluate."""
from __future__ import annotations

import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest

from sparkmaxent.cli import job_main
from sparkmaxent.evaluate import evaluate_dataset
from sparkmaxent.model import MaxentModel, feature_names_for

train_main = job_main("train")
predict_main = job_main("predict")
evaluate_main = job_main("evaluate")
pipeline_main = job_main("pipeline")

SMALL = ("data.synthetic = {n_events = 3000, n_predicates = 300, n_labels = 3, n_support = 9, "
         "n_copies = 2, n_conjunctions = 1, min_support_count = 40, seed = 3}")


def pipeline_args(out, *extra):
    return ["--set", SMALL, "--set", "train.l2=1e-3", "--set", "data.partitions=2",
            "--output", str(out), *extra]


@pytest.fixture(scope="module")
def run_dir(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("pipeline")
    assert pipeline_main(pipeline_args(out)) == 0
    return out


def test_pipeline_writes_model_and_report(run_dir, capsys):
    report = json.load(open(run_dir / "report.json"))
    assert os.path.exists(run_dir / "model" / "metadata.json")
    train = report["train"]
    assert train["converged"] and np.isfinite(train["objective"])
    assert train["passes"] == train["evaluations"]
    test = report["test"]
    # a real model beats always answering the most frequent test label
    gold = [row["support"] for row in test["per_label"]]
    assert test["accuracy"] > max(gold) / sum(gold) + 0.05
    assert test["events"] == sum(gold)


def test_local_and_spark_backends_train_the_same_model(spark, run_dir, tmp_path):
    data = json.load(open(run_dir / "report.json"))["datasets"]
    args = ["--train", data["train"], "--set", "train.l2=1e-3", "--output", str(tmp_path)]
    assert train_main(args + ["--set", "train.backend=local"]) == 0
    local = json.load(open(tmp_path / "train_report.json"))
    spark_report = json.load(open(run_dir / "report.json"))["train"]
    assert local["objective"] == pytest.approx(spark_report["objective"], rel=1e-9)
    assert local["nonzero_weights"] == spark_report["nonzero_weights"]


def test_selection_reports_name_features_on_either_backend(spark, run_dir, tmp_path):
    """Progress lines and reports name a selected feature by its string and
    label, whichever backend read the prepared dataset."""
    data = json.load(open(run_dir / "report.json"))["datasets"]
    labels = json.load(open(run_dir / "model" / "metadata.json"))["labels"]
    for backend in ("local", "spark"):
        out = tmp_path / backend
        assert train_main(["--train", data["train"], "--set", "train.method=sgc",
                           "--set", "train.selection.max_features=2", "--set", f"train.backend={backend}",
                           "--set", "train.selection.plots=false", "--output", str(out)]) == 0
        report = json.load(open(out / "train_report.json"))
        for j, name in zip(report["selected"], report["selected_names"]):
            p, k = divmod(j, len(labels))
            assert name == f"{feature_names_for(data['train'], np.array([p]))[p]}|{labels[k]}"


def test_predict_text_with_unseen_features_and_labels(spark, run_dir, tmp_path):
    text = tmp_path / "new.txt"
    text.write_text("L0 p1 p2 never-seen-feature\nZZZ p3 another-unseen\nL1 p5\n")
    out = tmp_path / "pred"
    assert predict_main(["--model", str(run_dir / "model"), "--input", str(text),
                         "--format", "maxent", "--output", str(out)]) == 0
    t = pq.read_table(out).sort_by("event_id").to_pydict()
    assert t["label"] == ["L0", "ZZZ", "L1"]  # the unseen gold label keeps its name
    for probs, p in zip(t["probabilities"], t["probability"]):
        assert sum(probs) == pytest.approx(1.0)
        assert max(probs) == pytest.approx(p)
    labels = json.load(open(run_dir / "model" / "metadata.json"))["labels"]
    assert t["predicted"] == [labels[int(np.argmax(p))] for p in t["probabilities"]]
    # no temporary leftovers next to the output
    assert sorted(os.listdir(tmp_path)) == ["new.txt", "pred"]

    report_path = tmp_path / "eval.json"
    assert evaluate_main(["--model", str(run_dir / "model"), "--input", str(text),
                          "--format", "maxent", "--report", str(report_path)]) == 0
    report = json.load(open(report_path))
    assert report["unseen_gold_labels"] == 1 and report["events"] == 3


def test_evaluate_matches_the_pipeline_report(spark, run_dir, tmp_path):
    data = json.load(open(run_dir / "report.json"))
    path = tmp_path / "eval.json"
    assert evaluate_main(["--model", str(run_dir / "model"), "--input", data["datasets"]["test"],
                          "--report", str(path)]) == 0
    report = json.load(open(path))
    assert report["accuracy"] == pytest.approx(data["test"]["accuracy"])
    # the in-process scorer of benchmarks gives the same figures
    model = MaxentModel.load(str(run_dir / "model"))
    local = evaluate_dataset(data["datasets"]["test"], model.weights, model.space, model.scaling)
    assert local["events"] == report["events"]
    assert local["accuracy"] == pytest.approx(report["accuracy"], abs=1e-12)
    assert local["per_label"] == report["per_label"]


def test_predict_refuses_to_overwrite_and_bad_input_exits_2(spark, run_dir, tmp_path, capsys):
    out = tmp_path / "exists"
    out.mkdir()
    text = tmp_path / "x.txt"
    text.write_text("L0 p1\n")
    assert predict_main(["--model", str(run_dir / "model"), "--input", str(text),
                         "--format", "maxent", "--output", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    assert train_main(["--output", str(tmp_path / "t")]) == 2
    assert "no training data" in capsys.readouterr().err
    assert evaluate_main(["--model", str(tmp_path / "nope"), "--input", str(text)]) == 2
    assert "not a saved model" in capsys.readouterr().err
    assert train_main(["--train", "x", "--set", "train.nonsense=1"]) == 3
    assert "unknown key" in capsys.readouterr().err
