"""A full disk or a refused permission at a write: one line naming the path
and the cause (exit 7 for no space, 2 for permission; docs/cli.md), the
old output intact, nothing left beside it (issue 40 items 2 and 5)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess

import pytest

from sparkmaxent.cli import EXIT_BAD_INPUT, EXIT_NO_SPACE, job_main
from sparkmaxent.storage import fs

from .faulting import assert_same_model, cli_args, fit, leftovers, make_data, model_of

train_main = job_main("train")
prepare_main = job_main("prepare")


@pytest.fixture(scope="module")
def data(spark, tmp_path_factory):
    return make_data(spark, tmp_path_factory.mktemp("write-failures"))


@pytest.mark.parametrize(
    "code, exit_code, cause",
    [
        (errno.ENOSPC, EXIT_NO_SPACE, "No space left on device"),
        (errno.EDQUOT, EXIT_NO_SPACE, "Disk quota exceeded"),
        (errno.EACCES, EXIT_BAD_INPUT, "Permission denied"),
    ],
)
def test_a_failing_model_write_is_one_line_naming_path_and_cause(
    data, tmp_path, capsys, monkeypatch, code, exit_code, cause
):
    """Fault injection through the storage layer: every write of the new
    model's files fails with ``code``; the model trained before is intact."""
    out = tmp_path / "run"
    fit(data, "l2", out)
    before = model_of(out)
    for kind in (fs.LocalFS, fs.HadoopFS):  # without a session, and through Hadoop's
        real = kind.write_bytes

        def failing(self, path, payload, real=real):
            if "model" in str(path).rsplit(str(out), 1)[-1]:  # the new model's files
                raise OSError(code, os.strerror(code), str(path))
            return real(self, path, payload)

        monkeypatch.setattr(kind, "write_bytes", failing)
    capsys.readouterr()
    args = cli_args(data, "l2", out, "output.overwrite=true", "train.l2=2e-3")
    assert train_main(args) == exit_code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: cannot write {out}") and f": {cause};" in err, err
    assert "model" in err.split(":")[1].rsplit(str(out), 1)[-1], err  # the model file
    monkeypatch.undo()
    assert_same_model(model_of(out), before)
    assert leftovers(out) == []


def _tmpfs_unavailable() -> str:
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "no mount/umount"
    return ""


@pytest.mark.skipif(bool(_tmpfs_unavailable()), reason=_tmpfs_unavailable() or "x")
def test_prepare_onto_a_full_tmpfs_exits_7_naming_the_output(spark, data, tmp_path, capsys):
    """A real full disk under Spark's own writers: a 256 KB tmpfs as the
    output's directory; the events Parquet does not fit. Exit 7, one line
    naming a path under the output and the cause; nothing left there."""
    text = tmp_path / "big.txt"
    lines = [f"L{i % 3} " + " ".join(f"w{i}_{k}" for k in range(30)) for i in range(6000)]
    text.write_text("\n".join(lines) + "\n")
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "sparkmaxent-full", str(full)], check=True
    )
    try:
        capsys.readouterr()
        out = full / "ds"
        args = ["--input", str(text), "--format", "maxent", "--output", str(out)]
        assert prepare_main(args) == EXIT_NO_SPACE
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert "No space left on device" in err and str(full) in err, err
        assert not out.exists() and leftovers(out) == []
    finally:
        subprocess.run(["umount", "-l", str(full)], check=False)
