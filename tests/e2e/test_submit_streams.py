"""Under scripts/submit.sh (spark-submit running jobs/*.py), the logs and
the ``error:`` line go to standard error, as under the console script:
spark-submit merges the Python driver's stderr into its stdout, and
``cli.restore_stderr`` points it back (issue 40 item 3)."""

from __future__ import annotations

import os
import subprocess

import pytest

from sparkmaxent.cli import EXIT_BAD_INPUT, EXIT_STALLED
from tests.e2e.test_cluster import JOB_TIMEOUT, ROOT, SUBMIT, submit_env


def _submit(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SUBMIT, "--master", "local[1]", *args],
        cwd=ROOT,
        env=submit_env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=JOB_TIMEOUT,
    )


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_a_bad_input_error_line_is_on_stderr_under_submit(tmp_path):
    missing = str(tmp_path / "missing.txt")
    r = _submit(
        ["prepare", "--input", missing, "--format", "maxent", "--output", str(tmp_path / "ds")]
    )
    assert r.returncode == EXIT_BAD_INPUT, r.stdout[-3000:] + r.stderr[-3000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and missing in errors[0], r.stderr[-3000:]
    assert "error:" not in r.stdout and " INFO sparkmaxent" not in r.stdout, r.stdout[-3000:]


#: jobs/train.py's main with a training run that logs, then stalls (exit 6)
STALLED_TRAIN = """
import logging, sys
from sparkmaxent import api
from sparkmaxent.cli import job_main
from sparkmaxent.errors import StalledError

def fit(*args, **kwargs):
    logging.getLogger("sparkmaxent.train").info("round 1 started")
    raise StalledError("pass 3 cancelled: no executor for 60 s (spark.no_executor_timeout_s)")

api.session = lambda cfg, command: None
api.fit = fit
sys.exit(job_main("train")())
"""


def test_train_exit_6_message_and_logs_are_on_stderr_under_submit(tmp_path):
    """The stall message, with its checkpoint note, and the logs before it:
    on stderr under spark-submit; stdout holds neither."""
    script = tmp_path / "stalled_train.py"
    script.write_text(STALLED_TRAIN)
    out = str(tmp_path / "run")
    r = _submit([str(script), "--train", str(tmp_path / "prepared"), "--output", out])
    assert r.returncode == EXIT_STALLED, r.stdout[-3000:] + r.stderr[-3000:]
    assert "INFO sparkmaxent.train: round 1 started" in r.stderr, r.stderr[-3000:]
    error = r.stderr[r.stderr.index("error: ") :]
    assert "spark.no_executor_timeout_s" in error, error
    assert os.path.join(out, "checkpoint") in error, error
    assert "error:" not in r.stdout and "round 1 started" not in r.stdout, r.stdout[-3000:]
