"""l1="auto": the penalty chosen inside fit on held-out rows by the
warm-started path (choice/path.py), then refitted on all rows."""

from __future__ import annotations

import pytest

from sparkmaxent.config import ConfigError
from sparkmaxent.ml import MaxEntClassifier, MaxEntRanker


@pytest.mark.parametrize(
    "params,message",
    [
        ({"validationFraction": 0.3}, r"validationFraction: held-out rows choose an 'auto'"),
        ({"l1": 0.01, "validationIndicatorCol": "v"}, r"validationIndicatorCol: held-out"),
        ({"method": "l2", "l1": "auto"}, r"l1: method 'l2' does not use it"),
        ({"method": "grafting", "l2": "auto"}, r"l2='auto': a path of l2 is fitted for"),
        (
            {"l1": "auto", "validationIndicatorCol": "v", "validationFraction": 0.3},
            "both set",
        ),
    ],
)
def test_auto_params_are_checked(params, message):
    with pytest.raises(ConfigError, match=message):
        MaxEntClassifier(**params).training_config()


def test_auto_means_a_held_out_path():
    cfg = MaxEntClassifier(l1="auto").training_config()
    assert cfg.train.method == "grafting" and cfg.train.choice.path and cfg.train.choice.refit
    cfg = MaxEntClassifier(l2="auto").training_config()
    assert cfg.train.method == "l2" and cfg.train.choice.path
    assert cfg.train.choice.folds == 1  # the held-out rows, however few: no automatic folds
    given = MaxEntClassifier(l2="auto", config={"train.choice.folds": 3}).training_config()
    assert given.train.choice.folds == 3
    with pytest.raises(ConfigError, match="MaxEntRanker: no 'auto' penalty"):
        MaxEntRanker(l1="auto")._validation_split(None)


def test_validation_split_is_stratified_and_repeatable(df):
    est = MaxEntClassifier(l1="auto", validationFraction=0.25)
    train, held = est._validation_split(df)
    counts = {r.label: r["count"] for r in df.groupBy("label").count().collect()}
    held_counts = {r.label: r["count"] for r in held.groupBy("label").count().collect()}
    assert held_counts == {k: int(n * 0.25 + 0.5) for k, n in counts.items()}
    assert train.count() + held.count() == df.count()
    assert train.columns == held.columns == df.columns
    again = sorted(r.id for r in est._validation_split(df)[1].collect())
    assert again == sorted(r.id for r in held.collect())

    from pyspark.sql import functions as F

    flagged = df.withColumn("v", F.col("id") % 5 == 0)
    est = MaxEntClassifier(l1="auto", validationIndicatorCol="v")
    train, held = est._validation_split(flagged)
    assert {r.id for r in held.collect()} == {i for i in range(df.count()) if i % 5 == 0}


def test_auto_l1_chooses_on_held_out_rows_and_refits_on_all(df, model, tmp_path):
    fitted = MaxEntClassifier(l1="auto").fit(df)
    summary = fitted.summary
    path = summary.regularizationPath
    assert len(path) >= 2 and sum(p["chosen"] for p in path) == 1
    chosen = next(p for p in path if p["chosen"])
    assert summary.chosenRegularization == chosen["l1"]
    assert [p["l1"] for p in path] == sorted((p["l1"] for p in path), reverse=True)
    refit = fitted.report["refit"]
    assert refit["l1"] == chosen["l1"] and refit["kkt_passed"]
    assert fitted.report["method"] == "grafting" and fitted.getL1() == "auto"
    assert summary.accuracy > 0.6
    # the path as a PNG (matplotlib is in the test environment); a model
    # fitted without 'auto' has no path to plot
    out = str(tmp_path / "path.png")
    assert summary.plotRegularizationPath(out) == out
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert model.summary.regularizationPath == []
    with pytest.raises(ValueError, match="no regularization path"):
        model.summary.plotRegularizationPath(str(tmp_path / "none.png"))
