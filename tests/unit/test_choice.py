"""Model choice in-process: the criteria and their standard errors, the
choice rule (argmax, one standard error), warm-started paths against cold
fits, the best stage of a selection run, and the path's report and plot."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.folds import fold_of_groups
from sparkmaxent.choice.heldout import (
    criterion_score,
)
from sparkmaxent.choice.mixes import denser_mix_gains, sparsest_within_noise
from sparkmaxent.choice.path import (
    geometric_grid,
    null_model,
    path_plan,
    scored_point,
)
from sparkmaxent.choice.sections import PathPoint, PathVariant
from sparkmaxent.choice.stop_rule import Measure, choose
from sparkmaxent.config import ConfigError, train_config
from sparkmaxent.data import synthetic
from sparkmaxent.evaluate import score_tagging
from sparkmaxent.kernels import MULTICLASS, Space, Weights
from sparkmaxent.kernels.blocks import take_events
from sparkmaxent.kernels.infold import in_fold
from sparkmaxent.kernels.predict import EvalTask, EventScores, EventScoresTask
from sparkmaxent.methods.gradient_test import make_gradient_test
from sparkmaxent.methods.round_details import BayesRound, IfsStage
from sparkmaxent.problem import Penalty
from sparkmaxent.selection.base import TrainingContext
from sparkmaxent.selection.stops import StopReason
from sparkmaxent.train import train

from .helpers import PassClock, brute_force_folds, random_block


@pytest.fixture(scope="module")
def problem():
    """Planted multiclass data cut into training and held-out parts."""
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=2500,
            n_predicates=150,
            n_labels=3,
            n_support=8,
            n_copies=0,
            n_conjunctions=1,
            min_support_count=40,
            seed=11,
        )
    )
    tr, he = synthetic.split(data, [0.75, 0.25], seed=0)
    space = Space(MULTICLASS, 150, 3, bias=True)
    return tr.block(), he.block(), space


def clocked(problem, setup: float = 0.0, output_dir=None, resume=False, **keys):
    """``run`` under a ``PassClock`` (1 s a pass, ``setup`` s more from the first)."""
    tr, he, space = problem
    train_part, heldout = LocalBackend([tr], space), LocalBackend([he], space)
    keys.setdefault("folds", 1)
    clock = PassClock(train_part, heldout, setup=setup)
    return train(train_part, train_config(**keys), heldout, output_dir, resume=resume, clock=clock)


def run(problem, heldout=True, output_dir=None, **keys):
    """Train on the problem's training part; the choice on its held-out
    part (``folds`` 1) unless ``folds`` says otherwise."""
    tr, he, space = problem
    keys.setdefault("folds", 1)
    held = LocalBackend([he], space) if heldout else None
    return train(LocalBackend([tr], space), train_config(**keys), held, output_dir=output_dir)


def test_choose_takes_the_best_or_the_sparsest_within_one_standard_error():
    scores, ses, sizes = (
        [0.70, 0.78, 0.80, 0.80, 0.79],
        [0.01, 0.03, 0.02, 0.02, 0.02],
        [1, 5, 9, 20, 40],
    )
    assert choose(scores, ses, sizes, one_se=False) == 2  # the first of the tied best
    assert choose(scores, ses, sizes, one_se=True) == 1  # 0.78 >= 0.80 - 0.02, 5 features
    assert choose([0.5, 0.4], [0.2, 0.2], [10, 3], one_se=True) == 1


def point(measure: Measure, features: int) -> PathPoint:
    """A path point of ``features`` weights scored ``measure`` on held-out data."""
    held = {"heldout_score": measure.score, "heldout_se": measure.se}
    return PathPoint("l1", 0.1, features, 0.5, 3, True, None, False, None, held)


def test_mixes_are_chosen_within_one_scores_error_and_report_the_paired_gap():
    rng = np.random.default_rng(0)
    base = rng.normal(-1.0, 0.5, 400)  # per-event scores of the sparse variant
    sparse = Measure.of_units(base)
    # a denser variant better on nearly every event, by less than one score's error
    dense = Measure.of_units(base + 0.02 + rng.normal(0, 0.01, 400))
    rows = [point(m, f) for m, f in ((sparse, 10), (dense, 100))]
    assert dense.score - sparse.score < dense.se
    i, gaps = sparsest_within_noise(rows, [sparse, dense])
    assert i == 0  # the sparsest within one standard error of the best
    assert gaps[1] == 0.0 and gaps[0] > 10  # far beyond the paired difference's noise
    # a denser variant better by more than one score's error is kept
    far = Measure.of_units(base + 0.2 + rng.normal(0, 0.01, 400))
    rows[1] = point(far, 100)
    assert sparsest_within_noise(rows, [sparse, far])[0] == 1


def test_denser_mixes_are_tried_only_while_the_last_gained_beyond_the_noise():
    rng = np.random.default_rng(1)
    base = rng.normal(-1.0, 0.5, 400)
    l1, better = Measure.of_units(base), Measure.of_units(base + 0.2 + rng.normal(0, 0.01, 400))
    slightly = Measure.of_units(base + 0.01 + rng.normal(0, 0.01, 400))
    assert denser_mix_gains([l1]) and denser_mix_gains([l1, better])
    assert not denser_mix_gains([l1, slightly])  # better on every event, within one error
    assert not denser_mix_gains([l1, better, l1])  # worse than a sparser mix


def test_mix_stop_runs_a_prefix_of_the_mixes_with_the_same_paths(problem):
    keys = dict(method="grafting", path=True, points=4, gtol=1e-9, refit=False)
    every = run(problem, l2_mixes=[0.0, 0.5, 0.9], mix_stop=False, **keys).report.path
    some = run(problem, l2_mixes=[0.0, 0.5, 0.9], mix_stop=True, **keys).report.path
    ran = [e.what["l2_mix"] for e in some.elastic]
    assert ran + [w["l2_mix"] for w in some.elastic_not_run] == [0.0, 0.5, 0.9]
    assert every.elastic_not_run == []
    for row, full in zip(some.elastic, every.elastic, strict=False):
        assert (row.point.gamma, row.point.features) == (full.point.gamma, full.point.features)


def test_criteria_and_their_standard_errors():
    c = np.array([1.0, 2.0, 1.0, 1.0])
    loss = np.array([0.1, 0.5, np.nan, 2.0])  # event 2: a label unseen in training
    hit = np.array([True, True, False, False])
    none = np.full(4, -1)
    scores = EventScores(c, loss, hit, none, none, none, none)
    n_eff = 25.0 / 7.0
    acc = criterion_score(scores, "accuracy", [])
    assert acc["heldout_score"] == pytest.approx(3 / 5)
    assert acc["heldout_se"] == pytest.approx(np.sqrt(0.6 * 0.4 / n_eff))
    ll = criterion_score(scores, "loglik", [])
    mean = (0.1 + 1.0 + 2.0) / 4
    var = (0.1 - mean) ** 2 / 4 + 2 * (0.5 - mean) ** 2 / 4 + (2.0 - mean) ** 2 / 4
    assert ll["heldout_score"] == pytest.approx(-mean) and ll["heldout_loss"] == pytest.approx(mean)
    assert ll["heldout_se"] == pytest.approx(np.sqrt(var / n_eff))
    with pytest.raises(ConfigError, match="chunk_f1 needs IOB"):
        criterion_score(scores, "chunk_f1", ["A", "B"])


def test_chunk_f1_criterion_puts_sentences_back_in_order():
    labels = ["B-NP", "I-NP", "O"]
    # two sentences, events shuffled; gold B I O | B O, predicted B I O | O O
    group = np.array([1, 0, 0, 1, 0])
    event_id = np.array([4, 1, 0, 3, 2])
    y = np.array([2, 1, 0, 0, 2])
    pred = np.array([2, 1, 0, 2, 2])
    ones = np.ones(5)
    scores = EventScores(ones, ones, y == pred, y, pred, group, event_id)
    got = criterion_score(scores, "chunk_f1", labels)
    names = np.array(labels, dtype=object)
    want = score_tagging(group, event_id, names[y], names[pred], labels, chunks=True)
    assert got["heldout_score"] == pytest.approx(want["chunks"]["f1"]) == pytest.approx(2 / 3)


def test_event_scores_sum_to_the_evaluation_stats():
    rng = np.random.default_rng(3)
    for shape in (MULTICLASS, "candidates"):
        block, space = random_block(rng, shape)
        n = min(6, space.n_features)
        weights = Weights(
            np.arange(n, dtype=np.int64),
            rng.normal(size=n),
            rng.normal(size=space.n_bias) if space.n_bias else None,
        )
        ev = EvalTask(space, weights)(block)
        per = EventScoresTask(space, weights)(block)
        known = ~np.isnan(per.loss)
        assert per.c @ per.hit == pytest.approx(ev.correct)
        assert per.c[known] @ per.loss[known] == pytest.approx(ev.loss)


def test_warm_started_path_matches_cold_fits_with_fewer_passes(problem):
    grid = [4e-3, 2e-3, 1e-3]
    path = run(problem, method="grafting", path=True, l1_grid=grid, patience=0, gtol=1e-9)
    points = path.report.path.points
    assert [(p.parameter, p.gamma) for p in points] == [("l1", g) for g in grid]
    for i, point in enumerate(points):
        cold = run(problem, heldout=False, method="grafting", l1=grid[i], gtol=1e-9)
        assert point.kkt_passed and cold.report.certificate.passed
        assert point.objective == pytest.approx(cold.report.objective, rel=1e-6)
        assert point.features == cold.report.nonzero_weights
        if i:  # the first point starts from the bias-only model, a cold fit from zeros
            assert point.passes < cold.report.passes


def test_a_path_point_adds_every_candidate_above_gamma1_for_the_same_optimum(problem):
    # n_best 1: a warm-started point's first round adds every candidate above
    # gamma1 at its start (round_size), without the strong rule's pass
    grid = [2e-2, 5e-3]
    keys = dict(method="grafting", path=True, l1_grid=grid, patience=0, gtol=1e-9, refit=False)
    path = run(problem, n_best=1, **keys)
    points = path.report.path.points
    assert path.report.path.chosen == 1  # the report's rounds are the second point's
    start = run(problem, heldout=False, method="grafting", l1=grid[0], gtol=1e-9)
    test = make_gradient_test(
        TrainingContext(LocalBackend([problem[0]], problem[2]), train_config(l1=grid[1])),
        Penalty(gamma1=grid[1]),
    ).test(start.weights)
    assert path.report.rounds[0].added == test.kkt.zero_weights_over_bound > points[0].features
    # the optimum of one candidate a round from the same start (grafting's own)
    one = train(
        LocalBackend([problem[0]], problem[2]),
        train_config(method="grafting", l1=grid[1], n_best=1, gtol=1e-9),
        warm_start=start.weights,
    )
    assert points[1].kkt_passed and one.report.certificate.passed
    assert points[1].objective == pytest.approx(one.report.objective, rel=1e-7)
    assert np.array_equal(path.weights.active_ids(), one.weights.active_ids())
    assert np.allclose(path.weights.values, one.weights.values, rtol=0, atol=1e-4)
    assert len(path.report.rounds) < len(one.report.rounds)
    assert points[1].passes < one.report.passes


def test_path_keeps_the_argmax_point_and_reports_it(problem, tmp_path):
    res = run(
        problem, output_dir=str(tmp_path), method="grafting", path=True, points=6, refit=False
    )
    path = res.report.path
    scores = [p.score for p in path.points]
    i = path.chosen
    assert i == int(np.argmax(scores)) and path.points[i].chosen
    assert sum(p.chosen for p in path.points) == 1
    assert path.parameter == "l1" and res.report["l1"] == path.points[i].gamma
    assert res.weights.nnz == path.points[i].features
    # the default grid descends geometrically from gamma1_max
    l1s = [p.gamma for p in path.points]
    assert all(b < a for a, b in zip(l1s, l1s[1:]))
    assert np.allclose(np.diff(np.log(l1s)), np.log(1e-3) / 6)
    # patience 2: the path ends at the grid's end or two points or more past the
    # best, the last more than one standard error of the difference below it
    last = path.points[-1]
    assert len(l1s) == 6 or (len(l1s) >= i + 3 and last.below_best_se > 1.0)
    assert path.points[i].below_best_se == 0.0
    with open(tmp_path / "plots" / "path.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_one_standard_error_rule_takes_the_sparsest_point_within_one_se(problem):
    res = run(problem, method="grafting", path=True, points=5, one_se=True, patience=0)
    points = res.report.path.points
    best = max(points, key=lambda p: p.score)
    within = [p for p in points if p.score >= best.score - best.se]
    chosen = res.report.path.chosen_point
    assert chosen.features == min(p.features for p in within)
    assert chosen.features <= best.features


def test_l2_path_chooses_gamma2_on_held_out_data(problem):
    res = run(problem, method="l2", path=True, l2_grid=[1e-3, 1e-1, 1e-2], patience=0)
    points = res.report.path.points
    assert {p.parameter for p in points} == {"l2"}
    l2s = [p.gamma for p in points]
    assert l2s == [1e-1, 1e-2, 1e-3]  # strongest first
    i = res.report.path.chosen
    assert i == int(np.argmax([p.score for p in points]))
    assert res.report["l2"] == l2s[i]


@pytest.mark.parametrize("method", ["sgc", "bayes-factor"])
def test_stage_methods_keep_the_best_held_out_stage(problem, tmp_path, method):
    # per_round 3: the Bayes factor's 15 features over several stages
    res = run(problem, output_dir=str(tmp_path), method=method, max_features=15, per_round=3)
    rounds = res.report.rounds
    best = max(rounds, key=lambda r: r.heldout_score)
    assert res.report.stage_choice.chosen_round == best.round
    assert res.weights.nnz == best.active
    assert [r.round for r in rounds if r.chosen] == [best.round]
    assert (tmp_path / "plots" / "path.png").exists()
    last = run(problem, method=method, max_features=15, per_round=3, best_stage=False)
    assert last.report.stage_choice is None
    # the last stage; the same first stage as the first run
    kept = last.report.rounds
    assert last.weights.nnz == kept[-1].active
    assert kept[0].active == rounds[0].active
    actives = [r.active for r in kept]
    if method == "sgc":  # the same stages up to the rule's stop (past it, only the first goes on)
        assert actives == [r.active for r in rounds[: len(kept)]]
    else:  # the paper's rounds of per_round picks: only held-out deciding the stop grows them
        assert max(np.diff([0, *actives])) <= 3 < max(np.diff([0, *(r.active for r in rounds)]))


def test_path_needs_held_out_data_and_a_path_method(problem):
    with pytest.raises(ConfigError, match="held-out data"):
        run(problem, heldout=False, method="grafting", path=True)
    with pytest.raises(ConfigError, match="no penalty path"):
        run(problem, method="sgc", path=True)
    with pytest.raises(ConfigError, match="positive numbers"):
        run(problem, method="grafting", path=True, l1_grid=[1e-3, -1.0])


def test_geometric_grid():
    grid = geometric_grid(1.0, 1e-2, 4)
    assert grid == pytest.approx([10**-0.5, 10**-1.0, 10**-1.5, 1e-2])


def test_default_path_goes_on_while_its_last_point_is_the_best(problem):
    # a grid that ends far above the best gamma1: the path extends itself
    res = run(problem, method="grafting", path=True, points=2, l1_ratio=0.25)
    path = res.report.path
    assert path.parameter == "l1"
    l1s = [p.gamma for p in path.points]
    assert len(l1s) > 2 and path.grid == l1s
    assert np.allclose(np.diff(np.log(l1s)), np.log(0.25) / 2)
    scores = [p.score for p in path.points]
    assert path.chosen == int(np.argmax(scores)) < len(l1s) - 1
    # a user grid is taken as given
    given = run(problem, method="grafting", path=True, l1_grid=[0.02, 0.01]).report.path
    assert given.parameter == "l1" and [p.gamma for p in given.points] == [0.02, 0.01]


def test_cut_stops_points_past_the_best_and_keeps_the_same_choice(problem):
    keys = dict(method="grafting", path=True, points=8, patience=0)
    full = run(problem, cut_passes=0, **keys)
    cut = run(problem, cut_passes=0.05, **keys)
    fp, cp = full.report.path, cut.report.path
    assert not any(p.cut for p in fp.points) and all(p.budget is None for p in fp.points)
    assert len(cp.points) == len(fp.points)
    # the cut fires on the points past the best, never on the chosen one
    fired = [i for i, p in enumerate(cp.points) if p.cut]
    assert fired and min(fired) > cp.chosen
    assert all(cp.points[i].score < cp.chosen_point.score for i in fired)
    # a point whose budget ran out while above the best went on past it
    went_on = [p for p in cp.points[1 : cp.chosen + 1] if p.continued_after is not None]
    assert went_on and all(p.passes > p.budget for p in went_on)
    # the same chosen point and optimum (to the solver's tolerance), for fewer passes
    assert cp.chosen == fp.chosen
    assert np.array_equal(cut.weights.active_ids(), full.weights.active_ids())
    # the weights agree to what the solver's gradient tolerance leaves free
    assert np.allclose(cut.weights.values, full.weights.values, rtol=0, atol=1e-4)
    assert cut.report.unconverged == [] == full.report.unconverged
    assert sum(p.passes for p in cp.points) < sum(p.passes for p in fp.points)
    for a, b in zip(cp.points, fp.points):
        if not a.cut:
            assert a.kkt_passed and b.kkt_passed
            assert a.objective == pytest.approx(b.objective, rel=1e-7)
            assert a.features == b.features


def test_l2_path_cut_keeps_the_same_choice(problem):
    full = run(problem, method="l2", path=True, points=6, patience=0, cut_passes=0)
    cut = run(problem, method="l2", path=True, points=6, patience=0, cut_passes=0.02)
    cp, fp = cut.report.path.points, full.report.path.points
    assert cut.report.path.chosen == full.report.path.chosen
    assert np.allclose(cut.weights.values, full.weights.values, rtol=0, atol=1e-4)
    for a, b in zip(cp, fp):
        if not a.cut:
            assert a.converged and a.objective == pytest.approx(b.objective, rel=1e-7)
    assert any(p.cut for p in cp) and not any(p.cut for p in fp)
    assert sum(p.passes for p in cp) < sum(p.passes for p in fp)


@pytest.mark.parametrize("method", ["grafting", "l2"])
def test_a_point_that_spends_its_budget_goes_on_to_the_optimum_of_a_full_fit(problem, method):
    # a point of the path (warm-started from the point before it) fitted
    # once without a budget, and once on half the passes that took, kept
    # going at the best held-out score so far: same certified optimum, and
    # fewer passes than the budget plus a refit
    tr, he, space = problem
    backend = LocalBackend([tr], space)
    cfg = train_config(method=method, path=True, gtol=1e-9)
    ctx = TrainingContext(backend, cfg, heldout=LocalBackend([he], space))
    start = null_model(ctx)
    parameter, grid, fit_point, top, _ = path_plan(ctx, start)
    k = len(grid) // 2
    before = fit_point(ctx, grid[k - 1], start, top if k == 1 else grid[k - 2], None, None)
    passes0 = backend.passes
    full = fit_point(ctx, grid[k], before.weights, grid[k - 1], None, None)
    full_passes = backend.passes - passes0
    assert full_passes >= 6, "a point long enough to cut in half"
    budget = full_passes // 2
    result, row, _ = scored_point(
        ctx, fit_point, grid[k], before.weights, grid[k - 1], budget, -np.inf
    )
    assert not row.cut and row.continued_after >= budget
    assert row.converged and full.report["converged"]
    if method == "grafting":
        assert row.kkt_passed and full.certificate.passed
        assert result.certificate.max_zero_gradient <= result.certificate.bound
    assert row.objective == pytest.approx(full.objective, rel=1e-8)
    assert np.array_equal(result.weights.active_ids(), full.weights.active_ids())
    # and the optimum of a cold fit at that penalty
    cold = run(problem, heldout=False, method=method, gtol=1e-9, **{parameter: grid[k]})
    assert row.objective == pytest.approx(cold.report.objective, rel=1e-7)
    # refitting would pay the budget's passes again: going on does not
    assert row.passes < row.continued_after + full_passes
    assert row.passes - row.continued_after < full_passes


def test_a_point_whose_budget_ends_in_its_finishing_round_is_still_certified(problem):
    # at every pass budget, also one that runs out in the round that only
    # finishes the active set to the final tolerance (nothing added), the
    # point that goes on reaches the full fit's certified optimum: the
    # finishing round cut by the budget runs again once the budget is lifted
    tr, he, space = problem
    backend = LocalBackend([tr], space)
    ctx = TrainingContext(backend, train_config(method="grafting", path=True),
                          heldout=LocalBackend([he], space))  # fmt: skip
    start = null_model(ctx)
    _, grid, fit_point, top, _ = path_plan(ctx, start)
    _, full, _ = scored_point(ctx, fit_point, grid[0], start, top, None, -np.inf)
    full_passes = full.passes
    assert full.kkt_passed and full_passes >= 6
    uncertified = []
    for budget in range(1, full_passes):
        result, row, _ = scored_point(ctx, fit_point, grid[0], start, top, budget, -np.inf)
        if not (row.kkt_passed and result.certificate.passed):
            uncertified.append(budget)
        assert row.objective == pytest.approx(full.objective, rel=1e-5)
    assert uncertified == []


# ---------------------------------------------------------------- k folds


def _with_groups(block, group):
    return dataclasses.replace(block, group=np.asarray(group), event_id=np.arange(len(group)))


def test_folds_are_whole_stratified_and_seeded():
    rng = np.random.default_rng(0)
    # groups 0..199 of one event (labels 0-2) and groups 200..219 of three events
    group = np.r_[np.arange(200), np.repeat(np.arange(200, 220), 3)]
    y = np.r_[rng.integers(0, 3, 200), np.zeros(60, dtype=int)]
    units, fold = fold_of_groups(group, y, 4, seed=1)
    assert np.array_equal(units, np.arange(220))
    for label in range(3):
        counts = np.bincount(fold[:200][y[:200] == label], minlength=4)
        assert counts.max() - counts.min() <= 1
    counts = np.bincount(fold[200:], minlength=4)
    assert counts.max() - counts.min() <= 1  # the long units: one stratum
    again = fold_of_groups(group[::-1], y[::-1], 4, seed=1)[1]
    assert np.array_equal(again, fold)  # a function of the groups, not their order
    assert not np.array_equal(fold_of_groups(group, y, 4, seed=2)[1], fold)


def test_path_folds_match_a_brute_force_k_fold(problem):
    tr, _, space = problem
    block = _with_groups(tr, np.arange(tr.n_events) // 2)  # pairs of events as units
    grid, k = [4e-3, 1.5e-3, 5e-4], 3
    keys = dict(method="grafting", path=True, l1_grid=grid, gtol=1e-9, patience=0, l2_mixes=[0])
    res = train(LocalBackend([block], space), train_config(folds=k, fold_seed=5, **keys))
    folds = res.report["folds"]
    brute = brute_force_folds(block, space, grid, k, 5)
    np.testing.assert_allclose(folds["fold_scores"], brute, rtol=1e-5)
    assert folds["chosen"] == int(np.argmax(brute.mean(axis=0)))
    # refitted on all the data at the chosen gamma1
    full = train(
        LocalBackend([block], space),
        train_config(method="grafting", l1=grid[folds["chosen"]], gtol=1e-9),
    )
    assert res.report["l1"] == grid[folds["chosen"]]
    assert res.report.objective == pytest.approx(full.report.objective, rel=1e-7)


def test_fold_path_extends_a_default_grid_whose_last_point_is_best(problem):
    tr, _, space = problem
    block = _with_groups(tr, np.arange(tr.n_events))
    # two default points down to 0.5 gamma1_max: the mean fold score still rises there
    keys = dict(method="grafting", path=True, points=2, l1_ratio=0.5, gtol=1e-9, l2_mixes=[0])
    res = train(LocalBackend([block], space), train_config(folds=3, fold_seed=2, **keys))
    folds = res.report["folds"]
    grid = folds["grid"]
    assert folds["extended_by"] == len(grid) - 2 > 0
    np.testing.assert_allclose(np.diff(np.log(grid)), np.log(0.5) / 2)  # the grid's own ratio
    mean = np.mean(brute_force_folds(block, space, grid, 3, 2), axis=0)
    np.testing.assert_allclose(folds["mean_score"], mean, rtol=1e-5)
    # it went on while the last point was the best and stopped at the first worse one
    assert all(mean[j] > mean[:j].max() for j in range(2, len(grid) - 1))
    assert folds["chosen"] == int(np.argmax(mean)) == len(grid) - 2
    assert res.report["l1"] == grid[folds["chosen"]]


def test_fold_path_stops_after_patience_points_without_a_better_mean(problem):
    tr, _, space = problem
    block = _with_groups(tr, np.arange(tr.n_events))
    grid = [3e-2, 1.5e-2, 8e-3, 4e-3, 1e-3, 2.5e-4, 6e-5]
    keys = dict(
        method="grafting", path=True, l1_grid=grid, gtol=1e-9, folds=3, fold_seed=1, l2_mixes=[0]
    )
    whole = train(LocalBackend([block], space), train_config(patience=0, **keys)).report["folds"]
    best = int(np.argmax(whole["mean_score"]))
    assert 0 < best and best + 2 < len(grid)  # an inside peak, the grid going on past it
    res = train(LocalBackend([block], space), train_config(patience=1, patience_se=0, **keys))
    folds = res.report["folds"]
    assert folds["grid"] == grid[: best + 2] and folds["chosen"] == best
    np.testing.assert_allclose(
        folds["fold_scores"], np.asarray(whole["fold_scores"])[:, : best + 2], rtol=1e-9
    )
    assert res.report["l1"] == grid[best]


def test_stage_folds_choose_the_stage_count_and_refit(problem):
    tr, _, space = problem
    block = _with_groups(tr, np.arange(tr.n_events))
    keys = dict(method="sgc", max_rounds=12)
    res = train(LocalBackend([block], space), train_config(folds=3, **keys))
    folds = res.report["folds"]
    mean = np.mean(folds["fold_scores"], axis=0)
    assert folds["chosen"] == int(np.argmax(mean)) and len(mean) == 12
    assert res.report["stages"] == folds["chosen_stages"] == folds["chosen"] + 1
    with pytest.raises(ConfigError, match="nothing to choose"):
        train(LocalBackend([block], space), train_config(method="l2", folds=3))


def test_take_events_keeps_whole_candidate_sets():
    rng = np.random.default_rng(5)
    block, _ = random_block(rng, "candidates")
    block = _with_groups(block, np.arange(block.n_events))
    keep = np.arange(block.n_events) % 2 == 1
    part = take_events(block, keep)
    assert part.n_events == keep.sum()
    np.testing.assert_array_equal(np.diff(part.event_ptr), np.diff(block.event_ptr)[keep])
    np.testing.assert_array_equal(part.group, block.group[keep])
    np.testing.assert_array_equal(part.c, block.c[keep])
    rows = keep[block.event_of_candidate]
    np.testing.assert_array_equal(part.correct, block.correct[rows])
    assert (part.F != block.F[rows]).nnz == 0
    assert np.array_equal(in_fold(block, block.group[keep], inside=False).group, block.group[~keep])


def test_elastic_grid_fits_one_path_per_gamma2_and_keeps_the_best(problem, tmp_path):
    grid = [4e-3, 2e-3, 1e-3]
    keys = dict(method="grafting", path=True, l1_grid=grid, patience=0, gtol=1e-9, l2_mixes=[0])
    res = run(problem, output_dir=str(tmp_path), elastic_grid=[0.05, 0.0], **keys)
    path = res.report.path
    rows = path.elastic
    assert [r.what["elastic_l2"] for r in rows] == [0.05, 0.0]
    assert path.what["elastic_l2"] == rows[sparsest_within_one_se(rows)].what["elastic_l2"]
    assert [r.point.chosen for r in rows].count(True) == 1
    assert path.plot and (tmp_path / "plots" / "path.png").exists()
    # each gamma2's path is the one fitted with that elastic_l2 alone
    for row in rows:
        alone = run(problem, elastic_l2=row.what["elastic_l2"], **keys).report.path
        point = alone.chosen_point
        assert row.point.gamma == point.gamma and row.point.features == point.features
        assert row.point.score == pytest.approx(point.score, rel=1e-9)
    # gamma2 > 0 changes the fit at the same gamma1
    pure = run(problem, elastic_l2=0.0, **keys).report.path.points
    ridge = run(problem, elastic_l2=0.05, **keys).report.path.points
    assert ridge[-1].objective != pytest.approx(pure[-1].objective)
    with pytest.raises(ConfigError, match="non-negative"):
        run(problem, elastic_grid=[-1.0], **keys)


def test_max_weights_stops_a_path_after_the_first_point_beyond_it(problem):
    keys = dict(method="grafting", path=True, points=8, patience=0, cut_passes=0)
    full = run(problem, **keys).report.path.points
    sizes = [p.features for p in full]
    limit = sizes[2]  # the path must stop at the first point with more weights
    first_beyond = next(i for i, n in enumerate(sizes) if n > limit)
    capped = run(problem, max_weights=limit, **keys).report.path.points
    assert len(capped) == first_beyond + 1 < len(full)
    assert [p.features for p in capped] == sizes[: first_beyond + 1]


def expected_rule_stop(scores: list[float], patience: int) -> int:
    """Brute force: the stage after which a run stops by the held-out rule
    with ``patience_se = 0`` (``patience`` stages past the best, the last
    below it; a tie does not stop), from the held-out scores of a run
    without it (0: never)."""
    best, best_round = -np.inf, 0
    for r, s in enumerate(scores, start=1):
        if s > best:
            best, best_round = s, r
        elif r - best_round >= patience and s < best:
            return r
    return 0


#: settings that select past the held-out optimum: plain gains, one feature
#: a stage (SGC); the printed sign and the uniform prior (the Bayes factor)
PAST_OPTIMUM = {
    "sgc": dict(method="sgc", max_features=120, gain_prior_variance=0.0, stage_features=1),
    "bayes-factor": dict(
        method="bayes-factor",
        max_features=120,
        per_round=1,
        model_prior="uniform",
        prior_variance=0.0,
        sign="printed",
    ),
}


@pytest.mark.parametrize(
    "method", ["sgc", pytest.param("bayes-factor", marks=[pytest.mark.slow, pytest.mark.ci])]
)
def test_stage_runs_stop_by_the_paths_held_out_rule_where_brute_force_says(problem, method):
    keys = PAST_OPTIMUM[method]
    if method == "bayes-factor":  # its rounds grow under a held-out rule: one that never fires
        unruled = run(problem, patience=0, max_rounds=1, **keys)  # its first round is enough
        full = run(problem, patience=10_000, patience_se=0.0, **keys)
    else:
        full = unruled = run(problem, patience=0, **keys)
    assert unruled.report.rounds[0].below_best_se is None  # no rule: nothing measured
    scores = [r.heldout_score for r in full.report.rounds]
    stop = expected_rule_stop(scores, 3)
    assert 0 < stop < len(scores)  # the rule stops this run early
    res = run(problem, patience=3, patience_se=0.0, **keys)
    rounds = res.report.rounds
    assert len(rounds) == stop
    # the same stages as the full run up to the stop; the best of them kept
    assert [r.heldout_score for r in rounds] == scores[:stop]
    chosen = res.report.stage_choice.chosen_round
    assert chosen == int(np.argmax(scores[:stop])) + 1
    assert res.weights.nnz == rounds[chosen - 1].active
    assert res.report.stop.message.startswith("held-out stop rule: 3 points")
    assert res.stop.reason is StopReason.HELDOUT_RULE and res.stop.detail["patience"] == 3
    # without held-out data there is nothing to stop on: it runs past the
    # rule's stop (to a cap one round beyond it, as far as needs checking)
    alone = run(problem, heldout=False, patience=3, patience_se=0.0, max_rounds=stop + 1, **keys)
    assert len(alone.report.rounds) > stop


@pytest.mark.parametrize("method", ["sgc", "bayes-factor"])
def test_stage_rule_pairs_stages_event_by_event_and_needs_a_gap_beyond_the_noise(problem, method):
    keys = PAST_OPTIMUM[method]
    res = run(problem, patience=2, patience_se=1.0, **keys)
    rounds = res.report.rounds
    chosen = res.report.stage_choice.chosen_round
    best = rounds[chosen - 1]
    # a stage stops the run only 2 stages past the best and more than 1
    # standard error of the difference below it: the last one, and no other
    gaps = [r.below_best_se for r in rounds]
    stops = [i + 1 for i, r in enumerate(rounds) if r.round - chosen >= 2 and gaps[i] > 1.0]
    assert stops == [len(rounds)] and res.report.stop.message.startswith("held-out stop rule")
    # paired over the same held-out events, the difference of two stages
    # that share all but a few features has a far smaller standard error
    # than the unpaired sqrt(se_a^2 + se_b^2)
    for r in rounds[chosen:]:
        unpaired = (best.heldout_score - r.heldout_score) / np.hypot(best.heldout_se, r.heldout_se)
        assert r.below_best_se > 2 * unpaired > 0


@pytest.mark.parametrize("method", ["sgc", "bayes-factor"])
def test_a_resumed_stage_run_stops_where_an_uninterrupted_one_does(problem, tmp_path, method):
    # interrupted past its best stage: the resumed rule pairs later stages
    # with the best stage's per-event scores from the checkpoint
    tr, he, space = problem
    config = train_config(patience=2, **PAST_OPTIMUM[method])
    whole = train(LocalBackend([tr], space), config, LocalBackend([he], space))
    rounds = whole.report.rounds
    after = whole.report.stage_choice.chosen_round + 1
    assert after < len(rounds)

    def interrupt(state):
        if state.round == after:
            raise KeyboardInterrupt

    out = str(tmp_path / "cut")
    with pytest.raises(KeyboardInterrupt):
        train(LocalBackend([tr], space), config, LocalBackend([he], space), out, on_round=interrupt)
    resumed = train(LocalBackend([tr], space), config, LocalBackend([he], space), out, resume=True)
    again = resumed.report.rounds
    assert [r.active for r in again] == [r.active for r in rounds]
    assert [r.below_best_se for r in again] == pytest.approx(
        [r.below_best_se for r in rounds], rel=1e-9
    )
    assert resumed.report.stop.message == whole.report.stop.message
    assert resumed.weights.nnz == whole.weights.nnz


@pytest.mark.parametrize("share", [0.0, 0.1])
def test_adaptive_sgc_stages_grow_while_held_out_improves_and_shrink_when_not(problem, share):
    keys = dict(stage_features=0, patience=0, max_features=150, stage_features_min_share=share)
    res = run(problem, method="sgc", **keys)
    rounds = res.report.rounds
    stage_size = [r.detail_as(IfsStage).stage_size for r in rounds]
    assert stage_size[0] == 1 and max(stage_size) >= 8
    best, active, floored = -np.inf, 0, 0
    for i in range(1, len(rounds)):
        prev = rounds[i - 1]
        improved = prev.heldout_score > best
        best = max(best, prev.heldout_score)
        active += prev.added
        size = stage_size[i - 1] * 2 if improved else max(stage_size[i - 1] // 2, 1)
        floor = math.ceil(share * active)  # at least this share of the active set
        floored += floor > size
        assert stage_size[i] == min(max(size, floor), 150 - active)
    assert floored > 0 if share else floored == 0  # the floor took part
    chosen = res.report.stage_choice.chosen_round
    assert res.weights.nnz == rounds[chosen - 1].active


def test_bayes_factor_goes_on_past_its_rule_and_held_out_data_choose(problem):
    keys = dict(method="bayes-factor", per_round=3, max_features=60)
    ruled = run(problem, beyond_rule=False, **keys)
    assert ruled.report["stopped_by_rule"] and ruled.report["rule_stop"] is None
    r = ruled.report["rounds_run"]
    res = run(problem, **keys)
    rounds = res.report.rounds
    # the rule's stop is one candidate stage, then more (rounds of per_round
    # picks without held-out data deciding; with it, they grow while it improves)
    assert all(0 < x.added <= 3 for x in ruled.report.rounds)
    stop = res.report["rule_stop"]["round"]
    assert res.report["rule_stop"]["why"].startswith("no proposal beats beta_0")
    beyond = [x.detail_as(BayesRound).beyond_rule for x in rounds]
    assert len(rounds) > stop and all(beyond[stop:])
    assert not any(beyond[:stop])
    assert rounds[0].added <= 3 and all(x.added > 0 for x in rounds)
    scores = [x.heldout_score for x in rounds]
    assert res.report.stage_choice.chosen_round == int(np.argmax(scores)) + 1
    assert not res.report["stopped_by_rule"]
    # without held-out data the rule ends the run
    alone = run(problem, heldout=False, **keys)
    assert alone.report["stopped_by_rule"] and alone.report["rounds_run"] == r


@pytest.mark.parametrize("method", ["sgc", "bayes-factor"])
def test_a_stage_run_ended_by_max_seconds_keeps_its_best_stage(problem, method):
    # a budget the first stage starts within and ends past (1 s a pass)
    first = clocked(problem, method=method, max_rounds=1, per_round=3).report.rounds[0]
    budget = first.elapsed_s - 1.0
    res = clocked(problem, method=method, max_seconds=budget, per_round=3)
    assert res.report.stop.message == f"max_seconds = {budget:g}"
    rounds = res.report.rounds
    assert len(rounds) == 1 and res.report.stage_choice.chosen_round == 1
    assert res.weights.nnz == rounds[0].active > 0
    # the budget asked for: not unconverged (exit 0), a warning
    assert res.report.unconverged == []
    assert res.report.warnings == [
        f"time budget reached (max_seconds = {budget:g}): the model is the best held-out stage "
        "so far; --resume with a larger train.selection.max_seconds continues the run"
    ]


@pytest.mark.parametrize("method", ["sgc", "bayes-factor"])
def test_a_killed_stage_run_resumed_with_a_spent_budget_ends_with_its_best_stage(
    problem, tmp_path, method
):
    # killed after 3 stages (no model): resumed with a budget its first
    # session already spent, it runs no stage and keeps the best of the 3
    tr, he, space = problem
    keys = dict(patience=0, **PAST_OPTIMUM[method])

    def interrupt(state):
        if state.round == 3:
            raise KeyboardInterrupt

    out = str(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        train(
            LocalBackend([tr], space),
            train_config(**keys),
            LocalBackend([he], space),
            out,
            on_round=interrupt,
        )
    # the same 3 stages, uninterrupted (and not refitted: the spent budget leaves no refit)
    whole = run(problem, max_rounds=3, refit=False, **keys)
    spent = train_config(max_seconds=1e-9, **keys)
    res = train(LocalBackend([tr], space), spent, LocalBackend([he], space), out, resume=True)
    assert len(res.report.rounds) == 3 and res.report.stop.message == "max_seconds = 1e-09"
    assert res.report.refit.skipped.startswith("max_seconds")
    assert res.report.stage_choice == whole.report.stage_choice
    np.testing.assert_array_equal(res.weights.ids, whole.weights.ids)
    np.testing.assert_allclose(res.weights.values, whole.weights.values, rtol=1e-12)
    assert res.report.warnings and res.report.unconverged == []


def test_max_seconds_stops_before_a_stage_that_would_end_past_it(problem):
    # 1 s a pass: a budget that ends within the third stage; that stage, if
    # it took as long as the second, would end past it, so it is not started
    keys = dict(method="sgc", stage_features=1, refit=False)
    free = [r.elapsed_s for r in clocked(problem, max_rounds=4, **keys).report.rounds]
    budget = free[2] - 0.5
    assert free[1] + (free[1] - free[0]) > budget  # the loop's estimate of the third
    res = clocked(problem, max_seconds=budget, **keys)
    assert res.report.stop.message == f"max_seconds = {budget:g}"
    assert [r.elapsed_s for r in res.report.rounds] == free[:2]
    assert res.report.wall_s <= budget
    assert res.report.stage_choice.chosen_round in (1, 2)


def test_a_resumed_run_counts_its_earlier_sessions_against_max_seconds(problem, tmp_path):
    # 3 stages in a first session, then resumed with a budget those 3 stages
    # and the new session's setup leave one more stage for
    tr, he, space = problem
    keys = dict(method="sgc", stage_features=1, refit=False, patience=0)
    free = [r.elapsed_s for r in clocked(problem, max_rounds=6, **keys).report.rounds]
    out = str(tmp_path / "run")
    first = clocked(problem, output_dir=out, max_rounds=3, **keys)
    assert [r.elapsed_s for r in first.report.rounds] == free[:3]
    budget = free[2] + (free[4] - free[2]) - 0.5  # about two stages more, less the setup
    res = clocked(problem, output_dir=out, resume=True, max_seconds=budget, **keys)
    rounds = res.report.rounds
    assert res.report.stop.message == f"max_seconds = {budget:g}"
    assert 4 <= len(rounds) <= 5 and rounds[-1].elapsed_s > free[2]


@pytest.mark.parametrize("method", ["grafting", "l2"])
def test_refit_fits_the_chosen_penalty_on_training_and_held_out_events(problem, method):
    tr, he, space = problem
    keys = dict(method=method, path=True, points=5, gtol=1e-9, l2_mixes=[0.0])
    chosen = run(problem, refit=False, **keys)
    res = run(problem, **keys)
    path, refit = res.report.path, res.report.refit
    point = path.chosen_point
    assert path == chosen.report.path  # the same path and choice
    parameter = "l1" if method == "grafting" else "l2"
    assert point.parameter == refit.parameter == parameter
    gamma = point.gamma
    assert refit.gamma == gamma
    # the chosen fit's figures are kept beside the refit's
    assert refit.chosen_fit.features == chosen.weights.nnz == point.features
    assert refit.chosen_fit.objective == pytest.approx(chosen.report.objective)
    assert res.report.heldout.accuracy == point.heldout["heldout_accuracy"]
    # the refit is a fit at the chosen gamma on both parts' events
    penalty = {"l1": gamma} if method == "grafting" else {"l2": gamma}
    both = LocalBackend([tr, he], space)
    cold = train(both, train_config(method=method, gtol=1e-9, **penalty))
    assert refit.objective == pytest.approx(cold.report.objective, rel=1e-6)
    assert res.weights.nnz == refit.features == cold.weights.nnz
    assert refit.objective != pytest.approx(chosen.report.objective, rel=1e-6)
    if method == "grafting":
        assert refit.kkt_passed


def test_refit_leaves_out_held_out_events_of_labels_unseen_in_training(problem):
    tr, he, space = problem
    y = he.y.copy()
    y[:50] = -1  # a label the training part never had
    held = dataclasses.replace(he, y=y)
    keys = dict(method="l2", path=True, l2_grid=[1e-2, 1e-3], patience=0)
    res = train(LocalBackend([tr], space), train_config(**keys), LocalBackend([held], space))
    assert res.report.refit.parameter == "l2"
    gamma = res.report.refit.gamma
    usable = take_events(he, np.arange(he.n_events) >= 50)
    cold = train(LocalBackend([tr, usable], space), train_config(method="l2", l2=gamma))
    assert res.report.refit.objective == pytest.approx(cold.report.objective, rel=1e-6)


def test_l2_mixes_choose_the_mix_with_gamma1_and_refit_with_both(problem):
    tr, he, space = problem
    keys = dict(method="grafting", path=True, points=4, gtol=1e-9, refit=False, mix_stop=False)
    res = run(problem, l2_mixes=[0.9, 0.0, 0.5], **keys)
    path = res.report.path
    elastic = path.elastic
    assert [e.what["l2_mix"] for e in elastic] == [0.0, 0.5, 0.9]  # pure l1 first
    # the sparsest mix whose chosen point is within one standard error of the best's
    picked = elastic[sparsest_within_one_se(elastic)]
    assert min(e.point.below_best_se for e in elastic) == 0.0  # the paired gap, 0 at the best
    assert path.what["l2_mix"] == picked.what["l2_mix"] and picked.point.chosen
    assert path.chosen_point.score == picked.point.score
    # pure l1 alone is the mix-0 path
    l1 = run(problem, l2_mixes=[0.0], **keys).report.path
    assert l1.elastic is None and l1.chosen_point.gamma == elastic[0].point.gamma
    # a mixed point is grafting at gamma1 with gamma2 = gamma1 m / (1 - m)
    mixed = next(e.point for e in elastic if e.what["l2_mix"] == 0.5)
    assert mixed.parameter == "l1"
    cold = run(
        problem, heldout=False, method="grafting", l1=mixed.gamma, elastic_l2=mixed.gamma, gtol=1e-9
    )
    assert mixed.objective == pytest.approx(cold.report.objective, rel=1e-6)
    # the refit keeps the chosen mix
    both = run(problem, l2_mixes=[0.9, 0.0, 0.5], **{**keys, "refit": True})
    assert both.report.refit.parameter == "l1"
    m, g = both.report.path.what["l2_mix"], both.report.refit.gamma
    whole = LocalBackend([tr, he], space)
    ref = train(whole, train_config(method="grafting", l1=g, elastic_l2=g * m / (1 - m), gtol=1e-9))
    assert both.report.refit.objective == pytest.approx(ref.report.objective, rel=1e-6)
    with pytest.raises(ConfigError, match="l2_mixes"):
        run(problem, l2_mixes=[0.0, 1.0], **keys)


def sparsest_within_one_se(rows: list[PathVariant]) -> int:
    """Brute force: the fewest features among the variants' chosen points
    scoring at least the best one's score minus its standard error (the
    first of ties)."""
    points = [r.point for r in rows]
    best = max(points, key=lambda p: p.score)
    within = [i for i, p in enumerate(points) if p.score >= best.score - best.se]
    return min(within, key=lambda i: (points[i].features, i))


def test_max_seconds_covers_every_point_of_a_path(problem):
    # the budget is the whole path's: no point starts once it is spent
    keys = dict(method="grafting", path=True, points=6, l2_mixes=[0.0], patience=0)
    free = clocked(problem, **keys)
    budget = free.report.wall_s / 3
    res = clocked(problem, max_seconds=budget, **keys)
    points = res.report.path.points
    assert 1 <= len(points) < len(free.report.path.points)
    assert res.weights.nnz > 0 and "refit" in res.report
