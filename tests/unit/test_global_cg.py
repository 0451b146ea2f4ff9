"""CG across passes (``solvers/global_cg.py``): the product pass against the
exact Hessian, and newton-cg with its late iterations run that way against
exact Newton (same optimum), across reruns (same bits) and on an
ill-conditioned planted round (converged where the partitions' local CG is
not, in fewer products); the crawl switch (a cut averaged step after the
partitions' CG ran into its product cap) against the same."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.data import synthetic
from sparkmaxent.kernels import MULTICLASS, Space, Weights
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.kernels.curvature import curvature
from sparkmaxent.kernels.direction import HessianProductTask
from sparkmaxent.problem.objective import Objective
from sparkmaxent.solvers import SolverOptions
from sparkmaxent.solvers.box_qp import solve_newton, solve_newton_cg
from sparkmaxent.solvers.global_cg import CRAWL_STEPS, AcrossPasses, free_set

from .helpers import planted_round, random_multiclass, round_problem
from .test_grafting import planted


class _Counting(LocalBackend):
    """A LocalBackend that counts its product passes and adds up the
    Hessian-vector products of all its passes."""

    products = 0
    product_passes = 0

    def run(self, task):
        merged = super().run(task)
        self.products += getattr(merged, "products", 0)
        self.product_passes += isinstance(task, HessianProductTask)
        return merged


def _solve(blocks, space, ids, box, **options):
    backend = _Counting(blocks, space)
    theta0 = np.zeros(len(ids) + space.n_bias)
    opts = SolverOptions(tol=1e-8, region=len(ids), **options)
    return solve_newton_cg(Objective(backend, ids), theta0, box, opts), backend


def test_a_product_pass_over_blocks_is_the_exact_hessian_times_v():
    rng = np.random.default_rng(2)
    block = random_multiclass(rng, m=240, P=20, K=3)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids = np.sort(rng.choice(space.n_features, size=15, replace=False))
    theta = rng.normal(size=len(ids) + space.n_bias) * 0.5
    weights = Weights(ids, theta[: len(ids)], theta[len(ids) :])
    H = curvature(block, space, weights, ids).hess
    v = rng.normal(size=len(theta))
    part = LocalBackend(split_block(block, 3), space).run(
        HessianProductTask(space, weights, ids, v)
    )
    assert part.products == 3 and part.weight == pytest.approx(block.c.sum())
    np.testing.assert_allclose(part.product, H @ v, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(part.diagonal, np.diag(H), rtol=1e-10, atol=1e-10)


def test_the_free_set_leaves_out_exactly_the_coordinates_a_bound_holds():
    theta = np.array([0.0, 0.0, 1.0, 2.0, 2.0])
    grad = np.array([1.0, -1.0, 5.0, -1.0, 1.0])
    lower, upper = np.array([0.0, 0.0, 0.0, -np.inf, -np.inf]), np.full(5, 2.0)
    assert free_set(theta, grad, lower, upper).tolist() == [False, True, True, False, True]


@pytest.mark.parametrize("n_blocks", [1, 3])
def test_cg_across_passes_reaches_the_optimum_of_exact_newton(n_blocks):
    block, space, ids, box, theta0 = planted_round(planted(seed=3, n_copies=0), step=7)
    exact = solve_newton(
        Objective(LocalBackend([block], space), ids), theta0, box, SolverOptions(tol=1e-8)
    )
    out, backend = _solve(split_block(block, n_blocks), space, ids, box, global_cg=200)
    assert out.converged and out.violation <= 1e-8
    assert backend.product_passes > 0  # the late iterations ran across passes
    assert out.value == pytest.approx(exact.value, rel=1e-12, abs=1e-12)
    n = len(ids)
    assert np.array_equal(out.theta[:n] != 0, exact.theta[:n] != 0)
    np.testing.assert_allclose(out.theta[:n], exact.theta[:n], atol=1e-5)


def test_cg_across_passes_is_deterministic_for_a_fixed_partitioning():
    block, space, ids, box, _ = planted_round(planted(seed=4), step=5)
    runs = [_solve(split_block(block, 3), space, ids, box, global_cg=200) for _ in range(2)]
    (a, backend_a), (b, backend_b) = runs
    assert backend_a.product_passes > 0
    assert np.array_equal(a.theta, b.theta) and a.value == b.value
    assert backend_a.passes == backend_b.passes


@pytest.mark.slow  # about 30 CPU seconds
def test_an_ill_conditioned_round_converges_across_passes_in_fewer_products():
    # every feature of a nearly unregularized round: the partitions' Hessians
    # differ too much for the average of their local steps to converge, even
    # with more Hessian-vector products than CG across passes needs in all
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=2000, n_predicates=100, n_labels=4, n_support=16,
            n_copies=0, n_conjunctions=1, min_support_count=60, seed=3,
        )
    )  # fmt: skip
    block, space = data.block(), Space(MULTICLASS, 100, 4, bias=True)
    ids = np.arange(space.n_features)
    box = round_problem(block, space, ids, 1e-6)
    blocks = split_block(block, 3)
    across, backend = _solve(blocks, space, ids, box, global_cg=200)
    with pytest.warns(Warning, match="Newton stopped"):
        local, local_backend = _solve(blocks, space, ids, box, max_iter=1000)
    assert across.converged and not local.converged
    assert backend.products < local_backend.products, (backend.products, local_backend.products)
    assert across.value < local.value


def test_the_crawl_switch_fires_only_on_cut_averaged_steps_at_the_product_cap():
    theta, grad = np.zeros(2), np.ones(2)
    lower, upper = np.full(2, -np.inf), np.full(2, np.inf)
    for step, products, blocks in [(0.5, 599, 3), (1.0, 600, 3), (0.5, 600, 1)]:
        across = AcrossPasses(0, 200)
        for _ in range(CRAWL_STEPS):
            across.crawled(step, products, 600, blocks)
        assert not across.ready(theta, grad, lower, upper), (step, products, blocks)
    off = AcrossPasses(0, 0)
    for _ in range(CRAWL_STEPS):
        off.crawled(0.5, 600, 600, 3)
    assert not off.ready(theta, grad, lower, upper)
    across = AcrossPasses(0, 200)
    across.crawled(0.5, 600, 600, 3)
    assert not across.ready(theta, grad, lower, upper)  # once: not yet
    across.crawled(0.5, 600, 600, 3)
    assert across.ready(theta, grad, lower, upper)  # twice: and for the rest of the round
    across.crawled(1.0, 0, 600, 3)
    assert across.ready(theta, grad, lower, upper)


def test_a_crawling_round_reaches_the_optimum_of_exact_newton_in_fewer_passes():
    # a product cap so low that the partitions' averaged steps run into it
    # and get cut: the crawl the switch is for
    block, space, ids, box, theta0 = planted_round(planted(seed=4, n_copies=0), step=5)
    exact = solve_newton(
        Objective(LocalBackend([block], space), ids), theta0, box, SolverOptions(tol=1e-8)
    )
    blocks = split_block(block, 3)
    crawl, backend = _solve(blocks, space, ids, box, max_products=10, crawl_cg=200)
    again, _ = _solve(blocks, space, ids, box, max_products=10, crawl_cg=200)
    local, local_backend = _solve(blocks, space, ids, box, max_products=10)
    assert crawl.converged and local.converged
    assert backend.product_passes > 0 and local_backend.product_passes == 0
    assert backend.passes < local_backend.passes, (backend.passes, local_backend.passes)
    assert crawl.value == pytest.approx(exact.value, rel=1e-12, abs=1e-12)
    n = len(ids)
    assert np.array_equal(crawl.theta[:n] != 0, exact.theta[:n] != 0)
    np.testing.assert_allclose(crawl.theta[:n], exact.theta[:n], atol=1e-5)
    assert np.array_equal(crawl.theta, again.theta)  # a fixed partitioning: the same bits
    one, one_backend = _solve([block], space, ids, box, max_products=10, crawl_cg=200)
    assert one.converged and one_backend.product_passes == 0  # one block: the exact step
