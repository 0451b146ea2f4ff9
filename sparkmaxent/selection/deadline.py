"""The time budget of a training run (``train.selection.max_seconds``).

One ``Deadline`` is made where ``train()`` starts and travels in the
``TrainingContext`` to everything the run does (the method's setup, its
rounds, the stage choice, the refit, every point of a path or fold), so
the budget covers the whole ``train()`` call, not just the round loop.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


class Deadline:
    """A budget of ``seconds`` (0: none) on ``clock``, counted from when
    the object is made. A resumed run's budget also counts the seconds its
    earlier sessions spent (``LoopState.earlier_s``), which the caller
    passes as ``earlier``."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.perf_counter):
        self.seconds = float(seconds)
        self.clock = clock
        self.start = clock()

    @property
    def bounded(self) -> bool:
        return self.seconds > 0

    def elapsed(self) -> float:
        """Seconds since the run started (this session)."""
        return self.clock() - self.start

    def remaining(self, earlier: float = 0.0) -> float:
        """Seconds left of the budget (inf without one)."""
        if not self.bounded:
            return math.inf
        return self.seconds - earlier - self.elapsed()

    def part(self, share: float) -> Deadline:
        """A budget of ``share`` of the seconds left, from now, on the same
        clock (one of several runs that split what is left, e.g. a fold of
        a k-fold choice); unbounded when this one is."""
        if not self.bounded:
            return Deadline(0.0, self.clock)
        return Deadline(max(self.remaining() * share, 1e-9), self.clock)
