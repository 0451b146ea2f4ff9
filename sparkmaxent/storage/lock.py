"""One run per output: a lock file next to it.

``.<name>.lock`` holds the owner's host, pid and start time. It is created
atomically (Hadoop's ``create(path, overwrite=false)``; ``O_EXCL`` on a
local disk), so of two runs starting on the same output one gets it and
the other is refused with exit 2, naming the path and the owner. It is
removed when the run ends, however it ends; a lock left by a killed run is
recovered with a warning when its owner is on this host and its process is
gone, or when it is older than ``output.lock_stale_s`` (0: never by age).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import InputError
from .atomic import join, split
from .fs import filesystem

log = logging.getLogger(__name__)

_HELD: set[str] = set()  # locks this process holds: nested use (pipeline -> fit) re-enters


def lock_path(target: str) -> str:
    parent, name = split(target)
    return join(parent, f".{name}.lock")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _owner(path: str) -> dict:
    """What a lock file says (``{}`` when it cannot be read or parsed)."""
    try:
        doc = json.loads(filesystem().read_bytes(path))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _stale(path: str, owner: dict, stale_s: float) -> str:
    """Why the lock at ``path`` is stale ("" if it is not)."""
    if owner.get("host") == socket.gethostname() and isinstance(owner.get("pid"), int):
        if not _alive(owner["pid"]):
            return f"its process {owner['pid']} on this host is gone"
    if stale_s > 0:
        try:
            age = time.time() - filesystem().mtime(path)
        except FileNotFoundError:
            return "it was just released"
        if age > stale_s:
            return f"it is {age:.0f} s old, more than output.lock_stale_s {stale_s:g}"
    return ""


def describe_owner(owner: dict) -> str:
    if not owner:
        return "an unknown run (unreadable lock file)"
    return f"pid {owner.get('pid')} on {owner.get('host')}, started {owner.get('started')}" + (
        f" ({owner['command']})" if owner.get("command") else ""
    )


@contextmanager
def output_lock(target: str, stale_s: float = 0.0, command: str = "") -> Iterator[str]:
    """Hold ``.<name>.lock`` next to ``target`` for the duration; yields its
    path. InputError (exit 2) while another live run holds it."""
    path = lock_path(target)
    if path in _HELD:
        yield path
        return
    fs = filesystem()
    me = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command,
        "token": uuid.uuid4().hex,
    }
    data = json.dumps(me, indent=2).encode()
    for _ in range(3):
        try:
            if fs.create_new(path, data):
                break
        except OSError as e:  # no parent directory, no permission, ...
            raise InputError(
                f"output {target} is not writable: cannot create {path}: {e}"
            ) from None
        owner = _owner(path)
        why = _stale(path, owner, stale_s)
        if not why:
            raise InputError(
                f"output {target} is being written by another run: {describe_owner(owner)} "
                f"holds {path}; wait for it to end, or remove the lock if that run is gone"
            )
        log.warning("recovering the stale lock %s of %s: %s", path, describe_owner(owner), why)
        fs.delete(path)
    else:
        raise InputError(f"output {target}: could not take the lock {path} (contended)")
    _HELD.add(path)
    try:
        yield path
    finally:
        _HELD.discard(path)
        if _owner(path).get("token") == me["token"]:  # never remove a lock taken from us
            fs.delete(path)
