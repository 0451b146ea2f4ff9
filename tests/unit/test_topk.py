"""The block-wise gradient test (kernels/topk.py) in-process: the top-k rule,
per-block summaries merged against the dense test, and grafting runs on
both paths giving the same selections, certificate and model."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.local import summarize_all
from sparkmaxent.config import train_config
from sparkmaxent.kernels import CANDIDATES, LossGrad, LossGradTask, MomentsTask, Space, Weights
from sparkmaxent.kernels.blocks import MulticlassBlock, split_block
from sparkmaxent.kernels.curvature import CurvatureTask
from sparkmaxent.kernels.topk import (
    BlockGradient,
    GradientSummary,
    GradientTestTask,
    sorted_unique,
    top_candidates,
    union_positions,
)
from sparkmaxent.methods.gradient_test import blockwise_summary, finished, select_candidates
from sparkmaxent.problem import Objective, kkt_certificate, kkt_from_parts
from sparkmaxent.train import train

from .helpers import random_candidates
from .test_grafting import grafting_config, planted

# ---- the top-k rule ---------------------------------------------------------------


# ids filling their span, an eighth of it (both marked over the span), or sparse
@pytest.mark.parametrize("high", [80, 700, 10**6])
@pytest.mark.parametrize("sizes", [(0, 0), (0, 5), (7, 0), (50, 60), (1000, 3)])
def test_union_positions_and_sorted_unique_are_union1d_and_unique(sizes, high):
    rng = np.random.default_rng(sum(sizes))
    a, b = (np.unique(rng.integers(0, high, n)).astype(np.int64) for n in sizes)
    got, pa, pb = union_positions(a, b)
    np.testing.assert_array_equal(got, np.union1d(a, b))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got[pa], a)
    np.testing.assert_array_equal(got[pb], b)
    both = np.concatenate([a, b[::-1], a])  # repeats, any order
    np.testing.assert_array_equal(sorted_unique(both), np.unique(both))


def test_top_candidates_orders_by_score_then_id_and_keeps_ties_at_the_cut():
    score = np.array([0.3, 0.9, 0.5, 0.9, 0.5, 0.5, 0.1])
    ids = np.array([10, 11, 12, 13, 14, 15, 16])
    # 0.9 twice, then three tied at 0.5 for the last two places: the smaller ids win
    assert ids[top_candidates(score, ids, 0.2, 4)].tolist() == [11, 13, 12, 14]
    # strictly above the threshold
    assert ids[top_candidates(score, ids, 0.5, 10)].tolist() == [11, 13]
    # the id order decides, not the position
    rev = ids[::-1].copy()
    assert rev[top_candidates(score, rev, 0.2, 3)].tolist() == [13, 15, 11]
    assert len(top_candidates(np.zeros(0), np.zeros(0, dtype=np.int64), 0.0, 3)) == 0
    with pytest.raises(ValueError, match="n_best"):
        top_candidates(score, ids, 0.0, 0)


def test_dense_selection_breaks_ties_at_the_cut_by_id():
    g = np.array([0.4, -0.4, 0.4, 0.4, -0.4, 0.9])
    for _ in range(3):
        ids, best = select_candidates(g, np.array([5]), gamma1_tested=0.1, n_best=2)
        assert ids.tolist() == [0, 1] and best == 0.4


# ---- summaries against the dense test -----------------------------------------------


def _random_gradient(rng, n, K=3):
    # rounded values: many exact ties; a few exactly 0
    grad = np.round(rng.normal(size=n), 1) * 0.01
    grad[rng.random(n) < 0.1] = 0.0
    return LossGrad(1.7, 5.0, 3.0, grad * 5.0, rng.normal(size=K))


def _partial(lg: LossGrad, space: Space) -> BlockGradient:
    """A dense LossGrad as the block-wise test's partial over every predicate."""
    P, K = space.n_predicates, space.n_labels
    return BlockGradient(
        lg.loss, lg.weight, lg.correct, np.arange(P), lg.grad.reshape(P, K), lg.grad_bias
    )


@pytest.mark.parametrize("block_size", [1, 3, 7, 64, 1000])
@pytest.mark.parametrize("n_best", [1, 5, 40])
def test_block_summaries_select_what_the_dense_test_selects(block_size, n_best):
    rng = np.random.default_rng(block_size * 100 + n_best)
    space = Space("multiclass", 100, 3, bias=True)
    lg = _random_gradient(rng, space.n_features)
    active = np.sort(rng.choice(space.n_features, 20, replace=False))
    values = rng.normal(size=20)
    values[[3, 11]] = 0.0  # active at exactly 0: excluded from selection, zero for the KKT
    weights = Weights(active, values, np.zeros(3))
    l2, threshold, l1, tol = 0.03, 0.005, 0.005, 1e-6
    bound = threshold * (1 + tol)
    task = GradientTestTask(space, weights, None, l2, bound, n_best, block_size)
    summary = finished(summarize_all(task, _partial(lg, space), lg.weight), space, active)

    full = lg.grad / lg.weight
    full[active] += l2 * values
    ids, best = select_candidates(full, active, bound, n_best)
    assert len(ids) == min(n_best, summary.n_over) > 0
    np.testing.assert_array_equal(summary.top_ids, ids)
    np.testing.assert_array_equal(summary.top_grad, full[ids])
    assert summary.max_inactive == best
    np.testing.assert_array_equal(summary.active_grad, full[active])
    grad_bias = lg.grad_bias / lg.weight
    dense = kkt_certificate(full, weights, grad_bias, l1, tol, grad_threshold=threshold)
    parts = kkt_from_parts(
        summary.active_grad,
        weights,
        summary.max_inactive,
        summary.n_over,
        summary.n_features,
        grad_bias,
        l1,
        tol,
        grad_threshold=threshold,
    )
    assert parts == dense
    assert summary.lg.loss == lg.loss and summary.lg.weight == lg.weight
    np.testing.assert_array_equal(summary.lg.grad_bias, lg.grad_bias)


def test_summaries_merge_in_any_order_to_the_same_answer():
    rng = np.random.default_rng(5)
    space = Space("multiclass", 50, 4)
    lg = _random_gradient(rng, space.n_features, K=4)
    weights = Weights(np.array([3, 17, 80]), np.array([0.5, -1.0, 2.0]))
    task = GradientTestTask(space, weights, None, 0.0, 0.004, 6, 9)
    pieces = [task.summarize(k, v, lg.weight) for k, v in task.split(_partial(lg, space))]
    forward = pieces[0]
    for p in pieces[1:]:
        forward = forward.merge(p)
    backward = pieces[-1]
    for p in pieces[-2::-1]:
        backward = p.merge(backward)
    a, b = finished(forward, space, weights.ids), finished(backward, space, weights.ids)
    np.testing.assert_array_equal(a.top_ids, b.top_ids)
    assert (a.max_inactive, a.n_over, a.n_features) == (b.max_inactive, b.n_over, 200)


def test_summaries_of_different_tests_do_not_merge_and_gaps_are_caught():
    space = Space("multiclass", 10, 2)
    a = GradientSummary.empty(0.1, 5)
    with pytest.raises(ValueError, match="different tests"):
        a.merge(GradientSummary.empty(0.2, 5))
    with pytest.raises(RuntimeError, match="covered 0 features"):
        finished(a, space, np.zeros(0, dtype=np.int64))
    with pytest.raises(ValueError, match="block size"):
        GradientTestTask(space, Weights.zeros(space), None, 0.0, 0.1, 5, 0)


# ---- one pass on a backend, both paths --------------------------------------------


def _nonzero_weights(block, space):
    res = train(LocalBackend([block], space), grafting_config(n_best=8, max_rounds=2))
    return res.weights


@pytest.mark.parametrize("compact", [False, True], ids=["dense-partials", "compact-partials"])
@pytest.mark.parametrize("standardize", [False, True])
def test_block_pass_equals_dense_pass_on_data(standardize, compact, monkeypatch):
    """Same data, same weights: the block-wise pass over many tiny feature
    blocks and the dense pass agree bit for bit (empirical expectation,
    centering term and bias gradient included), whether a data block's
    partial is over the predicates it holds or over all of them."""
    import sparkmaxent.kernels.topk as topk

    monkeypatch.setattr(topk, "compact_pays", lambda block, space: compact)
    _, block, space = planted()
    backend = LocalBackend(split_block(block, 3), space)
    scaling = None
    if standardize:
        scaling = backend.run(MomentsTask()).scaling()
    w = _nonzero_weights(block, space)
    # one active weight at exactly 0, as after a round whose solver left it there
    ids = np.union1d(w.ids, [5])
    values = np.zeros(len(ids))
    values[np.searchsorted(ids, w.ids)] = w.values
    theta = np.concatenate([values, w.bias])
    obj = Objective(backend, ids, l2=1e-3, scaling=scaling)
    ev = obj.at(theta, full_gradient=True, hessian=False)
    value, summary = blockwise_summary(obj, theta, 2e-3 * (1 + 1e-6), 10, 37)
    assert value == ev.value
    ids_dense, best = select_candidates(ev.full_grad, ids, 2e-3 * (1 + 1e-6), 10)
    assert len(ids_dense) == 10
    np.testing.assert_array_equal(summary.top_ids, ids_dense)
    np.testing.assert_array_equal(summary.top_grad, ev.full_grad[ids_dense])
    np.testing.assert_array_equal(summary.active_grad, ev.full_grad[ids])
    assert summary.max_inactive == best
    np.testing.assert_array_equal(summary.lg.grad_bias, ev.lossgrad.grad_bias)
    assert summary.lg.correct == ev.lossgrad.correct


class DenseRefusingBackend(LocalBackend):
    """Fails any pass that would bring a dense n_features gradient back."""

    def run(self, task):
        dense = (isinstance(task, LossGradTask) and task.grad_ids is None) or (
            isinstance(task, CurvatureTask) and task.full_gradient
        )
        assert not dense, f"a dense gradient pass on the block-wise path: {type(task).__name__}"
        return super().run(task)


@pytest.mark.parametrize("solver", ["newton", "newton-cg", "lbfgs-b"])
def test_grafting_block_path_grafts_the_dense_path_model(solver):
    _, block, space = planted()
    blocks = split_block(block, 2)
    dense = train(LocalBackend(blocks, space), grafting_config(solver=solver, partial_cut=0.0))
    backend = DenseRefusingBackend(blocks, space)
    cfg = grafting_config(solver=solver, dense_test_max=space.n_features - 1, test_block_size=13)
    tiled = train(backend, cfg)
    assert dense.report["gradient_test"] == {"path": "dense"}
    assert tiled.report["gradient_test"] == {
        "path": "block-wise",
        "block_size": 13,
        "blocks": -(-space.n_features // 13),
    }
    assert dense.report.certificate.passed and tiled.report.certificate == dense.report.certificate
    assert tiled.report.objective == dense.report.objective
    np.testing.assert_array_equal(tiled.weights.ids, dense.weights.ids)
    np.testing.assert_array_equal(tiled.weights.values, dense.weights.values)
    added = [r.added for r in dense.report.rounds]
    assert [r.added for r in tiled.report.rounds] == added
    if solver == "newton":  # the dense test rides on Newton's last pass; the block test cannot
        assert tiled.report.passes > dense.report.passes


def test_block_path_on_candidate_sets_and_with_a_round_limit():
    rng = np.random.default_rng(3)
    block = random_candidates(rng, m=150, D=30, max_cands=5)
    space = Space(CANDIDATES, 30, 1)
    cfg = dict(method="mle-ifs", grad_threshold=1e-2, n_best=3, max_rounds=2, gtol=1e-9)
    dense = train(LocalBackend([block], space), train_config(**cfg))
    tiled = train(
        DenseRefusingBackend([block], space),
        train_config(**cfg, dense_test_max=0, test_block_size=4),
    )
    assert tiled.report["rounds_run"] == 2 and not tiled.report.certificate.passed
    assert len(dense.weights.ids) > 0
    assert tiled.report.certificate == dense.report.certificate
    np.testing.assert_array_equal(tiled.weights.ids, dense.weights.ids)
    np.testing.assert_allclose(tiled.weights.values, dense.weights.values, rtol=0, atol=0)


@pytest.mark.parametrize("key, value", [("dense_test_max", -1), ("test_block_size", 0)])
def test_bad_test_settings_name_the_key(key, value):
    _, block, space = planted()
    with pytest.raises(ValueError, match=f"train.grafting.{key}: expected a value"):
        train(LocalBackend([block], space), grafting_config(**{key: value}))


# ---- a candidate space no dense vector could hold -----------------------------------


def _huge_space_events(P: int, K: int, m: int = 500, seed: int = 4):
    """Events over ``P`` predicates: predicate 0 fires everywhere, one of four
    informative predicates spread over the id range says the label (0..3) 80%
    of the time, and three noise predicates anywhere in [0, P) fire too."""
    rng = np.random.default_rng(seed)
    informative = np.array([P // 4, P // 2, 3 * P // 4, P - 1])
    y = rng.integers(0, 4, size=m)
    cue = np.where(rng.random(m) < 0.8, y, rng.integers(0, 4, size=m))
    noise = rng.integers(1, P - 1, size=(m, 3))
    rows = [np.unique(np.concatenate([[0, informative[c]], n])) for c, n in zip(cue, noise)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    X = sp.csr_matrix(
        (np.ones(indptr[-1]), np.concatenate(rows).astype(np.int32), indptr), shape=(m, P)
    )
    return MulticlassBlock(X, y.astype(np.int64), np.ones(m), K)


def test_grafting_over_ten_billion_candidates_certifies_in_little_memory():
    """10^10 candidate features (10^7 predicates x 1,000 labels) over 500
    events: grafting's block-wise test, certificate and report never hold a
    vector over the candidates (80 GB as float64; the peak of numpy's
    allocations stays under 0.5 GB), and the model is the one grafted over
    the same events with the predicates renumbered into a small space
    (dense test)."""
    import tracemalloc

    P, K = 10**7, 1000
    block = _huge_space_events(P, K)
    space = Space("multiclass", P, K, bias=False)
    cfg = grafting_config(l1=0.01, n_best=10, test_block_size=10**8)
    tracemalloc.start()
    try:
        huge = train(DenseRefusingBackend(split_block(block, 2), space), cfg)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    rep = huge.report
    assert space.n_features == 10**10
    assert rep["gradient_test"] == {"path": "block-wise", "block_size": 10**8, "blocks": 100}
    assert rep["kkt"]["passed"] and rep["kkt"]["features_checked"] == 10**10
    assert peak < 0.5 * 2**30, f"peak {peak / 2**20:.0f} MiB"
    preds = huge.weights.ids // K
    assert {P // 4, P // 2, 3 * P // 4, P - 1} <= set(preds.tolist())

    # the same events with their predicates renumbered 0..n-1: the dense test
    used = np.unique(block.X.indices).astype(np.int64)
    small_X = sp.csr_matrix(
        (block.X.data, np.searchsorted(used, block.X.indices), block.X.indptr),
        shape=(block.n_events, len(used)),
    )
    small_space = Space("multiclass", len(used), K, bias=False)
    small_block = MulticlassBlock(small_X, block.y, block.c, K)
    small_cfg = grafting_config(
        l1=0.01, n_best=10, dense_test_max=small_space.n_features, partial_cut=0.0
    )
    small = train(LocalBackend(split_block(small_block, 2), small_space), small_cfg)
    assert small.report["gradient_test"] == {"path": "dense"}
    assert small.report.certificate.passed
    small_ids = used[small.weights.ids // K] * K + small.weights.ids % K
    np.testing.assert_array_equal(huge.weights.ids, small_ids)
    np.testing.assert_allclose(huge.weights.values, small.weights.values, rtol=1e-9)
    assert rep["objective"] == pytest.approx(small.report.objective, rel=1e-12)
