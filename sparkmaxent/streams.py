"""The command line's standard streams: logs on standard error, also under
spark-submit."""

from __future__ import annotations

import logging
import sys


def restore_stderr() -> bool:
    """Under spark-submit, send this process's standard error to spark-submit's
    own standard error again; True when it did.

    spark-submit starts a Python driver with its stderr merged into its stdout
    (Spark's PythonRunner: ``redirectErrorStream``), so the logs and the
    ``error:`` line would land on stdout. When fds 1 and 2 are the same pipe
    and the parent process (spark-submit's JVM) has a standard error of its
    own, fd 2 is reopened on that (Linux ``/proc``; elsewhere nothing
    changes). Outside spark-submit (no ``PYSPARK_GATEWAY_PORT``, which its
    PythonRunner sets) a merge the user asked for (``2>&1``) is kept."""
    import os
    import stat

    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return False
    try:
        out, err = os.fstat(1), os.fstat(2)
        if not stat.S_ISFIFO(err.st_mode) or (out.st_dev, out.st_ino) != (err.st_dev, err.st_ino):
            return False
        parent = f"/proc/{os.getppid()}/fd/2"
        theirs = os.stat(parent)
        if (theirs.st_dev, theirs.st_ino) == (err.st_dev, err.st_ino):
            return False
        fd = os.open(parent, os.O_WRONLY | os.O_APPEND)
    except OSError:
        return False
    sys.stderr.flush()
    os.dup2(fd, 2)
    os.close(fd)
    return True


def setup_logging(verbose: bool = False) -> None:
    """Log lines with the date and time on stderr; Spark's Python loggers quiet."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            datefmt="%Y-%m-%d %H:%M:%S",
        )
    logging.getLogger("sparkmaxent").setLevel(logging.DEBUG if verbose else logging.INFO)
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
