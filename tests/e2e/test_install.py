"""The installable tool: ``pip install <repo>`` (not editable) into a fresh
virtualenv, then the ``sparkmaxent`` console script runs the pipeline on the
built-in synthetic data from another directory. Nothing reads files of the
source tree at run time: the configuration defaults live in
sparkmaxent/config/schema.py (conf/defaults.toml is generated documentation),
and the --config file is passed by path.

Slow: pip builds the wheel and installs pyspark, numpy, scipy, pyarrow and
pandas (minutes without a warm pip cache).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PIP_TIMEOUT = 1200.0  # seconds: a cold cache downloads ~500 MB
RUN_TIMEOUT = 600.0
# not copied for the build: environments, build output, run output
IGNORE = shutil.ignore_patterns(
    ".venv", ".git", "build", "dist", "out", "*.egg-info", "__pycache__", ".pytest_cache",
    "spark-warehouse", "metastore_db",
)  # fmt: skip


def run(cmd: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
            **kwargs,
        )
    except subprocess.TimeoutExpired as e:
        out = e.output.decode(errors="replace") if isinstance(e.output, bytes) else e.output
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout:g} s:\n{(out or '')[-4000:]}")
    assert r.returncode == 0, f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-6000:]}"
    return r


def clean_env() -> dict[str, str]:
    """This environment without what points at the checkout or its venv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")
    }
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


@pytest.mark.slow
def test_clean_install_runs_the_pipeline(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=IGNORE, symlinks=True)
    venv = tmp_path / "venv"
    env = clean_env()
    run([sys.executable, "-m", "venv", str(venv)], timeout=300, env=env)
    python = str(venv / "bin" / "python")
    run([python, "-m", "pip", "install", "--quiet", str(src)], timeout=PIP_TIMEOUT, env=env)
    shutil.rmtree(src)  # the installed package must not need the sources

    work = tmp_path / "work"
    work.mkdir()
    where = "import sparkmaxent; print(sparkmaxent.__file__)"
    r = run([python, "-c", where], timeout=60, cwd=work, env=env)
    assert r.stdout.strip().startswith(str(venv) + os.sep), r.stdout

    out = work / "run"
    cmd = [
        str(venv / "bin" / "sparkmaxent"),
        "pipeline",
        "--config",
        os.path.join(ROOT, "conf", "local.toml"),
        "--output",
        str(out),
    ]
    run(cmd, timeout=RUN_TIMEOUT, cwd=work, env=env)
    with open(out / "model" / "metadata.json") as f:
        meta = json.load(f)
    assert meta["summary"]["nonzero_weights"] > 0
    with open(out / "report.json") as f:
        report = json.load(f)
    assert report["train"]
