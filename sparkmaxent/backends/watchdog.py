"""The Spark backend's watchdog (backends/spark.py): a daemon thread polling
the status tracker about once a second while the calling thread runs a pass,
cancelling the pass's job group when the cluster has had no executor (and
the pass no progress) for ``no_executor_timeout_s``, when the pass outruns
``pass_timeout_s``, or when executors keep dying with no progress
(``max_executor_losses``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


class PassLimit:
    """The time limit of a backend's next pass: ``fixed_s`` when set
    (``spark.pass_timeout_s``); else ``factor`` times the slowest pass seen
    so far, the caching of the blocks counted (``spark.pass_timeout_factor``),
    at least ``floor_s`` (``spark.pass_timeout_floor_s``): a hung task ends
    the run however long the data makes a pass; 0 (no limit) when
    ``fixed_s`` and ``factor`` are 0."""

    def __init__(self, fixed_s: float = 0.0, factor: float = 0.0, floor_s: float = 0.0):
        self.fixed_s, self.factor, self.floor_s = fixed_s, factor, floor_s
        self.slowest_s = 0.0

    def seen(self, seconds: float) -> None:
        """A pass (or the caching) that took ``seconds`` and completed."""
        self.slowest_s = max(self.slowest_s, seconds)

    def next(self) -> tuple[float, str]:
        """(seconds, what sets them, for the message); (0, '') for no limit."""
        if self.fixed_s > 0:
            return self.fixed_s, f"spark.pass_timeout_s = {self.fixed_s:g} s"
        if self.factor <= 0:
            return 0.0, ""
        limit = max(self.floor_s, self.factor * self.slowest_s)
        return limit, (
            f"its limit of {limit:.0f} s (spark.pass_timeout_factor = {self.factor:g} times the "
            f"slowest pass so far, {self.slowest_s:.1f} s, at least spark.pass_timeout_floor_s = "
            f"{self.floor_s:g} s; raise them, or set spark.pass_timeout_s, if passes can be "
            "this slow)"
        )


class ClusterStatus:
    """What the watchdog reads of a running SparkContext."""

    def __init__(self, sc):
        self.sc = sc
        # in local mode the driver runs the tasks: there are no executors to lose
        self.local = (sc.master or "").startswith("local")

    def executors(self) -> int | None:
        """Executors registered now (the driver not counted); None in local mode."""
        if self.local:
            return None
        return max(0, self.sc._jsc.sc().getExecutorMemoryStatus().size() - 1)

    def lost_executors(self) -> list[tuple[str, str]]:
        """(id, reason) of every executor removed so far ([] in local mode):
        the reason as the executor or its worker gave it, e.g. "Unable to
        create executor due to No space left on device"."""
        if self.local:
            return []
        summaries = self.sc._jsc.sc().statusStore().executorList(False)
        out = []
        for i in range(summaries.size()):
            e = summaries.apply(i)
            if not e.isActive() and str(e.id()) != "driver":
                reason = e.removeReason()
                out.append((str(e.id()), str(reason.get()) if reason.isDefined() else "unknown"))
        return out

    def progress(self) -> tuple:
        """Changes whenever a stage starts, ends or completes a task."""
        tracker = self.sc.statusTracker()
        stages = []
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                stages.append((sid, info.currentAttemptId, info.numCompletedTasks))
        return tuple(sorted(stages))


class Watchdog:
    """Watches one pass (``what``) of job group ``group`` from a daemon thread
    while the calling thread runs it; cancels the group when the cluster has
    had no executor and the pass no progress for ``no_executor_s`` seconds, or
    when the pass has run ``pass_s`` seconds (0: no such limit; ``pass_rule``
    says what set it, ``PassLimit.next``), or when
    ``max_losses`` executors were lost since the pass started with no
    progress since the first of them (executors that register and die at
    start-up, e.g. unable to unpack the Python archive; 0: no such limit).
    After the pass, ``tripped`` is the reason it was cancelled, or None.

    ``status`` has ``executors() -> int | None`` (None: local mode, never
    stalls for want of executors) and ``progress() -> comparable``.
    """

    def __init__(
        self,
        sc,
        group: str,
        what: str,
        status,
        no_executor_s: float = 0.0,
        pass_s: float = 0.0,
        poll_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        max_losses: int = 0,
        pass_rule: str = "",
    ):
        self.sc, self.group, self.what, self.status = sc, group, what, status
        self.no_executor_s, self.pass_s, self.max_losses = no_executor_s, pass_s, max_losses
        self.pass_rule = pass_rule or f"spark.pass_timeout_s = {pass_s:g} s"
        self._known_lost: set[str] | None = None  # lost before this count started
        self._loss_progress: Any = None
        self.poll_s, self.clock = poll_s, clock
        self.tripped: str | None = None
        self.start = clock()
        self.most_executors = 0
        self._idle_since: float | None = None
        self._progress: Any = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def check(self, now: float) -> str | None:
        """One poll: the reason to cancel the pass at time ``now``, or None."""
        n = self.status.executors()
        self.most_executors = max(self.most_executors, n or 0)
        if self.pass_s and now - self.start >= self.pass_s:
            return (
                f"it ran longer than {self.pass_rule} ("
                + ("local mode" if n is None else f"{n} executor(s) now")
                + ")"
            )
        losses = self._repeated_losses()
        if losses:
            return losses
        if not self.no_executor_s or n is None or n > 0:
            self._idle_since = self._progress = None
            return None
        progress = self.status.progress()
        if self._idle_since is None or progress != self._progress:
            self._idle_since, self._progress = now, progress
            return None
        idle = now - self._idle_since
        if idle < self.no_executor_s:
            return None
        lost = (
            f"all {self.most_executors} were lost"
            if self.most_executors
            else "none registered since the pass started"
        )
        return (
            f"no executors for {idle:.0f} s ({lost}; spark.no_executor_timeout_s = "
            f"{self.no_executor_s:g})"
        )

    def _repeated_losses(self) -> str | None:
        """The reason to cancel when ``max_losses`` executors were lost with
        no progress of the pass since the first of them, else None."""
        lost_executors = getattr(self.status, "lost_executors", None)
        if not self.max_losses or lost_executors is None:
            return None
        try:
            lost = lost_executors()
        except Exception as e:  # a Spark without this status: the other checks still run
            logger.debug("watchdog of %s: no executor list: %s", self.what, e)
            return None
        if self._known_lost is None:  # the first poll: earlier losses are not this pass's
            self._known_lost = {i for i, _ in lost}
        new = [(i, why) for i, why in lost if i not in self._known_lost]
        if not new:
            return None
        progress = self.status.progress()
        if self._loss_progress is None:
            self._loss_progress = progress
        elif progress != self._loss_progress:  # tasks ran meanwhile: start counting again
            self._known_lost |= {i for i, _ in new}
            self._loss_progress = None
            return None
        if len(new) < self.max_losses:
            return None
        return (
            f"{len(new)} executors were lost since the pass started and it made no progress "
            f"(spark.max_executor_losses = {self.max_losses}); the last one's reason: "
            f"{new[-1][1]}"
        )

    def _watch(self) -> None:
        while not self._done.wait(self.poll_s):
            try:
                reason = self.check(self.clock())
            except Exception as e:  # the context stopping under us: not the pass's failure
                logger.debug("watchdog of %s: status unavailable: %s", self.what, e)
                continue
            if reason is None:
                continue
            with self._lock:
                if self._done.is_set():  # the pass ended meanwhile: nothing to cancel
                    return
                self.tripped = f"{reason}, after {self.clock() - self.start:.1f} s"
                logger.error(
                    "%s stalled: %s; cancelling job group %s", self.what, self.tripped, self.group
                )
                self.sc.cancelJobGroup(self.group)
            return

    def __enter__(self) -> Watchdog:
        if self.no_executor_s > 0 or self.pass_s > 0:
            self._thread = threading.Thread(
                target=self._watch, daemon=True, name=f"watchdog {self.group}"
            )
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:  # after this, the thread cancels nothing
            self._done.set()
