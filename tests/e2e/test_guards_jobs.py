"""Issue 23, item 1, through the command line: no exit-0 NaN or empty
models. Bad configuration values exit 3 naming the key, a feature value
the arithmetic would overflow on exits 2 at prepare naming file and line,
and a non-finite pass in training exits 5 with no model written."""

from __future__ import annotations

import os

import pytest

from sparkmaxent.cli import EXIT_BAD_CONFIG, EXIT_BAD_INPUT, EXIT_NUMERIC, job_main

prepare_main = job_main("prepare")
train_main = job_main("train")

TEXT = "".join(f"{'AB'[i % 2]} f{i % 3} g{i % 5}:{1 + i % 4} h:{(i % 7) / 7}\n" for i in range(60))


@pytest.mark.parametrize(
    "setting, key",
    [
        ("train.l2=nan", "train.l2"),
        ("train.memory=0", "train.memory"),
        ("train.l1=inf", "l1"),  # as reported: l1 lives in [train.grafting]
        ("train.grafting.l1=inf", "train.grafting.l1"),
        ("train.max_rounds=-1", "max_rounds"),  # as reported: [train.selection]
        ("train.selection.max_rounds=-1", "train.selection.max_rounds"),
    ],
)
def test_bad_train_settings_exit_3_naming_the_key(tmp_path, capsys, setting, key):
    out = tmp_path / "out"
    assert (
        train_main(["--train", str(tmp_path / "none"), "--set", setting, "--output", str(out)])
        == EXIT_BAD_CONFIG
    )
    err = capsys.readouterr().err
    assert err.startswith("error: ") and key in err
    assert not out.exists()


@pytest.mark.parametrize(
    "setting, key",
    [("data.synthetic.n_labels=1", "n_labels >= 2"), ("data.synthetic.n_event=9", "['n_event']")],
)
def test_a_bad_synthetic_spec_exits_3_naming_the_key(tmp_path, capsys, setting, key):
    """issue 40: the pipeline's generator settings are configuration (exit 3,
    one line), not a traceback once the pipeline reaches the generator."""
    out = tmp_path / "out"
    assert job_main("pipeline")(["--output", str(out), "--set", setting]) == EXIT_BAD_CONFIG
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "data.synthetic" in err and key in err, err
    assert len(err.strip().splitlines()) == 1 and not out.exists(), err


def test_prepare_refuses_a_value_over_the_bound_exit_2(spark, tmp_path, capsys):
    """The issue's input: a value of 1e300 trained to a NaN model with exit 0."""
    f = tmp_path / "huge.txt"
    f.write_text("A x y:2\nB x\nA y:1e300\n")
    out = tmp_path / "prepared"
    assert (
        prepare_main(["--input", str(f), "--format", "maxent", "--output", str(out)])
        == EXIT_BAD_INPUT
    )
    err = capsys.readouterr().err
    assert f"{f}:3: expected a feature value with |value| <= 1e+12, got 'y:1e300'" in err
    assert not out.exists()


@pytest.fixture(scope="module")
def prepared(spark, tmp_path_factory):
    d = tmp_path_factory.mktemp("guards")
    (d / "train.txt").write_text(TEXT)
    out = d / "prepared"
    assert (
        prepare_main(
            [
                "--input",
                str(d / "train.txt"),
                "--format",
                "maxent",
                "--partitions",
                "2",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    return str(out)


def poison_passes(monkeypatch, after: int = 0) -> None:
    """Make the Spark backend's passes return a NaN loss from pass ``after``
    on, on the driver (as an overflow on the executors would)."""
    from sparkmaxent.backends.spark import SparkBackend

    run = SparkBackend.run  # every pass, keyed passes (the block-wise test) too
    calls = {"n": 0}

    def poison(result):
        calls["n"] += 1
        if calls["n"] > after:
            for lg in (result, getattr(result, "lg", None)):
                if lg is not None and hasattr(lg, "grad") and hasattr(lg, "loss"):
                    lg.loss = float("nan")
        return result

    monkeypatch.setattr(SparkBackend, "run", lambda self, task: poison(run(self, task)))


@pytest.mark.parametrize(
    "method, after", [("l2", 0), ("l2", 3), ("grafting", 3), ("sgc", 0), ("bayes-factor", 2)]
)
def test_a_nan_pass_exits_5_and_writes_no_model(
    spark, prepared, tmp_path, capsys, monkeypatch, method, after
):
    poison_passes(monkeypatch, after)
    out = tmp_path / "run"
    rc = train_main(
        [
            "--train",
            prepared,
            "--set",
            f"train.method={method}",
            "--set",
            "train.selection.plots=false",
            "--set",
            "data.in_process_max_events=0",  # the poisoned passes are the Spark backend's
            "--output",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert rc == EXIT_NUMERIC, err
    assert f"error: {method}" in err and "non-finite loss" in err and "standardize" in err
    assert not (out / "model").exists() and not (out / "train_report.json").exists()


def test_the_same_dataset_trains_without_the_poison(spark, prepared, tmp_path):
    out = tmp_path / "run"
    assert train_main(["--train", prepared, "--output", str(out)]) == 0
    assert os.path.exists(out / "model" / "metadata.json")
