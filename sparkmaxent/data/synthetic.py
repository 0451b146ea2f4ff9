"""Sparse multiclass events drawn from a planted conditional maxent model.

The built-in dataset of the README and of the tests. Because the model that
generated the labels is known, so is its support, and feature-selection
methods (grafting, IFS, Bayes factor, combination features) can be scored by
how much of it they recover (``support_recovery``).

Generative model
----------------
Predicates p = 0..P-1 fire independently, p with probability ``rate[p]``::

    x_ip ~ Bernoulli(rate[p]),  rate[p] = min(1, c * rank(p) ** -s)

Ranks follow a Zipf law with exponent ``s = spec.zipf_exponent``; ``c`` is
chosen so that sum_p rate[p] = ``spec.active_per_event`` (the mean number of
active predicates per event), solved exactly with rates capped at 1. Predicate
ids are a random permutation of the ranks, so ``p0`` is not the most frequent.

Labels follow the planted model (DESIGN.md section 1, multiclass shape, plus
conjunction terms)::

    s_k(x) = b_k + sum_p x_p W[p, k] + sum_(a, b, k', v) [k' = k] x_a x_b v
    p(k | x) = exp(s_k(x)) / sum_k' exp(s_k'(x))

sampled exactly with the Gumbel-max trick, argmax_k (s_k(x) + g_k).

Planted structure
-----------------
* **Support**: ``spec.n_support`` informative predicates, each with a non-zero
  weight on exactly one label. One label per predicate keeps the planted
  weights the unique sparsest representation of the model: a softmax is
  unchanged when a constant is added to a predicate's row of W, and with one
  non-zero out of K >= 3 labels the l1-smallest row in that family is the
  planted one (its median is 0). With K = 2 the label of each support
  feature is not identifiable (w on L1 equals -w on L0); count recovery
  per predicate there. Informative predicates are drawn among those expected
  to fire in at least ``spec.min_support_count`` events and at most
  ``spec.max_support_rate`` of them, so they are learnable and not
  confounded with the bias.
* **Redundant copies**: ``spec.n_copies`` extra predicates fire exactly when
  an informative predicate (their original) fires and carry no weight: a
  selector that picks a copy has picked a false positive.
* **Conjunctions**: ``spec.n_conjunctions`` pairs (a, b) of frequent
  predicates with a weight on the conjunction "a&b" for one label and no
  weight on a or b alone (Berger, Della Pietra & Della Pietra 1996, section
  4's feature induction; the combination features of McCallum 2003).

Every event has value 1.0 on each active predicate and weight 1; the event
id and the group of event i are both i (its position in the generated set).
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from .readers import RawEvent

logger = logging.getLogger(__name__)

CONJUNCTION_SEP = "&"

# Draw this many standard deviations of geometric gaps beyond the mean per
# predicate, so a second round of draws is rarely needed (see _bernoulli_columns).
_SLACK_SIGMAS = 6.0


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
        events (``rate * n_events``).
    max_support_rate : float
        Informative and conjunction predicates fire in at most this share of
        events (near-constant predicates are indistinguishable from the bias).
    seed : int
        Seed of every random draw: the same spec gives the same data.
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

    def __post_init__(self):
        def need(ok: bool, what: str, got) -> None:
            if not ok:
                raise ValueError(f"SyntheticSpec: expected {what}, got {got!r}")

        need(self.n_events >= 1, "n_events >= 1", self.n_events)
        need(self.n_labels >= 2, "n_labels >= 2", self.n_labels)
        need(self.n_support >= 0, "n_support >= 0", self.n_support)
        need(0 <= self.n_copies <= self.n_support,
             f"0 <= n_copies <= n_support = {self.n_support}", self.n_copies)
        need(self.n_conjunctions >= 0, "n_conjunctions >= 0", self.n_conjunctions)
        need(self.n_predicates > self.n_copies,
             f"n_predicates > n_copies = {self.n_copies}", self.n_predicates)
        n_base = self.n_predicates - self.n_copies
        need(0 < self.active_per_event <= n_base,
             f"0 < active_per_event <= n_predicates - n_copies = {n_base}",
             self.active_per_event)
        need(self.zipf_exponent >= 0, "zipf_exponent >= 0", self.zipf_exponent)
        need(self.weight_scale > 0, "weight_scale > 0", self.weight_scale)
        need(self.bias_scale >= 0, "bias_scale >= 0", self.bias_scale)
        need(0 < self.max_support_rate <= 1, "0 < max_support_rate <= 1", self.max_support_rate)
        need(self.min_support_count >= 0, "min_support_count >= 0", self.min_support_count)


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
        doc = {"true_support": sorted(map(list, self.true_support)),
               "true_conjunctions": sorted([list(ab), k] for ab, k in self.true_conjunctions),
               "redundant_copies": dict(sorted(self.redundant_copies.items()))}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)

    @staticmethod
    def load(path: str | os.PathLike) -> "PlantedTruth":
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        missing = {"true_support", "true_conjunctions", "redundant_copies"} - set(doc)
        if missing:
            raise ValueError(f"{path}: expected a planted-truth JSON with keys true_support, "
                             f"true_conjunctions, redundant_copies; missing {sorted(missing)}")
        return PlantedTruth(
            frozenset((f, k) for f, k in doc["true_support"]),
            frozenset(((a, b), k) for (a, b), k in doc["true_conjunctions"]),
            dict(doc["redundant_copies"]))


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
    weights : ndarray of float64, shape (P, K)
        Planted W; non-zero only at the true support.
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
    weights: np.ndarray
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
        return self.weights.shape[0]

    @property
    def n_labels(self) -> int:
        return self.weights.shape[1]

    @property
    def feature_names(self) -> list[str]:
        """Feature string of each predicate column, ``"p{id}"``, length P."""
        return [feature_name(p) for p in range(self.n_predicates)]

    # ---- the planted truth ----------------------------------------------

    @property
    def true_support(self) -> set[tuple[str, str]]:
        """(feature, label) pairs with a non-zero planted weight (no bias,
        no conjunctions)."""
        p, k = np.nonzero(self.weights)
        return {(feature_name(a), self.label_names[b]) for a, b in zip(p.tolist(), k.tolist())}

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
        return {feature_name(c): feature_name(o)
                for c, o in zip(self.copy_ids.tolist(), self.original_ids.tolist())}

    def truth(self) -> PlantedTruth:
        """The planted support, conjunctions and copies, without the events."""
        return PlantedTruth(frozenset(self.true_support), frozenset(self.true_conjunctions),
                            self.redundant_copies)

    def true_feature_ids(self) -> np.ndarray:
        """True support as kernel feature ids ``j = p * K + k`` over this
        data's own predicate numbering, sorted, shape (n_support,)."""
        p, k = np.nonzero(self.weights)
        return np.sort(p * self.n_labels + k).astype(np.int64)

    # ---- views of the events ----------------------------------------------

    def fires(self, p: int) -> np.ndarray:
        """Whether predicate ``p`` is active in each event, bool (m,)."""
        out = np.zeros(self.n_events, dtype=bool)
        rows = np.repeat(np.arange(self.n_events), np.diff(self.indptr))
        out[rows[self.indices == p]] = True
        return out

    def planted_scores(self) -> np.ndarray:
        """Planted scores s_k(x_i) (module docstring), shape (m, K)."""
        return _planted_scores(self.indptr, self.indices, self.values, self.weights, self.bias,
                               self.conjunction_pairs, self.conjunction_labels,
                               self.conjunction_weights)

    def planted_proba(self) -> np.ndarray:
        """Planted p(k | x_i), shape (m, K): the Bayes-optimal predictor."""
        S = self.planted_scores()
        S -= S.max(axis=1, keepdims=True)
        P = np.exp(S)
        return P / P.sum(axis=1, keepdims=True)

    def block(self):
        """The events as a ``MulticlassBlock`` whose predicate columns are
        this data's predicate ids (so kernel feature ``j = p * K + k``)."""
        from ..kernels.blocks import multiclass_block

        return multiclass_block(self.indptr, self.indices, self.values, self.labels,
                                np.ones(self.n_events), self.n_predicates, self.n_labels)

    def iter_events(self) -> Iterator[RawEvent]:
        """RawEvents one by one (a Python loop: for small data and files)."""
        names = np.array(self.feature_names, dtype=object)
        ptr = self.indptr
        for i in range(self.n_events):
            cols = self.indices[ptr[i]:ptr[i + 1]]
            eid = int(self.event_ids[i])
            yield RawEvent(self.label_names[int(self.labels[i])], names[cols].tolist(),
                           self.values[ptr[i]:ptr[i + 1]].tolist(), 1.0, eid, eid)

    def events(self) -> list[RawEvent]:
        """All events as RawEvents, built on demand."""
        return list(self.iter_events())

    def subset(self, rows: np.ndarray) -> "SyntheticData":
        """The events at ``rows`` (int array, any order), same planted model."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= self.n_events):
            raise IndexError(f"expected event rows in [0, {self.n_events}), "
                             f"got values in [{rows.min()}, {rows.max()}]")
        lengths = np.diff(self.indptr)[rows]
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        # gather nnz positions of the chosen rows, vectorised
        starts = np.repeat(self.indptr[rows] - indptr[:-1], lengths)
        pos = starts + np.arange(indptr[-1], dtype=np.int64)
        return SyntheticData(
            spec=self.spec, indptr=indptr, indices=self.indices[pos], values=self.values[pos],
            labels=self.labels[rows], event_ids=self.event_ids[rows], weights=self.weights,
            bias=self.bias, conjunction_pairs=self.conjunction_pairs,
            conjunction_labels=self.conjunction_labels,
            conjunction_weights=self.conjunction_weights, copy_ids=self.copy_ids,
            original_ids=self.original_ids, rates=self.rates, label_names=self.label_names)


def feature_name(p: int) -> str:
    """Feature string of predicate id ``p``."""
    return f"p{p}"


def conjunction_name(feature_a: str, feature_b: str) -> str:
    """Canonical feature string of the conjunction of two features, e.g.
    ``"p3&p17"`` (the two names in string order)."""
    a, b = sorted((feature_a, feature_b))
    return f"{a}{CONJUNCTION_SEP}{b}"


# ---- generation -------------------------------------------------------------

def zipf_rates(n: int, mean_active: float, exponent: float) -> np.ndarray:
    """Rates ``min(1, c * r ** -exponent)`` for ranks r = 1..n, with c solved
    exactly so that they sum to ``mean_active``; shape (n,), decreasing.

    With the first j rates capped at 1, c = (mean_active - j) / sum_{r > j}
    r ** -exponent; the right j is the smallest for which rate j + 1 <= 1.
    """
    if not 0 < mean_active <= n:
        raise ValueError(f"expected 0 < mean_active <= n = {n}, got {mean_active}")
    w = np.arange(1, n + 1, dtype=np.float64) ** -exponent
    tail = np.cumsum(w[::-1])[::-1]  # tail[j] = sum_{r >= j} w[r]
    j = np.arange(n)
    c = (mean_active - j) / tail
    ok = c * w <= 1.0 + 1e-12
    first = int(np.argmax(ok)) if ok.any() else n
    if first == n:
        return np.ones(n)
    rates = np.minimum(1.0, c[first] * w)
    rates[:first] = 1.0
    return rates


def _bernoulli_columns(rng: np.random.Generator, m: int, rates: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Sample x_ip ~ Bernoulli(rates[p]) for i < m, all p, without an m x P array.

    The positions of the successes of a Bernoulli(q) sequence are the running
    sums of Geometric(q) gaps; each column draws a few standard deviations
    more gaps than it needs on average and redraws in the rare case that it
    did not get past m.

    Returns
    -------
    cols, rows : ndarray of int64, shape (nnz,)
        Column-major (all of column 0, then column 1, ...), rows increasing
        within a column.
    """
    cols_out: list[np.ndarray] = []
    rows_out: list[np.ndarray] = []
    todo = np.flatnonzero(rates > 0)
    slack = _SLACK_SIGMAS
    while todo.size:
        q = rates[todo]
        mean = m * q
        n_draw = np.ceil(mean + slack * np.sqrt(mean * (1 - q)) + 10)
        n_draw = np.minimum(m, n_draw).astype(np.int64)
        gaps = rng.geometric(np.repeat(q, n_draw))
        cs = np.cumsum(gaps)
        ends = np.cumsum(n_draw)
        base = np.concatenate([[0], cs[ends[:-1] - 1]])
        pos = cs - np.repeat(base, n_draw) - 1
        # a column is complete once its draws get past row m - 1 (m gaps of at
        # least 1 always do); incomplete ones are redrawn whole with more slack
        complete = cs[ends - 1] - base >= m
        keep = (pos < m) & np.repeat(complete, n_draw)
        cols_out.append(np.repeat(todo, n_draw)[keep])
        rows_out.append(pos[keep])
        todo = todo[~complete]
        slack *= 2
    cols = np.concatenate(cols_out) if cols_out else np.zeros(0, np.int64)
    rows = np.concatenate(rows_out) if rows_out else np.zeros(0, np.int64)
    if len(cols_out) > 1:  # redrawn columns came last: restore column-major order
        order = np.argsort(cols, kind="stable")
        cols, rows = cols[order], rows[order]
    return cols.astype(np.int64), rows.astype(np.int64)


def _planted_scores(indptr, indices, values, W, bias, pairs, conj_labels, conj_weights
                    ) -> np.ndarray:
    m, K = len(indptr) - 1, W.shape[1]
    rows = np.repeat(np.arange(m), np.diff(indptr))
    S = np.tile(bias, (m, 1)).astype(np.float64)
    informative = np.any(W != 0, axis=1)
    hit = informative[indices]  # only nnz of informative predicates add to a score
    r, c, v = rows[hit], indices[hit], values[hit]
    for k in range(K):
        S[:, k] += np.bincount(r, weights=v * W[c, k], minlength=m)
    for (a, b), k, w in zip(pairs.tolist(), conj_labels.tolist(), conj_weights.tolist()):
        fa = np.zeros(m)
        fb = np.zeros(m)
        fa[rows[indices == a]] = values[indices == a]
        fb[rows[indices == b]] = values[indices == b]
        S[:, k] += w * fa * fb
    return S


def _signed_weights(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    return rng.choice([-1.0, 1.0], size=n) * scale * rng.uniform(0.5, 1.5, size=n)


def generate(spec: SyntheticSpec | None = None) -> SyntheticData:
    """Draw events from the planted model of ``spec`` (see module docstring).

    Vectorised throughout: 200,000 events x 5,000 predicates take about a
    second. The same spec (seed included) always gives the same data.

    Parameters
    ----------
    spec : SyntheticSpec, optional
        Defaults to ``SyntheticSpec()`` (5,000 events, 2,000 predicates,
        5 labels).

    Returns
    -------
    SyntheticData
    """
    spec = spec or SyntheticSpec()
    t0 = time.perf_counter()
    rng = np.random.default_rng(spec.seed)
    m, P, K = spec.n_events, spec.n_predicates, spec.n_labels
    n_base = P - spec.n_copies

    # predicate ids: a random permutation of Zipf ranks; copies take the last ids
    perm = rng.permutation(P)
    base_ids, copy_ids = perm[:n_base], perm[n_base:]
    rank_rates = zipf_rates(n_base, spec.active_per_event, spec.zipf_exponent)

    # conjunction members: the most frequent predicates that are not near-constant
    eligible = np.flatnonzero(rank_rates <= spec.max_support_rate)  # ranks, decreasing rate
    n_members = 2 * spec.n_conjunctions
    if len(eligible) < n_members:
        raise ValueError(f"expected at least {n_members} predicates with rate <= "
                         f"max_support_rate={spec.max_support_rate} for {spec.n_conjunctions} "
                         f"conjunctions, got {len(eligible)}")
    member_ranks = eligible[:n_members]
    pairs_rank = member_ranks.reshape(-1, 2)
    co_counts = m * rank_rates[pairs_rank[:, 0]] * rank_rates[pairs_rank[:, 1]] \
        if spec.n_conjunctions else np.zeros(0)
    if np.any(co_counts < spec.min_support_count):
        logger.warning("conjunction pairs are expected to co-occur in only %s events "
                       "(< min_support_count=%s): they will be hard to learn",
                       np.round(co_counts, 1).tolist(), spec.min_support_count)

    # informative predicates: reasonably frequent, not near-constant, not conjunction members
    pool = eligible[n_members:]
    pool = pool[m * rank_rates[pool] >= spec.min_support_count]
    if len(pool) < spec.n_support:
        raise ValueError(
            f"expected at least n_support={spec.n_support} predicates expected to fire in "
            f">= min_support_count={spec.min_support_count} events and <= "
            f"max_support_rate={spec.max_support_rate} of them, got {len(pool)}; "
            "raise n_events or active_per_event, or lower n_support or min_support_count")
    support_ranks = rng.choice(pool, size=spec.n_support, replace=False)
    support_ids = base_ids[support_ranks]
    support_labels = rng.integers(0, K, size=spec.n_support)
    W = np.zeros((P, K))
    W[support_ids, support_labels] = _signed_weights(rng, spec.n_support, spec.weight_scale)
    bias = rng.normal(0.0, spec.bias_scale, size=K)

    conj_pairs = base_ids[pairs_rank].astype(np.int64)
    conj_labels = rng.integers(0, K, size=spec.n_conjunctions).astype(np.int64)
    conj_weights = _signed_weights(rng, spec.n_conjunctions, spec.weight_scale)

    original_ids = rng.choice(support_ids, size=spec.n_copies, replace=False).astype(np.int64)

    # the events: Bernoulli columns by rank, then copies of their originals' columns
    col_rank, rows = _bernoulli_columns(rng, m, rank_rates)
    cols = base_ids[col_rank]
    rank_of = np.empty(P, dtype=np.int64)
    rank_of[base_ids] = np.arange(n_base)
    if spec.n_copies:
        col_starts = np.searchsorted(col_rank, np.arange(n_base + 1))
        r0, r1 = col_starts[rank_of[original_ids]], col_starts[rank_of[original_ids] + 1]
        copy_rows = np.concatenate([rows[a:b] for a, b in zip(r0, r1)])
        copy_cols = np.repeat(copy_ids, r1 - r0)
        rows = np.concatenate([rows, copy_rows])
        cols = np.concatenate([cols, copy_cols])
    # CSR: sort by (event, predicate) with one key sort
    key = np.sort(rows * P + cols)
    rows, cols = key // P, key % P
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))]).astype(np.int64)
    indices = cols.astype(np.int32)
    values = np.ones(len(indices))

    S = _planted_scores(indptr, indices, values, W, bias, conj_pairs, conj_labels, conj_weights)
    labels = np.argmax(S + rng.gumbel(size=S.shape), axis=1).astype(np.int64)  # Gumbel-max

    rates = np.empty(P)
    rates[base_ids] = rank_rates
    rates[copy_ids] = rates[original_ids]

    data = SyntheticData(
        spec=spec, indptr=indptr, indices=indices, values=values, labels=labels,
        event_ids=np.arange(m, dtype=np.int64), weights=W, bias=bias,
        conjunction_pairs=conj_pairs.reshape(-1, 2), conjunction_labels=conj_labels,
        conjunction_weights=conj_weights, copy_ids=copy_ids.astype(np.int64),
        original_ids=original_ids, rates=rates, label_names=[f"L{k}" for k in range(K)])
    logger.info("generated %d events x %d predicates (%d labels, %d active), support %d, "
                "%d copies, %d conjunctions in %.2fs", m, P, K, len(indices), spec.n_support,
                spec.n_copies, spec.n_conjunctions, time.perf_counter() - t0)
    return data


# ---- files and splits -------------------------------------------------------

def write_maxent_text(data: SyntheticData, path: str | os.PathLike) -> int:
    """Write the events in the "maxent" text format, ``label feat feat ...``
    one event per line (``feat:value`` where a value is not 1), as read by
    ``sparkmaxent.data.readers.parse_maxent``.

    Returns
    -------
    int
        Number of lines written.
    """
    names = np.array(data.feature_names, dtype=object)
    ptr, n = data.indptr, 0
    with open(path, "w", encoding="utf-8") as f:
        for i in range(data.n_events):
            a, b = ptr[i], ptr[i + 1]
            toks = names[data.indices[a:b]]
            vals = data.values[a:b]
            if np.any(vals != 1.0):
                toks = [t if v == 1.0 else f"{t}:{v!r}" for t, v in zip(toks, vals.tolist())]
            f.write(data.label_names[int(data.labels[i])])
            if len(toks):
                f.write(" ")
                f.write(" ".join(toks))
            f.write("\n")
            n += 1
    return n


def split(data: SyntheticData, fractions: Sequence[float], seed: int = 0) -> list[SyntheticData]:
    """Split the events at random into parts of the given shares.

    Events are i.i.d. draws of one planted model, so the parts are samples of
    the same distribution (train / held-out / test). Event ids keep the
    position in the generated set, so the parts never share an id.

    Parameters
    ----------
    fractions : sequence of float
        Shares of the parts, positive and summing to 1 (within 1e-9); part
        sizes are rounded down, the remainder goes to the last part.
    seed : int
        Seed of the permutation.
    """
    fr = np.asarray(fractions, dtype=np.float64)
    if fr.ndim != 1 or len(fr) == 0 or np.any(fr <= 0) or abs(fr.sum() - 1.0) > 1e-9:
        raise ValueError(f"expected positive fractions summing to 1, got {list(fractions)}")
    order = np.random.default_rng(seed).permutation(data.n_events)
    sizes = np.floor(fr * data.n_events).astype(np.int64)
    sizes[-1] = data.n_events - sizes[:-1].sum()
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [data.subset(np.sort(order[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]


def train_test_split(data: SyntheticData, test_fraction: float = 0.2, seed: int = 0
                     ) -> tuple[SyntheticData, SyntheticData]:
    """Random (train, test) split; see ``split``."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"expected 0 < test_fraction < 1, got {test_fraction}")
    train, test = split(data, [1.0 - test_fraction, test_fraction], seed)
    return train, test


SPLIT_NAMES = ("train", "heldout", "test")
TRUTH_FILE = "truth.json"


def write_splits(spec: SyntheticSpec | None, directory: str | os.PathLike,
                 fractions: Sequence[float] = (0.7, 0.1, 0.2), seed: int | None = None
                 ) -> dict[str, str]:
    """Generate ``spec``'s events once, split them into train / held-out /
    test (``split``) and write each as a maxent text file, with the planted
    truth next to them.

    Parameters
    ----------
    spec : SyntheticSpec or None
        None for the defaults.
    directory : path
        Created if missing; receives ``train.maxent``, ``heldout.maxent``,
        ``test.maxent`` and ``truth.json`` (``PlantedTruth.save``).
    fractions : (float, float, float)
        Shares of train, held-out and test.
    seed : int, optional
        Seed of the split; default ``spec.seed``.

    Returns
    -------
    dict
        "train", "heldout", "test" -> path of the text file; "truth" -> path
        of the truth JSON.
    """
    spec = spec or SyntheticSpec()
    if len(fractions) != len(SPLIT_NAMES):
        raise ValueError(f"expected {len(SPLIT_NAMES)} fractions (train, heldout, test), "
                         f"got {list(fractions)}")
    data = generate(spec)
    os.makedirs(directory, exist_ok=True)
    out, sizes = {}, {}
    parts = split(data, fractions, spec.seed if seed is None else seed)
    for name, part in zip(SPLIT_NAMES, parts):
        out[name] = os.path.join(os.fspath(directory), f"{name}.maxent")
        sizes[name] = write_maxent_text(part, out[name])
    out["truth"] = os.path.join(os.fspath(directory), TRUTH_FILE)
    data.truth().save(out["truth"])
    logger.info("wrote synthetic splits to %s: %s events", directory, sizes)
    return out


# ---- scoring a selected feature set ------------------------------------------

def support_recovery(selected: set[tuple[str, str]] | Sequence[tuple[str, str]],
                     data: SyntheticData | PlantedTruth) -> dict:
    """How well a selected set of (feature, label) pairs recovers the truth.

    Single features are scored against ``data.true_support``; conjunction
    features (names holding ``"&"``, e.g. ``conjunction_name("p3", "p7")``,
    in either order) against ``data.true_conjunctions``, separately. A
    selected redundant copy is a false positive even though it carries the
    same information as its original. ``data`` may be the generated data or
    its ``PlantedTruth`` (e.g. loaded from ``truth.json``).

    Returns
    -------
    dict
        precision, recall : float
            Over single features; precision is 0 with nothing selected,
            recall is 1 with an empty true support.
        n_selected, n_true, n_correct : int
            Single features selected, in the true support, and both.
        n_copies_of_selected : int
            Selected copies whose original, with the same label, is selected too.
        n_copies_for_missed : int
            Selected copies whose original (same label) is in the true support
            but not selected: the selector took the copy instead.
        conj_precision, conj_recall : float
        n_conj_selected, n_conj_true, n_conj_correct : int
    """
    sel = set(selected)
    for item in sel:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise ValueError(f"expected (feature, label) pairs, got {item!r}")
    singles = {s for s in sel if CONJUNCTION_SEP not in s[0]}
    conj_sel = {(frozenset(s[0].split(CONJUNCTION_SEP)), s[1]) for s in sel - singles}
    truth = data.true_support
    conj_truth = {(frozenset(ab), k) for ab, k in data.true_conjunctions}

    n_correct = len(singles & truth)
    copies = data.redundant_copies
    of_selected = sum(1 for f, k in singles if f in copies and (copies[f], k) in singles)
    for_missed = sum(1 for f, k in singles
                     if f in copies and (copies[f], k) in truth and (copies[f], k) not in singles)
    n_conj_correct = len(conj_sel & conj_truth)
    return {
        "precision": n_correct / len(singles) if singles else 0.0,
        "recall": n_correct / len(truth) if truth else 1.0,
        "n_selected": len(singles),
        "n_true": len(truth),
        "n_correct": n_correct,
        "n_copies_of_selected": of_selected,
        "n_copies_for_missed": for_missed,
        "conj_precision": n_conj_correct / len(conj_sel) if conj_sel else 0.0,
        "conj_recall": n_conj_correct / len(conj_truth) if conj_truth else 1.0,
        "n_conj_selected": len(conj_sel),
        "n_conj_true": len(conj_truth),
        "n_conj_correct": n_conj_correct,
    }
