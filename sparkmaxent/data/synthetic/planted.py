"""The planted model: its parameters, its truth, and the events drawn from it.

``SyntheticSpec`` says what to draw, ``SyntheticData`` holds the events with
the planted weights behind them, and ``PlantedTruth`` is the part a selector
should recover (support, conjunctions, redundant copies), small enough to
save next to generated files.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ... import storage
from ...errors import ConfigError
from ..readers import RawEvent

CONJUNCTION_SEP = "&"


@dataclass(frozen=True)
class SyntheticSpec:
    """Parameters of the planted model and of the generated sample.

    Attributes
    ----------
    n_events : int
        Number of events m.
    n_predicates : int
        Number of predicates P, redundant copies included.
    n_labels : int
        Number of labels K (>= 2).
    active_per_event : float
        Mean number of active predicates per event (before the redundant
        copies are added, which fire on top of their originals).
    zipf_exponent : float
        Exponent s of the Zipf law of predicate rates, rate ~ rank ** -s.
    n_support : int
        Size of the true support: informative (predicate, label) pairs, one
        per informative predicate. Conjunctions and bias are not counted.
    weight_scale : float
        Planted weights are ``+-weight_scale * U(0.5, 1.5)``.
    n_copies : int
        Predicates that are perfect copies of an informative predicate
        (at most ``n_support``).
    n_conjunctions : int
        Predicate pairs (a, b) whose effect exists only when both fire.
    bias_scale : float
        Standard deviation of the per-label bias b_k.
    min_support_count : float
        Informative predicates are expected to fire in at least this many
        events (``rate * model_events``).
    max_support_rate : float
        Informative and conjunction predicates fire in at most this share of
        events (near-constant predicates are indistinguishable from the bias).
    seed : int
        Seed of every random draw: the same spec gives the same data.
    model_events : int
        Sample size the planted model is chosen for (``min_support_count``
        counts events of a sample this size); 0: ``n_events``. Specs that
        differ only in ``n_events`` and share a non-zero ``model_events``
        share one planted model (support, weights, bias, conjunctions,
        copies) and differ only in the events drawn from it: a scale
        series over events with the true model fixed.
    """

    n_events: int = 5000
    n_predicates: int = 2000
    n_labels: int = 5
    active_per_event: float = 10.0
    zipf_exponent: float = 1.0
    n_support: int = 40
    weight_scale: float = 2.0
    n_copies: int = 5
    n_conjunctions: int = 3
    bias_scale: float = 0.5
    min_support_count: float = 100.0
    max_support_rate: float = 0.5
    seed: int = 0
    model_events: int = 0

    def __post_init__(self):
        def need(ok: bool, what: str, got) -> None:
            if not ok:
                raise ValueError(f"SyntheticSpec: expected {what}, got {got!r}")

        need(self.n_events >= 1, "n_events >= 1", self.n_events)
        need(self.model_events >= 0, "model_events >= 0", self.model_events)
        need(self.n_labels >= 2, "n_labels >= 2", self.n_labels)
        need(self.n_support >= 0, "n_support >= 0", self.n_support)
        need(
            0 <= self.n_copies <= self.n_support,
            f"0 <= n_copies <= n_support = {self.n_support}",
            self.n_copies,
        )
        need(self.n_conjunctions >= 0, "n_conjunctions >= 0", self.n_conjunctions)
        need(
            self.n_predicates > self.n_copies,
            f"n_predicates > n_copies = {self.n_copies}",
            self.n_predicates,
        )
        n_base = self.n_predicates - self.n_copies
        need(
            0 < self.active_per_event <= n_base,
            f"0 < active_per_event <= n_predicates - n_copies = {n_base}",
            self.active_per_event,
        )
        need(self.zipf_exponent >= 0, "zipf_exponent >= 0", self.zipf_exponent)
        need(self.weight_scale > 0, "weight_scale > 0", self.weight_scale)
        need(self.bias_scale >= 0, "bias_scale >= 0", self.bias_scale)
        need(0 < self.max_support_rate <= 1, "0 < max_support_rate <= 1", self.max_support_rate)
        need(self.min_support_count >= 0, "min_support_count >= 0", self.min_support_count)

    @classmethod
    def from_config(cls, values: dict, path: str = "data.synthetic") -> SyntheticSpec:
        """The spec a configuration's table gives (``data.synthetic``);
        ConfigError naming the key for an unknown field, a value of the
        wrong type (integer fields take integers, the others finite
        numbers) or out of range."""
        fields = {f.name: f.default for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {unknown}; expected some of {list(fields)}")
        checked: dict = {}
        for name, value in values.items():
            integer = isinstance(fields[name], int)
            number = isinstance(value, int if integer else (int, float))
            if isinstance(value, bool) or not number or not math.isfinite(value):
                expected = "an integer" if integer else "a finite number"
                raise ConfigError(
                    f"{path}.{name}: expected {expected}, got {value!r} ({type(value).__name__})"
                )
            checked[name] = value if integer else float(value)
        try:
            return cls(**checked)
        except ValueError as e:
            raise ConfigError(str(e).replace("SyntheticSpec", path, 1)) from None


@dataclass(frozen=True)
class PlantedTruth:
    """What a selector should find, by feature and label strings; small
    enough to save next to a generated dataset (``save`` / ``load``).

    Attributes
    ----------
    true_support : frozenset of (feature, label)
    true_conjunctions : frozenset of ((feature_a, feature_b), label)
    redundant_copies : dict copy feature -> original feature
    """

    true_support: frozenset
    true_conjunctions: frozenset
    redundant_copies: dict

    def save(self, path: str | os.PathLike) -> None:
        """Write as JSON (sorted lists, so the file is stable)."""
        doc = {
            "true_support": sorted(map(list, self.true_support)),
            "true_conjunctions": sorted([list(ab), k] for ab, k in self.true_conjunctions),
            "redundant_copies": dict(sorted(self.redundant_copies.items())),
        }
        storage.write_text(os.fspath(path), json.dumps(doc, indent=1))

    @staticmethod
    def load(path: str | os.PathLike) -> PlantedTruth:
        doc = json.loads(storage.read_bytes(os.fspath(path)))
        missing = {"true_support", "true_conjunctions", "redundant_copies"} - set(doc)
        if missing:
            raise ValueError(
                f"{path}: expected a planted-truth JSON with keys true_support, "
                f"true_conjunctions, redundant_copies; missing {sorted(missing)}"
            )
        return PlantedTruth(
            frozenset((f, k) for f, k in doc["true_support"]),
            frozenset(((a, b), k) for (a, b), k in doc["true_conjunctions"]),
            dict(doc["redundant_copies"]),
        )


@dataclass(frozen=True, eq=False)
class SyntheticData:
    """Generated events (as CSR parts) and the planted model behind them.

    Attributes
    ----------
    spec : SyntheticSpec
    indptr : ndarray of int64, shape (m + 1,)
    indices : ndarray of int32, shape (nnz,)
        Active predicates of event i are ``indices[indptr[i]:indptr[i + 1]]``,
        increasing within each event.
    values : ndarray of float64, shape (nnz,)
        All 1.0.
    labels : ndarray of int64, shape (m,)
        Label index of each event.
    event_ids : ndarray of int64, shape (m,)
        Position of each event in the generated set (``arange(m)`` unless this
        is a subset made by ``split``).
    support_ids, support_labels : ndarray of int64, shape (n_support,)
        The planted W's non-zeros: predicate and label of each (the dense
        P x K matrix, ``weights``, is built only when asked for: at 10^8
        candidates it would not fit).
    support_weights : ndarray of float64, shape (n_support,)
    bias : ndarray of float64, shape (K,)
    conjunction_pairs : ndarray of int64, shape (n_conjunctions, 2)
    conjunction_labels : ndarray of int64, shape (n_conjunctions,)
    conjunction_weights : ndarray of float64, shape (n_conjunctions,)
    copy_ids : ndarray of int64, shape (n_copies,)
    original_ids : ndarray of int64, shape (n_copies,)
        ``copy_ids[i]`` fires exactly when ``original_ids[i]`` fires.
    rates : ndarray of float64, shape (P,)
        Firing probability of each predicate.
    label_names : list of str, length K
        ``"L0"`` .. ``"L{K-1}"``.
    """

    spec: SyntheticSpec
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    labels: np.ndarray
    event_ids: np.ndarray
    support_ids: np.ndarray
    support_labels: np.ndarray
    support_weights: np.ndarray
    bias: np.ndarray
    conjunction_pairs: np.ndarray
    conjunction_labels: np.ndarray
    conjunction_weights: np.ndarray
    copy_ids: np.ndarray
    original_ids: np.ndarray
    rates: np.ndarray
    label_names: list[str]

    # ---- shape and names ------------------------------------------------

    @property
    def n_events(self) -> int:
        return len(self.indptr) - 1

    @property
    def n_predicates(self) -> int:
        return self.spec.n_predicates

    @property
    def n_labels(self) -> int:
        return self.spec.n_labels

    @property
    def weights(self) -> np.ndarray:
        """Planted W as a dense (P, K) matrix, non-zero only at the true
        support (built on each call: for small data)."""
        W = np.zeros((self.n_predicates, self.n_labels))
        W[self.support_ids, self.support_labels] = self.support_weights
        return W

    @property
    def feature_names(self) -> list[str]:
        """Feature string of each predicate column, ``"p{id}"``, length P."""
        return [feature_name(p) for p in range(self.n_predicates)]

    # ---- the planted truth ----------------------------------------------

    @property
    def true_support(self) -> set[tuple[str, str]]:
        """(feature, label) pairs with a non-zero planted weight (no bias,
        no conjunctions)."""
        p, k = self.support_ids.tolist(), self.support_labels.tolist()
        return {(feature_name(a), self.label_names[b]) for a, b in zip(p, k)}

    @property
    def true_conjunctions(self) -> set[tuple[tuple[str, str], str]]:
        """((feature_a, feature_b), label) of each planted conjunction, the
        two features in string order."""
        out = set()
        for (a, b), k in zip(self.conjunction_pairs.tolist(), self.conjunction_labels.tolist()):
            fa, fb = sorted((feature_name(a), feature_name(b)))
            out.add(((fa, fb), self.label_names[k]))
        return out

    @property
    def redundant_copies(self) -> dict[str, str]:
        """Copy feature -> the informative feature it duplicates."""
        return {
            feature_name(c): feature_name(o)
            for c, o in zip(self.copy_ids.tolist(), self.original_ids.tolist())
        }

    def truth(self) -> PlantedTruth:
        """The planted support, conjunctions and copies, without the events."""
        return PlantedTruth(
            frozenset(self.true_support), frozenset(self.true_conjunctions), self.redundant_copies
        )

    def true_feature_ids(self) -> np.ndarray:
        """True support as kernel feature ids ``j = p * K + k`` over this
        data's own predicate numbering, sorted, shape (n_support,)."""
        j = self.support_ids * self.n_labels + self.support_labels
        return np.sort(j).astype(np.int64)

    # ---- views of the events ----------------------------------------------

    def fires(self, p: int) -> np.ndarray:
        """Whether predicate ``p`` is active in each event, bool (m,)."""
        out = np.zeros(self.n_events, dtype=bool)
        rows = np.repeat(np.arange(self.n_events), np.diff(self.indptr))
        out[rows[self.indices == p]] = True
        return out

    def planted_scores(self) -> np.ndarray:
        """Planted scores s_k(x_i) (``generator`` module docstring), shape (m, K)."""
        return planted_scores(
            self.indptr,
            self.indices,
            self.values,
            (self.support_ids, self.support_labels, self.support_weights),
            self.bias,
            self.conjunction_pairs,
            self.conjunction_labels,
            self.conjunction_weights,
        )

    def planted_proba(self) -> np.ndarray:
        """Planted p(k | x_i), shape (m, K): the Bayes-optimal predictor."""
        S = self.planted_scores()
        S -= S.max(axis=1, keepdims=True)
        P = np.exp(S)
        return P / P.sum(axis=1, keepdims=True)

    def block(self):
        """The events as a ``MulticlassBlock`` whose predicate columns are
        this data's predicate ids (so kernel feature ``j = p * K + k``)."""
        from ...kernels.blocks import multiclass_block

        return multiclass_block(
            self.indptr,
            self.indices,
            self.values,
            self.labels,
            np.ones(self.n_events),
            self.n_predicates,
            self.n_labels,
        )

    def iter_events(self) -> Iterator[RawEvent]:
        """RawEvents one by one (a Python loop: for small data and files)."""
        names = np.array(self.feature_names, dtype=object)
        ptr = self.indptr
        for i in range(self.n_events):
            cols = self.indices[ptr[i] : ptr[i + 1]]
            eid = int(self.event_ids[i])
            yield RawEvent(
                self.label_names[int(self.labels[i])],
                names[cols].tolist(),
                self.values[ptr[i] : ptr[i + 1]].tolist(),
                1.0,
                eid,
                eid,
            )

    def events(self) -> list[RawEvent]:
        """All events as RawEvents, built on demand."""
        return list(self.iter_events())

    def subset(self, rows: np.ndarray) -> SyntheticData:
        """The events at ``rows`` (int array, any order), same planted model."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= self.n_events):
            raise IndexError(
                f"expected event rows in [0, {self.n_events}), "
                f"got values in [{rows.min()}, {rows.max()}]"
            )
        lengths = np.diff(self.indptr)[rows]
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        # gather nnz positions of the chosen rows, vectorised
        starts = np.repeat(self.indptr[rows] - indptr[:-1], lengths)
        pos = starts + np.arange(indptr[-1], dtype=np.int64)
        return SyntheticData(
            spec=self.spec,
            indptr=indptr,
            indices=self.indices[pos],
            values=self.values[pos],
            labels=self.labels[rows],
            event_ids=self.event_ids[rows],
            support_ids=self.support_ids,
            support_labels=self.support_labels,
            support_weights=self.support_weights,
            bias=self.bias,
            conjunction_pairs=self.conjunction_pairs,
            conjunction_labels=self.conjunction_labels,
            conjunction_weights=self.conjunction_weights,
            copy_ids=self.copy_ids,
            original_ids=self.original_ids,
            rates=self.rates,
            label_names=self.label_names,
        )


def feature_name(p: int) -> str:
    """Feature string of predicate id ``p``."""
    return f"p{p}"


def conjunction_name(feature_a: str, feature_b: str) -> str:
    """Canonical feature string of the conjunction of two features, e.g.
    ``"p3&p17"`` (the two names in string order)."""
    a, b = sorted((feature_a, feature_b))
    return f"{a}{CONJUNCTION_SEP}{b}"


def planted_scores(
    indptr, indices, values, support, bias, pairs, conj_labels, conj_weights
) -> np.ndarray:
    """Scores s_k(x_i) of the CSR events under the planted W (``support``:
    its non-zeros as predicate, label and weight arrays), bias and the
    conjunctions (pairs, their labels and weights), shape (m, K)."""
    m, K = len(indptr) - 1, len(bias)
    rows = np.repeat(np.arange(m), np.diff(indptr))
    S = np.tile(bias, (m, 1)).astype(np.float64)
    preds, labels, weights = support
    order = np.argsort(preds, kind="stable")
    preds, labels, weights = preds[order], labels[order], weights[order]
    # each nnz of a planted predicate adds its weights to the scores (a
    # predicate may carry several labels: one add per (nnz, label) pair)
    lo, hi = np.searchsorted(preds, indices, "left"), np.searchsorted(preds, indices, "right")
    n = hi - lo
    nz = np.repeat(np.arange(len(indices)), n)
    at = np.repeat(lo, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    planted = np.zeros((m, K))  # summed first, then added: bias + sum, as always
    np.add.at(planted, (rows[nz], labels[at]), values[nz] * weights[at])
    S += planted
    for (a, b), k, w in zip(pairs.tolist(), conj_labels.tolist(), conj_weights.tolist()):
        fa = np.zeros(m)
        fb = np.zeros(m)
        fa[rows[indices == a]] = values[indices == a]
        fb[rows[indices == b]] = values[indices == b]
        S[:, k] += w * fa * fb
    return S
