"""When to stop a sequence of held-out measurements, and which point to keep:
one rule for paths (a penalty per point), stage runs (a stage per point)
and k folds (a fold per unit).

A point is measured by its held-out score and either its per-unit scores
(one per held-out event, or one per fold: the score is their weighted
mean) or only the score's standard error. The stop compares the latest
point with the best so far through the standard error of their
*difference*: with per-unit scores of both, the paired difference
(the same events scored by two models; its standard error is much smaller
than either score's when the models are close), else sqrt(se_a^2 + se_b^2).

Stop (``StopRule.go_on`` is False) once at least ``patience`` points came
after the best one and the latest is below the best by more than
``margin`` standard errors of the difference: one noisy worse point does
not end a path, a run of points that are worse beyond the noise does.
A tie is never below the best, so plateaus of a step criterion (accuracy
moves in steps of 1/n) do not stop. ``max_behind`` (optional) stops
after that many points past the best whatever the noise (flat tails).

The choice is the best score, or with ``one_se`` the sparsest point whose
score is at least the best minus the best's standard error (Breiman et al.
1984; Hastie, Tibshirani & Friedman 2009, section 7.10).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..selection.stops import Stop, StopReason, stop


@dataclasses.dataclass(frozen=True)
class Measure:
    """A point's held-out score, its standard error and (optionally) the
    per-unit scores whose ``weights``-weighted mean it is (NaN units or
    weight 0: left out, e.g. events of a label unseen in training). Units
    of two points are paired by position: the same events (or folds) in
    the same order."""

    score: float
    se: float
    units: np.ndarray | None = None
    weights: np.ndarray | None = None
    hits: np.ndarray | None = None

    @classmethod
    def of_units(cls, units, weights=None, hits=None) -> Measure:
        """The weighted mean of ``units`` and its standard error
        (weighted standard deviation / sqrt(effective number of units));
        ``hits``: optionally, each unit's correctness (1 or 0), in the same
        order, for ``accuracy_gain``."""
        u = np.asarray(units, dtype=float)
        c = np.ones_like(u) if weights is None else np.asarray(weights, dtype=float)
        mean, se = _mean_se(u, c)
        return cls(mean, se, u, c, None if hits is None else np.asarray(hits, dtype=float))


def _mean_se(u: np.ndarray, c: np.ndarray) -> tuple[float, float]:
    """Weighted mean of the finite units with weight > 0 and its standard
    error; n_eff = (sum c)^2 / sum c^2 (the count when unweighted)."""
    ok = np.isfinite(u) & (c > 0)
    u, c = u[ok], c[ok]
    w = float(c.sum())
    if not w:
        return float("nan"), float("nan")
    mean = float(c @ u) / w
    n_eff = w**2 / float(c @ c)
    if n_eff <= 1:
        return mean, float("inf")
    # unbiased for equal weights: the sample standard deviation over sqrt(n)
    var = float(c @ (u - mean) ** 2) / w * n_eff / (n_eff - 1)
    return mean, math.sqrt(var / n_eff)


def difference_se(a: Measure, b: Measure) -> float:
    """Standard error of score(a) - score(b): paired over units when both
    carry units of the same length, else sqrt(se_a^2 + se_b^2)."""
    if a.units is not None and b.units is not None and len(a.units) == len(b.units):
        ca = np.ones(len(a.units)) if a.weights is None else a.weights
        cb = np.ones(len(b.units)) if b.weights is None else b.weights
        c = np.where((ca > 0) & (cb > 0), ca, 0.0)
        return _mean_se(a.units - b.units, c)[1]
    return math.sqrt(a.se**2 + b.se**2)


def accuracy_gain(a: Measure, b: Measure) -> tuple[float, float] | None:
    """Held-out accuracy of ``a`` minus that of ``b`` and the standard error
    of that difference, paired event by event (both measures' ``hits``: the
    same events in the same order, weighted as ``a``'s units); None when
    either lacks per-event hits (k folds, chunk F1) or they do not pair."""
    if a.hits is None or b.hits is None or len(a.hits) != len(b.hits):
        return None
    ca = np.ones(len(a.hits)) if a.weights is None else a.weights
    cb = np.ones(len(b.hits)) if b.weights is None else b.weights
    c = np.where((ca > 0) & (cb > 0), ca, 0.0)
    return _mean_se(a.hits - b.hits, c)


@dataclasses.dataclass
class StopRule:
    """Feed points in order (``add``), ask ``go_on()`` and, at the end,
    ``choice()``; see the module doc.

    patience : points that must come after the best before a stop (>= 1;
        0: never stop, fit every point).
    margin : standard errors of the difference by which the latest point
        must be below the best (0: any worse point).
    one_se : ``choice`` takes the sparsest point within one standard error.
    max_behind : stop after this many points past the best whatever the
        noise (None: no such cap).
    """

    patience: int = 2
    margin: float = 1.0
    one_se: bool = False
    max_behind: int | None = None
    points: list = dataclasses.field(default_factory=list)
    scores: list[float] = dataclasses.field(default_factory=list)
    ses: list[float] = dataclasses.field(default_factory=list)
    sizes: list[int] = dataclasses.field(default_factory=list)
    gaps: list[float | None] = dataclasses.field(default_factory=list)
    _best: int | None = None
    _best_measure: Measure | None = None
    _last_gap: float = 0.0

    def add(self, point, measure: Measure, size: int = 0, eligible: bool = True) -> None:
        """Record ``point`` (any label: a penalty, a stage number), its
        ``measure`` and model size (non-zero weights; ``one_se`` prefers the
        smallest). A point not ``eligible`` (e.g. a path point cut before
        its optimum) counts for the stop but is never chosen."""
        self.points.append(point)
        self.scores.append(float(measure.score) if eligible else float("nan"))
        self.ses.append(float(measure.se))
        self.sizes.append(int(size))
        best = self._best_measure
        if eligible and (best is None or measure.score > best.score):
            self._best, self._best_measure = len(self.points) - 1, measure
            self._last_gap = 0.0
            self.gaps.append(0.0)
            return
        if best is None:  # nothing eligible yet
            self._last_gap = 0.0
            self.gaps.append(None)
            return
        se = difference_se(measure, best)
        diff = best.score - float(measure.score)
        self._last_gap = diff / se if se > 0 else (math.inf if diff > 0 else 0.0)
        self.gaps.append(self._last_gap)

    def best(self) -> int | None:
        """Index of the best eligible point so far (the first of ties)."""
        return self._best

    def behind(self) -> int:
        """Points added after the best one."""
        return len(self.points) - 1 - (self._best if self._best is not None else -1)

    def go_on(self) -> bool:
        return self.why() is None

    def why(self) -> Stop | None:
        """Why the sequence should stop now (None while it should go on)."""
        if not self.patience or self._best is None:
            return None
        behind = self.behind()
        if self.max_behind is not None and behind >= self.max_behind:
            return stop(StopReason.HELDOUT_MAX_BEHIND, behind=behind, max_behind=self.max_behind)
        if behind >= self.patience and self._last_gap > self.margin:
            return stop(
                StopReason.HELDOUT_RULE,
                behind=behind,
                gap=float(self._last_gap),
                patience=self.patience,
                margin=self.margin,
            )
        return None

    def choice(self) -> int:
        """Index of the chosen point: the best, or with ``one_se`` the
        sparsest eligible point scoring at least the best minus the best's
        standard error (ties: the first)."""
        if self._best is None:
            raise ValueError("no eligible point to choose from")
        return choose(self.scores, self.ses, self.sizes, self.one_se)


def choose(scores: list[float], ses: list[float], sizes: list[int], one_se: bool) -> int:
    """Index of the chosen point of ``scores`` (NaN: not eligible): the
    best score (the first of ties), or with ``one_se`` the fewest features
    among points scoring at least the best minus its standard error (ties:
    the first)."""
    if not scores or np.all(np.isnan(np.asarray(scores, dtype=float))):
        raise ValueError("no points to choose from")
    values = np.asarray(scores, dtype=float)
    best = int(np.nanargmax(values))
    if not one_se:
        return best
    within = np.flatnonzero(values >= values[best] - ses[best])
    return int(within[np.argmin(np.asarray(sizes)[within])])


def stop_rule(choice) -> StopRule:
    """The held-out stop rule of paths and stage runs (``train.choice``:
    ``patience`` points past the best, the last ``patience_se`` standard
    errors of the paired held-out difference below it)."""
    return StopRule(patience=choice.patience, margin=choice.patience_se, one_se=choice.one_se)
