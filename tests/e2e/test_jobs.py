"""The jobs end to end, in the test run's Spark session: pipeline (prepare +
train + evaluate on synthetic data), train, predict and evaluate."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkmaxent.cli import job_main
from sparkmaxent.evaluate import evaluate_dataset
from sparkmaxent.model import MaxentModel, feature_names_for

train_main = job_main("train")
predict_main = job_main("predict")
evaluate_main = job_main("evaluate")
pipeline_main = job_main("pipeline")

SMALL = (
    "data.synthetic = {n_events = 3000, n_predicates = 300, n_labels = 3, n_support = 9, "
    "n_copies = 2, n_conjunctions = 1, min_support_count = 40, seed = 3}"
)


def pipeline_args(out, *extra):
    return [
        "--set",
        SMALL,
        "--set",
        "train.l2=1e-3",
        "--set",
        "data.partitions=2",
        "--output",
        str(out),
        *extra,
    ]


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
        assert (
            train_main(
                [
                    "--train",
                    data["train"],
                    "--set",
                    "train.method=sgc",
                    "--set",
                    "train.selection.max_features=2",
                    "--set",
                    f"train.backend={backend}",
                    "--set",
                    "train.selection.plots=false",
                    "--output",
                    str(out),
                ]
            )
            == 0
        )
        report = json.load(open(out / "train_report.json"))
        for j, name in zip(report["selected"], report["selected_names"]):
            p, k = divmod(j, len(labels))
            assert name == f"{feature_names_for(data['train'], np.array([p]))[p]}|{labels[k]}"


def test_predict_text_with_unseen_features_and_labels(spark, run_dir, tmp_path):
    text = tmp_path / "new.txt"
    text.write_text("L0 p1 p2 never-seen-feature\nZZZ p3 another-unseen\nL1 p5\n")
    out = tmp_path / "pred"
    assert (
        predict_main(
            [
                "--model",
                str(run_dir / "model"),
                "--input",
                str(text),
                "--format",
                "maxent",
                "--output",
                str(out),
            ]
        )
        == 0
    )
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
    assert (
        evaluate_main(
            [
                "--model",
                str(run_dir / "model"),
                "--input",
                str(text),
                "--format",
                "maxent",
                "--report",
                str(report_path),
            ]
        )
        == 0
    )
    report = json.load(open(report_path))
    assert report["unseen_gold_labels"] == 1 and report["events"] == 3


def test_evaluate_matches_the_pipeline_report(spark, run_dir, tmp_path):
    data = json.load(open(run_dir / "report.json"))
    path = tmp_path / "eval.json"
    assert (
        evaluate_main(
            [
                "--model",
                str(run_dir / "model"),
                "--input",
                data["datasets"]["test"],
                "--report",
                str(path),
            ]
        )
        == 0
    )
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
    assert (
        predict_main(
            [
                "--model",
                str(run_dir / "model"),
                "--input",
                str(text),
                "--format",
                "maxent",
                "--output",
                str(out),
            ]
        )
        == 2
    )
    assert "exists" in capsys.readouterr().err
    assert train_main(["--output", str(tmp_path / "t")]) == 2
    assert "no training data" in capsys.readouterr().err
    assert evaluate_main(["--model", str(tmp_path / "nope"), "--input", str(text)]) == 2
    assert "not a saved model" in capsys.readouterr().err
    assert train_main(["--train", "x", "--set", "train.nonsense=1"]) == 3
    assert "unknown key" in capsys.readouterr().err


# ---- issue 23: input the model cannot have been meant for -------------------

CONLL_TEXT = "He PRP B-NP\nreckons VBZ B-VP\nthe DT B-NP\ncurrent JJ I-NP\n\nIt PRP B-NP\n"


def test_wrong_format_exits_2_unless_allowed(spark, run_dir, tmp_path, capsys, caplog):
    """CoNLL columns read as ``maxent``: every feature unknown to the model."""
    text = tmp_path / "tagged.txt"
    text.write_text(CONLL_TEXT)
    model = str(run_dir / "model")
    out = tmp_path / "pred"
    assert (
        predict_main(
            ["--model", model, "--input", str(text), "--format", "maxent", "--output", str(out)]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "100.0% of the feature occurrences" in err and "(10 of 10)" in err
    assert "format or vocabulary mismatch" in err and "--format maxent" in err
    assert "--allow-unknown" in err
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["tagged.txt"]
    assert evaluate_main(["--model", model, "--input", str(text), "--format", "maxent"]) == 2
    assert "100.0% of the feature occurrences" in capsys.readouterr().err
    # a stricter threshold catches the unseen features of a right format too
    good = tmp_path / "new.txt"
    good.write_text("L0 p1 p2 never-seen-feature\nL1 p5\n")
    assert (
        evaluate_main(
            ["--model", model, "--input", str(good), "--format", "maxent", "--max-unknown", "0.2"]
        )
        == 2
    )
    assert "25.0% of the feature occurrences" in capsys.readouterr().err

    caplog.clear()
    with caplog.at_level("WARNING", logger="sparkmaxent"):
        assert (
            predict_main(
                [
                    "--model",
                    model,
                    "--input",
                    str(text),
                    "--format",
                    "maxent",
                    "--output",
                    str(out),
                    "--allow-unknown",
                ]
            )
            == 0
        )
    assert any(
        r.levelname == "WARNING"
        and "100.0% of the feature occurrences" in r.message
        and "--allow-unknown" in r.message
        for r in caplog.records
    )
    assert pq.read_table(out).num_rows == 5
    with caplog.at_level("WARNING", logger="sparkmaxent"):
        assert (
            evaluate_main(
                ["--model", model, "--input", str(text), "--format", "maxent", "--allow-unknown"]
            )
            == 0
        )


def test_prepared_input_uses_its_recorded_counts(spark, run_dir, tmp_path, capsys):
    text = tmp_path / "tagged.txt"
    text.write_text(CONLL_TEXT)
    model = str(run_dir / "model")
    prepared = tmp_path / "prepared"
    assert (
        job_main("prepare")(
            [
                "--input",
                str(text),
                "--format",
                "maxent",
                "--no-merge",
                "--vocabulary",
                os.path.join(model, "vocabulary"),
                "--output",
                str(prepared),
            ]
        )
        == 0
    )
    info = json.load(open(prepared / "dataset.json"))
    assert (info["unknown_features"], info["feature_occurrences"]) == (10, 10)
    assert evaluate_main(["--model", model, "--input", str(prepared)]) == 2
    err = capsys.readouterr().err
    assert f"in {prepared} (10 of 10)" in err and "prepared with the model's vocabulary" in err
    assert evaluate_main(["--model", model, "--input", str(prepared), "--allow-unknown"]) == 0
    # the test split prepared with the training dictionary: nothing unknown
    data = json.load(open(run_dir / "report.json"))["datasets"]
    assert evaluate_main(["--model", model, "--input", data["test"], "--max-unknown", "0"]) == 0


def _damage(model_dir, case):
    meta = os.path.join(model_dir, "metadata.json")
    weights = os.path.join(model_dir, "weights")
    part = os.path.join(
        weights, sorted(f for f in os.listdir(weights) if f.endswith(".parquet"))[0]
    )
    if case == "truncated metadata":
        text = open(meta).read()
        open(meta, "w").write(text[: len(text) // 3])
        return meta
    if case == "missing key":
        m = json.load(open(meta))
        del m["n_predicates"]
        json.dump(m, open(meta, "w"))
        return meta
    if case == "unreadable weights":
        open(part, "wb").write(b"not parquet at all")
        return weights
    d = pq.read_table(part).to_pydict()
    if case == "predicate out of range":
        d["predicate"][0] = json.load(open(meta))["n_predicates"]
    elif case == "label out of range":
        d["label_index"][0] = len(json.load(open(meta))["labels"])
    elif case == "non-finite weight":
        d["weight"][0] = float("nan")
    elif case == "duplicate rows":
        for c in d:
            d[c].append(d[c][0])
    pq.write_table(pa.table(d, schema=pq.read_schema(part)), part)
    return weights


@pytest.mark.parametrize(
    "case,command",
    [
        ("truncated metadata", "evaluate"),
        ("missing key", "predict"),
        ("unreadable weights", "evaluate"),
        ("predicate out of range", "predict"),
        ("label out of range", "evaluate"),
        ("non-finite weight", "predict"),
        ("duplicate rows", "evaluate"),
    ],
)
def test_damaged_model_exits_2_naming_the_file(spark, run_dir, tmp_path, capsys, case, command):
    model = tmp_path / "model"
    shutil.copytree(run_dir / "model", model)
    damaged = _damage(str(model), case)
    data = json.load(open(run_dir / "report.json"))["datasets"]["test"]
    args = ["--model", str(model), "--input", data]
    if command == "predict":
        assert predict_main(args + ["--output", str(tmp_path / "pred")]) == 2
    else:
        assert evaluate_main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and damaged in err and "Traceback" not in err


def _damage_parquet(path, how):
    """Cut a Parquet file to 100 bytes, or flip 4 bytes in the middle of its
    first column's pages (the footer intact: what only page checksums find)."""
    data = bytearray(open(path, "rb").read())
    if how == "truncated":
        data = data[:100]
    else:
        chunk = pq.ParquetFile(path).metadata.row_group(0).column(0)
        start = chunk.dictionary_page_offset or chunk.data_page_offset
        middle = start + chunk.total_compressed_size // 2
        data[middle : middle + 4] = bytes(b ^ 0x5A for b in data[middle : middle + 4])
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize(
    "part,how,command",
    [
        ("vocabulary/features", "truncated", "evaluate"),
        ("vocabulary/features", "truncated", "predict"),
        ("vocabulary/features", "middle", "evaluate"),
        ("vocabulary/features", "middle", "predict"),
        ("weights", "middle", "evaluate"),
    ],
)
def test_a_damaged_model_parquet_file_exits_2_naming_it(
    spark, run_dir, tmp_path, capsys, part, how, command
):
    """issue 40 item 2: a Parquet file of the model (its vocabulary's
    dictionary, its weights) cut short or damaged in the middle: exit 2
    naming that file, before any Spark job (no traceback), never a
    prediction from wrong names or weights."""
    model = tmp_path / "model"
    shutil.copytree(run_dir / "model", model)
    damaged = sorted((model / part).glob("part-*.parquet"))[0]
    _damage_parquet(damaged, how)
    text = tmp_path / "test.txt"
    text.write_text("L0 p1 p2\nL1 p5\n")
    args = ["--model", str(model), "--input", str(text), "--format", "maxent"]
    capsys.readouterr()
    if command == "predict":
        assert predict_main(args + ["--output", str(tmp_path / "pred")]) == 2
        assert not (tmp_path / "pred").exists()
    else:
        assert evaluate_main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"{damaged}: cannot read it as Parquet" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
