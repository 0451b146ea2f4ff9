"""Output locks on a remote file system under Spark Connect (``lock.py``).

A lock file there cannot be created atomically nor deleted so that its
name is free again: the server's writers only refuse an existing path
(``mode("error")``) and a deleted path stays a directory holding Spark's
hidden ``_SUCCESS``. So the lock ``.<name>.lock`` is a directory of
*claims*, packed files named by generation ``1``, ``2``, ...; the highest
generation listed is the lock's state: the owner's document (host, pid,
start, token), or a release marker once its owner released it.

- **taking** the lock writes generation ``n + 1`` with ``mode("error")``
  and reads it back (``ConnectFS.create_new``): of two runs racing for it,
  at most the one whose bytes alone are there has it. Older generations
  are then deleted, so the listing stays short.
- **releasing** it (or recovering it when stale) writes the release
  marker over the current generation; **refreshing** it writes the
  owner's document again (its modification time is the age ``lock.py``
  judges).

:class:`ClaimLog` has the file system methods ``lock.py`` calls on a lock
path, with these meanings.
"""

from __future__ import annotations

import json
from typing import Any

#: what a released generation holds
RELEASED = json.dumps({"released": True}).encode()


class ClaimLog:
    """The lock paths of a ``ConnectFS`` (remote ones): generations of claims."""

    name = "connect-claims"

    def __init__(self, fs: Any) -> None:
        self.fs = fs

    def _generations(self, path: str) -> list[int]:
        """The generations listed under the lock ``path``, ascending."""
        try:
            names = self.fs.list(path)
        except FileNotFoundError:
            return []
        return sorted(int(n) for n in names if n.isdigit())

    def _current(self, path: str) -> tuple[int, bytes | None]:
        """(generation, its owner's document) of the lock; None for the
        document when it was released, (0, None) when never taken."""
        generations = self._generations(path)
        if not generations:
            return 0, None
        n = generations[-1]
        try:
            data = self.fs.read_bytes(_claim(path, n))
        except FileNotFoundError:  # deleted since it was listed: released
            return n, None
        return n, None if data == RELEASED else data

    def create_new(self, path: str, data: bytes) -> bool:
        """Take the lock unless a run holds it: claim the next generation."""
        n, owner = self._current(path)
        if owner is not None:
            return False
        if not self.fs.create_new(_claim(path, n + 1), data):
            return False
        for old in self._generations(path):
            if old <= n:
                self.fs.delete(_claim(path, old))
        return True

    def read_bytes(self, path: str) -> bytes:
        """The owner's document; FileNotFoundError when no run holds it."""
        owner = self._current(path)[1]
        if owner is None:
            raise FileNotFoundError(f"{path}: no run holds this lock")
        return owner

    def mtime(self, path: str) -> float:
        n, owner = self._current(path)
        if owner is None:
            raise FileNotFoundError(f"{path}: no run holds this lock")
        return self.fs.mtime(_claim(path, n))

    def touch(self, path: str) -> None:
        n, owner = self._current(path)
        if owner is not None:
            self.fs.write_bytes(_claim(path, n), owner)

    def delete(self, path: str) -> None:
        """Release the lock (the current generation marked released)."""
        n, owner = self._current(path)
        if owner is not None:
            self.fs.write_bytes(_claim(path, n), RELEASED)


def _claim(path: str, n: int) -> str:
    return f"{path.rstrip('/')}/{n}"
