"""What every training method shares: its inputs (TrainingContext), its
result (FitResult), and the state and outcome of a selection round."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, Self, TypeVar

from ..backends import Backend
from ..config import TrainConfig
from ..kernels import Scaling, Space, Weights
from ..kernels.conjunctions import Conjunctions, Expanding
from ..kernels.predict import EvalStats, EvalTask
from ..problem.kkt import Certificate
from .deadline import Deadline
from .stops import Stop


@dataclass
class TrainingContext:
    """Inputs of a training run (unchanged while it runs).

    ``output_dir``, ``resume`` and ``on_round`` concern selection methods:
    where their round checkpoints and plots go, whether to continue from the
    checkpoint there, and a hook called with the loop state after every
    round's checkpoint (tests use it to interrupt a run). ``start`` is a
    warm start for the methods that take one (grafting): the solution at a
    stronger penalty on the same data, e.g. the previous point of a
    descending gamma1 grid (ml/classifier.py fitMultiple).
    ``start_conjunctions``: the conjunctions ``start`` is over (atoms
    followed by them), when it is a combination-features solution.
    ``deadline``: the run's time budget (selection/deadline.py), made by
    ``train()`` at its start; a context made without one starts its own
    (``train.selection.max_seconds`` from now).
    """

    backend: Backend
    config: TrainConfig
    scaling: Scaling | None = None
    heldout: Backend | None = None
    output_dir: str | None = None
    resume: bool = False
    on_round: Callable | None = None
    start: Weights | None = None
    start_conjunctions: Conjunctions | None = None
    deadline: Deadline = field(default=None)  # type: ignore[assignment]  # __post_init__

    def __post_init__(self) -> None:
        if self.deadline is None:
            self.deadline = Deadline(self.config.selection.max_seconds)


@dataclass
class FitResult:
    """What a method returns: the weights, its report section (JSON-able
    entries, and the typed model-choice sections of choice/sections.py,
    which report.py writes as JSON), and why a selection run stopped (None
    for the smooth fits; train() writes it into the report as ``stopped``
    and ``stop_reason``, and adds the standardization the weights are
    relative to). A method that forms
    conjunctions returns them: the weights are then over the atoms followed
    by the conjunctions (kernels/conjunctions.py)."""

    weights: Weights
    report: dict = field(default_factory=dict)
    scaling: Scaling | None = None
    conjunctions: Conjunctions | None = None
    stop: Stop | None = None

    @property
    def certificate(self) -> Certificate | None:
        """The KKT certificate of the grafting family (``report["kkt"]``), else None."""
        return self.report.get("kkt")

    @property
    def objective(self) -> float | None:
        """The objective the method minimized, at the weights (``report["objective"]``)."""
        value = self.report.get("objective")
        return None if value is None else float(value)

    def space(self, atoms: Space) -> Space:
        """The weights' space, given the data's (atoms only)."""
        if self.conjunctions is None:
            return atoms
        return Space(atoms.shape, self.conjunctions.n_predicates, atoms.n_labels, atoms.bias)


Method = Callable[[TrainingContext], FitResult]


def evaluate_backend(
    backend: Backend,
    weights: Weights,
    scaling: Scaling | None,
    conjunctions: Conjunctions | None = None,
) -> EvalStats:
    """Accuracy, loss and confusion of ``weights`` on a backend's events
    (with ``conjunctions``: formed in every event first)."""
    if conjunctions is None or not len(conjunctions):
        return backend.run(EvalTask(backend.space, weights, scaling))
    space = FitResult(weights, conjunctions=conjunctions).space(backend.space)
    return backend.run(Expanding(EvalTask(space, weights, scaling), conjunctions))


@dataclass(frozen=True)
class RoundSolve:
    """How a grafting-family round's solver ran (solvers/): which solver,
    its iterations and objective evaluations, the projected-gradient
    tolerance it was given and the violation it ended at, and whether it
    converged (None: stopped by a path point's pass budget or by the run's
    time budget between its iterations, no failure)."""

    solver: str
    iterations: int
    evaluations: int
    tol: float
    violation: float
    converged: bool | None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


#: the trace entries of a RoundSolve
SOLVE_KEYS = tuple(f.name for f in dataclasses.fields(RoundSolve))


D = TypeVar("D")


class RoundDetail(Protocol):
    """A method's own entries of a trace row, typed (methods/round_details.py)
    and turned into the row's JSON only where it is written."""

    def to_json(self) -> dict: ...

    @classmethod
    def from_json(cls, doc: dict) -> Self:
        """The entries read back from a whole row's JSON (a checkpoint's)."""
        ...


@dataclass
class RoundRecord:
    """One row of a selection run's trace (``LoopState.trace``), built by
    the round loop (selection/loop.py) and written as JSON only in the
    report's ``rounds`` and the checkpoint (``to_json``; docs/formats.md).

    Attributes
    ----------
    round, active, added, removed : int
        The round (1-based), the active features after it, and those it
        added and pruned.
    objective : float
        The method's objective after the round.
    score_name : str
        The JSON key of ``score`` (grafting ``max_gradient``, ifs ``gain``,
        bayes-factor ``beta``).
    score : float
        The largest candidate statistic of the round's test.
    passes : int
        Training passes of the run after the round.
    elapsed_s : float
        Wall time of the run after the round.
    round_passes, round_s : int, float
        The training passes and wall time from the row before (this
        session's first round: from the loop's start, after the method's
        setup) to this one, which the time budget guesses the next round
        from (selection/loop.py ``limit_reached``); 0 in a row read back
        from a checkpoint (an earlier session's), as they are not written
        (``passes`` and ``elapsed_s`` are).
    heldout : dict
        With held-out data, its scores after the round
        (``choice.heldout.criterion_score``: ``heldout_accuracy``,
        ``heldout_loss``, ``heldout_score``, ``heldout_se``); {} without.
    below_best_se : float or None
        A stage run's held-out stop rule: standard errors below the best
        stage (None: no rule).
    solve : RoundSolve or None
        The round solver of the grafting family (None for other methods).
    detail : RoundDetail or None
        The method's own entries (methods/round_details.py): ifs its picks
        and gains, bayes-factor its proposals, combination its phase and
        conjunction search; None for plain grafting.
    chosen : bool or None
        A stage run's kept stage (``choice.heldout.best_stage``); None
        when no stage was chosen.
    """

    round: int
    active: int
    added: int
    removed: int
    objective: float
    score_name: str
    score: float
    passes: int = 0
    elapsed_s: float = 0.0
    round_passes: int = 0
    round_s: float = 0.0
    heldout: dict = field(default_factory=dict)
    below_best_se: float | None = None
    solve: RoundSolve | None = None
    detail: RoundDetail | None = None
    chosen: bool | None = None

    def detail_as(self, kind: type[D]) -> D:
        """The method's own entries, which must be a ``kind``."""
        if not isinstance(self.detail, kind):
            raise TypeError(f"round {self.round}: expected {kind.__name__}, got {self.detail!r}")
        return self.detail

    @property
    def heldout_score(self) -> float:
        return self.heldout["heldout_score"]

    @property
    def heldout_se(self) -> float:
        return self.heldout["heldout_se"]

    @property
    def heldout_accuracy(self) -> float | None:
        return self.heldout.get("heldout_accuracy")

    def to_json(self) -> dict:
        """The row's JSON object (docs/formats.md, ``rounds``)."""
        doc: dict = {
            "round": self.round,
            "active": self.active,
            "added": self.added,
            "removed": self.removed,
            "objective": self.objective,
            self.score_name: self.score,
            **self.heldout,
        }
        if self.below_best_se is not None:
            doc["below_best_se"] = self.below_best_se
        doc.update(passes=self.passes, elapsed_s=self.elapsed_s)
        if self.solve is not None:
            doc.update(self.solve.to_json())
        if self.detail is not None:
            doc.update(self.detail.to_json())
        if self.chosen is not None:
            doc["chosen"] = self.chosen
        return doc

    @classmethod
    def from_json(
        cls, doc: dict, score_name: str, detail: type[RoundDetail] | None = None
    ) -> RoundRecord:
        """A row read back from ``to_json`` (a checkpoint's trace);
        ``detail``: the type of the method's entries (None: it has none)."""
        fixed = {k: doc[k] for k in ("round", "active", "added", "removed", "objective")}
        solve = RoundSolve(**{k: doc[k] for k in SOLVE_KEYS}) if "solver" in doc else None
        return cls(
            **fixed,
            score_name=score_name,
            score=doc.get(score_name, math.nan),
            passes=doc["passes"],
            elapsed_s=doc["elapsed_s"],
            heldout={k: v for k, v in doc.items() if k.startswith("heldout_")},
            below_best_se=doc.get("below_best_se"),
            solve=solve,
            detail=None if detail is None else detail.from_json(doc),
            chosen=doc.get("chosen"),
        )


@dataclass(frozen=True)
class BestStage:
    """The best held-out stage so far of a run keeping it
    (``choice.heldout.keep_if_best``): its round and held-out score (its
    weights are ``LoopState.arrays``' ``choice_*``)."""

    round: int
    score: float


@dataclass
class LoopState:
    """The changing state of a selection run: what a checkpoint holds.

    Attributes
    ----------
    round : int
        Rounds completed.
    weights : Weights
        Active features (ids), their weights, and the bias.
    passes : int
        Training passes of the selection loop so far (all sessions).
    elapsed_s : float
        Wall time of the run so far, from ``train()``'s start (all sessions).
    trace : list of RoundRecord
        One row per completed round.
    done : bool
        The method stopped by itself (for example: no candidate passed the test).
    stop : Stop or None
        Why the run stopped (by itself or at a cap); None while it runs.
    best : BestStage or None
        The best held-out stage so far (a run keeping it; a checkpoint
        keeps it as ``info["choice_round"]`` and ``info["choice_score"]``).
    certificate : Certificate or None
        The KKT certificate the method stopped with (the grafting family;
        a checkpoint keeps it as ``info["kkt"]``).
    arrays : dict of str to ndarray
        Method-specific arrays kept between rounds (for example SGC's stale
        gains); saved in the round's .npz.
    earlier_s : float
        Of ``elapsed_s``, the wall time of earlier sessions (a resumed run;
        not checkpointed: it is the checkpoint's ``elapsed_s``).
    """

    round: int
    weights: Weights
    passes: int = 0
    elapsed_s: float = 0.0
    trace: list[RoundRecord] = field(default_factory=list)
    done: bool = False
    best: BestStage | None = None
    arrays: dict = field(default_factory=dict)
    stop: Stop | None = None
    earlier_s: float = 0.0
    certificate: Certificate | None = None


@dataclass
class RoundOutcome:
    """What one round of a method did.

    Attributes
    ----------
    stop : Stop or None
        Why the method stops (nothing changed, the loop ends); None: it
        goes on.
    weights : Weights
        Weights after the round (unchanged when ``stop``).
    added, removed : int
        Features that entered the active set, and that were pruned from it.
    objective : float
        The method's objective at ``weights``.
    score : float
        The largest candidate statistic of the test that opened the round
        (grafting: max |dC/dw_j| over inactive features).
    detail : RoundDetail or None
        The method's own entries of the round's trace row.
    solve : RoundSolve or None
        The round solver's run (the grafting family).
    certificate : Certificate or None
        With a stop: the KKT certificate the method stops with.
    arrays : dict or None
        New ``LoopState.arrays`` (None: unchanged).
    note : str
        Added to the round's progress line (e.g. the feature selected); for
        a stop, what to log instead of ``stop.message``.
    """

    stop: Stop | None
    weights: Weights
    added: int = 0
    removed: int = 0
    objective: float = float("nan")
    score: float = float("nan")
    detail: RoundDetail | None = None
    arrays: dict | None = None
    note: str = ""
    certificate: Certificate | None = None
    solve: RoundSolve | None = None
