"""Executors whose Python has no pandas (issue 39): the slim environment of
``scripts/pack_env.py`` leaves pandas out, on the ground that sparkmaxent's
Python workers exchange Arrow batches only. Here the executors' Python is
this interpreter with a ``pandas`` that cannot be imported put first on its
path (``PYSPARK_PYTHON`` a wrapper script), the driver's unchanged: a
probe shows the executors run this environment and cannot import pandas,
and a pyspark.ml
classifier fitted on the Spark backend (``data.in_process_max_events = 0``)
and scored by ``transform`` (the Arrow UDF and SQL) works there.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.slow  # its own local[2] JVM and a fit on Spark: about a minute

#: the executors' Python: this one, with a pandas that fails to import first on its path
WRAPPER = """#!/bin/sh
PYTHONPATH="{shadow}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{python}" "$@"
"""

SCRIPT = """
import sys
from pyspark.sql import SparkSession
from sparkmaxent.ml import MaxEntClassifier
from tests.ml.data import frame

spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)

def probe(_):
    import sys

    import pyarrow  # noqa: F401
    import sparkmaxent  # noqa: F401

    try:
        import pandas  # noqa: F401
        yield f"{sys.prefix}: pandas imported"
    except ImportError as e:
        yield f"{sys.prefix}: no pandas: {e}"

print(spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()[0])
df = frame(spark, n=400)
est = MaxEntClassifier(method="grafting", l1=0.01, config={"data.in_process_max_events": 0})
model = est.fit(df)
for scoring in ("arrow", "sql"):
    model.scoring = scoring
    rows = model.transform(df).select("label", "prediction").collect()
    right = sum(r.label == r.prediction for r in rows)
    print(scoring, "scored", len(rows), "right", right)
"""


def test_fit_and_scoring_on_executors_without_pandas(tmp_path):
    shadow = tmp_path / "shadow" / "pandas"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pandas'\", name='pandas')\n"
    )
    wrapper = tmp_path / "python-without-pandas"
    wrapper.write_text(WRAPPER.format(shadow=shadow.parent, python=sys.executable))
    wrapper.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": ROOT, "SPARK_LOCAL_IP": "127.0.0.1"}
    for key in ("SPARK_REMOTE", "PYSPARK_DRIVER_PYTHON"):
        env.pop(key, None)
    env["PYSPARK_PYTHON"] = str(wrapper)  # the executors' Python (the driver's: this one)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    # the probe: the executors run this environment, import pyarrow and sparkmaxent, not pandas
    assert lines[0] == f"{sys.prefix}: no pandas: No module named 'pandas'", proc.stdout
    for scoring, line in zip(("arrow", "sql"), lines[1:], strict=True):
        words = line.split()
        assert words[:3] == [scoring, "scored", "400"], line
        assert int(words[4]) >= 0.7 * 400, line  # the cue feature is right 80% of the time
