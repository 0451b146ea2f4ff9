"""Fault injection for the fault suite (tests/e2e/test_faults.py): kill the
process at a chosen step of writing its outputs.

With ``SPARKMAXENT_FAULT=<point>:<n>`` in the environment, the process
SIGKILLs itself the ``n``-th time it reaches ``<point>``, one of
:data:`POINTS`. Every file a run writes goes through ``storage``, so these
steps cover prepare, every training method's checkpoints, plots and
reports, and model publishing. Unset (always, outside the suite),
:func:`reach` returns after one test of a module constant: the variable is
read once, at import.
"""

from __future__ import annotations

import os
import signal
import sys

#: where :func:`reach` is called, and what has happened there
POINTS = {
    "write": "a file is written to its temporary sibling, not yet in place "
    "(checkpoint rounds and state, reports, dataset.json, model files, plots)",
    "publish": "a finished output is about to be renamed in (nothing renamed yet)",
    "swap": "the old output is moved aside, the new one not yet renamed in",
}
ENV = "SPARKMAXENT_FAULT"

_SPEC = os.environ.get(ENV, "")
_SEEN: dict[str, int] = {}


def parse(spec: str) -> tuple[str, int]:
    """``"write:3"`` -> ``("write", 3)``; ValueError naming the variable otherwise."""
    point, _, n = spec.partition(":")
    if point not in POINTS or not n.isdigit() or int(n) < 1:
        raise ValueError(f"{ENV}={spec!r}: expected <point>:<n> with point one of {list(POINTS)}")
    return point, int(n)


def reach(point: str) -> None:
    """Count a pass through ``point``; SIGKILL this process at the one
    ``SPARKMAXENT_FAULT`` names."""
    if _SPEC:
        _maybe_kill(point)


def _maybe_kill(point: str) -> None:
    target, n = parse(_SPEC)
    if point != target:
        return
    _SEEN[point] = _SEEN.get(point, 0) + 1
    if _SEEN[point] == n:
        sys.stderr.write(f"{ENV}: killing pid {os.getpid()} at {point} #{n}\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
