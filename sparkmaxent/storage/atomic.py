"""All-or-nothing outputs on any file system, and clean-up after killed runs.

An output (a directory or a file) is written to a hidden temporary
sibling ``.<name>.tmp-<random>`` and published by renames: the old output
is moved aside to ``.<name>.old-<random>``, the new one renamed in, the old
one deleted; if the second rename fails the old one is put back. Renames
are atomic on HDFS, ABFS and local disks (on S3 a rename is a copy, so
there the sequence is only all-or-nothing, not instantaneous). A run
killed between the renames leaves the old output in its ``.old-`` sibling;
:func:`sweep` puts it back at the next start, and removes ``.tmp-``
siblings of killed or failed runs.
"""

from __future__ import annotations

import errno
import logging
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import InputError
from . import faults
from .fs import filesystem, local_path, scheme

log = logging.getLogger(__name__)

#: ``.<name>.<tag>-<8 hex>[-work]``: what publish, write_atomic and scratch leave
_SIBLING = re.compile(r"^\.(?P<name>.+)\.(?P<tag>tmp|old)-[0-9a-f]{8}(?:-work)?$")


def absolute(path: str) -> str:
    """A bare relative path made absolute (URIs as they are)."""
    path = path.rstrip("/") or "/"
    return path if scheme(path) else local_path(path)


def join(base: str, *parts: str) -> str:
    """``base/part/...`` for local paths and URIs alike."""
    out = base.rstrip("/")
    for part in parts:
        out = f"{out}/{part.strip('/')}"
    return out


def split(path: str) -> tuple[str, str]:
    """(parent, name) of an absolute path or URI."""
    path = absolute(path)
    parent, _, name = path.rpartition("/")
    if parent.endswith(("/", ":")) or not parent:
        parent += "/"  # file:///x -> file:///, file:/x -> file:/, /x -> /
    return parent, name


def sibling(path: str, tag: str) -> str:
    """A fresh hidden path next to ``path``: ``.<name>.<tag>-<random>``."""
    parent, name = split(path)
    return join(parent, f".{name}.{tag}-{uuid.uuid4().hex[:8]}")


def refuse_existing(path: str, overwrite: bool, what: str = "output") -> None:
    """InputError (exit 2) for an existing ``path`` unless ``overwrite``."""
    if not overwrite and filesystem().exists(path):
        raise InputError(
            f"{what} {path} exists: expected a new path, or overwrite=True "
            "(--overwrite) to replace it"
        )


#: outputs whose lock another run took over (as stale) while this run held
#: it, with who took it: this run writes nothing more under them
_TAKEN_OVER: dict[str, str] = {}


def mark_taken_over(output: str, by: str) -> None:
    """Record that another run (``by``) now holds ``output``'s lock."""
    _TAKEN_OVER[output.rstrip("/")] = by


def release_taken_over(output: str) -> None:
    _TAKEN_OVER.pop(output.rstrip("/"), None)


def refuse_taken_over(path: str) -> None:
    """InputError (exit 2) for a write at or under an output whose lock was
    taken over: two runs must never write the same output."""
    for output, by in _TAKEN_OVER.items():
        if path == output or path.startswith(output + "/"):
            raise InputError(
                f"output {output}: its lock was taken over by {by} (this run had not "
                "refreshed it within output.lock_stale_s); this run stops without "
                f"writing {path}, and leaves the output to that run"
            )


def publish(tmp: str, target: str, overwrite: bool) -> None:
    """Rename the finished ``tmp`` to ``target``; an old ``target`` is moved
    aside first and deleted only once the new one is in place (put back if
    the rename fails), so ``target`` is never lost."""
    fs = filesystem()
    refuse_taken_over(target)
    refuse_existing(target, overwrite)
    faults.reach("publish")
    if not fs.exists(target):
        fs.rename(tmp, target)
        return
    old = sibling(target, "old")
    fs.rename(target, old)
    faults.reach("swap")
    try:
        fs.rename(tmp, target)
    except BaseException:
        fs.rename(old, target)
        raise
    fs.delete(old)


@contextmanager
def staged(target: str) -> Iterator[str]:
    """Where to build the output ``target`` all or nothing (yielded): a
    temporary sibling, published to ``target`` when the block ends
    (:func:`publish`: an old one replaced only by a complete new one) and
    deleted if it fails. Where nothing renames (a remote file system under
    Spark Connect) ``target`` itself: an old one is deleted first, and what
    was written is deleted if the block fails, so a failure leaves no
    output there, old or new."""
    fs = filesystem()
    if not fs.renames(target):
        refuse_taken_over(target)
        fs.delete(target)
        try:
            yield target
        except BaseException:
            fs.delete(target)
            raise
        return
    tmp = sibling(target, "tmp")
    try:
        yield tmp
        publish(tmp, target, overwrite=True)
    except BaseException:
        fs.delete(tmp)
        raise


def write_atomic(path: str, data: bytes) -> None:
    """Write a file all or nothing: a temporary sibling, then replaced in
    (in one rename on local disks, by :func:`publish` elsewhere)."""
    fs = filesystem()
    refuse_taken_over(path)
    if not fs.renames(path):  # a packed file under Connect: Spark's commit is all or nothing
        fs.write_bytes(path, data)
        return
    tmp = sibling(path, "tmp")
    try:
        fs.write_bytes(tmp, data)
        faults.reach("write")
        if not fs.replace_file(tmp, path):
            publish(tmp, path, overwrite=True)
    except BaseException:
        fs.delete(tmp)
        raise


def sweep(directory: str, names: set[str] | None = None) -> list[str]:
    """Clean up after killed or failed runs in ``directory`` (only for the
    outputs ``names``, or all): ``.tmp-`` siblings are deleted; an
    ``.old-`` sibling whose output is missing (a kill between publish's
    renames) is renamed back, any other deleted. Call it only while holding
    the output's lock (``lock.output_lock``): a live run's temporary
    siblings look just the same. Returns what it did, one line each."""
    fs = filesystem()
    if not fs.is_dir(directory):
        return []
    done = []
    for entry in fs.list(directory):
        m = _SIBLING.match(entry)
        if not m or (names is not None and m.group("name") not in names):
            continue
        path, target = join(directory, entry), join(directory, m.group("name"))
        if m.group("tag") == "old" and not fs.exists(target):
            fs.rename(path, target)
            done.append(f"restored {target} from {entry}, left by a run killed while publishing")
        else:
            fs.delete(path)
            done.append(f"removed {path}, left by a killed or failed run")
    for line in done:
        log.warning("%s", line)
    return done


def check_writable(directory: str) -> None:
    """Create ``directory`` if needed and write and delete a probe file in
    it, so a run finds out before its first pass, not after training;
    InputError (exit 2) naming the directory otherwise."""
    fs = filesystem()
    probe = join(directory, f".sparkmaxent-probe.tmp-{uuid.uuid4().hex[:8]}")
    if not fs.renames(directory):  # remote under Connect: the lock beside it was the probe
        return
    try:
        fs.mkdirs(directory)
        fs.write_bytes(probe, b"")
        fs.delete(probe)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise  # a full disk, not a bad path: the command line names it (exit 7)
        raise InputError(f"output {directory} is not writable: {type(e).__name__}: {e}") from None
