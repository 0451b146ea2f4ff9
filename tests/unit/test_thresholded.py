"""The dense gradient test from thresholded partials (kernels/thresholded.py)
equals the dense test: selections, gradients, maximum, certificate and the
grafted model, with and without the second pass."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.config import train_config
from sparkmaxent.kernels import CANDIDATES, LossGradTask, MomentsTask, Space, Weights
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.kernels.curvature import CurvatureTask
from sparkmaxent.kernels.thresholded import ExactSumsTask, ThresholdedTestTask
from sparkmaxent.methods.gradient_test import BlockwiseTest, DenseTest, ThresholdedTest
from sparkmaxent.methods.grafting import Grafting, variant
from sparkmaxent.methods.partials import resolve
from sparkmaxent.problem import Penalty
from sparkmaxent.selection.base import TrainingContext
from sparkmaxent.train import train

from .helpers import random_candidates
from .test_grafting import grafting_config, planted


class CountingBackend(LocalBackend):
    """Counts the passes of each task type, and refuses a pass that ships
    the dense gradient (a test's or a solver's) unless allowed (the
    thresholded path must not fall back silently)."""

    def __init__(self, *a, dense_ok: bool = False, **kw):
        super().__init__(*a, **kw)
        self.dense_ok = dense_ok
        self.kinds: list[str] = []

    def run(self, task):
        kind = type(task).__name__
        dense = isinstance(task, LossGradTask) and task.grad_ids is None
        if dense or isinstance(task, CurvatureTask) and task.full_gradient:
            kind = "dense"
            assert self.dense_ok, "a dense gradient pass on the thresholded path"
        self.kinds.append(kind)
        return super().run(task)


def _weights(seed: int, space, n_active: int, zero_at: int | None = None) -> Weights:
    """Random weights over ``n_active`` random features (one at exactly 0)."""
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(space.n_features, n_active, replace=False)).astype(np.int64)
    values = rng.normal(scale=0.3, size=n_active)
    if zero_at is not None:
        values[zero_at] = 0.0
    return Weights(ids, values, rng.normal(scale=0.1, size=space.n_labels))


def _tests(blocks, space, weights, cut, scaling=None, dense_ok=False, **cfg):
    """The gradient test at ``weights`` through grafting's thresholded path
    (cut) and its dense path (cut 0), and the thresholded method."""
    out = []
    for c in (cut, 0.0):
        backend = CountingBackend(blocks, space, dense_ok=dense_ok or c == 0)
        config = grafting_config(partial_cut=c, **cfg)
        method = Grafting(TrainingContext(backend, config, scaling), variant("grafting", config))
        out.append((method.gradient_test.test(weights), method, backend))
    return out


def _assert_same_test(a, b, method=None, weights=None):
    """``a`` (thresholded) is the dense test ``b``; with its count left
    open, the certificate ``method`` then gives at ``weights`` is."""
    assert a.value == b.value
    np.testing.assert_array_equal(a.new, b.new)
    np.testing.assert_array_equal(a.new_grad, b.new_grad)
    assert a.best == b.best
    assert b.open == 0
    if a.open:
        assert len(a.new) and a.kkt.zero_weights_over_bound < b.kkt.zero_weights_over_bound
        assert method.gradient_test.certify(weights) == b.kkt
    else:
        assert a.kkt == b.kkt
    assert (a.lossgrad.loss, a.lossgrad.weight, a.lossgrad.correct) == (
        b.lossgrad.loss,
        b.lossgrad.weight,
        b.lossgrad.correct,
    )
    np.testing.assert_array_equal(a.lossgrad.grad_bias, b.lossgrad.grad_bias)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cut", [0.05, 0.5, 0.95])
def test_thresholded_test_is_the_dense_test_on_random_weights(seed, cut):
    """Random weights, 2-5 blocks, with gamma2 and standardization on odd
    seeds: the same test bit for bit, whatever the cut."""
    _, block, space = planted(seed=seed % 3 + 1, m=1500, P=120)
    blocks = split_block(block, 2 + seed % 4)
    scaling = LocalBackend(blocks, space).run(MomentsTask()).scaling() if seed % 2 else None
    weights = _weights(seed, space, 12 + 3 * seed, zero_at=seed % 5)
    l1 = [2e-3, 5e-3, 2e-2][seed % 3]
    (thr, method, backend), (dense, _, _) = _tests(
        blocks, space, weights, cut, scaling, l1=l1, n_best=3 + seed, elastic_l2=1e-3 * (seed % 2)
    )
    fetches = method.gradient_test.fetch_passes
    assert backend.kinds == ["ThresholdedTestTask"] + ["ExactSumsTask"] * fetches
    _assert_same_test(thr, dense, method, weights)
    assert len(dense.new) > 0


@pytest.mark.parametrize("seed", range(4))
def test_tight_cuts_need_the_second_pass_and_still_equal_the_dense_test(seed):
    """A cut near the threshold and every passing feature among the n best
    leave features undecided: the second pass fetches them and the test is
    still the dense one."""
    _, block, space = planted(seed=seed + 1, m=2000, P=150)
    blocks = split_block(block, 4)
    weights = _weights(seed, space, 20)
    (thr, method, backend), (dense, _, _) = _tests(
        blocks, space, weights, 0.99, l1=5e-3, n_best=500
    )
    assert method.gradient_test.fetch_passes == 1 and backend.kinds == [
        "ThresholdedTestTask",
        "ExactSumsTask",
    ]
    _assert_same_test(thr, dense, method, weights)


def test_resolve_decides_from_the_intervals_or_names_what_it_needs():
    """Unit check of ``resolve`` on a handmade merge of two blocks."""
    _, block, space = planted(m=1200, P=80)
    blocks = split_block(block, 2)
    weights = _weights(0, space, 10)
    exact = LocalBackend(blocks, space).run(LossGradTask(space, weights.sparse(), None, None))
    thr, n = 3e-3, 4
    task = ThresholdedTestTask(space, weights, None, 0.5 * thr)
    part = LocalBackend(blocks, space).run(task)
    # every unshipped feature is bounded below the threshold
    g = exact.grad / exact.weight
    inactive = np.setdiff1d(np.arange(space.n_features), weights.ids)
    unshipped = np.setdiff1d(inactive, part.ids)
    bound = part.rows[unshipped // space.n_labels] / part.weight
    assert np.all(np.abs(g[unshipped]) <= bound) and bound.max() <= 0.5 * thr
    # each shipped feature's interval holds its dense value
    half = part.rest / part.weight
    assert np.all(np.abs(np.abs(g[part.ids]) - np.abs(part.sums / part.weight)) <= half + 1e-15)
    np.testing.assert_array_equal(part.sums[part.rest == 0], exact.grad[part.ids[part.rest == 0]])
    out = resolve(part, weights, 0.0, thr, n)
    if isinstance(out, np.ndarray):
        assert len(out)
        sums = LocalBackend(blocks, space).run(ExactSumsTask(space, weights, None, out)).grad
        np.testing.assert_array_equal(sums, exact.grad[out])
        out = resolve(part.with_exact(out, sums), weights, 0.0, thr, n)
    assert not isinstance(out, np.ndarray) and out.n_undecided == 0
    score = np.abs(g)
    score[weights.ids] = -1
    assert out.best == score.max()
    assert out.n_over == np.count_nonzero(score > thr)
    np.testing.assert_array_equal(out.new_grad, g[out.new])
    np.testing.assert_array_equal(out.active_grad, g[weights.ids])


@pytest.mark.parametrize("seed", range(4))
def test_fetch_pass_gives_the_dense_sums_from_the_fetched_columns_only(seed, monkeypatch):
    """The second pass (``ExactSumsTask``, ``loss_grad_at``) gives the dense
    test's sums at its features bit for bit, centered and scaled too, and
    its gradient product runs over the fetched features' predicate columns
    only (not a kernel over every feature); candidate sets likewise."""
    from sparkmaxent.kernels import loss

    _, block, space = planted(seed=seed + 1, m=1500, P=120)
    K, rng = space.n_labels, np.random.default_rng(seed)
    scaling = LocalBackend([block], space).run(MomentsTask()).scaling() if seed % 2 else None
    weights = _weights(seed, space, 15, zero_at=3)
    # inactive features, active ones, and the zero-valued active one
    ids = np.union1d(rng.choice(space.n_features, 40, replace=False), weights.ids[:5])
    dense = loss.loss_grad(block, space, weights.sparse(), scaling, None)
    widths, sweep = [], loss._sweep

    def recording(Xs, W, bias, mean, inv, Xg, *rest):
        widths.append(Xg.shape[1])
        return sweep(Xs, W, bias, mean, inv, Xg, *rest)

    monkeypatch.setattr(loss, "_sweep", recording)
    got = ExactSumsTask(space, weights, scaling, ids)(block)
    assert widths == [len(np.unique(ids // K))] and widths[0] < space.n_predicates
    np.testing.assert_array_equal(got.grad, dense.grad[ids])
    assert (got.loss, got.weight, got.correct) == (dense.loss, dense.weight, dense.correct)
    np.testing.assert_array_equal(got.grad_bias, dense.grad_bias)
    cands = random_candidates(rng, m=200, D=30, max_cands=4)
    cspace = Space(CANDIDATES, 30, 1)
    cw = _weights(seed, cspace, 6)
    cw = Weights(cw.ids, cw.values, None)
    cids = np.sort(rng.choice(30, 12, replace=False)).astype(np.int64)
    full = loss.loss_grad(cands, cspace, cw.sparse(), None, None)
    fetched = ExactSumsTask(cspace, cw, None, cids)(cands)
    np.testing.assert_array_equal(fetched.grad, full.grad[cids])


def test_unshipped_features_that_may_be_the_maximum_are_fetched():
    """No weights and a gamma1 far above every gradient: nothing passes and
    every gradient is below the cut, so no block ships anything and the
    maximum comes from the fetch of the rows whose bound reaches the
    largest known one (here: all that hold non-zeros)."""
    _, block, space = planted(m=800, P=60)
    blocks = split_block(block, 3)
    weights = Weights(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(space.n_labels))
    (thr, method, backend), (dense, _, _) = _tests(blocks, space, weights, 0.9, l1=10.0)
    _assert_same_test(thr, dense)
    assert dense.kkt.zero_weights_over_bound == 0 and len(dense.new) == 0
    assert backend.kinds == ["ThresholdedTestTask", "ExactSumsTask"]


@pytest.mark.parametrize("solver", ["newton", "newton-cg", "lbfgs-b"])
@pytest.mark.parametrize("cut", [0.5, 0.99])
def test_grafting_with_thresholded_partials_grafts_the_dense_model(solver, cut):
    """The same model, rounds and certificate as the dense test, the
    solvers' last passes shipping the test's partials in place of the dense
    gradient (WithPartialTask) and no pass the dense gradient."""
    _, block, space = planted()
    blocks = split_block(block, 3)
    dense = train(LocalBackend(blocks, space), grafting_config(solver=solver, partial_cut=0.0))
    backend = CountingBackend(blocks, space)
    thr = train(backend, grafting_config(solver=solver, partial_cut=cut))
    assert dense.report["gradient_test"] == {"path": "dense"}
    report = thr.report["gradient_test"]
    assert report["partials"] == "thresholded" and report["partial_cut"] == cut
    assert report["fetch_passes"] == backend.kinds.count("ExactSumsTask")
    assert backend.kinds.count("ThresholdedTestTask") >= 1
    # the Newton solvers' last passes brought the next test (no pass of its own)
    assert backend.kinds.count("WithPartialTask") >= (solver != "lbfgs-b")
    assert dense.report.certificate.passed and thr.report.certificate == dense.report.certificate
    assert thr.report.objective == dense.report.objective
    np.testing.assert_array_equal(thr.weights.ids, dense.weights.ids)
    np.testing.assert_array_equal(thr.weights.values, dense.weights.values)

    def figures(r):  # a round's figures (the passes differ: the second passes)
        return (r.active, r.added, r.removed, r.objective, r.score_name, r.score, r.solve.tol,
                r.solve.violation)  # fmt: skip

    assert [figures(r) for r in thr.report.rounds] == [figures(r) for r in dense.report.rounds]
    # the passes: the dense ones, plus the second passes
    assert thr.report.passes == dense.report.passes + report["fetch_passes"]


def test_candidate_sets_and_a_capped_run_certify_as_the_dense_test():
    """Candidate-set events (one feature per predicate), a run stopped by its
    round limit with candidates still passing: the final certificate decides
    every open feature and is the dense test's, count included."""
    rng = np.random.default_rng(3)
    block = random_candidates(rng, m=300, D=40, max_cands=5)
    space = Space(CANDIDATES, 40, 1)
    cfg = dict(method="mle-ifs", grad_threshold=1e-2, n_best=2, max_rounds=2, gtol=1e-9)
    cfg["solver"] = "lbfgs-b"  # no full gradient from the solver: every test is thresholded
    blocks = split_block(block, 3)
    dense = train(LocalBackend(blocks, space), train_config(**cfg, partial_cut=0.0))
    backend = CountingBackend(blocks, space)
    thr = train(backend, train_config(**cfg, partial_cut=0.9))
    # the final test left its count open: the certificate ran it again, deciding all
    at = [i for i, k in enumerate(backend.kinds) if k == "ThresholdedTestTask"]
    assert len(at) >= 2 and set(backend.kinds[at[-2] + 1 : at[-1]]) <= {"ExactSumsTask"}
    assert thr.report["rounds_run"] == 2 and not thr.report.certificate.passed
    assert dense.report.certificate.zero_weights_over_bound > 0
    assert thr.report.certificate == dense.report.certificate
    np.testing.assert_array_equal(thr.weights.ids, dense.weights.ids)
    np.testing.assert_array_equal(thr.weights.values, dense.weights.values)


def test_the_factory_chooses_the_test_once_from_the_configuration():
    """Block-wise above dense_test_max, else thresholded partials when
    partial_cut > 0, else the dense test; only the dense ones let a solver
    bring the full gradient, and every one reads the same bound."""
    _, block, space = planted()
    backend = LocalBackend(split_block(block, 2), space)
    cases = [
        (dict(dense_test_max=space.n_features - 1, test_block_size=64), BlockwiseTest, False),
        (dict(partial_cut=0.5, partial_keep=2), ThresholdedTest, True),
        (dict(partial_cut=0.0), DenseTest, True),
    ]
    for kw, kind, full in cases:
        config = grafting_config(**kw)
        method = Grafting(TrainingContext(backend, config), variant("grafting", config))
        test = method.gradient_test
        assert type(test) is kind and test.full_gradient is full
        assert method.options.full_gradient is full
        assert test.gamma1_tested == Penalty(gamma1=2e-3).gamma1_tested(config.gtol, 1e-6)
        assert test.describe()["path"] == ("block-wise" if kind is BlockwiseTest else "dense")
    assert test.certify(Weights.zeros(space)) == test.test(Weights.zeros(space)).kkt
