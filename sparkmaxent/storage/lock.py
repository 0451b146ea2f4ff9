"""One run per output: a lock file next to it.

``.<name>.lock`` holds the owner's host, pid and start time. It is created
atomically (Hadoop's ``create(path, overwrite=false)``; ``O_EXCL`` on a
local disk; on a remote file system under Spark Connect, a claim written
with ``mode("error")`` and read back: ``connect_lock.py``), so of two runs
starting on the same output one gets it and the other is refused with
exit 2, naming the path and the owner. It is removed when the run ends,
however it ends; a lock left by a killed run is recovered with a warning
when its owner is on this host and its process is gone, or when it has
not been refreshed for ``output.lock_stale_s``
(0: never by age).

While the run lives, a daemon thread refreshes the lock's modification
time every ``min(60 s, lock_stale_s / 4)`` (:class:`Heartbeat`), so only a
lock whose owner stopped refreshing it (a driver on another host that
died, whose pid this host cannot check) grows older than
``lock_stale_s``; a long run is never mistaken for a dead one. A run
whose lock was nevertheless taken over (it stalled for longer than that)
finds out at its next refresh and writes nothing more under the output:
its next write or publish there fails with exit 2.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import InputError
from .atomic import join, mark_taken_over, release_taken_over, split
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


def lock_fs(path: str) -> Any:
    """The file system methods for the lock file ``path``: a remote one under
    Spark Connect is a directory of claims (``connect_lock.py``)."""
    fs = filesystem()
    if fs.name == "connect" and not fs.renames(path):
        from .connect_lock import ClaimLog

        return ClaimLog(fs)
    return fs


def _owner(path: str, fs: Any = None) -> dict:
    """What a lock file says (``{}`` when it cannot be read or parsed);
    ``fs``: its :func:`lock_fs` (default: this thread's)."""
    try:
        doc = json.loads((fs or lock_fs(path)).read_bytes(path))
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
            age = time.time() - lock_fs(path).mtime(path)
        except FileNotFoundError:
            return "it was just released"
        if age > stale_s:
            return (
                f"it was last refreshed {age:.0f} s ago, more than output.lock_stale_s {stale_s:g}"
            )
    return ""


def describe_owner(owner: dict) -> str:
    if not owner:
        return "an unknown run (unreadable lock file)"
    return f"pid {owner.get('pid')} on {owner.get('host')}, started {owner.get('started')}" + (
        f" ({owner['command']})" if owner.get("command") else ""
    )


#: the longest time between two refreshes of a held lock, in seconds
REFRESH_MAX_S = 60.0


def refresh_interval(stale_s: float) -> float:
    """Seconds between refreshes of a lock judged by ``stale_s``; with 0
    (never stale by age for this run) still every :data:`REFRESH_MAX_S`, as
    runs started with another ``output.lock_stale_s`` judge it too."""
    return min(REFRESH_MAX_S, stale_s / 4) if stale_s > 0 else REFRESH_MAX_S


class Heartbeat:
    """Refresh the lock ``path`` of ``output`` every ``interval`` seconds
    from a daemon thread while it is still ours (its token). When another
    run has taken it over, stop with an error logged, and mark ``output``
    taken over so that this run's next write under it fails (exit 2)
    instead of racing the new owner."""

    def __init__(self, path: str, token: str, interval: float, output: str = "") -> None:
        self.path, self.token, self.interval, self.output = path, token, interval, output
        # the owner's file system: a Spark Connect session is active in its thread only
        self.fs = lock_fs(path)
        self.refreshed = 0  # how many times (tests)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lock {path}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    #: pauses before reading an unreadable lock again: a file being written
    #: (a new owner's create, seen between its truncate and its write) or a
    #: file system hiccup is not yet a takeover
    REREAD_PAUSES_S = (0.05, 0.2, 1.0)

    def _current_owner(self) -> dict | None:
        """What the lock says, read again after :data:`REREAD_PAUSES_S` while
        it is unreadable; None when the heartbeat was stopped meanwhile."""
        owner = _owner(self.path, self.fs)
        for pause in self.REREAD_PAUSES_S:
            if owner:
                break
            if self._stop.wait(pause):
                return None
            owner = _owner(self.path, self.fs)
        return owner

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                owner = self._current_owner()
                if owner is None:
                    return
                if owner.get("token") != self.token:
                    log.error(
                        "the lock %s is no longer this run's (taken over as stale?) but "
                        "%s's: this run writes nothing more under %s",
                        self.path,
                        describe_owner(owner),
                        self.output or "its output",
                    )
                    if self.output:
                        mark_taken_over(self.output, describe_owner(owner))
                    return
                self.fs.touch(self.path)
                self.refreshed += 1
            except Exception as e:  # a file system hiccup: try again next time
                log.warning("could not refresh the lock %s: %s", self.path, e)


@contextmanager
def output_lock(target: str, stale_s: float = 0.0, command: str = "") -> Iterator[str]:
    """Hold ``.<name>.lock`` next to ``target`` for the duration, refreshed
    by a :class:`Heartbeat`; yields its path. InputError
    (exit 2) while another live run holds it."""
    path = lock_path(target)
    if path in _HELD:
        yield path
        return
    fs = lock_fs(path)
    token = uuid.uuid4().hex
    me = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command,
        "token": token,
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
                + (
                    f" (a lock not refreshed for output.lock_stale_s {stale_s:g} s is taken "
                    "over by itself)"
                    if stale_s > 0
                    else " (output.lock_stale_s = 0: a lock is never taken over by its age)"
                )
            )
        log.warning("recovering the stale lock %s of %s: %s", path, describe_owner(owner), why)
        fs.delete(path)
    else:
        raise InputError(f"output {target}: could not take the lock {path} (contended)")
    _HELD.add(path)
    try:
        with Heartbeat(path, token, refresh_interval(stale_s), target):
            yield path
    finally:
        _HELD.discard(path)
        release_taken_over(target)
        if _owner(path).get("token") == token:  # never remove a lock taken from us
            fs.delete(path)
