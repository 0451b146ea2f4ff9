"""The typed sections model choice adds to a method's report: the best
stage a stage method kept (``choice``) and the refit of a chosen path point
or stage (``refit``). The methods build them; ``report.py`` turns them into
JSON where the report is written (their ``to_json``, the keys
docs/methods/model-choice.md documents): a flat section is its fields in
order (``FlatJson``); only those that nest sections, rename a field or
leave unset ones out write their own."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


class FlatJson:
    """A dataclass of JSON values written as its fields, in order."""

    def to_json(self) -> dict:
        return dataclasses.asdict(self)  # type: ignore[call-overload]  # mixed into dataclasses


def shallow_fields(section) -> dict:
    """A dataclass's fields in order, their values as they are (the caller
    writes the nested sections among them)."""
    return {f.name: getattr(section, f.name) for f in dataclasses.fields(section)}


@dataclass
class StageChoice(FlatJson):
    """The held-out stage a stage method (ifs, sgc, bayes-factor) kept
    (``choice.heldout.best_stage``): the criterion, the stage and its
    held-out score, and the stages run."""

    criterion: str
    chosen_round: int
    heldout_score: float
    stages_run: int


@dataclass
class ChosenFit:
    """The chosen point's (or stage's) own fit, on the training events only,
    beside its refit: objective, features and the held-out entries of its
    path point or trace row (``heldout_accuracy``, ``heldout_loss``, ...);
    a stage's number; the Bayes factor's loss and training accuracy."""

    objective: float | None
    features: int
    heldout: dict = field(default_factory=dict)
    stage: int | None = None
    loss: float | None = None
    train_accuracy: float | None = None

    def to_json(self) -> dict:
        doc: dict = {} if self.stage is None else {"stage": self.stage}
        doc.update(objective=self.objective, features=self.features, **self.heldout)
        if self.loss is not None:
            doc["loss"] = self.loss
        if self.train_accuracy is not None:
            doc["train_accuracy"] = self.train_accuracy
        return doc


@dataclass
class PathRefit:
    """A path's chosen penalty refitted on the training and held-out events
    (``choice.points.refit``): the penalty (``parameter``: l1 or l2, its
    value ``gamma``), the refit's objective, features, passes, convergence
    and certificate verdict (grafting), beside the chosen point's fit;
    which of the two the run ``kept`` ("refit" or "chosen fit") and why
    (``choice.points.kept_fit``)."""

    parameter: str
    gamma: float
    objective: float | None
    features: int
    passes: int
    converged: bool
    chosen_fit: ChosenFit
    kkt_passed: bool | None = None
    kept: str = "refit"
    why: str = ""

    def to_json(self) -> dict:
        doc = {
            self.parameter: self.gamma,
            "objective": self.objective,
            "features": self.features,
            "passes": self.passes,
            "converged": self.converged,
            "chosen_fit": self.chosen_fit.to_json(),
        }
        if self.kkt_passed is not None:
            doc["kkt_passed"] = self.kkt_passed
        return {**doc, "kept": self.kept, "why": self.why}


@dataclass
class PriorPoint(FlatJson):
    """One prior strength tried for the chosen stage's features
    (``choice.stage_prior.choose_stage_prior``): its ``scale`` (times the
    method's prior variance), gamma2 on the training events, the fit's
    passes and convergence, its held-out entries (``heldout_score``,
    ``heldout_se``, ...), its gap below the best in standard errors of the
    paired difference, and whether it was chosen."""

    scale: float
    l2: float
    passes: int
    converged: bool
    heldout: dict
    below_best_se: float | None = None
    chosen: bool = False


@dataclass
class LabelsChoice(FlatJson):
    """The features a stage method's refit fits, chosen on held-out data
    (``train.choice.refit_all_labels = auto``;
    ``choice.refit_labels.refit_features``): the chosen stage's own
    (``chosen``) or every label's of its predicates (``all labels``), each
    fitted on the training events (``l2``: the kept set's gamma2 there);
    which was ``kept``, their features and held-out entries, the held-out
    gain of all labels over the chosen stage's features, the standard error
    of that paired difference, and the passes of the fits and their
    scoring. With a grid of prior scales (``train.choice
    .stage_prior_scales``) each set is fitted at its own best scale of the
    grid, ``chosen_scale`` and ``all_scale``, and ``all_points`` are the
    all-labels set's walk of the grid (the chosen stage's is the refit's
    ``prior_points``); without, both are 1 and ``all_points`` is []."""

    kept: str
    l2: float
    chosen_features: int
    all_features: int
    chosen_heldout: dict
    all_heldout: dict
    gain: float
    se: float
    passes: int
    chosen_scale: float = 1.0
    all_scale: float = 1.0
    all_points: list[PriorPoint] = field(default_factory=list)


@dataclass
class StageRefit:
    """The best stage's features refitted on the training and held-out
    events (``choice.heldout.refit_stage``) under the method's own prior,
    its variance times ``prior_scale`` (chosen on held-out data among
    ``prior_points``, or among ``labels.all_points`` when every label's
    features were kept; 1 and [] when no choice was made): gamma2, the
    refit's objective and loss, the objective at the chosen stage's
    weights under that gamma2, features, passes, convergence and
    iterations (of at most ``max_iter``), beside the chosen stage's fit;
    ``labels``: the held-out choice of the features refitted (None: no
    choice was made, ``train.choice.refit_all_labels`` true or false)."""

    l2: float
    objective: float
    loss: float
    start_objective: float
    features: int
    passes: int
    converged: bool
    iterations: int
    max_iter: int
    chosen_fit: ChosenFit
    prior_scale: float = 1.0
    prior_points: list[PriorPoint] = field(default_factory=list)
    labels: LabelsChoice | None = None

    def to_json(self) -> dict:
        doc = {
            **shallow_fields(self),
            "chosen_fit": self.chosen_fit.to_json(),
            "prior_points": [p.to_json() for p in self.prior_points],
        }
        if self.labels is None:
            del doc["labels"]
        else:
            doc["labels"] = self.labels.to_json()
        return doc


@dataclass
class RefitSkipped(FlatJson):
    """No refit, and why (a block-wise test, a spent time budget)."""

    skipped: str


#: what a report's ``refit`` holds
Refit = PathRefit | StageRefit | RefitSkipped


@dataclass
class PathPoint:
    """One point of a penalty path (``choice.path.scored_point``): its
    penalty (``parameter`` l1 or l2, value ``gamma``), the fit's features,
    objective, passes, convergence, pass budget (None: none), whether the
    budget cut it, the passes at which a budgeted fit went on (None: it did
    not), its held-out entries (``heldout_score``, ``heldout_se``,
    ``heldout_accuracy``, ``heldout_loss``, ...), the certificate's verdict
    (grafting), its gap below the best in standard errors of the paired
    difference, and whether it was chosen."""

    parameter: str
    gamma: float
    features: int
    objective: float | None
    passes: int
    converged: bool
    budget: int | None
    cut: bool
    continued_after: int | None
    heldout: dict
    kkt_passed: bool | None = None
    below_best_se: float | None = None
    chosen: bool | None = None

    @property
    def score(self) -> float:
        """The held-out score the choice maximizes (``train.choice.criterion``)."""
        return self.heldout["heldout_score"]

    @property
    def se(self) -> float:
        return self.heldout["heldout_se"]

    def to_json(self) -> dict:
        doc = {
            self.parameter: self.gamma,
            "features": self.features,
            "objective": self.objective,
            "passes": self.passes,
            "converged": self.converged,
            "budget": self.budget,
            "cut": self.cut,
            "continued_after": self.continued_after,
            **self.heldout,
        }
        if self.kkt_passed is not None:
            doc["kkt_passed"] = self.kkt_passed
        for key in ("below_best_se", "chosen"):
            if getattr(self, key) is not None:
                doc[key] = getattr(self, key)
        return doc


@dataclass
class PathVariant:
    """One elastic-net variant's path (``choice.mixes.elastic_paths``): what
    it is (``{"l2_mix": m}`` or ``{"elastic_l2": gamma2}``), its points, and
    its chosen point (its ``chosen`` and ``below_best_se`` among the variants),
    the passes of its whole path, the pass budget it ran on (None: none;
    ``choice.mixes.extension_cap``), the seconds of its time share
    (None: no time budget; ``choice.mixes.mix_share``), why its path
    ended (``PathSection.stop``) and its held-out accuracy gain over the
    log-likelihood's choice with that paired difference's standard error
    (``choice.mixes.denser_by_accuracy``; None: that variant, or not
    comparable)."""

    what: dict
    points: int
    point: PathPoint
    path_passes: int = 0
    passes_cap: int | None = None
    seconds_share: float | None = None
    stop: str | None = None
    accuracy_gain: tuple[float, float] | None = None

    def to_json(self) -> dict:
        doc = {**self.what, "points": self.points, **self.point.to_json()}
        doc = {**doc, "path_passes": self.path_passes, "passes_cap": self.passes_cap}
        doc = {**doc, "seconds_share": self.seconds_share}
        if self.accuracy_gain is not None:
            gain, se = self.accuracy_gain
            doc = {**doc, "accuracy_gain": float(gain), "accuracy_gain_se": float(se)}
        return doc if self.stop is None else {**doc, "stop": self.stop}


@dataclass
class VersusAtoms:
    """A combination-features path against the atoms' own path on the same
    held-out events (``choice.path.versus_atoms``): which was ``kept``
    (combination or atoms), the combination's held-out gain over the atoms'
    chosen point and the standard error of that paired difference, both
    chosen points, and the points of the path not kept."""

    kept: str
    gain: float
    difference_se: float
    combination_point: PathPoint
    atoms_point: PathPoint
    other_points: list[PathPoint]

    def to_json(self) -> dict:
        return {
            **shallow_fields(self),
            "combination_point": self.combination_point.to_json(),
            "atoms_point": self.atoms_point.to_json(),
            "other_points": [p.to_json() for p in self.other_points],
        }


@dataclass
class PathSection:
    """A penalty path (``choice.path``): its parameter (l1, l2), the
    criterion and rule of the choice, the grid fitted, the chosen point's
    index, every point, the plot (None: none); for an elastic-net choice,
    the chosen variant (``what``), one row per variant run, and the
    variants not run; why the path ended (``stop``: ``choice.path.path_stop``)."""

    parameter: str
    criterion: str
    one_se: bool
    grid: list[float]
    chosen: int
    points: list[PathPoint]
    plot: str | None
    what: dict = field(default_factory=dict)
    elastic: list[PathVariant] | None = None
    elastic_not_run: list[dict] | None = None
    versus_atoms: VersusAtoms | None = None
    stop: str | None = None

    @property
    def chosen_point(self) -> PathPoint:
        return self.points[self.chosen]

    def to_json(self) -> dict:
        doc = {
            "parameter": self.parameter,
            "criterion": self.criterion,
            "one_se": self.one_se,
            "grid": self.grid,
            "chosen": self.chosen,
            "points": [p.to_json() for p in self.points],
            "plot": self.plot,
            **self.what,
        }
        if self.elastic is not None:
            doc["elastic"] = [v.to_json() for v in self.elastic]
        if self.elastic_not_run is not None:
            doc["elastic_not_run"] = self.elastic_not_run
        if self.versus_atoms is not None:
            doc["versus_atoms"] = self.versus_atoms.to_json()
        if self.stop is not None:
            doc["stop"] = self.stop
        return doc


__all__ = [
    "ChosenFit",
    "FlatJson",
    "PathPoint",
    "PathRefit",
    "PathSection",
    "PathVariant",
    "PriorPoint",
    "Refit",
    "RefitSkipped",
    "StageChoice",
    "StageRefit",
    "VersusAtoms",
]
