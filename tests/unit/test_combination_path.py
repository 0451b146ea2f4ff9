"""The gamma1 path of combination features (``train.choice.path`` with
``train.grafting.combination_degree`` 2): warm-started points against cold
fits at the same gamma1, each certified over every conjunction, and the
refit of the chosen gamma1 on the training and held-out events."""

from __future__ import annotations

import dataclasses

import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.sections import PathRefit
from sparkmaxent.config import train_config
from sparkmaxent.data import synthetic
from sparkmaxent.kernels import MULTICLASS, Space
from sparkmaxent.methods.round_details import CombinationRound
from sparkmaxent.train import train

KEYS = dict(method="grafting", n_best=4, gtol=1e-9, combination_degree=2, folds=1)
GRID = [4e-3, 2e-3]


@pytest.fixture(scope="module")
def problem():
    """Planted multiclass data with two planted conjunctions, cut into
    training and held-out parts."""
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=2500,
            n_predicates=150,
            n_labels=3,
            n_support=8,
            n_copies=0,
            n_conjunctions=2,
            min_support_count=40,
            seed=11,
        )
    )
    tr, he = synthetic.split(data, [0.75, 0.25], seed=0)
    return tr.block(), he.block(), Space(MULTICLASS, 150, 3, bias=True)


@pytest.fixture(scope="module")
def chosen(problem):
    """The path without the refit: the chosen point is the model."""
    tr, he, space = problem
    cfg = train_config(path=True, l1_grid=GRID, patience=0, refit=False, **KEYS)
    return train(LocalBackend([tr], space), cfg, LocalBackend([he], space))


def cold(blocks, space, gamma):
    return train(LocalBackend(blocks, space), train_config(l1=gamma, **KEYS))


def test_points_are_certified_and_equal_cold_fits(problem, chosen):
    tr, _, space = problem
    path = chosen.report.path
    assert [p.gamma for p in path.points] == GRID
    conjunction_weights = []
    for point in path.points:
        fit = cold([tr], space, point.gamma)
        assert point.kkt_passed and fit.report.certificate.passed
        assert fit.report.certificate.conjunctions.passed
        assert point.objective == pytest.approx(fit.report.objective, rel=1e-6)
        conjunction_weights.append(fit.report["combination"]["conjunction_weights"])
    assert max(conjunction_weights) > 0  # conjunctions entered along the path
    assert "refit" not in chosen.report  # train.choice.refit = false


def test_warm_started_points_add_every_candidate_above_gamma1_in_a_round(problem, chosen):
    """As grafting points do (atoms and formed conjunctions; new ones by the
    search's n_best): the same certified optimum as a warm-started
    combination fit that adds n_best candidates a round, on fewer passes."""
    tr, _, space = problem
    start, conj = None, None
    for i, point in enumerate(chosen.report.path.points):
        keys = train_config(l1=point.gamma, **KEYS)
        fit = train(LocalBackend([tr], space), keys, warm_start=start, warm_conjunctions=conj)
        start, conj = fit.weights, fit.conjunctions
        assert point.kkt_passed and fit.report.certificate.conjunctions.passed
        assert point.objective == pytest.approx(fit.report.objective, rel=1e-9)
        if i:  # the first point starts from the bias-only model: n_best a round
            assert point.passes < fit.report.passes  # here: 128 against 172


def test_the_chosen_point_is_the_model_without_refit(chosen):
    point = chosen.report.path.chosen_point
    assert chosen.weights.nnz == point.features
    assert chosen.report.objective == pytest.approx(point.objective)
    assert chosen.report["combination"]["conjunctions_in_model"] == len(chosen.conjunctions)
    # scored on the held-out events widened by its own conjunctions
    assert chosen.report.heldout.accuracy == pytest.approx(point.heldout["heldout_accuracy"])


def test_refit_fits_the_chosen_gamma1_on_training_and_held_out_events(problem, chosen):
    tr, he, space = problem
    cfg = train_config(path=True, l1_grid=GRID, patience=0, **KEYS)
    res = train(LocalBackend([tr], space), cfg, LocalBackend([he], space))
    path, refit = res.report.path, res.report.refit
    assert path == chosen.report.path  # the same path and choice
    point = path.chosen_point
    assert isinstance(refit, PathRefit) and refit.parameter == "l1" and refit.gamma == point.gamma
    assert refit.chosen_fit.features == chosen.weights.nnz
    # a cold combination fit at the chosen gamma1 on both parts' events
    both = cold([tr, he], space, point.gamma)
    assert refit.kkt_passed and both.report.certificate.passed
    assert res.report.certificate.conjunctions.passed
    assert refit.objective == pytest.approx(both.report.objective, rel=1e-6)
    assert res.weights.nnz == refit.features
    # warm-started: new conjunctions enter by the search's n best in the
    # first combination round, twice the last batch in each later one
    added = [r.detail_as(CombinationRound).conjunctions_added or 0 for r in res.report.rounds]
    limits = [KEYS["n_best"] * 2 ** sum(a > 0 for a in added[:i]) for i in range(len(added))]
    assert max(added) > 0 and all(a <= m for a, m in zip(added, limits, strict=True))
    assert res.report["combination"]["conjunctions_in_model"] == len(res.conjunctions)
    # the held-out figures are the chosen fit's (the refit saw those events)
    assert res.report.heldout.accuracy == point.heldout["heldout_accuracy"]


class KeptApart(LocalBackend):
    """An in-process backend whose refit union keeps the two parts apart
    (``UnionBackend``), as distributed parts are (``backends.union.union_of``)."""


class WidenedEveryPass(KeptApart):
    """A backend without a derived copy: its conjunctions are formed in
    every pass (what the refit over training + held-out events did before)."""

    derived = None  # type: ignore[assignment]


def test_refit_forms_the_conjunctions_once_per_round_not_every_pass(problem, monkeypatch):
    from sparkmaxent.kernels.conjunctions import Conjunctions

    tr, he, space = problem
    expand = Conjunctions.expand
    calls = {"n": 0}

    def counted(self, block):
        calls["n"] += len(self)
        return expand(self, block)

    monkeypatch.setattr(Conjunctions, "expand", counted)
    cfg = train_config(path=True, l1_grid=GRID, patience=0, **KEYS)
    runs = {}
    for name, cls in (("cached", KeptApart), ("every pass", WidenedEveryPass)):
        calls["n"] = 0
        res = train(cls([tr], space), cfg, cls([he], space))
        runs[name] = (res, calls["n"])
    (cached, formed_cached), (plain, formed_plain) = runs["cached"], runs["every pass"]
    # the same path, choice and refitted model
    assert cached.report.path.points == plain.report.path.points
    assert cached.report.objective == pytest.approx(plain.report.objective, rel=1e-12)
    assert (cached.weights.active_ids() == plain.weights.active_ids()).all()
    assert cached.weights.values == pytest.approx(plain.weights.values, rel=1e-9, abs=1e-12)
    assert (cached.conjunctions.atoms == plain.conjunctions.atoms).all()
    # the refit's builds: at most one per combination round (its set of
    # conjunctions), against one per pass before
    builds = cached.report["combination"]["conjunction_builds"]
    builds_plain = plain.report["combination"]["conjunction_builds"]
    phases = [r.detail_as(CombinationRound).phase for r in cached.report.rounds]
    rounds = phases.count("combination")
    assert 1 <= builds <= rounds + 1
    assert builds_plain > 5 * builds  # here: 5 builds, 45 before (46 refit passes)
    assert builds_plain >= cached.report.refit.passes - 2
    # conjunctions formed in events over the whole run (path, held-out scores, refit)
    assert 0 < formed_cached < formed_plain / 3


def test_a_union_derives_both_parts_and_closes_them(problem):
    from sparkmaxent.backends.union import UnionBackend
    from sparkmaxent.kernels.conjunctions import Conjunctions

    tr, he, space = problem
    union = UnionBackend(LocalBackend([tr], space), LocalBackend([he], space))
    conj = Conjunctions.from_tuples(space.n_predicates, [(0, 1), (2, 3, 4)])
    widened_space = Space(MULTICLASS, conj.n_predicates, 3, bias=True)
    copy = union.derived(conj.expand, widened_space, "test")
    assert copy.space == widened_space and copy.owns_parts
    assert copy.first.blocks[0].X.shape[1] == conj.n_predicates
    assert copy.second.blocks[0].X.shape[1] == conj.n_predicates
    copy.close()
    assert copy.first.blocks == [] and copy.second.blocks == []
    assert union.first.blocks and union.second.blocks  # the parts' owners close them
    assert UnionBackend(WidenedEveryPass([tr], space), LocalBackend([he], space)).derived is None


def test_the_combination_is_kept_when_it_beats_the_atoms_beyond_the_noise(chosen):
    path = chosen.report.path
    versus = path.versus_atoms
    assert versus.kept == "combination"
    assert versus.gain > versus.difference_se > 0
    assert versus.combination_point == path.chosen_point
    assert all(p.kkt_passed is not None for p in versus.other_points)  # the atoms' path


def test_without_planted_conjunctions_the_atoms_path_is_kept():
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=1500, n_predicates=120, n_labels=3, n_support=8, n_copies=0,
            n_conjunctions=0, min_support_count=40, seed=5,
        )
    )  # fmt: skip
    tr, he = (p.block() for p in synthetic.split(data, [0.75, 0.25], seed=0))
    space = Space(MULTICLASS, 120, 3, bias=True)
    cfg = train_config(path=True, l1_grid=GRID, patience=0, refit=False, **KEYS)
    res = train(LocalBackend([tr], space), cfg, LocalBackend([he], space))
    versus = res.report.path.versus_atoms
    assert versus.kept == "atoms" and versus.gain <= versus.difference_se
    assert not res.conjunctions  # the atoms' model
    atoms_keys = {**KEYS, "combination_degree": 1}
    atoms_cfg = train_config(path=True, l1_grid=GRID, patience=0, refit=False, **atoms_keys)
    alone = train(LocalBackend([tr], space), atoms_cfg, LocalBackend([he], space))

    def unbudgeted(points):  # the combination path fits without a pass budget
        return [dataclasses.replace(p, budget=None) for p in points]

    assert unbudgeted(res.report.path.points) == unbudgeted(alone.report.path.points)
    assert (res.weights.active_ids() == alone.weights.active_ids()).all()
    assert res.weights.values == pytest.approx(alone.weights.values)


def test_a_warm_started_points_conjunction_batch_grows_to_the_same_optimum(problem, monkeypatch):
    """``conjunction_growth``: at a warm-started point each combination round
    that formed conjunctions multiplies the next round's batch; the points'
    certified optima are those of a fixed batch of n_best (growth 1)."""
    import sparkmaxent.methods.combination as combination

    tr, he, space = problem
    asked: list[tuple[int, int]] = []  # (batch asked, new conjunction features found)
    search = combination.search

    def spied(*args):
        found = search(*args)
        asked.append((args[-1], int(len(found.keys))))
        return found

    monkeypatch.setattr(combination, "search", spied)
    runs = {}
    for growth in (1.0, 3.0):
        asked.clear()
        cfg = train_config(
            path=True, l1_grid=GRID, patience=0, refit=False, conjunction_growth=growth, **KEYS
        )
        res = train(LocalBackend([tr], space), cfg, LocalBackend([he], space))
        runs[growth] = (res, list(asked))
    (fixed, fixed_asked), (grown, grown_asked) = runs[1.0], runs[3.0]
    n = KEYS["n_best"]
    assert {a for a, _ in fixed_asked} == {n}
    batches = sorted({a for a, _ in grown_asked})
    assert batches == [n * 3**k for k in range(len(batches))] and len(batches) > 1
    assert any(k > n for a, k in grown_asked)  # a round formed more than n_best
    for a, b in zip(fixed.report.path.points, grown.report.path.points, strict=True):
        assert a.kkt_passed and b.kkt_passed
        assert b.objective == pytest.approx(a.objective, rel=1e-6)


def test_grown_batch_grows_geometrically_up_to_its_cap_without_overflow():
    """The batch of new conjunction features after k rounds that formed
    some: first * growth^k, capped; a huge growth ("all at once") over many
    rounds reaches the cap instead of overflowing a float (1e9**40 does)."""
    from sparkmaxent.methods.combination import MAX_BATCH, grown_batch

    assert [grown_batch(10, 2.0, k) for k in range(4)] == [10, 20, 40, 80]
    assert grown_batch(10, 1.0, 50) == 10
    assert grown_batch(4, 3.0, 2) == 36
    assert grown_batch(10, 1e9, 40) == MAX_BATCH
    assert grown_batch(10, 2.0, 200) == MAX_BATCH
