"""How a prepare run builds its dataset, and how predict and evaluate read
the data they score: one ``PrepareOptions`` (one ``ScoringOptions``) built
once (from the [data] section and the command line, or a Python caller's
keywords) and passed down through every stage."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..plan import ExecutionPlan, Limits
from .readers import InputError

if TYPE_CHECKING:
    from ..config.runtime import OutputConfig
    from ..config.schema import DataConfig

#: default largest fraction of an input's feature occurrences unknown to the
#: model before predict and evaluate refuse it (``--max-unknown``)
MAX_UNKNOWN = 0.5


@dataclass(frozen=True)
class PrepareOptions:
    """The settings of one prepare run (checked when built).

    cutoff
        Keep features whose weighted event count is >= cutoff (0 keeps
        all); ignored with ``vocabulary`` (``data.prepare_cutoff``).
    merge_duplicates
        Merge identical events, summing weights (training data); False for
        test/prediction data, so every event keeps its own row.
    vocabulary
        A prepared training dataset whose dictionary and labels are reused
        (held-out, test and prediction data).
    partitions
        Number of event files; None: Spark's default parallelism
        (``data.partitions``, 0 there).
    quarantine
        Set malformed records aside in ``<out>/_quarantine/`` instead of
        failing at the first one (text input).
    overwrite
        Replace an existing output (only once the new one is complete).
    require_labels
        Training data: >= 2 labels, or a correct candidate in every event;
        not checked with ``vocabulary``.
    lock_stale_s
        A lock on the output older than this is stale (``output.lock_stale_s``).
    in_process_max_events, in_process_bytes_per_event
        ``data.in_process_max_events`` and ``data.in_process_bytes_per_event``:
        the sizes below which prepare runs in the driver's process
        (``sparkmaxent.plan.Limits``); 0 events: on Spark.
    binary
        Binary predicates (``data.binary``); None: as the ``vocabulary`` was
        prepared, else False.
    plan
        The run's ``plan.ExecutionPlan``, if any: told whether the prepare
        ran in-process or on Spark.
    """

    cutoff: int = 0
    merge_duplicates: bool = True
    vocabulary: str | None = None
    partitions: int | None = None
    quarantine: bool = False
    overwrite: bool = False
    require_labels: bool = True
    lock_stale_s: float = 0.0
    in_process_max_events: int = 0
    binary: bool | None = None
    in_process_bytes_per_event: int = Limits.bytes_per_event
    plan: ExecutionPlan | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.cutoff < 0:
            raise InputError(f"expected a count cutoff >= 0, got {self.cutoff}")
        if self.partitions is not None and self.partitions < 1:
            raise InputError(f"expected partitions >= 1, got {self.partitions}")

    @classmethod
    def from_config(
        cls, data: DataConfig, output: OutputConfig | None = None, **given
    ) -> PrepareOptions:
        """The options the [data] (and [output]) sections give, ``given``
        keywords (e.g. ``vocabulary``, ``merge_duplicates``) over them."""
        base = cls(
            cutoff=data.prepare_cutoff,
            partitions=data.partitions or None,
            lock_stale_s=output.lock_stale_s if output is not None else 0.0,
            in_process_max_events=data.in_process_max_events,
            binary=data.binary or None,
            in_process_bytes_per_event=data.in_process_bytes_per_event,
        )
        return dataclasses.replace(base, **given)

    @property
    def limits(self) -> Limits:
        """The in-process rules of ``sparkmaxent.plan`` for these sizes."""
        return Limits(self.in_process_max_events, self.in_process_bytes_per_event)

    def replace(self, **changes) -> PrepareOptions:
        """A copy with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class TableColumns:
    """Which columns of a table hold what: ``group`` set means candidate
    sets (one row per candidate), else multiclass events (one per row);
    ``label`` "": none (data to predict); ``key``: a column predictions
    carry to join back to the rows."""

    label: str = "label"
    features: str = "features"
    values: str | None = None
    weight: str | None = None
    group: str | None = None
    correct: str = "correct"
    key: str | None = None


@dataclass(frozen=True)
class ScoringOptions:
    """How ``predict`` and ``evaluate`` read the data they score (checked
    when built): the keywords every layer from the command line down to
    ``api.prepared_for_model`` passed one by one, as one object.

    options
        Reader options of text or table input (``data.options``, ``--option``).
    columns
        A table's columns (``TableColumns``; ``key`` gives the
        predictions a column to join back on); None: the defaults.
    max_unknown, allow_unknown
        Refuse input whose share of feature occurrences unknown to the model
        is above ``max_unknown`` (a wrong format or vocabulary), or only warn
        with ``allow_unknown`` (``api.check_unknown``).
    overwrite
        ``predict``: replace an existing output (once the new one is complete).
    in_process_max_events, in_process_bytes_per_event
        ``data.in_process_max_events`` and ``data.in_process_bytes_per_event``:
        input below these sizes is prepared (and by ``predict`` scored) in
        the driver's process (``sparkmaxent.plan.Limits``); 0 events: on Spark.
    """

    options: dict[str, Any] = field(default_factory=dict)
    columns: TableColumns | None = None
    max_unknown: float = MAX_UNKNOWN
    allow_unknown: bool = False
    overwrite: bool = False
    in_process_max_events: int = 0
    in_process_bytes_per_event: int = Limits.bytes_per_event

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_unknown <= 1.0:  # also refuses NaN
            raise InputError(f"expected max_unknown in [0, 1], got {self.max_unknown}")

    @classmethod
    def from_config(cls, data: DataConfig, **given) -> ScoringOptions:
        """The options the [data] section gives (reader options, in-process
        sizes), ``given`` keywords (e.g. ``columns``, ``overwrite``) over them."""
        base = cls(
            options=dict(data.options),
            in_process_max_events=data.in_process_max_events,
            in_process_bytes_per_event=data.in_process_bytes_per_event,
        )
        return dataclasses.replace(base, **given)

    def replace(self, **changes) -> ScoringOptions:
        """A copy with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes)


__all__ = ["MAX_UNKNOWN", "PrepareOptions", "ScoringOptions", "TableColumns"]
