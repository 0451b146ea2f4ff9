"""The method-specific entries of a selection round's trace row
(``RoundRecord.detail``): typed records, turned into the row's JSON only
where the report and the checkpoint are written (``to_json``) and read back
from a checkpoint on resume (``from_json``; docs/formats.md, ``rounds``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


def _present(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` less its None entries (optional entries a row leaves out)."""
    return {k: v for k, v in doc.items() if v is not None}


@dataclass(frozen=True)
class GainPick:
    """A feature an ifs/sgc stage selected: its approximate gain (decrease
    of the mean loss) at its fitted weight alpha (Berger et al. 1996)."""

    feature: int
    feature_name: str
    gain: float
    alpha: float

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> GainPick:
        return cls(doc["feature"], doc["feature_name"], doc["gain"], doc["alpha"])


@dataclass(frozen=True)
class IfsStage:
    """An ifs/sgc stage (methods/ifs.py): its best pick (``gain`` is the
    row's score too), the others (``more``), the gain evaluations, passes and
    SGC batches it took, the features it asked for, whether all weights were
    re-estimated, and for a stage of several picks the refit of them
    together: its loss decrease over the gains' sum, passes and seconds."""

    best: GainPick
    gain_evaluations: int
    stage_passes: int
    batches: int
    stage_size: int
    more: tuple[GainPick, ...] = ()
    reestimated: bool = False
    refit_ratio: float | None = None
    refit_passes: int | None = None
    refit_s: float | None = None

    @property
    def picks(self) -> list[GainPick]:
        return [self.best, *self.more]

    def to_json(self) -> dict:
        doc = {
            **self.best.to_json(),
            "gain_evaluations": self.gain_evaluations,
            "stage_passes": self.stage_passes,
            "batches": self.batches,
            "stage_size": self.stage_size,
        }
        if self.more:
            doc["more"] = [p.to_json() for p in self.more]
        doc["reestimated"] = self.reestimated
        refit = {"refit_ratio": self.refit_ratio, "refit_passes": self.refit_passes}
        return {**doc, **_present({**refit, "refit_s": self.refit_s})}

    @classmethod
    def from_json(cls, doc: dict) -> IfsStage:
        return cls(
            GainPick.from_json(doc),
            doc["gain_evaluations"],
            doc["stage_passes"],
            doc["batches"],
            doc["stage_size"],
            tuple(GainPick.from_json(p) for p in doc.get("more", [])),
            doc["reestimated"],
            doc.get("refit_ratio"),
            doc.get("refit_passes"),
            doc.get("refit_s"),
        )


#: Selected features a bayes-factor progress line names (the trace has all).
NOTE_FEATURES = 5


@dataclass(frozen=True)
class BayesPick:
    """A feature a bayes-factor round selected, with the score it was ranked
    by: ``beta`` (log Bayes factor plus log prior odds, Daume III 2004
    Eq. 12-14), or past the rule ``gain`` (its log posterior gain), and its
    weight mu."""

    feature: int
    mu: float
    feature_name: str
    beta: float | None = None
    gain: float | None = None

    @classmethod
    def of(cls, pick: dict, feature_name: str) -> BayesPick:
        """A pick of ``BayesFactor.select`` ({feature, beta or gain, mu})."""
        return cls(pick["feature"], pick["mu"], feature_name, pick.get("beta"), pick.get("gain"))

    @property
    def score(self) -> float:
        """The score it was ranked by."""
        score = self.gain if self.beta is None else self.beta
        assert score is not None, "a pick has a beta or a gain"
        return score

    def to_json(self) -> dict:
        scores = _present({"beta": self.beta, "gain": self.gain})
        return {"feature": self.feature, **scores, "mu": self.mu, "feature_name": self.feature_name}

    @classmethod
    def from_json(cls, doc: dict) -> BayesPick:
        return cls.of(doc, doc["feature_name"])


@dataclass(frozen=True)
class BayesRound:
    """A bayes-factor round (methods/bayes.py): the rule's stop it went on
    past (``rule_stop``, the round that met it), whether it is beyond the
    rule, what its picks were ranked by (``log_bayes_factor``, or past the
    rule ``log_posterior_gain``) and how many it could take; its proposals
    and the events they came from; beta_0, how many proposals beat it, how
    many were rescored; the model prior's inclusion probability and log
    prior odds; the picks; and the OptMAP fit after them
    (mean loss, log-likelihood, solver, evaluations, convergence);
    ``from_round``: the best held-out stage the round went back to, after a
    round that did not improve it (None: it went on from the last round)."""

    beyond_rule: bool
    ranked_by: str
    round_size: int
    proposals: int
    misclassified_events: int
    misclassified_weight: float
    margin_below: float | None
    margin_share: float | None
    proposing_events: int
    beta_0: float
    positive_proposals: int
    rescored: int
    inclusion_probability: float | None
    log_prior_odds: float
    selected: tuple[BayesPick, ...]
    loss: float
    log_likelihood: float
    optmap_solver: str
    optmap_evaluations: int
    optmap_converged: bool
    rule_stop: str | None = None
    from_round: int | None = None

    def note(self) -> str:
        """The round's progress-line note: proposals, how many beat beta_0, the picks."""
        picks, inclusion = self.selected, self.inclusion_probability
        key = "gain" if self.ranked_by == "log_posterior_gain" else "beta"
        shown = ", ".join(
            f"{p.feature_name} {key} {p.score:.4g} mu {p.mu:.4g}" for p in picks[:NOTE_FEATURES]
        )
        more = f" (+{len(picks) - NOTE_FEATURES} more)" if len(picks) > NOTE_FEATURES else ""
        prior = "" if inclusion is None else f", inclusion probability {inclusion:.3g}"
        back = "" if self.from_round is None else f"from stage {self.from_round}: "
        return (
            f"{back}{self.proposals} proposals scored ({self.positive_proposals} beat beta_0 "
            f"{self.beta_0:.6g}{prior}), selected {shown}{more}"
        )

    def to_json(self) -> dict:
        doc = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        doc["selected"] = [p.to_json() for p in self.selected]
        rule_stop = doc.pop("rule_stop")
        return {"rule_stop": rule_stop, **doc} if rule_stop is not None else doc

    @classmethod
    def from_json(cls, doc: dict) -> BayesRound:
        optional = ("selected", "rule_stop", "from_round")
        names = [f.name for f in dataclasses.fields(cls) if f.name not in optional]
        picks = tuple(BayesPick.from_json(p) for p in doc["selected"])
        return cls(
            **{k: doc[k] for k in names},
            selected=picks,
            rule_stop=doc.get("rule_stop"),
            from_round=doc.get("from_round"),
        )


@dataclass(frozen=True)
class ConjunctionSearch:
    """What one conjunction search examined (methods/combination.py
    ``search``; Okanohara & Tsujii 2009): the atoms and pairs its bound left,
    its passes, and the conjunctions and (conjunction, label) features whose
    exact gradient it computed."""

    atoms_surviving: int
    pairs_surviving: int
    search_passes: int
    conjunctions_examined: int
    conjunction_features_examined: int

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> ConjunctionSearch:
        return cls(**{f.name: doc[f.name] for f in dataclasses.fields(cls)})


#: CombinationRound.phase: grafting over the atoms, then with conjunctions
ATOMS_PHASE, COMBINATION_PHASE = "atoms", "combination"


@dataclass(frozen=True)
class CombinationRound:
    """A round of grafting with combination features: its phase (atoms
    optimized first, then the conjunction search each round), the search of
    a combination round, and the conjunctions it formed (None: none grown)."""

    phase: str
    search: ConjunctionSearch | None = None
    conjunctions_added: int | None = None

    @property
    def conjunctions_examined(self) -> int | None:
        return None if self.search is None else self.search.conjunctions_examined

    def to_json(self) -> dict:
        doc: dict = {"phase": self.phase}
        if self.search is not None:
            doc.update(self.search.to_json())
        return {**doc, **_present({"conjunctions_added": self.conjunctions_added})}

    @classmethod
    def from_json(cls, doc: dict) -> CombinationRound:
        search = ConjunctionSearch.from_json(doc) if "search_passes" in doc else None
        return cls(doc["phase"], search, doc.get("conjunctions_added"))
