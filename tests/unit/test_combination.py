"""Combination features by grafting (Okanohara & Tsujii 2009): the bound of
Eq. 5 against brute force over every conjunction, the search's and the
rounds' selections against brute force, the certificate against one over
the enumerated space, checkpoints, and data the method refuses."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from sparkmaxent.backends import LocalBackend
from sparkmaxent.config import train_config
from sparkmaxent.data import synthetic
from sparkmaxent.errors import ConfigError, InputError
from sparkmaxent.kernels import MULTICLASS, MulticlassBlock, Space, Weights, loss_grad
from sparkmaxent.kernels.blocks import concat_blocks, split_block
from sparkmaxent.kernels.combination_search import (
    AtomBoundTask,
    EnumerateTask,
    FormTask,
    residuals,
)
from sparkmaxent.kernels.conjunctions import MAX_DEGREE, Conjunctions
from sparkmaxent.methods.combination import Combination, search
from sparkmaxent.methods.round_details import CombinationRound
from sparkmaxent.model_conjunctions import atoms_of_keys
from sparkmaxent.problem import Certificate, kkt_certificate
from sparkmaxent.selection.base import TrainingContext
from sparkmaxent.train import train

from .helpers import interrupt_and_resume

P, K = 14, 3


def random_events(seed: int, m: int = 120, binary: bool = False) -> MulticlassBlock:
    """Weighted events with values in (0, 1] (or binary), dense enough that
    many pairs and triples co-occur."""
    rng = np.random.default_rng(seed)
    X = sp.random(m, P, density=0.35, format="csr", random_state=rng)
    X.data = np.ones_like(X.data) if binary else rng.uniform(0.05, 1.0, X.nnz)
    return MulticlassBlock(X, rng.integers(0, K, m), rng.uniform(0.5, 3.0, m), K)


def every_conjunction(block, degree: int, first: Conjunctions | None = None) -> Conjunctions:
    """Every conjunction that fires in some event (brute force), after
    ``first`` (so its derived ids are kept)."""
    n = block.n_predicates
    keys = EnumerateTask(n, degree)(block).keys
    rows = np.concatenate(
        [atoms_of_keys(keys[keys < n * n], 2, n), atoms_of_keys(keys[keys >= n * n], 3, n)]
    )
    return (first or Conjunctions.empty(n)).extend(rows)


def exact_sums(block, conj_all: Conjunctions, space: Space, weights: Weights, conj):
    """v, t+, t- of every (conjunction, label) of ``conj_all`` (m x n products)."""
    alpha = residuals(block, space, weights, conj)
    V = conj_all.values(block.X).T.tocsr()
    return V @ alpha, V @ np.maximum(alpha, 0), V @ np.minimum(alpha, 0)


def some_weights(rng, conj: Conjunctions) -> tuple[Space, Weights]:
    space = Space(MULTICLASS, conj.n_predicates, K, bias=True)
    ids = np.sort(rng.choice(space.n_features, size=min(12, space.n_features), replace=False))
    return space, Weights(ids, rng.normal(0, 0.8, len(ids)), rng.normal(0, 0.3, K))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bound_brackets_every_exact_gradient(seed):
    rng = np.random.default_rng(seed)
    block = random_events(seed, binary=seed == 2)
    formed = Conjunctions.from_tuples(P, [(0, 1), (2, 3, 4)])
    space, weights = some_weights(rng, formed)
    sums = AtomBoundTask(space, weights, formed)(block)
    conj_all = every_conjunction(block, 3)
    v, tp, tm = exact_sums(block, conj_all, space, weights, formed)
    # the atoms' own sums are exact too
    alpha = residuals(block, space, weights, formed)
    np.testing.assert_allclose(sums.tplus - (-sums.tminus), block.X.T @ alpha, atol=1e-12)
    atoms = conj_all.atoms
    lo = np.full(v.shape, -np.inf)
    hi = np.full(v.shape, np.inf)
    for d in range(MAX_DEGREE):
        has = atoms[:, d] >= 0
        lo[has] = np.maximum(lo[has], sums.tminus[atoms[has, d]])
        hi[has] = np.minimum(hi[has], sums.tplus[atoms[has, d]])
    assert (v >= lo - 1e-12).all() and (v <= hi + 1e-12).all()
    # both signs occur, at degree 2 and at degree 3
    for d in (2, 3):
        rows = conj_all.degree == d
        assert (v[rows] > 1e-3).any() and (v[rows] < -1e-3).any()
    # a triple is bracketed by each of its pairs' t+, t- too (the second level)
    pair_ids = conj_all.lookup(
        np.array([a * P + b for a, b, c in atoms[conj_all.degree == 3][:, :3]])
    )
    triple = np.flatnonzero(conj_all.degree == 3)
    pair_pos = pair_ids - P
    assert (v[triple] <= tp[pair_pos] + 1e-12).all()
    assert (v[triple] >= tm[pair_pos] - 1e-12).all()


def brute_top(block, space, weights, conj, degree, bound, n):
    """The n best inactive features over the atoms and every conjunction
    (enumerated), as {(atom tuple, label): gradient}, the |gradient| of
    every inactive feature above the bound by the same names, and the n-th
    best |gradient| (features tied with it may take its place)."""
    conj_all = every_conjunction(block, degree, conj)
    big = Space(MULTICLASS, conj_all.n_predicates, K, bias=True)
    lg = loss_grad(conj_all.expand(block), big, weights, None, None)
    g = lg.grad / lg.weight
    score = np.abs(g)
    score[weights.active_ids()] = -1
    order = np.lexsort((np.arange(len(g)), -score))
    passing = order[score[order] > bound]
    top = passing[:n]
    n_atoms = block.n_predicates

    def name(j):
        p, k = divmod(int(j), K)
        return ((p,) if p < n_atoms else conj_all.tuples()[p - n_atoms], k)

    nth = float(score[top[-1]]) if len(top) else np.inf
    return {name(j): g[j] for j in top}, {name(j): score[j] for j in passing}, nth


def same_up_to_ties(got: set, expect: dict, scores: dict, nth: float, tol=1e-9) -> bool:
    """``got`` is a brute-force selection: as many features, each passing
    with a score within ``tol`` of the n-th best or above it, and every
    feature scoring clearly above the n-th best among them."""
    sure = {f for f, s in scores.items() if s > nth + tol}
    return (
        len(got) == len(expect)
        and sure <= got
        and all(f in scores and scores[f] >= nth - tol for f in got)
    )


@pytest.mark.parametrize("degree", [2, 3])
def test_search_selects_what_brute_force_selects(degree):
    rng = np.random.default_rng(degree)
    blocks = split_block(random_events(10 + degree, m=300), 3)
    block = concat_blocks(blocks)
    formed = Conjunctions.from_tuples(P, [(0, 1), (5, 6, 7)])
    space, weights = some_weights(rng, formed)
    backend = LocalBackend(blocks, Space(MULTICLASS, P, K, bias=True))
    for bound, n in ((0.005, 7), (0.02, 4), (0.5, 3)):
        found = search(backend, space, weights, formed, degree, bound, n)
        # brute force over conjunctions only (atoms and formed ones are the ordinary test's)
        conj_all = every_conjunction(block, degree, formed)
        big = Space(MULTICLASS, conj_all.n_predicates, K, bias=True)
        lg = loss_grad(conj_all.expand(block), big, weights, None, None)
        g = (lg.grad / lg.weight).reshape(-1, K)[P + len(formed) :]
        score = np.abs(g).ravel()
        order = np.lexsort((np.arange(len(score)), -score))
        want = order[score[order] > bound][:n]
        tuples = conj_all.tuples()[len(formed) :]
        expect = {(tuples[j // K], j % K): g.ravel()[j] for j in want}
        got_rows = [
            tuple(int(a) for a in atoms_of_keys([k], 3 if k >= P * P else 2, P)[0] if a >= 0)
            for k in found.keys
        ]
        got = dict(zip(zip(got_rows, found.labels.tolist()), found.grad))
        assert set(got) == set(expect)
        for key, value in got.items():
            assert value == pytest.approx(expect[key], rel=1e-9, abs=1e-12)
        if score.max() > bound:
            assert found.best == pytest.approx(score.max(), rel=1e-9)
        else:  # nothing passes: what was examined is below the bound, the rest by Eq. 5
            assert found.best <= score.max() + 1e-12
        assert found.counts.conjunctions_examined <= len(conj_all)
    # a high bound rules nearly everything out without forming it
    assert found.counts.conjunctions_examined < len(tuples) / 2


@pytest.mark.parametrize("seed", [0, 2])
def test_formed_pairs_are_exactly_the_surviving_ones_with_brute_force_sums(seed):
    """The pair pass (one sparse product per label, merged across blocks)
    forms a (pair, label) iff both atoms survive for that label with the
    same sign, and its v, t+, t- equal brute force over the enumerated pairs."""
    rng = np.random.default_rng(seed)
    blocks = split_block(random_events(20 + seed, m=240, binary=seed == 2), 3)
    block = concat_blocks(blocks)
    formed = Conjunctions.from_tuples(P, [(0, 1), (2, 3, 4)])
    space, weights = some_weights(rng, formed)
    backend = LocalBackend(blocks, Space(MULTICLASS, P, K, bias=True))
    sums = backend.run(AtomBoundTask(space, weights, formed))
    W = sums.weight
    bound = float(np.median(np.abs(np.concatenate([sums.tplus, sums.tminus])) / W))
    mask = np.stack([sums.tplus / W > bound, -sums.tminus / W > bound], axis=2)
    atoms = np.flatnonzero(mask.any(axis=(1, 2)))
    got = backend.run(FormTask(space, weights, formed, 2, atoms, mask[atoms], atoms))

    pairs = every_conjunction(block, 2)
    v, tp, tm = exact_sums(block, pairs, space, weights, formed)
    a, b = pairs.atoms[:, 0], pairs.atoms[:, 1]
    survives = (mask[a, :, 0] & mask[b, :, 0]) | (mask[a, :, 1] & mask[b, :, 1])
    j, k = np.nonzero(survives)
    want = (a[j] * P + b[j]) * K + k
    order = np.argsort(want)
    # the bound rules some pairs out for some label, and keeps some of both signs
    assert 0 < len(want) < survives.size
    assert (v[j, k] > 0).any() and (v[j, k] < 0).any()
    np.testing.assert_array_equal(got.keys, want[order])
    for mine, exact in ((got.v, v), (got.tplus, tp), (got.tminus, tm)):
        np.testing.assert_allclose(mine, exact[j, k][order], rtol=1e-12, atol=1e-14)


def planted(seed=4, m=2500, n_predicates=40):
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=m,
            n_predicates=n_predicates,
            n_labels=K,
            active_per_event=6,
            n_support=6,
            n_conjunctions=3,
            min_support_count=60,
            seed=seed,
        )
    )
    block = data.block()
    return data, block, Space(MULTICLASS, n_predicates, K, bias=True)


def comb_config(degree, **kw):
    base = dict(method="grafting", l1=3e-3, n_best=4, gtol=1e-9, combination_degree=degree)
    return train_config(**{**base, **kw})


@pytest.mark.parametrize(
    "degree",
    [2, pytest.param(3, marks=[pytest.mark.slow, pytest.mark.ci])],  # 3: every triple
)
def test_each_round_selects_the_brute_force_n_best(degree):
    data, block, space = planted()
    blocks = split_block(block, 2)
    cfg = comb_config(degree)
    states = []

    def keep(state):
        states.append(
            dataclasses.replace(state, trace=list(state.trace), arrays=dict(state.arrays))
        )

    result = train(LocalBackend(blocks, space), cfg, on_round=keep)
    assert result.conjunctions is not None and len(result.conjunctions)
    checked = 0
    for state in states:
        if int(state.arrays.get("phase", [0])[0]) == 0:
            continue
        method = Combination(TrainingContext(LocalBackend(blocks, space), cfg))
        out = method.round(state)
        if method.selected is None:
            continue
        chosen, grown = method.selected
        conj = Conjunctions(space.n_predicates, state.arrays["conjunctions"].reshape(-1, 3))
        # the progress note counts the conjunctions formed and the weights on conjunctions
        on_conj = chosen[chosen // K >= space.n_predicates] // K - space.n_predicates
        formed = {grown.tuples()[q] for q in on_conj} - set(conj.tuples())
        assert out.note.startswith(f"+{len(formed)} conjunctions")
        if len(on_conj):
            assert f", {len(on_conj)} conjunction weights (" in out.note
            assert out.note.count("&") >= min(3, len(on_conj))
        bound = method.grafting(conj).gradient_test.gamma1_tested
        expect, scores, nth = brute_top(
            block, space, state.weights, conj, degree, bound, cfg.grafting.n_best
        )
        p, k = np.divmod(chosen, K)
        got = {
            ((q,) if q < space.n_predicates else grown.tuples()[q - space.n_predicates], kk)
            for q, kk in zip(p.tolist(), k.tolist())
        }
        assert same_up_to_ties(got, expect, scores, nth)
        checked += 1
    assert checked >= 2


@pytest.mark.parametrize("degree", [2, 3])
def test_certificate_equals_the_enumerated_one(degree):
    data, block, space = planted(seed=5)
    cfg = comb_config(degree, max_rounds=0)
    result = train(LocalBackend(split_block(block, 2), space), cfg)
    cert = result.report.certificate
    conj = result.conjunctions
    conj_all = every_conjunction(block, degree, conj)
    big = Space(MULTICLASS, conj_all.n_predicates, K, bias=True)
    lg = loss_grad(conj_all.expand(block), big, result.weights, None, None)
    full = kkt_certificate(
        lg.grad / lg.weight, result.weights, lg.grad_bias / lg.weight, cfg.grafting.l1, 1e-6
    )
    assert cert.passed and full.passed
    ours = max(cert.max_zero_gradient, cert.conjunctions.max_examined_gradient)
    assert ours == pytest.approx(full.max_zero_gradient, rel=1e-7)
    assert cert.max_active_violation == pytest.approx(full.max_active_violation, abs=1e-9)
    # some conjunction entered and helps: the objective is below the atoms-only one
    atoms_only = train(LocalBackend([block], space), comb_config(1))
    assert result.report.objective < atoms_only.report.objective - 1e-4
    assert result.report["combination"]["conjunctions_in_model"] == len(conj) > 0
    names = [n for n, _ in result.report["combination"]["top_conjunction_features"]]
    assert all(" & " in n and "|" in n for n in names)


def test_stopped_run_certificate_covers_conjunctions_by_the_bound():
    data, block, space = planted(seed=6)
    result = train(LocalBackend([block], space), comb_config(2, max_rounds=6, l1=1e-3))
    cert = result.report.certificate
    assert result.report.stop.message == "max_rounds = 6"
    part = cert.conjunctions
    assert part.unexamined.startswith("every conjunction never formed")
    conj = result.conjunctions
    conj_all = every_conjunction(block, 2, conj)
    big = Space(MULTICLASS, conj_all.n_predicates, K, bias=True)
    lg = loss_grad(conj_all.expand(block), big, result.weights, None, None)
    full = kkt_certificate(
        lg.grad / lg.weight, result.weights, lg.grad_bias / lg.weight, 1e-3, 1e-6
    )
    assert cert.passed == full.passed
    # the JSON form the report and a checkpoint hold reads back as the same certificate
    assert Certificate.from_json(cert.to_json()) == cert
    doc = cert.to_json()
    assert list(doc)[-1] == "conjunctions" and list(doc["conjunctions"]) == [
        "degree",
        "examined_conjunctions",
        "examined_features",
        "max_examined_gradient",
        "unexamined",
        "bound",
        "passed",
    ]


def test_resume_in_the_combination_phase_gives_the_same_model(tmp_path):
    data, block, space = planted(seed=7)
    cfg = comb_config(2)
    probe = train(LocalBackend([block], space), cfg)
    phases = [r.detail_as(CombinationRound).phase for r in probe.report.rounds]
    first = phases.index("combination")
    whole, resumed, left = interrupt_and_resume(
        lambda: LocalBackend([block], space), cfg, tmp_path, after=first + 2
    )
    assert left["round"] == first + 2
    assert resumed.conjunctions.tuples() == whole.conjunctions.tuples()
    assert resumed.weights.ids.tolist() == whole.weights.ids.tolist()
    np.testing.assert_allclose(resumed.weights.values, whole.weights.values, rtol=1e-12)


@pytest.mark.parametrize("value", [1.5, -0.25])
def test_values_outside_0_1_are_refused_naming_the_predicate(value):
    block = random_events(3)
    X = block.X.tolil()
    X[4, 9] = value
    bad = MulticlassBlock(X.tocsr(), block.y, block.c, K)
    with pytest.raises(InputError, match=rf"predicate '9' \(id 9\) has the value {value:g}"):
        train(LocalBackend([bad], Space(MULTICLASS, P, K, bias=True)), comb_config(2))


def test_standardization_is_refused():
    block = random_events(3)
    with pytest.raises(ConfigError, match="train.standardize"):
        train(
            LocalBackend([block], Space(MULTICLASS, P, K, bias=True)),
            comb_config(2, standardize=True),
        )


def test_warm_start_from_the_atoms_solution_reaches_the_same_model():
    """l1-Comb warm-started from l1-Orig at the same gamma1 (the benchmark's
    grid) ends at the cold run's objective, in fewer passes; weights over
    conjunctions are refused as a start."""
    data, block, space = planted(seed=7)
    cold_backend = LocalBackend([block], space)
    cold = train(cold_backend, comb_config(2))
    orig = train(LocalBackend([block], space), comb_config(1))
    warm_backend = LocalBackend([block], space)
    warm = train(warm_backend, comb_config(2), warm_start=orig.weights)
    assert warm.report.certificate.passed and cold.report.certificate.passed
    assert warm.report.objective == pytest.approx(cold.report.objective, rel=1e-6)
    assert len(warm.conjunctions) > 0
    assert warm_backend.passes < cold_backend.passes
    with pytest.raises(ConfigError, match="atomic features only"):
        train(LocalBackend([block], space), comb_config(2), warm_start=cold.weights)


def test_heldout_scores_each_round_over_its_conjunctions():
    """With held-out data every round is scored over the atoms and the
    round's conjunctions, formed in the held-out events: the last round's
    held-out accuracy is the final model's on them."""
    data, block, space = planted(seed=8, m=3000)
    train_part, held = split_block(block, 2)
    result = train(LocalBackend([train_part], space), comb_config(2), LocalBackend([held], space))
    rounds = result.report.rounds
    phases = [r.detail_as(CombinationRound).phase for r in rounds]
    assert "combination" in phases and len(result.conjunctions)
    wide = Space(MULTICLASS, result.conjunctions.n_predicates, K, bias=True)
    S = result.conjunctions.expand(held).X @ result.weights.matrix(wide) + result.weights.bias
    accuracy = float(held.c @ (S.argmax(axis=1) == held.y)) / float(held.c.sum())
    assert rounds[-1].heldout_accuracy == pytest.approx(accuracy, rel=1e-12)


@pytest.mark.parametrize("degree", [2, 3])
def test_warm_start_from_the_previous_gamma1_with_its_conjunctions(degree):
    """l1-Comb at gamma1 warm-started from l1-Comb at a larger gamma1 (its
    weights and conjunctions: the benchmark's descending grid) ends at the
    cold run's objective, certified over every conjunction, in fewer
    passes; conjunctions over other atoms are refused."""
    data, block, space = planted(seed=9)
    strong = train(LocalBackend([block], space), comb_config(degree, l1=6e-3))
    assert len(strong.conjunctions) > 0
    cold_backend = LocalBackend([block], space)
    cold = train(cold_backend, comb_config(degree))
    warm_backend = LocalBackend([block], space)
    warm = train(
        warm_backend,
        comb_config(degree),
        warm_start=strong.weights,
        warm_conjunctions=strong.conjunctions,
    )
    assert warm.report.certificate.passed and cold.report.certificate.passed
    assert warm.report.certificate.conjunctions.passed
    assert warm.report.objective == pytest.approx(cold.report.objective, rel=1e-6)
    assert warm_backend.passes < cold_backend.passes
    # the start's conjunctions that keep a weight are still in the model
    kept = set(warm.conjunctions.tuples())
    assert kept & set(strong.conjunctions.tuples())
    other = Conjunctions(space.n_predicates + 1, strong.conjunctions.atoms)
    with pytest.raises(ConfigError, match="over 41 atomic predicates, the data has 40"):
        train(
            LocalBackend([block], space),
            comb_config(degree),
            warm_start=strong.weights,
            warm_conjunctions=other,
        )


def test_in_process_rounds_form_the_conjunctions_once_and_fit_the_same_model(monkeypatch):
    data, block, space = planted(seed=6)
    blocks = split_block(block, 2)
    cfg = comb_config(2)
    calls = []
    expand = Conjunctions.expand

    def counted(self, b):
        calls.append(len(self))
        return expand(self, b)

    monkeypatch.setattr(Conjunctions, "expand", counted)
    backend = LocalBackend(blocks, space)
    cached = train(backend, cfg)
    cached_calls, passes = len(calls), backend.passes
    calls.clear()

    class WidenedEveryPass(LocalBackend):  # no derived copy: every pass forms them again
        derived = None  # type: ignore[assignment]

    backend = WidenedEveryPass(blocks, space)
    again = train(backend, cfg)
    builds = cached.report["combination"]["conjunction_builds"]
    assert again.report["combination"]["conjunction_builds"] > builds > 0
    assert backend.passes == passes
    assert len(calls) > cached_calls > 0
    assert len(cached.conjunctions) == len(again.conjunctions) > 0
    assert np.array_equal(cached.conjunctions.atoms, again.conjunctions.atoms)
    assert np.array_equal(cached.weights.active_ids(), again.weights.active_ids())
    np.testing.assert_allclose(cached.weights.values, again.weights.values, rtol=1e-12)
    assert cached.report.objective == pytest.approx(again.report.objective, rel=1e-14)
