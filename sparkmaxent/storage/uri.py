"""Paths as URIs: the scheme of a path, and local paths from ``file:`` URIs
(no file system touched)."""

from __future__ import annotations

import os
import re

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


def scheme(path: str) -> str:
    """The URI scheme of ``path`` (``hdfs``, ``file``, ...), "" for a bare path."""
    m = _SCHEME.match(path)
    return m.group(1).lower() if m and "/" in path[m.end() : m.end() + 1] else ""


def local_path(path: str) -> str:
    """``file:///a/b`` or ``file:/a/b`` -> ``/a/b``; a bare path made absolute."""
    if scheme(path) == "file":
        rest = path[len("file:") :]
        if rest.startswith("//"):
            rest = rest[2:]
            rest = rest[rest.index("/") :] if "/" in rest else "/"
        return rest
    return os.path.abspath(os.path.expanduser(path))
