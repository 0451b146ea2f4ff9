"""jobs/prepare.py end to end: exit codes 0, 2 and 1, and what it writes."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from jobs import prepare as job
from sparkmaxent.data.readers import FORMATS

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

CONLL = (
    "He PRP B-NP\nreckons VBZ B-VP\nthe DT B-NP\ndeficit NN I-NP\n. . O\n\n"
    "The DT B-NP\ndeficit NN I-NP\ngrew VBD B-VP\n"
)


def info_of(out) -> dict:
    with open(os.path.join(out, "dataset.json")) as f:
        return json.load(f)


@pytest.mark.skipif("conll" not in FORMATS, reason="readers.FORMATS has no 'conll' parser yet")
def test_conll_basenp_no_merge_exit_0(spark, tmp_path, caplog):
    f = tmp_path / "train.txt"
    f.write_text(CONLL)
    out = tmp_path / "prepared"
    with caplog.at_level(logging.INFO, logger="sparkmaxent"):
        rc = job.main(
            [
                "--input",
                str(f),
                "--format",
                "conll",
                "--option",
                "mode=basenp",
                "--no-merge",
                "--partitions",
                "2",
                "--output",
                str(out),
            ]
        )
    assert rc == 0
    info = info_of(out)
    assert info["labels"] == ["B-NP", "I-NP", "O"]  # B-VP mapped to O
    assert info["n_events"] == 8 and info["total_weight"] == 8.0
    assert info["source"]["options"]["mode"] == "basenp"
    assert info["source"]["merge_duplicates"] is False
    import pyarrow.parquet as pq

    t = pq.read_table(str(out / "events"), columns=["event_id", "group", "label"])
    assert t.column("event_id").to_pylist() == list(range(8))
    assert t.column("group").to_pylist() == [0] * 5 + [1] * 3
    assert t.column("label").to_pylist() == [0, 2, 0, 1, 2, 0, 1, 2]
    assert any(
        "n_events" in r.getMessage() and '"n_events": 8' in r.getMessage() for r in caplog.records
    )


def test_bad_input_exit_2_names_file_and_line(spark, tmp_path, capsys):
    f = tmp_path / "bad.txt"
    f.write_text("A x\nB y:inf\n")
    out = tmp_path / "o"
    rc = job.main(["--input", str(f), "--format", "maxent", "--output", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"{f}:2: " in err and "Traceback" not in err
    assert not out.exists()


def test_usage_errors_exit_2(spark, tmp_path, capsys):
    f = tmp_path / "a.txt"
    f.write_text("A x\nB y\n")
    out = str(tmp_path / "o")
    assert job.main(["--input", str(f), "--format", "nope", "--output", out]) == 2
    assert "unknown input format 'nope'" in capsys.readouterr().err
    assert (
        job.main(["--input", str(f), "--format", "maxent", "--output", out, "--option", "mode"])
        == 2
    )
    assert "expected KEY=VALUE" in capsys.readouterr().err
    assert (
        job.main(["--input", str(tmp_path / "missing*.txt"), "--format", "maxent", "--output", out])
        == 2
    )
    assert "nothing matching" in capsys.readouterr().err


def test_an_unwritable_output_exits_2_before_reading(spark, tmp_path, capsys):
    f = tmp_path / "a.txt"
    f.write_text("A x\nB y\n")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory\n")
    # the output's parent is a file: found when the lock is taken, before any pass
    assert job.main(["--input", str(f), "--format", "maxent", "--output", str(blocker / "o")]) == 2
    assert f"output {blocker}/o is not writable" in capsys.readouterr().err


def test_unexpected_failure_exit_1(spark, tmp_path, monkeypatch, caplog):
    from sparkmaxent.storage import atomic

    f = tmp_path / "a.txt"
    f.write_text("A x\nB y\n")

    def failing_publish(*args, **kwargs):
        raise OSError("I/O error (simulated)")

    # an OS error while publishing: not bad input, so exit 1 with the traceback
    monkeypatch.setattr(atomic, "publish", failing_publish)  # what storage.staged publishes by
    assert job.main(["--input", str(f), "--format", "maxent", "--output", str(tmp_path / "o")]) == 1
    assert "I/O error (simulated)" in caplog.text and "Traceback" in caplog.text
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]  # the temporary output removed


@pytest.mark.slow
def test_runs_as_a_script(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("A x y\nB y z\nA x\n")
    out = tmp_path / "o"
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "jobs", "prepare.py"),
            "--input",
            str(f),
            "--format",
            "maxent",
            "--output",
            str(out),
            "--master",
            "local[2]",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert info_of(out)["n_events"] == 3


def test_prepare_takes_cutoff_and_partitions_from_the_config_and_flags_override_them(
    spark, tmp_path, caplog
):
    f = tmp_path / "a.txt"
    f.write_text("A x y\nB y z\nA x\nB w\n")  # x and y in two events, z and w in one
    conf = tmp_path / "c.toml"
    conf.write_text("[data]\nprepare_cutoff = 2\npartitions = 3\n")
    base = ["--input", str(f), "--format", "maxent", "--overwrite", "--output"]
    assert job.main([*base, str(tmp_path / "conf"), "--config", str(conf)]) == 0
    info = info_of(tmp_path / "conf")
    assert (info["n_features"], info["cutoff"], info["source"]["partitions"]) == (2, 2, 3)
    assert job.main([*base, str(tmp_path / "set"), "--set", "data.prepare_cutoff=2"]) == 0
    assert info_of(tmp_path / "set")["n_features"] == 2
    flags = ["--config", str(conf), "--cutoff", "0", "--partitions", "1"]
    with caplog.at_level(logging.INFO, logger="sparkmaxent"):
        assert job.main([*base, str(tmp_path / "flag"), *flags]) == 0
    assert "plan: prepare in-process" in caplog.text  # a small file: read here
    caplog.clear()
    spark_only = ["--set", "data.in_process_max_events=0"]
    with caplog.at_level(logging.INFO, logger="sparkmaxent"):
        assert job.main([*base, str(tmp_path / "spark"), *flags, *spark_only]) == 0
    assert "plan: prepare on spark" in caplog.text
    assert (
        info_of(tmp_path / "spark")["events_fingerprint"]
        == info_of(tmp_path / "flag")["events_fingerprint"]
    )
    info = info_of(tmp_path / "flag")
    assert (info["n_features"], info["cutoff"], info["source"]["partitions"]) == (4, 0, 1)


def test_a_bad_flag_value_exits_3_naming_the_flag_and_the_key(tmp_path, capsys):
    f = tmp_path / "a.txt"
    f.write_text("A x\nB y\n")
    args = ["--input", str(f), "--format", "maxent", "--output", str(tmp_path / "o")]
    assert job.main([*args, "--cutoff", "-1"]) == 3
    assert "--cutoff: data.prepare_cutoff: expected a value >= 0" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
