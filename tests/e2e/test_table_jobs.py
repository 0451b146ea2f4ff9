"""Table inputs through the command line, in the test run's Spark session:
Parquet tables with array<string> (+ values), map and Vector feature
columns and a weight column through prepare -> train -> predict with a key
column; a candidate-set table; bad columns exit 2 naming the column."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest

from sparkmaxent.cli import job_main
from sparkmaxent.data.tables import TableColumns, prepare_input

prepare_main = job_main("prepare")
train_main = job_main("train")
predict_main = job_main("predict")
evaluate_main = job_main("evaluate")

N_ROWS, N_PREDICATES = 240, 8


def events(seed: int = 5) -> list[tuple]:
    """(id, label, predicate indices, values, weight) rows: the label is
    mostly the parity of the first active predicate; every 10th row repeats
    the row before it (merged in training, kept in predictions)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(N_ROWS):
        if i % 10 == 9:
            prev = rows[-1]
            rows.append((f"r{i}", prev[1], prev[2], prev[3], prev[4]))
            continue
        idx = sorted(rng.choice(N_PREDICATES, size=3, replace=False).tolist())
        label = "even" if (idx[0] % 2 == 0) != (rng.random() < 0.1) else "odd"
        vals = [float(v) for v in rng.integers(1, 4, size=3)]
        rows.append((f"r{i}", label, idx, vals, float(rng.integers(1, 3))))
    return rows


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    """The same events as three Parquet tables: array<string> names + values,
    map<string,double>, and a pyspark.ml Vector (names: the indices)."""
    from pyspark.ml.linalg import Vectors

    d = tmp_path_factory.mktemp("tables")
    rows = events()
    arrays = [(i, y, [str(j) for j in idx], v, w) for i, y, idx, v, w in rows]
    maps = [(i, y, dict(zip([str(j) for j in idx], v)), w) for i, y, idx, v, w in rows]
    vectors = [(i, y, Vectors.sparse(N_PREDICATES, idx, v), w) for i, y, idx, v, w in rows]
    frames = {
        "arrays": spark.createDataFrame(arrays, "id string, y string, f array<string>, "
                                        "v array<double>, w double"),
        "maps": spark.createDataFrame(maps, "id string, y string, f map<string,double>, w double"),
        "vectors": spark.createDataFrame(vectors, ["id", "y", "f", "w"]),
    }  # fmt: skip
    paths = {}
    for name, df in frames.items():
        paths[name] = str(d / name)
        df.write.parquet(paths[name])
    return paths


def cols(name: str) -> list[str]:
    out = ["--label-col", "y", "--features-col", "f", "--weight-col", "w"]
    return out + (["--values-col", "v"] if name == "arrays" else [])


def events_of(prepared: str) -> list[dict]:
    t = pq.read_table(os.path.join(prepared, "events"))
    return t.select(["label", "weight", "indices", "values"]).to_pylist()


@pytest.fixture(scope="module")
def model(spark, tables, tmp_path_factory):
    d = tmp_path_factory.mktemp("table-run")
    prepared = str(d / "prepared")
    args = ["--input", tables["arrays"], "--format", "parquet", "--output", prepared]
    assert prepare_main(args + cols("arrays")) == 0
    run = str(d / "run")
    assert train_main(["--train", prepared, "--output", run, "--set", "train.l2=1e-3"]) == 0
    return prepared, os.path.join(run, "model")


def test_map_and_vector_tables_prepare_as_the_array_table(tables, model, tmp_path):
    prepared, _ = model
    info = json.load(open(os.path.join(prepared, "dataset.json")))
    assert info["source"]["format"] == "table" and info["labels"] == ["even", "odd"]
    assert info["n_events"] < N_ROWS  # the repeated rows were merged
    for name in ("maps", "vectors"):
        out = str(tmp_path / name)
        args = ["--input", tables[name], "--format", "parquet", "--output", out]
        assert prepare_main(args + cols(name)) == 0
        assert events_of(out) == events_of(prepared)


def test_predict_with_a_key_column_joins_back_to_every_source_row(spark, tables, model, tmp_path):
    """One prediction per source row (repeated rows too), carrying the row's
    key; the Vector table, read without its labels, gives the same ones."""
    _, model_dir = model
    got = {}
    for name, unlabelled in (("arrays", []), ("vectors", ["--label-col", ""])):
        out = str(tmp_path / name)
        args = ["--model", model_dir, "--input", tables[name], "--format", "parquet"]
        args += cols(name) + unlabelled + ["--key-col", "id", "--output", out]
        assert predict_main(args) == 0
        got[name] = pq.read_table(out).to_pandas().set_index("id").sort_index()
    assert (got["vectors"]["label"] == "").all()
    pred = got["arrays"]
    assert list(pred.columns[:1]) == ["event_id"] and len(pred) == N_ROWS
    source = spark.read.parquet(tables["arrays"]).toPandas().set_index("id").sort_index()
    joined = source.join(pred, how="inner")
    assert len(joined) == N_ROWS and (joined["y"] == joined["label"]).all()
    assert (joined["predicted"] == joined["label"]).mean() > 0.8  # it learned the parity
    np.testing.assert_allclose(
        np.stack(got["vectors"]["probabilities"]), np.stack(pred["probabilities"]), rtol=1e-12
    )


def test_evaluate_a_table(tables, model, capsys):
    _, model_dir = model
    args = ["--model", model_dir, "--input", tables["maps"], "--format", "parquet"]
    assert evaluate_main(args + cols("maps")) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["events"] == N_ROWS and report["accuracy"] > 0.8


# Candidate sets: 60 groups of 3 candidates; the correct one holds "good".
def candidate_rows() -> list[tuple]:
    rng = np.random.default_rng(2)
    rows = []
    for g in range(60):
        best = int(rng.integers(3))
        for c in range(3):
            feats = [f"x{int(rng.integers(4))}"] + (["good"] if c == best else [])
            rows.append((1000 + g, feats, 1.0 if c == best else 0.0))
    return rows


def test_candidate_table_through_the_command_line(spark, tmp_path):
    table = str(tmp_path / "cands")
    spark.createDataFrame(
        candidate_rows(), "sent long, f array<string>, score double"
    ).write.parquet(table)
    prepared, run, pred = (str(tmp_path / n) for n in ("prepared", "run", "pred"))
    cand = ["--features-col", "f", "--group-col", "sent", "--correct-col", "score"]
    assert prepare_main(["--input", table, "--format", "parquet", "--output", prepared] + cand) == 0
    info = json.load(open(os.path.join(prepared, "dataset.json")))
    assert info["shape"] == "candidates" and info["total_weight"] == 60.0  # merged: fewer events
    assert train_main(["--train", prepared, "--output", run, "--set", "train.l2=1e-3"]) == 0
    model_dir = os.path.join(run, "model")
    args = ["--model", model_dir, "--input", table, "--format", "parquet", "--output", pred]
    assert predict_main(args + cand + ["--key-col", "sent"]) == 0
    t = pq.read_table(pred).to_pandas().sort_values("sent")
    assert t["sent"].tolist() == list(range(1000, 1060))  # one row per group
    assert (t["event_id"] == t["sent"]).all()  # an integer group id is the event id
    hits = [c[p] for p, c in zip(t["predicted"], t["correct"])]
    assert np.mean(hits) == 1.0


def test_bad_columns_and_sources_exit_2_naming_them(spark, tables, model, tmp_path, capsys):
    _, model_dir = model
    arrays = ["--input", tables["arrays"], "--format", "parquet"]

    def prepare_fails(*extra: str) -> str:
        out = str(tmp_path / "never")
        assert prepare_main([*arrays, "--output", out, *extra]) == 2
        assert not os.path.exists(out)
        return capsys.readouterr().err

    err = prepare_fails("--label-col", "nope", "--features-col", "f")
    assert "label column named 'nope'" in err and "'id', 'y', 'f', 'v', 'w'" in err
    assert tables["arrays"] in err  # the table is named by its path
    err = prepare_fails("--label-col", "y", "--features-col", "w")
    assert "column 'w' of type array<string>, map<string,double> or vector, got double" in err
    err = prepare_fails("--label-col", "y", "--features-col", "f", "--weight-col", "id")
    assert "numeric weight column 'id', got string" in err
    err = prepare_fails(
        "--label-col", "y", "--features-col", "f", "--group-col", "id", "--correct-col", "y"
    )
    assert "column 'y' of type boolean or numeric" in err
    err = prepare_fails("--label-col", "y", "--features-col", "f", "--format", "delta")
    assert "no source named 'delta'" in err and "io.delta:delta-spark" in err
    out = str(tmp_path / "never")
    missing = ["--input", str(tmp_path / "nothing"), "--format", "parquet", "--output", out]
    assert prepare_main(missing) == 2
    assert "expected an input at" in capsys.readouterr().err
    text_cols = ["--input", tables["arrays"], "--format", "maxent", "--output", out]
    assert prepare_main(text_cols + ["--label-col", "y"]) == 2
    assert "column options (--label-col, ...) are for tables" in capsys.readouterr().err
    scoring = ["--model", model_dir, *arrays, "--output", out] + cols("arrays")
    assert predict_main(scoring + ["--key-col", "nokey"]) == 2
    assert "key column named 'nokey'" in capsys.readouterr().err
    assert predict_main(scoring + ["--key-col", "label"]) == 2
    assert "key column 'label': expected a name other than" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_prepare_input_refuses_a_key_with_merging(spark, tables, tmp_path):
    from sparkmaxent.errors import InputError

    columns = TableColumns(label="y", features="f", values="v", key="id")
    with pytest.raises(InputError, match=r"key column 'id': keys need one prepared event per row"):
        prepare_input(spark, [tables["arrays"]], str(tmp_path / "p"), "parquet", columns=columns)


def test_pipeline_reads_tables_named_by_the_config(tables, tmp_path):
    pipeline_main = job_main("pipeline")
    out = tmp_path / "pipeline"
    path = tables["maps"]
    sets = [
        "data.format=parquet",
        f'data.train_inputs=["{path}"]',
        f'data.test_inputs=["{path}"]',
        "data.label_col=y",
        "data.features_col=f",
        "data.weight_col=w",
        "train.l2=1e-3",
    ]
    args = [a for s in sets for a in ("--set", s)]
    assert pipeline_main(args + ["--output", str(out)]) == 0
    report = json.load(open(out / "report.json"))
    test_info = json.load(open(os.path.join(report["datasets"]["test"], "dataset.json")))
    assert test_info["source"]["format"] == "table" and test_info["n_events"] == N_ROWS
    assert report["test"]["events"] == N_ROWS and report["test"]["accuracy"] > 0.8
