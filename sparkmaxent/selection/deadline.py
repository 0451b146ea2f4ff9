"""The time budget of a training run (``train.selection.max_seconds``).

One ``Deadline`` is made where ``train()`` starts and travels in the
``TrainingContext`` to everything the run does (the method's setup, its
rounds, the stage choice, the refit, every point of a path or fold), so
the budget covers the whole ``train()`` call, not just the round loop. A
resumed run's budget starts with the seconds its earlier sessions spent
(the checkpoint's ``elapsed_s``), so what a k-fold choice splits
(``part``) is what is truly left.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ..config import ChoiceConfig


class Deadline:
    """A budget of ``seconds`` (0: none) on ``clock``, counted from when
    the object is made, less ``earlier``: the seconds earlier sessions of
    a resumed run spent on it (its checkpoint's ``elapsed_s``)."""

    def __init__(
        self,
        seconds: float,
        clock: Callable[[], float] = time.perf_counter,
        earlier: float = 0.0,
    ):
        self.seconds = float(seconds)
        self.clock = clock
        self.earlier = float(earlier)
        self.start = clock()
        # the costliest path point's seconds over its passes, and its seconds
        # (``note_point``): what a refit's pass is reserved at, and the cap
        self.pass_s = 0.0
        self.point_s = 0.0
        # the budget this one is a part of (``part``): a measured point is noted there too
        self.parent: Deadline | None = None

    def note_point(self, seconds: float, passes: int) -> None:
        """Record a path point's ``seconds`` and its seconds a pass; the
        largest of each is kept (a path's points grow denser, and so do
        their passes), here and in the budget this one is a part of (a mix
        path's share: ``choice.mixes.mix_share`` reserves the refit on the
        whole budget)."""
        self.pass_s = max(self.pass_s, float(seconds) / max(passes, 1))
        self.point_s = max(self.point_s, float(seconds))
        if self.parent is not None:
            self.parent.note_point(seconds, passes)

    @property
    def bounded(self) -> bool:
        return self.seconds > 0

    def elapsed(self) -> float:
        """Seconds since this budget started (this session)."""
        return self.clock() - self.start

    def remaining(self) -> float:
        """Seconds left of the budget (inf without one), earlier sessions'
        seconds counted."""
        if not self.bounded:
            return math.inf
        return self.seconds - self.earlier - self.elapsed()

    def part(self, share: float) -> Deadline:
        """A budget of ``share`` of the seconds left, from now, on the same
        clock (one of several runs that split what is left, e.g. a fold of
        a k-fold choice); unbounded when this one is."""
        seconds = max(self.remaining() * share, 1e-9) if self.bounded else 0.0
        part = Deadline(seconds, self.clock)
        part.parent, part.pass_s, part.point_s = self, self.pass_s, self.point_s
        return part


def refit_reserve_s(choice: ChoiceConfig, deadline: Deadline, pass_s: Callable[[], float]) -> float:
    """Seconds a time-bound run keeps of ``deadline`` for the refit that
    follows it (a path's chosen point, a stage run's chosen stage):
    ``train.choice.refit_reserve_passes`` times ``pass_s()``, the seconds
    of one pass as the caller times it (called only when a reserve is
    kept: timing may run a pass); 0 without a budget or a refit. A
    reserve in passes, not a share of the budget: a warm-started refit
    needs about as many passes as a point (a few dozen) whatever the
    budget, and the seconds of its passes are those of the chosen
    model's size, which a path measures as it goes (``Deadline.pass_s``:
    the run's mean pass, cheap early points included, undercounts them)."""
    if not deadline.bounded or not choice.refit or not choice.refit_reserve_passes:
        return 0.0
    return choice.refit_reserve_passes * pass_s()
