"""Capped thresholded partials (kernels/thresholded.py, ``keep``): each block
ships at most its ``keep`` largest entries above the cut; the test still
finds the dense test's n best, and a certificate still counts exactly."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.kernels import LossGradTask, MomentsTask, Weights
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.kernels.loss import LossGrad
from sparkmaxent.kernels.thresholded import (
    ExactSumsTask,
    ThresholdedTestTask,
    threshold_partial,
)
from sparkmaxent.methods.partials import resolve

from .test_grafting import planted
from .test_thresholded import _tests, _weights


def _block_sums(grad: list[float]) -> LossGrad:
    """A block's sums with the gradient ``grad``, unit event weight."""
    return LossGrad(0.0, 1.0, 0.0, np.array(grad, dtype=float), None)


def test_a_feature_every_block_withholds_is_fetched_when_it_may_be_the_best():
    """Two blocks, 2 labels, each keeping 1 entry: block 1 ships feature 0,
    block 2 feature 1; both withhold feature 5, whose sum is the largest.
    The rows' bounds must bring it in (a fetch), and the best is 5."""
    grads = [
        [10.0, 0.1, 0.0, 0.0, 0.0, 9.0, 0.0, 0.0],
        [0.1, 10.0, 0.0, 0.0, 0.0, 9.0, 0.0, 0.0],
    ]
    none = Weights(np.zeros(0, dtype=np.int64), np.zeros(0), None)
    parts = [threshold_partial(_block_sums(g), none.active_ids(), 0.5, 2, keep=1) for g in grads]
    assert [p.ids.tolist() for p in parts] == [[0], [1]]
    part = pickle.loads(pickle.dumps(parts[0])).merge(pickle.loads(pickle.dumps(parts[1])))
    out = resolve(part, none, 0.0, 1.0, 1, exact_count=False)
    assert isinstance(out, np.ndarray) and 5 in out
    exact = np.sum(grads, axis=0)
    decided = resolve(part.with_exact(out, exact[out]), none, 0.0, 1.0, 1, exact_count=False)
    assert not isinstance(decided, np.ndarray)
    assert decided.new.tolist() == [5] and decided.new_grad.tolist() == [9.0]
    assert decided.best == 9.0
    # the count: f0, f1 and f5 pass (|g| 5.05, 5.05, 9 > 1)
    counted = resolve(part, none, 0.0, 1.0, 1, exact_count=True)
    assert isinstance(counted, np.ndarray) and 5 in counted
    counted = resolve(part.with_exact(counted, exact[counted]), none, 0.0, 1.0, 1)
    assert not isinstance(counted, np.ndarray)
    assert counted.n_over == 3 and counted.n_undecided == 0


def _capped_case(seed: int):
    """Random weights over planted data in 2-4 blocks, gamma1 low enough
    that a block has more entries over the cut than its cap."""
    _, block, space = planted(seed=seed % 3 + 1, m=1500, P=120)
    blocks = split_block(block, 2 + seed % 3)
    scaling = LocalBackend(blocks, space).run(MomentsTask()).scaling() if seed % 2 else None
    weights = _weights(seed, space, 12 + 2 * seed, zero_at=seed % 4)
    return blocks, space, scaling, weights


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("factor", [1, 3])
def test_capped_partials_bound_every_feature_and_count_exactly_when_asked(seed, factor):
    """Every feature's true |g_j| lies in what the capped partials say of it
    (its interval if shipped, its row's bound if not); the count over the
    threshold lies in [n_over, n_over + n_undecided]; asked for the exact
    count, one fetch makes it the brute-force count."""
    blocks, space, scaling, weights = _capped_case(seed)
    thr, n_best, gamma1_cut = 2e-3, 3 + seed, 1e-3
    backend = LocalBackend(blocks, space)
    exact = backend.run(LossGradTask(space, weights.sparse(), scaling, None))
    part = backend.run(ThresholdedTestTask(space, weights, scaling, gamma1_cut, factor * n_best))
    W, K = part.weight, space.n_labels
    assert part.cut > gamma1_cut * W, "no block capped: the case tests nothing"
    g = np.abs(exact.grad / exact.weight)
    inactive = np.setdiff1d(np.arange(space.n_features), weights.ids)
    unshipped = np.setdiff1d(inactive, part.ids)
    row_bound = np.minimum(part.rows, part.cut)[unshipped // K] / W
    assert np.all(g[unshipped] <= row_bound * (1 + 1e-12))
    assert np.all(np.abs(g[part.ids] - np.abs(part.sums / W)) <= part.rest / W + 1e-15)
    truth = int(np.count_nonzero(g[inactive] > thr))
    for exact_count in (False, True):
        out = resolve(part, weights, 0.0, thr, n_best, exact_count)
        if isinstance(out, np.ndarray):
            sums = backend.run(ExactSumsTask(space, weights, scaling, out)).grad
            np.testing.assert_array_equal(sums, exact.grad[out])
            out = resolve(part.with_exact(out, sums), weights, 0.0, thr, n_best, exact_count)
        assert not isinstance(out, np.ndarray)
        assert out.n_over <= truth <= out.n_over + out.n_undecided
        if exact_count:
            assert out.n_undecided == 0 and out.n_over == truth
        score = np.where(np.isin(np.arange(space.n_features), weights.ids), -1.0, g)
        assert out.best == score.max()
        order = np.lexsort((np.arange(len(score)), -score))[:n_best]
        np.testing.assert_array_equal(out.new, order[score[order] > thr])


@pytest.mark.parametrize("seed", range(6))
def test_grafting_with_capped_partials_is_the_dense_test_and_certifies_it(seed):
    """Through grafting (partial_keep 1: a block ships n_best entries at
    most): the same n best, gradients and maximum as the dense test; its
    count, where left open, brackets the dense one, and the certificate
    (uncapped) is the dense one."""
    blocks, space, scaling, weights = _capped_case(seed)
    n_best = 3 + seed
    (thr, method, backend), (dense, _, _) = _tests(
        blocks, space, weights, 0.5, scaling, l1=2e-3, n_best=n_best, partial_keep=1
    )
    assert method.gradient_test.keep == n_best
    np.testing.assert_array_equal(thr.new, dense.new)
    np.testing.assert_array_equal(thr.new_grad, dense.new_grad)
    assert thr.best == dense.best and thr.value == dense.value and len(dense.new) == n_best
    over = thr.kkt.zero_weights_over_bound
    assert over <= dense.kkt.zero_weights_over_bound <= over + thr.open
    if not thr.open:  # the fetch decided every feature that may pass
        assert thr.kkt == dense.kkt
        return
    tasks, run = [], backend.run
    backend.run = lambda task: tasks.append(task) or run(task)
    assert method.gradient_test.certify(weights) == dense.kkt
    # the certificate's pass ran uncapped
    assert isinstance(tasks[0], ThresholdedTestTask) and tasks[0].keep is None
