"""The execution plan of a run: which stages run in the driver's process
and which on Spark, decided by one set of rules from the configuration and
the data's size, logged in one line (``plan: train on spark (4
partitions), evaluate in-process``) and recorded in the run's report.

Why small data stays in the driver: every Spark job has a fixed cost
(``pass_overhead`` in docs/benchmarks.md) far above the work on a few
thousand events. The rules (``Limits``):

- a prepared dataset of at most ``data.in_process_max_events`` events is
  trained (a "spark" backend becomes "local"), fingerprinted and scored in
  the driver's process; so is its held-out data, judged by its own size;
- text input files of at most ``data.in_process_bytes_per_event`` bytes
  per such event in all are read and prepared there, before their events
  are counted (the bytes are known without reading them);
- a table of at most that many rows (without a key column) is collected
  with Arrow in one Spark job and prepared there.

0 events turns all of it off. Either way the results are the same (tested).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import Config
    from .config.schema import DataConfig

logger = logging.getLogger("sparkmaxent")

IN_PROCESS = "in-process"
SPARK = "spark"
#: the stages a plan may hold, in the order its line names them
STAGES = ("prepare", "train", "heldout", "evaluate", "predict")


@dataclass(frozen=True)
class Limits:
    """The sizes below which a stage runs in the driver's process."""

    max_events: int = 0  # data.in_process_max_events; 0: never
    bytes_per_event: int = 512  # data.in_process_bytes_per_event

    @classmethod
    def from_config(cls, data: DataConfig) -> Limits:
        return cls(data.in_process_max_events, data.in_process_bytes_per_event)

    def events(self, n_events: int) -> bool:
        """Whether a dataset of ``n_events`` events is handled in-process."""
        return 0 < n_events <= self.max_events

    def input_bytes(self, n_bytes: int) -> bool:
        """Whether text input of ``n_bytes`` bytes in all is prepared in-process."""
        return self.max_events > 0 and n_bytes <= self.max_events * self.bytes_per_event

    def rows(self, frame) -> bool:
        """Whether a DataFrame has at most ``max_events`` rows (one Spark job
        counting at most that many plus one; none when the limit is 0)."""
        return self.max_events > 0 and frame.limit(self.max_events + 1).count() <= self.max_events


@dataclass(frozen=True)
class Stage:
    """Where one stage runs: ``engine`` IN_PROCESS or SPARK, with the
    backend kind and partitions of a training stage."""

    engine: str
    backend: str = ""
    partitions: int | None = None

    def describe(self) -> str:
        if self.engine == IN_PROCESS:
            return IN_PROCESS
        parts = f" ({self.partitions} partitions)" if self.partitions else ""
        return f"on {self.backend or SPARK}{parts}"


@dataclass
class ExecutionPlan:
    """One run's decisions, each stage decided once by :class:`Limits`
    from its data's size when that size is known, and kept here: the
    object the stages are given, logged by :meth:`log` and recorded by
    :meth:`to_dict`."""

    limits: Limits = field(default_factory=Limits)
    backend: str = "spark"  # train.backend
    partitions: int | None = None  # data.partitions (None: Spark's default)
    stages: dict[str, Stage] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Config) -> ExecutionPlan:
        return cls(Limits.from_config(cfg.data), cfg.train.backend, cfg.data.partitions or None)

    def backend_for(self, stage: str, n_events: int) -> str:
        """The backend kind of training (``stage`` "train" or "heldout") on
        a dataset of ``n_events``: ``train.backend``, or "local" for a
        "spark*" backend over data small enough (:meth:`Limits.events`).
        Both give the same objective and gradient up to the order of
        floating-point sums, so models agree to the optimizer's tolerance."""
        kind = self.backend
        if kind.startswith("spark") and self.limits.events(n_events):
            kind = "local"
        engine = IN_PROCESS if kind == "local" else SPARK
        self.stages[stage] = Stage(engine, kind, None if kind == "local" else self.partitions)
        return kind

    def built(self, stage: str, backend: object) -> None:
        """Record the partitions the backend of a training ``stage`` cached
        its events in: ``data.partitions``, or when that is 0 the Parquet
        scan's count, known only once the backend is built."""
        from .backends.base import CachedBackend

        if isinstance(backend, CachedBackend):
            self.stages[stage] = dataclasses.replace(
                self.stages[stage], partitions=backend.partitions
            )

    def scores_in_process(self, stage: str, n_events: int, keyed: bool = False) -> bool:
        """Whether ``stage`` (evaluate, predict) scores a dataset of
        ``n_events`` in-process; never with a key column (``keyed``)."""
        small = self.limits.events(n_events) and not keyed
        self.stages[stage] = Stage(IN_PROCESS if small else SPARK)
        return small

    def prepared(self, in_process: bool) -> None:
        """Record how a prepare ran (``prepare.PrepareOptions.plan``);
        of several datasets, in-process only when every one was."""
        before = self.stages.get("prepare")
        every = in_process and (before is None or before.engine == IN_PROCESS)
        self.stages["prepare"] = Stage(IN_PROCESS if every else SPARK)

    def line(self) -> str:
        """``plan: train on spark (4 partitions), evaluate in-process``."""
        done = [f"{s} {self.stages[s].describe()}" for s in STAGES if s in self.stages]
        return "plan: " + (", ".join(done) or "nothing decided")

    def log(self) -> None:
        logger.info("%s", self.line())

    def to_dict(self) -> dict:
        """The decisions for a report: stage -> {engine, backend, partitions}."""
        return {
            s: {k: v for k, v in vars(self.stages[s]).items() if v not in ("", None)}
            for s in STAGES
            if s in self.stages
        }


__all__ = ["IN_PROCESS", "SPARK", "STAGES", "ExecutionPlan", "Limits", "Stage"]
