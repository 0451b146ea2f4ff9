"""The Hessian operator kept per block and point (``kernels/pointcache.py``):
exact hits, no stale operator once the weights change, bounded memory, and
CG across passes with the cache giving bit for bit the round without it."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.kernels import MULTICLASS, LossGradTask, Space, Weights
from sparkmaxent.kernels.blocks import MulticlassBlock, split_block
from sparkmaxent.kernels.direction import HessianProductTask, hessian_operator, point_operator
from sparkmaxent.kernels.pointcache import OPERATORS, PointCache
from sparkmaxent.problem.objective import Objective
from sparkmaxent.solvers import SolverOptions
from sparkmaxent.solvers.box_qp import solve_newton_cg

from .helpers import planted_round, random_multiclass
from .test_grafting import planted


def _copy(block: MulticlassBlock) -> MulticlassBlock:
    """The block as Spark hands it to a task: equal arrays, new objects."""
    return pickle.loads(pickle.dumps(block))


def _point(rng, space, n):
    ids = np.sort(rng.choice(space.n_features, size=n, replace=False))
    theta = rng.normal(size=n + space.n_bias) * 0.5
    return ids, Weights(ids, theta[:n], theta[n:])


def _setting(seed=0):
    rng = np.random.default_rng(seed)
    block = random_multiclass(rng, m=200, P=15, K=3)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    return rng, block, space


def test_a_block_equal_to_the_cached_one_at_the_same_point_is_a_hit():
    rng, block, space = _setting()
    ids, weights = _point(rng, space, 12)
    cache = PointCache()
    built = []
    first = cache.get(block, ("k", weights.values), lambda: built.append(1) or np.ones(3))
    again = cache.get(_copy(block), ("k", weights.values.copy()), lambda: built.append(1))
    assert again is first and built == [1] and (cache.hits, cache.misses) == (1, 1)
    assert not first.flags.writeable  # no caller changes an entry under the cache


def test_new_weights_or_another_block_build_afresh_and_keep_one_point_per_block():
    rng, block, space = _setting()
    other = random_multiclass(rng, m=200, P=15, K=3)
    _, weights = _point(rng, space, 12)
    moved = weights.values.copy()
    moved[3] += 1e-12  # the smallest change of the point is another point
    cache = PointCache()
    cache.get(block, (weights.values,), lambda: np.zeros(2))
    cache.get(other, (weights.values,), lambda: np.zeros(2))
    assert len(cache) == 2 and cache.misses == 2
    fresh = cache.get(block, (moved,), lambda: np.full(2, 7.0))
    assert fresh.tolist() == [7.0, 7.0] and cache.misses == 3
    assert len(cache) == 2  # the block's old point was dropped
    # a caller changing its key array after the call does not change the entry's key
    moved[3] += 1.0
    assert cache.get(block, (moved,), lambda: np.full(2, 8.0)).tolist() == [8.0, 8.0]


def test_the_cache_stays_within_its_bound():
    rng, block, space = _setting()
    blocks = [random_multiclass(rng, m=50, P=15, K=3) for _ in range(4)]
    cache = PointCache(max_bytes=3 * 8000 + 100)
    for b in blocks:
        cache.get(b, (), lambda: np.zeros(1000))  # 8,000 bytes each
    assert len(cache) == 3 and cache.nbytes <= cache.max_bytes
    # the least recently used went: the first block builds again
    cache.get(blocks[0], (), lambda: np.zeros(1000))
    assert cache.misses == 5
    cache.get(block, (), lambda: np.zeros(10_000))  # larger than half the bound: not kept
    assert cache.nbytes <= cache.max_bytes and cache.misses == 6
    cache.get(block, (), lambda: np.zeros(10_000))
    assert cache.misses == 7


def test_the_cached_operator_is_the_uncached_one_and_matches_finite_differences():
    rng, block, space = _setting(1)
    ids, weights = _point(rng, space, 12)
    v = rng.normal(size=len(ids) + space.n_bias)
    _, product, diag = hessian_operator(block, space, weights, ids, None)
    point_operator(block, space, weights, ids, None)
    hits = OPERATORS.hits
    _, cached, cached_diag = point_operator(_copy(block), space, weights, ids, None)
    assert OPERATORS.hits == hits + 1
    assert np.array_equal(cached(v), product(v)) and np.array_equal(cached_diag, diag)
    # H v against the gradient's central difference along v
    eps = 1e-5
    n = len(ids)

    def grad(theta):
        w = Weights(ids, theta[:n], theta[n:])
        lg = LocalBackend([block], space).run(LossGradTask(space, w, None, ids))
        return np.concatenate([lg.grad, lg.grad_bias])

    theta = np.concatenate([weights.values, weights.bias])
    fd = (grad(theta + eps * v) - grad(theta - eps * v)) / (2 * eps)
    np.testing.assert_allclose(cached(v), fd, rtol=1e-6, atol=1e-6)
    # a changed point is never served the old operator
    moved = Weights(ids, weights.values + 0.3, weights.bias)
    _, at_moved, _ = point_operator(block, space, moved, ids, None)
    _, fresh, _ = hessian_operator(block, space, moved, ids, None)
    assert np.array_equal(at_moved(v), fresh(v)) and not np.allclose(at_moved(v), cached(v))


class _Uncached(LocalBackend):
    """A LocalBackend whose every pass starts from an empty operator cache:
    every product pass computes its block's probabilities afresh."""

    def run(self, task):
        OPERATORS.clear()
        return super().run(task)


@pytest.mark.parametrize("n_blocks", [1, 3])
def test_cg_across_passes_with_the_cache_is_bit_for_bit_the_round_without_it(n_blocks):
    block, space, ids, box, theta0 = planted_round(planted(seed=3, n_copies=0), step=7)
    opts = SolverOptions(tol=1e-8, region=len(ids), global_cg=200)
    runs = []
    for backend_class in (_Uncached, LocalBackend):
        OPERATORS.clear()
        hits = OPERATORS.hits
        backend = backend_class(split_block(block, n_blocks), space)
        out = solve_newton_cg(Objective(backend, ids), theta0, box, opts)
        runs.append((out, backend.passes, OPERATORS.hits - hits))
    (plain, plain_passes, plain_hits), (cached, cached_passes, cached_hits) = runs
    assert plain_hits == 0 and cached_hits > 0  # the cached run reused operators
    assert cached.converged and cached.violation <= 1e-8
    assert np.array_equal(cached.theta, plain.theta) and cached.value == plain.value
    assert cached.violation == plain.violation and cached_passes == plain_passes
    assert np.array_equal(cached.last.grad, plain.last.grad)
    OPERATORS.clear()


def test_a_product_pass_over_blocks_served_from_the_cache_is_the_same_sum():
    rng, block, space = _setting(2)
    ids, weights = _point(rng, space, 10)
    blocks = split_block(block, 3)
    v = rng.normal(size=len(ids) + space.n_bias)
    task = HessianProductTask(space, weights, ids, v)
    first = LocalBackend(blocks, space).run(task)
    hits = OPERATORS.hits
    again = LocalBackend([_copy(b) for b in blocks], space).run(task)
    assert OPERATORS.hits == hits + 3
    assert np.array_equal(first.product, again.product)
    assert np.array_equal(first.diagonal, again.diagonal) and first.weight == again.weight


def test_closing_the_in_process_backend_drops_its_operators():
    rng, block, space = _setting(3)
    ids, weights = _point(rng, space, 6)
    backend = LocalBackend([block], space)
    backend.run(HessianProductTask(space, weights, ids, np.ones(len(ids) + space.n_bias)))
    assert len(OPERATORS) > 0
    backend.close()
    assert len(OPERATORS) == 0
