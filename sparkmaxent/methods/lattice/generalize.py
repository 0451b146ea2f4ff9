"""Generalization by constraint removal (Mikheev 1998, section 4).

The optimized nodes whose feature frequency, marginal over labels, exceeds
a threshold are constrained: each gives one (node, label) feature per label
of a conditional maxent model, a node's feature firing on every event whose
configuration contains the node (so a constrained node marginalizes over
its unconstrained descendants). Nodes of one atom are that atomic
predicate; larger ones are conjunctions (kernels/conjunctions.py), formed
in the events on the executors in every pass.

The model is fitted with the project's L-BFGS (``fit_smooth``); then,
round by round, the most specific constrained nodes (no constrained node
above them) whose weights are closest to 0 (the paper's lambda near 1) are
unconstrained several at once, and the model is refitted warm-started. The
model of the best held-out likelihood is kept (the paper's stop, after
Berger et al. 1996); without held-out data, the model of the best training
AIC (``criterion``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass

import numpy as np

from ...backends.expanded import ExpandedBackend
from ...kernels import Space, Weights
from ...kernels.conjunctions import Conjunctions
from ...kernels.lattice_nodes import is_subset
from ...selection.base import FitResult, TrainingContext, evaluate_backend
from ...selection.stops import Stop, StopReason

log = logging.getLogger(__name__)


def node_predicates(nodes: list[tuple[int, ...]], n_atoms: int) -> tuple[np.ndarray, Conjunctions]:
    """The predicate id of every node (its atom for one-atom nodes, else
    ``n_atoms + j`` for conjunction j) and the conjunctions of the larger ones."""
    big = [t for t in nodes if len(t) > 1]
    conj = Conjunctions.from_tuples(n_atoms, big, max_degree=0)
    index = {t: n_atoms + j for j, t in enumerate(big)}
    return np.array([t[0] if len(t) == 1 else index[t] for t in nodes], dtype=np.int64), conj


def most_specific(masks: np.ndarray) -> np.ndarray:
    """Positions of the nodes (mask rows) with no other node above them
    (no strict superset among the rows)."""
    inside = is_subset(masks[:, None, :], masks[None, :, :])  # [a, b]: a subset of b
    np.fill_diagonal(inside, False)
    return np.flatnonzero(~inside.any(axis=1))


@dataclass
class Generalized:
    """The kept model: its weights (over atoms + conjunctions), the
    conjunctions, the constrained nodes, and one trace row per round."""

    weights: Weights
    conjunctions: Conjunctions
    constrained: list[tuple[int, ...]]
    trace: list[dict]
    best_round: int
    stop: Stop


def _features(preds: np.ndarray, k: int) -> np.ndarray:
    return np.sort((preds[:, None] * k + np.arange(k)[None, :]).ravel())


def _strength(weights: Weights, preds: np.ndarray, k: int) -> np.ndarray:
    """max over labels of |w(node, label)| for each node's predicate."""
    dense = dict(zip(weights.active_ids().tolist(), np.abs(weights.values).tolist()))
    return np.array([max(dense.get(int(p) * k + y, 0.0) for y in range(k)) for p in preds])


@dataclass
class Criterion:
    """What a round is judged by: held-out mean loss and accuracy, or
    without held-out data the training AIC per unit of training weight,
    (AIC / 2) / N = mean training loss + (non-zero weights) / N (Akaike's
    criterion, the alternative Mikheev's section 4 cites)."""

    mean_loss: float
    accuracy: float


def criterion(held: ExpandedBackend | None, train: ExpandedBackend, weights: Weights) -> Criterion:
    if held is not None:
        stats = evaluate_backend(held, weights, None)
        return Criterion(stats.mean_loss, stats.accuracy)
    stats = evaluate_backend(train, weights, None)
    n_params = int(np.count_nonzero(weights.values))
    return Criterion(stats.mean_loss + n_params / max(stats.weight, 1e-300), stats.accuracy)


# long: one loop of fit, score, choose and remove; split it and the state goes in many arguments
def generalize(
    ctx: TrainingContext,
    nodes: list[tuple[int, ...]],
    masks: np.ndarray,
    fraction: float,
    patience: int,
) -> Generalized:
    """Fit over the constrained ``nodes`` (atom tuples; ``masks`` their
    lattice bitmasks), then unconstrain and refit as the module says."""
    from ..baselines import fit_smooth

    k = ctx.backend.space.n_labels
    preds, conj = node_predicates(nodes, ctx.backend.space.n_predicates)
    train = ExpandedBackend(ctx.backend, conj, cache=ctx.config.lattice.cache_widened)
    held = (
        ExpandedBackend(ctx.heldout, conj, cache=ctx.config.lattice.cache_widened)
        if ctx.heldout is not None
        else None
    )
    sub = dataclasses.replace(ctx, backend=train, scaling=None)
    alive = np.ones(len(nodes), dtype=bool)
    start: Weights | None = None
    trace: list[dict] = []
    best: tuple[float, Weights, np.ndarray] | None = None
    best_round, stop = 0, Stop(StopReason.NO_NODE_LEFT)
    removed_nodes: list[list[int]] = []
    for rnd in range(len(nodes) + 1):
        passes0 = train.passes
        fit = fit_smooth(sub, _features(preds[alive], k), ctx.config.l2, start)
        stats = criterion(held, train, fit.weights)
        trace.append(
            {
                "round": rnd,
                "constraints": int(alive.sum()),
                "removed": removed_nodes,
                "objective": fit.report["objective"],
                "heldout_loss": stats.mean_loss,
                "heldout_accuracy": stats.accuracy,
                "passes": train.passes - passes0,
            }
        )
        log.info(
            "lattice generalization round %d: %d constraints, held-out loss %.6f, accuracy %.5f",
            rnd,
            alive.sum(),
            stats.mean_loss,
            stats.accuracy,
        )
        if best is None or stats.mean_loss <= best[0] + 1e-12:
            best, best_round = (stats.mean_loss, fit.weights, alive.copy()), rnd
        elif rnd - best_round >= patience:
            stop = Stop(StopReason.HELDOUT_PATIENCE, {"patience": patience, "unit": "rounds"})
            break
        live = np.flatnonzero(alive)
        if len(live) <= 1:
            break
        top = live[most_specific(masks[live])]
        n_remove = min(len(top), max(1, math.ceil(fraction * len(live))), len(live) - 1)
        order = np.argsort(_strength(fit.weights, preds[top], k), kind="stable")
        removed = top[order[:n_remove]]
        alive[removed] = False
        removed_nodes = [list(nodes[i]) for i in removed]
        start = fit.weights
    for wide in (train, held):
        if wide is not None:
            wide.close()
    assert best is not None, "at least one fit ran"
    _, weights, kept = best
    return Generalized(
        weights, conj, [nodes[i] for i in np.flatnonzero(kept)], trace, best_round, stop
    )


def trim(weights: Weights, conj: Conjunctions, space: Space) -> tuple[Weights, Conjunctions]:
    """The weights with the conjunctions no non-zero weight uses dropped
    (and the others renumbered), so the model holds only what it scores with."""
    w = weights.sparse()
    preds = w.active_ids() // space.n_labels
    used = np.unique(preds[preds >= conj.n_atoms] - conj.n_atoms)
    smaller, remap = conj.subset(used)
    ids = remap[preds] * space.n_labels + w.active_ids() % space.n_labels
    order = np.argsort(ids)
    return Weights(ids[order], w.values[order], w.bias), smaller


def fit_result(gen: Generalized, space: Space, report: dict) -> FitResult:
    weights, conj = trim(gen.weights, gen.conjunctions, space)
    return FitResult(weights, report, conjunctions=conj)
