"""Combination features by l1 grafting (Okanohara & Tsujii 2009, sections
2.2-3): ``train.method = "grafting"`` with ``train.grafting.combination_degree``
2 or 3.

The candidates are the atomic features (predicate, label) plus every
(conjunction of 2..degree distinct predicates that fire together in some
event, label); a conjunction's value is the product of its atoms' values
(kernels/conjunctions.py). The schedule is the paper's: grafting over the
atoms first (methods/grafting.py, unchanged), then rounds in which
conjunctions enter by the same gradient test, n best per round, with the
same round solver, pruning, checkpoints and certificate.

The test over conjunctions never enumerates them (kernels/combination_search.py):
one pass sums t+, t- per atomic feature; atoms whose bound (Eq. 5) cannot
exceed the test's bound take part in no conjunction; a second pass forms
only the pairs of surviving atoms inside each event and sums their exact
gradients by key; at degree 3 a third pass forms only the triples whose
three pairs survive their own bound. Conjunctions that entered the model
become derived predicates, tested with the atoms by the ordinary gradient
test over the widened events (backends/expanded.py). The certificate at the
end covers every conjunction up to the degree: the examined ones by their
exact gradient, all others by the bound.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..backends.base import Backend, PassesOn
from ..backends.expanded import ExpandedBackend
from ..errors import ConfigError, InputError
from ..kernels import MULTICLASS, Space, Weights
from ..kernels.combination_search import AtomBoundTask, ConjunctionSums, FormTask, ValueRangeTask
from ..kernels.conjunctions import MAX_DEGREE, Conjunctions
from ..model_conjunctions import atoms_of_keys, check_key_range
from ..problem import Certificate, ConjunctionCheck
from ..selection.base import FitResult, LoopState, RoundOutcome, TrainingContext
from ..selection.loop import run_rounds
from ..selection.reporting import FeatureNamer
from ..selection.stops import StopReason, stop
from .gradient_test import TestResult
from .grafting import Grafting, grafting_report, variant
from .round_details import ATOMS_PHASE, COMBINATION_PHASE, CombinationRound, ConjunctionSearch

log = logging.getLogger(__name__)

#: LoopState.arrays keys: the conjunctions formed so far, and the phase
CONJUNCTIONS, PHASE = "conjunctions", "phase"
ATOMS, COMBINATION = 0, 1
#: largest batch of new conjunction features (a geometric batch stops growing here)
MAX_BATCH = 2**40


def grown_batch(first: int, growth: float, rounds: int) -> int:
    """``first`` times ``growth`` once per earlier round that formed
    conjunctions, capped at ``MAX_BATCH`` as it grows (a large growth, e.g.
    "all at once", never overflows a float)."""
    batch = float(first)
    for _ in range(rounds):
        batch = min(batch * growth, MAX_BATCH)
    return int(batch)


@dataclass(frozen=True)
class Found:
    """The conjunction test at some weights.

    Attributes
    ----------
    keys, labels, grad : the selected (conjunction key, label) features not
        yet formed, best first, and their dC/dw.
    best : float
        max |dC/dw| over examined features of conjunctions not yet formed
        (every other one is at most the bound).
    counts : ConjunctionSearch
        What the search examined (the trace's entries).
    """

    keys: np.ndarray
    labels: np.ndarray
    grad: np.ndarray
    best: float
    counts: ConjunctionSearch


def search(
    backend,
    space: Space,
    weights: Weights,
    conj: Conjunctions,
    degree: int,
    gamma1_tested: float,
    n: int,
) -> Found:
    """The ``n`` best (conjunction, label) features not yet formed whose
    |dC/dw| exceeds ``gamma1_tested``, exactly, in 2 passes (degree 2) or 3, over
    ``backend``'s events (atoms only, or widened by ``conj``: the round's
    backend, whose widened events a local fit keeps); ``space`` and
    ``weights`` are over the atoms followed by ``conj``."""
    K, n_atoms = space.n_labels, conj.n_atoms
    sums = backend.run(AtomBoundTask(space, weights, conj))
    W = sums.weight
    mask = np.stack([sums.tplus / W > gamma1_tested, -sums.tminus / W > gamma1_tested], axis=2)
    atoms = np.flatnonzero(mask.any(axis=(1, 2)))
    pairs_surviving, passes = 0, 1
    found: list[ConjunctionSums] = []
    if len(atoms) >= 2:
        found.append(backend.run(FormTask(space, weights, conj, 2, atoms, mask[atoms], atoms)))
        passes += 1
    if degree == MAX_DEGREE and found and len(found[0].keys):
        pairs = found[0]
        pair_key, k = np.divmod(pairs.keys, K)
        alive = np.stack(
            [pairs.tplus / W > gamma1_tested, -pairs.tminus / W > gamma1_tested], axis=1
        )
        some = alive.any(axis=1)
        parts, inv = np.unique(pair_key[some], return_inverse=True)
        pmask = np.zeros((len(parts), K, 2), dtype=bool)
        pmask[inv, k[some]] = alive[some]
        pairs_surviving = int(len(parts))
        if len(parts) >= 2:
            used = np.unique(np.concatenate([parts // n_atoms, parts % n_atoms]))
            found.append(backend.run(FormTask(space, weights, conj, 3, parts, pmask, used)))
            passes += 1
    keys = np.concatenate([f.keys for f in found]) if found else np.zeros(0, dtype=np.int64)
    v = np.concatenate([f.v for f in found]) if found else np.zeros(0)
    conj_key, label = np.divmod(keys, K)
    grad = -v / W
    score = np.abs(grad)
    score[conj.lookup(conj_key) >= 0] = -1.0  # formed: the ordinary test covers them
    # keys are sorted (pairs' keys below triples'): count conjunctions by runs
    examined = int(np.count_nonzero(np.diff(conj_key)) + (len(keys) > 0))
    counts = ConjunctionSearch(int(len(atoms)), pairs_surviving, passes, examined, len(keys))
    top = best_first(score, keys, gamma1_tested, n)
    return Found(conj_key[top], label[top], grad[top], float(score.max(initial=0.0)), counts)


def best_first(score: np.ndarray, keys: np.ndarray, gamma1_tested: float, n: int) -> np.ndarray:
    """Positions of the ``n`` largest ``score`` above ``gamma1_tested``, best first,
    ties by key: a partition to the n-th largest score, then a sort of only
    those at or above it (the same as sorting everything)."""
    above = np.flatnonzero(score > gamma1_tested)
    if len(above) > n > 0:
        nth = np.partition(score[above], len(above) - n)[len(above) - n]
        above = above[score[above] >= nth]
    order = above[np.lexsort((keys[above], -score[above]))]
    return order[:n]


def _conjunctions(state: LoopState, first: Conjunctions) -> Conjunctions:
    """The conjunctions formed so far (``first`` before the first round)."""
    rows = state.arrays.get(CONJUNCTIONS)
    if rows is None:
        return first
    return Conjunctions(first.n_atoms, np.asarray(rows, dtype=np.int64).reshape(-1, MAX_DEGREE))


def _arrays(conj: Conjunctions, phase: int) -> dict:
    return {CONJUNCTIONS: conj.atoms.copy(), PHASE: np.array([phase])}


class Combination:
    """The round method: atoms' grafting rounds, then combination rounds."""

    def __init__(self, ctx: TrainingContext, search_best: int | None = None, growth: float = 1.0):
        self.ctx = ctx
        self.spec = variant("grafting", ctx.config)
        #: new conjunction features a round forms at most (the search's own
        #: limit) in the first combination round that finds some
        self.search_best = search_best or ctx.config.grafting.n_best
        #: each later combination round that still finds some forms up to
        #: this many times the last round's limit (1: a fixed batch)
        self.growth = growth
        self.degree = ctx.config.grafting.combination_degree
        self.n_atoms = ctx.backend.space.n_predicates
        #: the warm start's conjunctions (its weights are over the atoms followed by them)
        self.first = ctx.start_conjunctions or Conjunctions.empty(self.n_atoms)
        self.namer = FeatureNamer(ctx.backend)
        self._current: tuple[int, Grafting] | None = None
        #: conjunction builds of the rounds' released widened events
        self.builds = 0
        self.last_found: tuple[Weights, int, Found] | None = None
        #: the last combination round's selection: feature ids over the
        #: atoms followed by the conjunctions (tests compare it with brute force)
        self.selected: tuple[np.ndarray, Conjunctions] | None = None

    def grafting(self, conj: Conjunctions) -> Grafting:
        """Grafting over the atoms followed by ``conj`` (kept while it grows
        not). The conjunctions are formed in the events once for the
        round's passes (``ExpandedBackend(cache=True)``: in process, on a
        union of training and held-out events, or a cached copy on Spark),
        not again in every pass; the previous round's copy is released."""
        if self._current is None or self._current[0] != len(conj):
            self.close()
            widened = ExpandedBackend(self.ctx.backend, conj, cache=True)
            ctx = dataclasses.replace(self.ctx, backend=widened)
            self._current = (len(conj), Grafting(ctx, self.spec))
        return self._current[1]

    def _widened(self) -> ExpandedBackend | None:
        if self._current is None:
            return None
        backend = self._current[1].ctx.backend
        assert isinstance(backend, ExpandedBackend)
        return backend

    def close(self) -> None:
        """Releases the current round's widened events (counting their builds)."""
        widened = self._widened()
        if widened is not None:
            self.builds += widened.builds
            widened.builds = 0
            widened.close()

    @property
    def conjunction_builds(self) -> int:
        """How often conjunctions were formed over all the training events
        (once per round's set of conjunctions when cached, else once a pass)."""
        widened = self._widened()
        return self.builds + (widened.builds if widened is not None else 0)

    @property
    def conjunctions(self) -> Conjunctions:
        """The conjunctions of the latest round's feature space."""
        widened = self._widened()
        return self.first if widened is None else widened.conjunctions

    def batch(self, state: LoopState) -> int:
        """New conjunction features this round forms at most: ``search_best``
        times ``growth`` to the number of earlier combination rounds of this
        fit that formed some (the trace: the same after a resume). A
        warm-started path point's atoms enter all at once (choice/points.py
        ``round_size``); a batch that grows geometrically lets the
        conjunctions above gamma1 enter in a logarithmic number of rounds
        while a round that finds few still adds few. The optimum is the
        same for any batch (Okanohara & Tsujii 2009, section 2.2: grafting
        ends when no candidate's gradient exceeds gamma1)."""
        grown = sum(
            1
            for r in state.trace
            if r.detail_as(CombinationRound).phase == COMBINATION_PHASE
            and (r.detail_as(CombinationRound).conjunctions_added or 0) > 0
        )
        return grown_batch(self.search_best, self.growth, grown)

    def find(
        self, weights: Weights, conj: Conjunctions, g: Grafting, n: int | None = None
    ) -> Found:
        """The conjunction test at ``weights``, selecting at most ``n`` (None:
        ``search_best``; no pass when just run there with the same ``n``, or
        with any when ``n`` is None: only its bound is then needed)."""
        if self.last_found is not None and self.last_found[0] is weights:
            if n is None or self.last_found[1] == n:
                return self.last_found[2]
        n = self.search_best if n is None else n
        found = search(
            g.ctx.backend,
            g.ctx.backend.space,
            weights,
            conj,
            self.degree,
            g.gradient_test.gamma1_tested,
            n,
        )
        self.last_found = (weights, n, found)
        return found

    def round(self, state: LoopState) -> RoundOutcome:
        conj = _conjunctions(state, self.first)
        g = self.grafting(conj)
        if int(state.arrays.get(PHASE, [ATOMS])[0]) == ATOMS:
            out = g.round(state)
            if out.stop is None:
                detail = CombinationRound(ATOMS_PHASE)
                return dataclasses.replace(out, arrays=_arrays(conj, ATOMS), detail=detail)
            log.info("atoms optimized (%s); searching conjunctions", out.note or out.stop.message)
        return self._combination_round(state, conj, g)

    def _combination_round(self, state: LoopState, conj: Conjunctions, g: Grafting):
        weights = state.weights
        test = g.gradient_test.test(weights)
        found = self.find(weights, conj, g, self.batch(state))
        best = max(test.best, found.best)
        detail = CombinationRound(COMBINATION_PHASE, found.counts)
        if not len(test.new) and not len(found.keys):
            last = state.trace[-1] if state.trace else None
            finished = (
                last is not None
                and last.added == 0
                and last.detail_as(CombinationRound).phase == COMBINATION_PHASE
            )
            if test.kkt.passed or finished:
                return RoundOutcome(
                    stop(StopReason.NO_CANDIDATE_PASSES),
                    weights,
                    objective=g.penalized(test.value, weights),
                    score=best,
                    certificate=self.certificate(test.kkt, found),
                )
            out = g.grow(weights, test, finish=True)
            return dataclasses.replace(out, arrays=_arrays(conj, COMBINATION), detail=detail)
        K = g.ctx.backend.space.n_labels
        degree = np.where(found.keys >= self.n_atoms**2, MAX_DEGREE, 2)
        rows = np.concatenate(
            [atoms_of_keys(found.keys[degree == d], d, self.n_atoms) for d in (2, MAX_DEGREE)]
        )
        keys = np.concatenate([found.keys[degree == d] for d in (2, MAX_DEGREE)])
        labels = np.concatenate([found.labels[degree == d] for d in (2, MAX_DEGREE)])
        grad = np.concatenate([found.grad[degree == d] for d in (2, MAX_DEGREE)])
        grown = conj.extend(rows)
        ids = np.concatenate([test.new, grown.lookup(keys) * K + labels])
        grads = np.concatenate([test.new_grad, grad])
        top = np.lexsort((ids, -np.abs(grads)))[: self.ctx.config.grafting.n_best]
        chosen = ids[top]
        # the found conjunctions that made the cut (the others are not formed)
        new = chosen // K - self.n_atoms
        keep = np.union1d(np.arange(len(conj)), new[new >= len(conj)])
        grown, remap = grown.subset(keep)
        p, k = np.divmod(chosen, K)
        chosen = remap[p] * K + k
        self.selected = (chosen, grown)
        g2 = self.grafting(grown)
        gt = TestResult(test.value, test.lossgrad, chosen, grads[top], best, test.kkt)
        out = g2.grow(weights, gt)
        self.namer.conjunctions = grown
        # weights on conjunctions (new ones, or new labels of formed ones)
        conj_weights = [int(j) for j in chosen if j // K >= self.n_atoms]
        names = [self.namer(j) for j in conj_weights[:3]]
        added = int(len(grown) - len(conj))
        detail = dataclasses.replace(detail, conjunctions_added=added)
        note = f"+{added} conjunctions" + (
            f", {len(conj_weights)} conjunction weights ({', '.join(names)}"
            f"{', ...' if len(conj_weights) > 3 else ''})"
            if conj_weights
            else ""
        )
        note += f", {found.counts.conjunctions_examined} examined"
        return dataclasses.replace(
            out, arrays=_arrays(grown, COMBINATION), detail=detail, note=note
        )

    def certificate(self, kkt: Certificate, found: Found) -> Certificate:
        """The KKT certificate over atoms and formed conjunctions (``kkt``)
        extended to every conjunction up to the degree."""
        gamma1_tested = kkt.zero_bound
        check = ConjunctionCheck(
            self.degree,
            found.counts.conjunctions_examined,
            found.counts.conjunction_features_examined,
            found.best,
            bound=gamma1_tested,
            passed=bool(found.best <= gamma1_tested),
        )
        return kkt.with_conjunctions(check)


def check_data(ctx: TrainingContext) -> None:
    """The search needs multiclass events, unstandardized values in [0, 1]
    (a conjunction's value is then at most its atoms'), and int64 keys."""
    space = ctx.backend.space
    if space.shape != MULTICLASS:
        raise InputError(
            "train.grafting.combination_degree > 1 needs multiclass events, got "
            f"{space.shape} events"
        )
    if ctx.config.standardize:
        raise ConfigError(
            "train.standardize: combination features (train.grafting.combination_degree > 1) "
            "need the raw values in [0, 1]; set train.standardize = false"
        )
    try:
        check_key_range(space.n_predicates, space.n_labels)
    except ValueError as e:
        raise InputError(str(e)) from None
    r = ctx.backend.run(ValueRangeTask())
    namer = FeatureNamer(ctx.backend)
    for value, p in ((r.low, r.low_predicate), (r.high, r.high_predicate)):
        if not 0.0 <= value <= 1.0:
            raise InputError(
                f"predicate {namer.predicate(p)!r} (id {p}) has the value {value:g}: combination "
                "features (train.grafting.combination_degree > 1) need binary values or values "
                "in [0, 1], so that a conjunction's value is at most its atoms' (Okanohara & "
                "Tsujii 2009, section 3); prepare the data as binary predicates (prepare "
                "--binary, data.binary = true, MaxEntClassifier(binary=True): a repeated "
                "feature counts once), rescale it, "
                "or use combination_degree = 1"
            )


def check_start(start: Weights | None, first: Conjunctions, space: Space) -> None:
    """A warm start must be over the atoms followed by its conjunctions
    (``TrainingContext.start_conjunctions``; none: the atoms only)."""
    if first.n_atoms != space.n_predicates:
        raise ConfigError(
            f"warm start of combination features: its conjunctions are over {first.n_atoms} "
            f"atomic predicates, the data has {space.n_predicates}"
        )
    n_features = (space.n_predicates + len(first)) * space.n_labels
    ids = start.active_ids() if start is not None else np.zeros(0, dtype=np.int64)
    if len(ids) and int(ids.max()) >= n_features:
        what = f"and its {len(first)} conjunctions" if len(first) else "only"
        raise ConfigError(
            "warm start of combination features: expected weights over the atomic features "
            f"{what} (ids < {n_features}), got id {int(ids.max())}; pass the conjunctions of "
            "a combination-features model with it (train(warm_conjunctions=...))"
        )


def compact(weights: Weights, conj: Conjunctions, n_labels: int):
    """The weights and conjunctions with the conjunctions left without a
    non-zero weight dropped (renumbered in order)."""
    w = weights.sparse()
    p, k = np.divmod(w.active_ids(), n_labels)
    used = np.unique(p[p >= conj.n_atoms]) - conj.n_atoms
    kept, remap = conj.subset(used)
    ids = remap[p] * n_labels + k
    order = np.argsort(ids)
    return Weights(ids[order], w.values[order], w.bias), kept


class HeldoutWithConjunctions:
    """The held-out events as the current weights need them: widened by the
    conjunctions ``conjunctions()`` returns now (a combination run's latest
    round, or a path's latest point: the weights are over the atoms
    followed by them), formed inside the held-out blocks like the training
    ones. A backend (passes count on ``base``) for the held-out scores
    (``choice.score_on``)."""

    def __init__(self, base: Backend, conjunctions: Callable[[], Conjunctions]):
        self.base, self.conjunctions = base, conjunctions
        self.info = getattr(base, "info", None)
        self._widened: ExpandedBackend | None = None

    def _now(self) -> ExpandedBackend:
        conj = self.conjunctions()
        if self._widened is None or self._widened.conjunctions is not conj:
            self._widened = ExpandedBackend(self.base, conj)
        return self._widened

    @property
    def space(self) -> Space:
        return self._now().space

    @space.setter
    def space(self, value: Space) -> None:
        raise AttributeError("the held-out space follows the conjunctions; it is not set")

    passes = PassesOn("base")

    def run(self, task):
        return self._now().run(task)

    def close(self) -> None:
        """Nothing of its own to release (``base`` is closed by its owner)."""


def fit_combination(
    ctx: TrainingContext, search_best: int | None = None, growth: float = 1.0
) -> FitResult:
    """Grafting with combination features (this module's docstring).
    ``search_best``: the new conjunction features the first combination
    round forms at most (None: ``n_best``), when ``n_best`` is a
    warm-started path point's round size (choice/points.py ``round_size``);
    ``growth``: each later round that formed some multiplies it
    (``Combination.batch``)."""
    check_data(ctx)
    method = Combination(ctx, search_best, growth)
    log.info(
        "grafting with combination features of degree <= %d: l1 %g, %d best per round "
        "(at most %d new conjunction features in the first combination round, x%g in each "
        "later one that finds some), over %d atomic predicates",
        method.degree,
        method.spec.penalty.gamma1,
        ctx.config.grafting.n_best,
        method.search_best,
        method.growth,
        method.n_atoms,
    )
    start = ctx.start.sparse() if ctx.start is not None else None
    check_start(start, method.first, ctx.backend.space)
    # a warm start (l1-Orig at this gamma1, or l1-Comb at the previous one with
    # its conjunctions) shortens the first phase, over the atoms and those conjunctions
    rounds_ctx = ctx
    if ctx.heldout is not None:
        heldout = HeldoutWithConjunctions(ctx.heldout, lambda: method.conjunctions)
        rounds_ctx = dataclasses.replace(ctx, heldout=heldout)
    try:
        names = ("grafting", "max_gradient", "candidate |gradient|")
        state = run_rounds(rounds_ctx, method, *names, start, detail=CombinationRound)
        conj = _conjunctions(state, method.first)
        g = method.grafting(conj)
        cert = state.certificate
        if cert is None:  # stopped by a cap: certify what there is
            found = method.find(state.weights, conj, g)
            cert = method.certificate(g.gradient_test.certify(state.weights), found)
        report = grafting_report(ctx, "grafting", g, state, cert)
    finally:
        method.close()  # the widened events of the last round
    K = ctx.backend.space.n_labels
    weights, kept = compact(state.weights, conj, K)
    method.namer.conjunctions = kept
    ids = weights.active_ids()
    order = np.argsort(-np.abs(weights.values))
    report["combination"] = {
        "degree": method.degree,
        "conjunctions_formed": int(len(conj)),
        "conjunctions_in_model": int(len(kept)),
        "conjunction_builds": method.conjunction_builds,
        "conjunction_weights": int(np.count_nonzero(ids // K >= method.n_atoms)),
        "examined_per_round": [
            r.detail_as(CombinationRound).conjunctions_examined for r in state.trace
        ],
        "top_conjunction_features": [
            [method.namer(int(ids[i])), float(weights.values[i])]
            for i in order
            if ids[i] // K >= method.n_atoms
        ][:50],
    }
    return FitResult(weights, report, conjunctions=kept, stop=state.stop)


__all__ = ["HeldoutWithConjunctions", "fit_combination", "search", "compact"]
