"""Why a run stopped: one enum of every reason a method produces
(``StopReason``) and the ``Stop`` that carries a reason with its detail
(the cap's value, the counts) as separate fields.

Code decides on ``stop.reason`` (``stop.reason is StopReason.MAX_ROUNDS``),
never on text: ``Stop.message`` is for reports and logs only, and the
report's JSON (``stopped``, ``stop_reason``) is made from a Stop where the
report is written (``train.py``). A structure test keeps reason strings
from being compared anywhere else.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum


class StopReason(Enum):
    """Every reason a training method stops; the value is the report's
    ``stop_reason``."""

    # grafting family (methods/grafting.py, combination.py)
    NO_CANDIDATE_PASSES = "no_candidate_passes"
    NO_PROGRESS = "no_progress"
    BUDGET_SPENT = "budget_spent"
    # run-control caps of every selection method (selection/loop.py)
    MAX_ROUNDS = "max_rounds"
    MAX_SECONDS = "max_seconds"
    MAX_FEATURES = "max_features"
    # the held-out stop rule of stage runs (choice/stop_rule.py)
    HELDOUT_RULE = "heldout_rule"
    HELDOUT_MAX_BEHIND = "heldout_max_behind"
    # IFS / SGC (methods/ifs.py)
    NO_CANDIDATE_LEFT = "no_candidate_left"
    GAIN_THRESHOLD = "gain_threshold"
    # Bayes factor (methods/bayes.py)
    NO_MISCLASSIFIED = "no_misclassified"
    NO_PROPOSAL = "no_proposal"
    BAYES_RULE = "bayes_rule"
    # lattice (methods/lattice/select.py, methods/lattice/generalize.py)
    MAX_STEPS = "max_steps"
    NO_TRAINING_GAIN = "no_training_gain"
    HELDOUT_PATIENCE = "heldout_patience"
    NO_NODE_LEFT = "no_node_left"


def _bayes_rule(scored: int, inclusion_zero: bool) -> str:
    prior = "; empirical-Bayes inclusion probability 0" if inclusion_zero else ""
    return f"no proposal beats beta_0 ({scored} scored{prior})"


def _margin(events: int | None) -> str:
    """The Bayes factor's proposals from the lowest-margin events, when it tried them."""
    return "" if events is None else f" nor from the lowest-margin events ({events})"


#: how each reason reads, from its detail fields
_MESSAGES: dict[StopReason, Callable[..., str]] = {
    StopReason.NO_CANDIDATE_PASSES: lambda: "no candidate passes the test",
    StopReason.NO_PROGRESS: lambda added: (
        f"the round's {added} new weights all stayed at 0 (solver tolerance too loose)"
    ),
    StopReason.BUDGET_SPENT: lambda: "pass budget spent",
    StopReason.MAX_ROUNDS: lambda limit: f"max_rounds = {limit}",
    StopReason.MAX_SECONDS: lambda limit: f"max_seconds = {limit:g}",
    StopReason.MAX_FEATURES: lambda limit: f"max_features = {limit}",
    StopReason.HELDOUT_RULE: lambda behind, gap, patience, margin: (
        f"held-out stop rule: {behind} points without a better held-out score, the last "
        f"{gap:.2f} standard errors of the difference below the best "
        f"(patience {patience}, margin {margin:g})"
    ),
    StopReason.HELDOUT_MAX_BEHIND: lambda behind, max_behind: (
        f"held-out stop rule: {behind} points without a better held-out score (max {max_behind})"
    ),
    StopReason.NO_CANDIDATE_LEFT: lambda: "no candidate left",
    StopReason.GAIN_THRESHOLD: lambda gain, threshold: (
        f"best gain {gain:.4g} <= gain_threshold {threshold:g}"
    ),
    StopReason.NO_MISCLASSIFIED: lambda margin_events=None: (
        "no misclassified training event" + _margin(margin_events)
    ),
    StopReason.NO_PROPOSAL: lambda margin_events=None: (
        "no proposal outside the active set" + _margin(margin_events)
    ),
    StopReason.BAYES_RULE: _bayes_rule,
    StopReason.MAX_STEPS: lambda: "max_steps",
    StopReason.NO_TRAINING_GAIN: lambda: "no candidate raises the training likelihood",
    StopReason.HELDOUT_PATIENCE: lambda patience, unit: (
        f"held-out likelihood not improved for {patience} {unit}"
    ),
    StopReason.NO_NODE_LEFT: lambda: "no constrained node left to remove",
}


#: how each reason's message begins (a regular expression, matched at the
#: text's start): what reads a reason back from a report's ``stopped`` text
_STARTS: dict[StopReason, str] = {
    StopReason.NO_CANDIDATE_PASSES: r"no candidate passes the test$",
    StopReason.NO_PROGRESS: r"the round's \d+ new weights all stayed at 0",
    StopReason.BUDGET_SPENT: r"pass budget spent$",
    StopReason.MAX_ROUNDS: r"max_rounds = ",
    StopReason.MAX_SECONDS: r"max_seconds = ",
    StopReason.MAX_FEATURES: r"max_features = ",
    StopReason.HELDOUT_RULE: r"held-out stop rule: \d+ points without a better held-out score, ",
    StopReason.HELDOUT_MAX_BEHIND: (
        r"held-out stop rule: \d+ points without a better held-out score \(max "
    ),
    StopReason.NO_CANDIDATE_LEFT: r"no candidate left$",
    StopReason.GAIN_THRESHOLD: r"best gain \S+ <= gain_threshold ",
    StopReason.NO_MISCLASSIFIED: r"no misclassified training event",
    StopReason.NO_PROPOSAL: r"no proposal outside the active set",
    StopReason.BAYES_RULE: r"no proposal beats beta_0 \(",
    StopReason.MAX_STEPS: r"max_steps$",
    StopReason.NO_TRAINING_GAIN: r"no candidate raises the training likelihood$",
    StopReason.HELDOUT_PATIENCE: r"held-out likelihood not improved for ",
    StopReason.NO_NODE_LEFT: r"no constrained node left to remove$",
}


def reason_of_message(text: str | None) -> StopReason | None:
    """The reason whose message ``text`` is (a report's ``stopped``, e.g. a
    stored result row written before reports carried ``stop_reason``); None
    for a text that is no reason's message (a note, or a wording since
    changed). Code that has a Stop reads ``stop.reason`` instead."""
    if not text:
        return None
    found = [reason for reason, start in _STARTS.items() if re.match(start, text)]
    return found[0] if len(found) == 1 else None


@dataclass(frozen=True)
class Stop:
    """A reason and its detail fields (JSON-able keyword arguments of the
    reason's message, e.g. ``Stop(StopReason.MAX_ROUNDS, {"limit": 3})``)."""

    reason: StopReason
    detail: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.message  # noqa: B018 -- a reason's fields are checked where it is made

    @property
    def message(self) -> str:
        """How the stop reads in reports and logs."""
        return _MESSAGES[self.reason](**self.detail)

    def to_json(self) -> dict:
        return {"reason": self.reason.value, **self.detail}

    @classmethod
    def from_json(cls, doc: dict) -> Stop:
        detail = dict(doc)
        return cls(StopReason(detail.pop("reason")), detail)


def stop(reason: StopReason, **detail) -> Stop:
    """``Stop(reason, detail)`` with the detail as keywords."""
    return Stop(reason, detail)
