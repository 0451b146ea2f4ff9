"""The run report: what ``train()`` says about a run, typed (``RunReport``),
and turned into JSON only where it is written (``train_report.json``, the
pipeline's ``report.json``, a model's metadata; docs/formats.md).

A report has two parts. The run's own fields, the same for every method
(method, counts, passes, wall time, why it stopped, held-out figures, the
execution plan, what did not converge), are typed fields set by
``train()``. The method's section (``FitResult.report``: its rounds, KKT
certificate, path, refit, folds...) is documented per method in
docs/methods/; its model-choice entries (``path``, ``refit``, ``choice``)
are typed (choice/sections.py) and written as JSON by ``section_json``
here; the accessors below are the one place its shared entries are read.

Read as a mapping, a RunReport is its JSON form, so scripts and tests that
read ``train_report.json`` keys read a returned report alike; code in the
package reads the typed fields.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .choice.sections import (
    PathRefit,
    PathSection,
    Refit,
    RefitSkipped,
    StageChoice,
    StageRefit,
)
from .problem.kkt import Certificate
from .selection.base import RoundRecord
from .selection.stops import Stop, StopReason

if TYPE_CHECKING:
    from .plan import ExecutionPlan

#: the method-section keys that are not kept with a saved model (per-round rows)
ROUND_KEYS = ("trace", "rounds")


@dataclass(frozen=True)
class HeldoutFigures:
    """Accuracy and mean loss of the model on the held-out events (with a
    refit after a path: of the chosen point's fit, which had not seen them)."""

    accuracy: float
    loss: float


class JsonView(Mapping[str, Any]):
    """A typed report read as a mapping: its JSON form (``to_json``), the
    keys docs/formats.md documents."""

    def to_json(self) -> dict:
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        return self.to_json()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())


@dataclass
class RunReport(JsonView):
    """One training run (``train()``).

    Attributes
    ----------
    method : str
        ``train.method``.
    fit : dict
        The method's own section (``FitResult.report``), JSON-able.
    nonzero_weights, candidate_features : int
        Non-zero weights of the model; candidate features of the data.
    passes : int
        Passes over the training data, of the whole run.
    wall_s : float
        Wall time of ``train()``.
    stop : Stop or None
        Why a selection run stopped (None for the smooth fits).
    heldout : HeldoutFigures or None
        The model's held-out figures (None without held-out data).
    unconverged : list of str
        Why the run stopped without meeting its own criterion ([]: it met
        it; ``train.unconverged``); the CLI exits 4 on any.
    warnings : list of str
        What the run warns of (``train.budget_warnings``).
    automatic_folds : dict
        The entries of an automatic k-fold choice (``folds.automatic``,
        ``folds.events``), {} otherwise.
    plan : ExecutionPlan or None
        Where each stage of the run ran (set by ``api.train_model``).
    """

    method: str
    fit: dict
    nonzero_weights: int
    candidate_features: int
    passes: int
    wall_s: float
    stop: Stop | None = None
    heldout: HeldoutFigures | None = None
    unconverged: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    automatic_folds: dict = field(default_factory=dict)
    plan: ExecutionPlan | None = None

    # ---- the method section's shared entries (docs/formats.md) ----

    @property
    def objective(self) -> float | None:
        """The objective C(w) the method minimized, at the model's weights."""
        value = self.fit.get("objective")
        return None if value is None else float(value)

    @property
    def certificate(self) -> Certificate | None:
        """The KKT certificate of the grafting family (``problem/kkt.py``)."""
        return self.fit.get("kkt")

    @property
    def converged(self) -> bool | None:
        """Whether the smooth fits' optimizer converged (None: not reported)."""
        return self.fit.get("converged")

    @property
    def optimizer_message(self) -> str:
        return str(self.fit.get("optimizer_message", ""))

    @property
    def rounds(self) -> list[RoundRecord]:
        """The per-round trace of a selection run ([] for the smooth fits)."""
        return list(self.fit.get("rounds") or [])

    @property
    def unconverged_rounds(self) -> list[int]:
        """The rounds whose solver did not converge."""
        return [r.round for r in self.rounds if r.solve is not None and r.solve.converged is False]

    @property
    def stage_choice(self) -> StageChoice | None:
        """The held-out stage a stage method kept (``choice``), if it did."""
        return self.fit.get("choice")

    @property
    def path(self) -> PathSection | None:
        """The penalty path the model was chosen on (``path``), if any."""
        return self.fit.get("path")

    @property
    def refit(self) -> Refit | None:
        """The refit of the chosen path point or stage (``refit``), if any."""
        return self.fit.get("refit")

    @property
    def refit_heldout(self) -> HeldoutFigures | None:
        """The chosen path point's held-out figures when it was refitted on
        the held-out events too (the refit's model saw them)."""
        refit = self.refit
        if not isinstance(refit, PathRefit | StageRefit):
            return None
        held = refit.chosen_fit.heldout
        return HeldoutFigures(held["heldout_accuracy"], held["heldout_loss"])

    @property
    def stopped_at_cap(self) -> bool:
        """Whether a run-control cap (``max_rounds``, ``max_seconds``) ended it."""
        return self.stop is not None and self.stop.reason in RUN_CAPS

    # ---- JSON, at the edge ----

    def to_json(self, rounds: bool = True) -> dict:
        """The report's JSON object (docs/formats.md); without the per-round
        rows (``ROUND_KEYS``) when ``rounds`` is False (a model's metadata)."""
        doc = {k: section_json(v) for k, v in self.fit.items() if rounds or k not in ROUND_KEYS}
        if self.automatic_folds:
            doc["folds"] = {**doc.get("folds", {}), **self.automatic_folds}
        if self.stop is not None:
            doc.update(stopped=self.stop.message, stop_reason=self.stop.reason.value)
        doc.update(
            method=self.method,
            nonzero_weights=self.nonzero_weights,
            candidate_features=self.candidate_features,
            passes=self.passes,
            wall_s=self.wall_s,
        )
        if self.heldout is not None:
            doc.update(heldout_accuracy=self.heldout.accuracy, heldout_loss=self.heldout.loss)
        doc.update(unconverged=list(self.unconverged), warnings=list(self.warnings))
        if self.plan is not None:
            doc["plan"] = self.plan.to_dict()
        return doc


def section_json(value: Any) -> Any:
    """An entry of a method's section as JSON: a typed section
    (``choice/sections.py``, the certificate) by its ``to_json``, the rest
    as it is."""
    if isinstance(value, list):  # a trace: its rows (RoundRecord) by theirs
        return [section_json(row) for row in value]
    return value.to_json() if isinstance(value, TYPED_SECTIONS) else value


#: the typed sections a method's report holds
TYPED_SECTIONS = (
    PathSection,
    StageChoice,
    PathRefit,
    StageRefit,
    RefitSkipped,
    Certificate,
    RoundRecord,
)


@dataclass
class PipelineReport(JsonView):
    """The ``pipeline`` command's run (``<output>/report.json``): the
    resolved configuration, the execution plan, the datasets, the training
    run, the test evaluation (None without test data), each phase's seconds
    and the wall time. Read as a mapping, it is its JSON form."""

    config: dict
    plan: ExecutionPlan
    datasets: dict
    train: RunReport
    test: dict | None
    phases_s: dict
    wall_s: float

    def to_json(self) -> dict:
        doc = {
            "config": self.config,
            "plan": self.plan.to_dict(),
            "datasets": self.datasets,
            "train": self.train.to_json(),
        }
        if self.test is not None:
            doc["test"] = self.test
        return {**doc, "phases_s": self.phases_s, "wall_s": self.wall_s}


#: Run-control caps (``train.selection``): a run they end is the run asked for.
RUN_CAPS = (StopReason.MAX_ROUNDS, StopReason.MAX_SECONDS)


__all__ = ["ROUND_KEYS", "RUN_CAPS", "HeldoutFigures", "PipelineReport", "RunReport"]
