"""Selection over the lattice by frequency redistribution (Mikheev 1998,
section 3): the optimized lattice grows one node (atomic or complex) at a
time, each time by the candidate whose addition most lowers D(p || p''),
the divergence of the smoothed redistributed prediction from the reference
distribution, equivalently most raises the training log-likelihood
sum_i sum_y xi^w_{i,y} log p''(y | i). No model is fitted per candidate.

Eq. 1: every empirical node i is decided by the most specific optimized
node d(i) below it, which takes the configuration frequencies of all the
nodes it decides (xi'^w); Eq. 3: p'(y | i) = xi'^w_{d(i),y} / xi'^w_{d(i)},
and 1/|Y| for undecided nodes; the smoothing
p'' = L / |Y| + (1 - L) p' with L = T / (T + xi'^w_{d(i)}).

Candidates are scored in batches on the executors (``CandidateScorer``);
the run stops when held-out likelihood (without held-out data: the
training AIC, ``TrainingAic``) has not improved for ``patience`` steps and
keeps the optimized lattice of the best step.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from ...kernels.lattice_nodes import (
    LatticeArrays,
    is_subset,
    moves,
    score_batch,
    smoothed_loglik,
)
from ...selection.stops import Stop, StopReason

log = logging.getLogger(__name__)


@dataclass
class Optimized:
    """The optimized lattice over an empirical one.

    Attributes
    ----------
    decider : ndarray of int64, (n,)
        d(i), the most specific optimized node below node i; -1: undecided.
        The optimized nodes are those deciding themselves.
    groups : ndarray, (n, K)
        xi'^w per label of optimized nodes (Eq. 1); 0 elsewhere.
    selected : list of int
        Nodes chosen by the selection, in order (their collocations are
        added with them).
    """

    decider: np.ndarray
    groups: np.ndarray
    selected: list[int] = field(default_factory=list)

    @staticmethod
    def empty(n_nodes: int, n_labels: int) -> Optimized:
        return Optimized(np.full(n_nodes, -1, dtype=np.int64), np.zeros((n_nodes, n_labels)))

    def copy(self) -> Optimized:
        return Optimized(self.decider.copy(), self.groups.copy(), list(self.selected))

    def nodes(self) -> np.ndarray:
        """The optimized nodes."""
        return np.flatnonzero(self.decider == np.arange(len(self.decider)))

    def decided(self) -> np.ndarray:
        """Which empirical nodes have a deciding node."""
        return self.decider >= 0

    def add(self, lat: LatticeArrays, a: int) -> np.ndarray:
        """Add node ``a`` and its collocations with the optimized nodes;
        returns the optimized nodes it created."""
        before = set(self.nodes().tolist())
        mv = moves(lat, self.decider, np.array([a]))
        moved = lat.counts[mv.node]
        on = mv.old >= 0
        np.add.at(self.groups, mv.old[on], -moved[on])
        np.add.at(self.groups, mv.new, moved)
        self.decider[mv.node] = mv.new
        self.selected.append(int(a))
        return np.array(sorted(set(self.nodes().tolist()) - before), dtype=np.int64)

    def proba(self, rows: np.ndarray, threshold: float | None = None) -> np.ndarray:
        """p'(y | i) of Eq. 3 (``threshold`` None) or the smoothed p'' for
        the empirical nodes ``rows`` (n_rows, K)."""
        return decided_proba(self.groups, self.decider[rows], threshold)


def decided_proba(groups: np.ndarray, deciders: np.ndarray, threshold: float | None):
    """Prediction of nodes decided by ``deciders`` (-1: uniform), from the
    deciders' redistributed frequencies, smoothed when ``threshold`` is given."""
    k = groups.shape[1]
    out = np.full((len(deciders), k), 1.0 / k)
    on = deciders >= 0
    c = groups[deciders[on]]
    total = c.sum(axis=1, keepdims=True)
    p = c / np.where(total > 0, total, 1.0)
    if threshold is not None:
        lam = threshold / (threshold + total)
        p = lam / k + (1 - lam) * p
    out[on] = p
    return out


def train_loglik(lat: LatticeArrays, opt: Optimized) -> float:
    """sum_i sum_y xi^w_{i,y} log p''(y | i) over the empirical lattice."""
    k = lat.counts.shape[1]
    nodes = opt.nodes()
    undecided = lat.counts[opt.decider < 0].sum()
    return float(smoothed_loglik(opt.groups[nodes], lat.threshold).sum() - undecided * np.log(k))


@dataclass
class HeldoutConfigs:
    """Held-out events as configurations over the lattice's atoms, each
    decided by the most specific optimized node contained in it (ties: the
    one added first), kept up to date as nodes are added.

    Attributes
    ----------
    masks : ndarray of uint64, (h, words)
    counts : ndarray, (h, K)
    decider : ndarray of int64, (h,)
    """

    masks: np.ndarray
    counts: np.ndarray
    decider: np.ndarray

    @staticmethod
    def of(masks: np.ndarray, counts: np.ndarray) -> HeldoutConfigs:
        return HeldoutConfigs(masks, counts, np.full(len(masks), -1, dtype=np.int64))

    def update(self, lat: LatticeArrays, new_nodes: np.ndarray) -> None:
        if not len(new_nodes) or not len(self.masks):
            return
        inside = is_subset(lat.masks[new_nodes][None, :, :], self.masks[:, None, :])
        size = np.where(inside, lat.sizes[new_nodes][None, :], -1)
        best = size.argmax(axis=1)
        best_size = size[np.arange(len(size)), best]
        current = np.where(self.decider >= 0, lat.sizes[np.maximum(self.decider, 0)], 0)
        better = best_size > current
        self.decider[better] = new_nodes[best[better]]

    def loglik(self, opt: Optimized, threshold: float) -> float:
        """Mean log-likelihood per unit of held-out weight under p''."""
        p = decided_proba(opt.groups, self.decider, threshold)
        with np.errstate(divide="ignore"):
            ll = np.where(self.counts > 0, self.counts * np.log(p), 0.0).sum()
        return float(ll / max(self.counts.sum(), 1e-300))


@dataclass
class TrainingAic:
    """The selection's stop criterion without held-out data: Akaike's
    information criterion (the alternative section 4 cites, after Pedersen
    & Bruce 1997), as -AIC / 2 per unit of training weight: the smoothed
    training log-likelihood less |Y| - 1 free frequencies per optimized
    node. Same interface as ``HeldoutConfigs`` (higher is better)."""

    lat: LatticeArrays

    def update(self, lat: LatticeArrays, new_nodes: np.ndarray) -> None:
        """Nothing to track: the criterion reads the optimized lattice."""

    def loglik(self, opt: Optimized, threshold: float) -> float:
        k = self.lat.counts.shape[1]
        penalty = (k - 1) * len(opt.nodes())
        return (train_loglik(self.lat, opt) - penalty) / max(float(self.lat.counts.sum()), 1e-300)


class CandidateScorer:
    """Finds the best candidate of a step by scoring candidates in batches:
    on the executors through ``sc`` (one Spark job per step, the empirical
    lattice broadcast once), or in this process when ``sc`` is None."""

    def __init__(self, lat: LatticeArrays, sc=None, n_batches: int = 0):
        self.lat, self.sc = lat, sc
        self.n_batches = n_batches or (2 * sc.defaultParallelism if sc is not None else 1)
        self.jobs = 0
        self.seconds = 0.0
        self.scored = 0
        self._static = sc.broadcast(lat) if sc is not None else None

    def gains(self, opt: Optimized, candidates: np.ndarray) -> np.ndarray:
        """The gain of every candidate (``kernels.lattice_nodes.candidate_gains``)."""
        t0 = time.perf_counter()
        batches = [b for b in np.array_split(candidates, self.n_batches) if len(b)]
        if self.sc is None:
            results = [score_batch(self.lat, opt.decider, opt.groups, b) for b in batches]
        else:
            static = self._static
            assert static is not None, "broadcast when sc is given"
            state = self.sc.broadcast((opt.decider, opt.groups))
            try:
                results = (
                    self.sc.parallelize(batches, len(batches))
                    .map(lambda b: score_batch(static.value, state.value[0], state.value[1], b))
                    .collect()
                )
            finally:
                state.destroy()
        self.jobs += 1
        self.scored += len(candidates)
        self.seconds += time.perf_counter() - t0
        return np.concatenate(results) if results else np.zeros(0)

    def best(self, opt: Optimized, candidates: np.ndarray) -> tuple[float, int]:
        """(gain, node) of the best candidate (ties: the lowest node id)."""
        g = self.gains(opt, candidates)
        if not len(g):
            return -np.inf, -1
        i = int(np.argmax(g))
        return float(g[i]), int(candidates[i])

    def close(self) -> None:
        if self._static is not None:
            self._static.destroy()


def stale(lat: LatticeArrays, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Candidates whose gain a step changed: a gain reads the deciders of
    the candidate's descendants and their groups' frequencies, so it
    changes only for the ancestors of the nodes whose decider changed or
    whose decider's group did (the others keep their cached gain, exactly)."""
    moved = before != after
    groups = np.union1d(before[moved], after[moved])
    touched = np.flatnonzero(np.isin(after, groups[groups >= 0]) | moved)
    hit = np.zeros(len(after), dtype=bool)
    hit[touched] = True
    # a row per node, never empty (a node is its own descendant)
    out = np.logical_or.reduceat(hit[lat.desc_idx], lat.desc_ptr[:-1])
    return np.flatnonzero(out & (after != np.arange(len(after))))


@dataclass
class SelectionResult:
    """The optimized lattice of the best step, and one trace row per step."""

    optimized: Optimized
    best_step: int
    trace: list[dict]
    stop: Stop
    scoring: dict


def select(
    lat: LatticeArrays,
    scorer: CandidateScorer,
    heldout: HeldoutConfigs | TrainingAic,
    patience: int,
    max_steps: int = 0,
) -> SelectionResult:
    """Grow the optimized lattice by the best candidate until held-out
    log-likelihood has not improved for ``patience`` steps (or no candidate
    raises the training likelihood, or ``max_steps``); the best step's
    lattice is kept."""
    n, k = lat.counts.shape
    opt = Optimized.empty(n, k)
    total = float(lat.counts.sum())
    best_ll, best, best_step = heldout.loglik(opt, lat.threshold), opt.copy(), 0
    trace: list[dict] = [{"step": 0, "node": -1, "optimized_nodes": 0, "heldout_ll": best_ll}]
    stop = Stop(StopReason.MAX_STEPS)
    step = 0
    gains = scorer.gains(opt, np.arange(n))
    while not max_steps or step < max_steps:
        gains[opt.nodes()] = -np.inf
        a = int(np.argmax(gains))
        gain = float(gains[a])
        if gain <= 1e-9 * max(total, 1.0):
            stop = Stop(StopReason.NO_TRAINING_GAIN)
            break
        step += 1
        changed = opt.decider.copy()
        heldout.update(lat, opt.add(lat, a))
        affected = stale(lat, changed, opt.decider)
        gains[affected] = scorer.gains(opt, affected)
        ll = heldout.loglik(opt, lat.threshold)
        trace.append(
            {
                "step": step,
                "node": a,
                "gain": gain,
                "optimized_nodes": len(opt.nodes()),
                "rescored": len(affected),
                "train_ll": train_loglik(lat, opt) / total,
                "heldout_ll": ll,
            }
        )
        log.info(
            "lattice selection step %d: node %d (gain %.4g), %d optimized nodes, "
            "%d candidates rescored, held-out ll %.6f",
            step,
            a,
            gain,
            len(opt.nodes()),
            len(affected),
            ll,
        )
        if ll > best_ll + 1e-12:
            best_ll, best, best_step = ll, opt.copy(), step
        elif step - best_step >= patience:
            stop = Stop(StopReason.HELDOUT_PATIENCE, {"patience": patience, "unit": "steps"})
            break
    scoring = {
        "jobs": scorer.jobs,
        "candidates_scored": scorer.scored,
        "seconds": round(scorer.seconds, 3),
        "batches_per_step": scorer.n_batches,
    }
    return SelectionResult(best, best_step, trace, stop, scoring)
