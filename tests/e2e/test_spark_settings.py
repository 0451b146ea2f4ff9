"""The Spark session's settings in real sessions, each in its own driver
process: spark-submit's options (through scripts/submit.sh) and
spark-defaults.conf win over the TOML [spark] conf, which wins over the
project's defaults; local masters bind to loopback; the UI is on unless
turned off. The precedence rules themselves: tests/unit/test_session.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.e2e.test_cluster import ROOT, run_submit, submit_env

# a job script: spark_session() with a TOML-like master and conf; dumps what
# the session ended up with
REPORT = """
import json, sys
from sparkmaxent.backends.session import spark_session
spark = spark_session(
    "local[2]",
    "sparkmaxent-settings",
    {
        "spark.sql.shuffle.partitions": "64",
        "spark.sql.execution.arrow.pyspark.enabled": "false",
        "spark.default.parallelism": "3",
    },
)
sc = spark.sparkContext
conf = dict(sc.getConf().getAll())
conf["spark.sql.shuffle.partitions"] = spark.conf.get("spark.sql.shuffle.partitions")
json.dump(
    {"conf": conf, "master": sc.master, "name": sc.appName, "ui": sc.uiWebUrl},
    open(sys.argv[1], "w"),
)
spark.stop()
"""


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_spark_submit_options_win_in_a_real_session(tmp_path):
    script = tmp_path / "settings.py"
    script.write_text(REPORT)
    out = tmp_path / "seen.json"
    r = run_submit(
        [
            "--master",
            "local[1]",
            "--conf",
            "spark.sql.shuffle.partitions=3",
            "--deploy-mode",
            "client",
            "--executor-memory",
            "700m",
            "--num-executors",
            "2",
            "--name",
            "settings-check",
            "--verbose",
            str(script),
            str(out),
        ]
    )
    assert r.returncode == 0, r.stdout[-4000:]
    seen = json.loads(out.read_text())
    conf = seen["conf"]
    assert seen["master"] == "local[1]"  # spark-submit's, not the TOML's local[2]
    assert seen["name"] == "settings-check"
    assert conf["spark.sql.shuffle.partitions"] == "3"  # spark-submit over the TOML
    assert conf["spark.sql.execution.arrow.pyspark.enabled"] == "false"  # TOML over defaults
    assert conf["spark.default.parallelism"] == "3"  # the TOML's
    assert conf["spark.ui.showConsoleProgress"] == "false"  # the project's default
    # passed through by submit.sh (a local master ignores executor sizes:
    # spark-submit --verbose shows what it parsed)
    assert re.search(r"executorMemory\s+700m", r.stdout), r.stdout[-4000:]
    assert re.search(r"numExecutors\s+2", r.stdout), r.stdout[-4000:]
    assert conf["spark.submit.deployMode"] == "client"
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf.get("spark.ui.enabled", "true") == "true"  # the UI is on by default
    assert seen["ui"] and seen["ui"].startswith("http://127.0.0.1:"), seen["ui"]


def test_spark_defaults_conf_wins_outside_spark_submit(tmp_path):
    """A plain Python driver (no spark-submit): spark-defaults.conf in
    SPARK_CONF_DIR over the TOML, the TOML over the defaults, loopback for
    the local master."""
    conf_dir = tmp_path / "sparkconf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.sql.shuffle.partitions   5\nspark.ui.enabled false\n"
    )
    script = tmp_path / "settings.py"
    script.write_text(REPORT)
    out = tmp_path / "seen.json"
    env = submit_env()
    env["SPARK_CONF_DIR"] = str(conf_dir)
    env["PYTHONPATH"] = ROOT
    r = subprocess.run(
        [sys.executable, str(script), str(out)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-4000:]
    seen = json.loads(out.read_text())
    conf = seen["conf"]
    assert seen["master"] == "local[2]"
    assert seen["name"] == "sparkmaxent-settings"
    assert conf["spark.sql.shuffle.partitions"] == "5"
    assert conf["spark.sql.execution.arrow.pyspark.enabled"] == "false"
    assert conf["spark.ui.enabled"] == "false"
    assert seen["ui"] is None
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
