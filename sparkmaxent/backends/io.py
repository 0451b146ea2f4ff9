"""Output that is all or nothing, on any Hadoop file system.

A job writes into a hidden temporary sibling of its output path and renames
it into place only when complete, so a failed job leaves no partial output
where a finished one would be.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


def _fs_and_path(spark, path: str):
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return fs, hpath, jvm


def path_exists(spark, path: str) -> bool:
    fs, hpath, _ = _fs_and_path(spark, path)
    return bool(fs.exists(hpath))


@contextmanager
def atomic_output(spark, path: str, overwrite: bool = False) -> Iterator[str]:
    """Yield a temporary path to write to; move it to ``path`` on success,
    delete it on failure."""
    fs, target, jvm = _fs_and_path(spark, path)
    if fs.exists(target) and not overwrite:
        raise FileExistsError(f"output {path} exists; pass --overwrite to replace it")
    parent = target.getParent()
    tmp = jvm.org.apache.hadoop.fs.Path(parent, f".tmp-{target.getName()}-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp.toString()
        _publish(fs, jvm, tmp, target)
    except BaseException:
        fs.delete(tmp, True)
        raise


def _publish(fs, jvm, tmp, target) -> None:
    """Rename the finished ``tmp`` to ``target``; an old ``target`` is moved
    aside first and deleted only once the new one is in place (and moved
    back if the rename fails), so ``target`` is never left missing."""
    old = None
    if fs.exists(target):
        old = jvm.org.apache.hadoop.fs.Path(
            target.getParent(), f".old-{target.getName()}-{uuid.uuid4().hex[:8]}"
        )
        if not fs.rename(target, old):
            raise OSError(f"could not move the old output {target.toString()} aside")
    if not fs.rename(tmp, target):
        if old is not None:
            fs.rename(old, target)
        raise OSError(f"could not move finished output {tmp.toString()} to {target.toString()}")
    if old is not None:
        fs.delete(old, True)
