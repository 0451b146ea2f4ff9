"""The Hessian-free round solver (``newton-cg``): Hessian-vector products
against the exact curvature kernel and finite differences, the projected CG
model solve against coordinate descent, and grafting with it against the
exact Newton solver (same certified optimum, deterministic)."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.kernels import MULTICLASS, LossGradTask, Space, Weights, loss_grad
from sparkmaxent.kernels.blocks import split_block, take_events
from sparkmaxent.kernels.curvature import curvature
from sparkmaxent.kernels.direction import (
    LocalDirectionTask,
    box_qp_pcg,
    hessian_operator,
)
from sparkmaxent.kernels.loss import PointsTask
from sparkmaxent.solvers.box_cd import box_qp_cd, projected_gradient
from sparkmaxent.train import train

from .helpers import orthant_box_qp, random_block, random_multiclass
from .test_curvature import one_correct, random_scaling
from .test_grafting import grafting_config, planted


def _point(rng, block, space, use_scaling):
    ids = np.sort(rng.choice(space.n_features, size=min(15, space.n_features), replace=False))
    n = len(ids)
    theta = rng.normal(size=n + space.n_bias) * 0.5
    scaling = random_scaling(rng, space.n_predicates) if use_scaling else None
    weights = Weights(ids, theta[:n], theta[n:] if space.bias else None)
    return ids, theta, scaling, weights


@pytest.mark.parametrize("shape", ["multiclass", "candidates"])
@pytest.mark.parametrize("use_scaling", [False, True])
def test_hessian_vector_product_is_the_exact_hessian_times_v(shape, use_scaling):
    rng = np.random.default_rng(5)
    block, space = random_block(rng, shape)
    if shape == "candidates":
        block = one_correct(block)  # the exact Hessian is the PSD part
    ids, theta, scaling, weights = _point(rng, block, space, use_scaling)
    H = curvature(block, space, weights, ids, scaling).hess  # FD-checked in test_curvature
    _, product, diag = hessian_operator(block, space, weights, ids, scaling)
    for _ in range(3):
        v = rng.normal(size=len(theta))
        np.testing.assert_allclose(product(v), H @ v, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(diag, np.diag(H), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("use_scaling", [False, True])
def test_hessian_vector_product_matches_finite_differences_of_the_gradient(use_scaling):
    rng = np.random.default_rng(8)
    block = random_multiclass(rng, m=60)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids, theta, scaling, weights = _point(rng, block, space, use_scaling)
    n = len(ids)

    def grad(th):
        lg = loss_grad(block, space, Weights(ids, th[:n], th[n:]), scaling, ids)
        return np.concatenate([lg.grad, lg.grad_bias])

    _, product, _ = hessian_operator(block, space, weights, ids, scaling)
    v = rng.normal(size=len(theta))
    eps = 1e-6
    fd = (grad(theta + eps * v) - grad(theta - eps * v)) / (2 * eps)
    np.testing.assert_allclose(product(v), fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("through", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_projected_cg_reaches_the_box_minimum_of_coordinate_descent(seed, through):
    rng = np.random.default_rng(seed)
    n = 40
    A = rng.normal(size=(n, 2 * n))
    H = A @ A.T / n + 0.05 * np.eye(n)
    g = rng.normal(size=n) * 3
    lo = np.where(rng.random(n) < 0.5, 0.0, -np.inf)  # orthant bounds on half of them
    hi = np.where(lo == 0.0, np.inf, 0.0)
    hi[: n // 4] = 0.3  # and a trust region on some
    lo[: n // 4] = -0.3
    d_cd, _ = box_qp_cd(H, g, lo, hi, 1e-11, 5000)
    d, used, dHd = box_qp_pcg(lambda v: H @ v, np.diag(H).copy(), g, lo, hi, 1e-10, 5000, through)
    assert used < 5000
    assert np.all((d >= lo) & (d <= hi))
    np.testing.assert_allclose(d, d_cd, atol=1e-8)
    assert dHd == pytest.approx(d @ H @ d, rel=1e-9)
    # the box binds: the unconstrained minimum lies outside
    assert not np.all((lo <= -np.linalg.solve(H, g)) & (-np.linalg.solve(H, g) <= hi))


def test_projected_cg_run_through_the_box_solves_an_orthant_face_in_fewer_products():
    # an l1 round's model (orthant_box_qp): CG stopped at the first bound it
    # crosses restarted after a product or two (a projected gradient method)
    # (not every face: on smaller random ones stopping at the bound can win)
    H, g, lo, hi, tol = orthant_box_qp()
    runs = {
        through: box_qp_pcg(lambda v: H @ v, np.diag(H).copy(), g, lo, hi, tol, 2000, through)
        for through in (True, False)
    }
    for d, used, dHd in runs.values():
        assert np.all((d >= lo) & (d <= hi))
        pg = projected_gradient(g + H @ d, d, lo, hi)
        assert np.abs(pg).max() <= tol and used < 2000
        assert dHd == pytest.approx(d @ H @ d, rel=1e-9)
    through, stopped = runs[True][1], runs[False][1]
    assert 4 * through < stopped, (through, stopped)


def test_one_block_local_direction_is_the_exact_newton_step():
    rng = np.random.default_rng(3)
    block = random_multiclass(rng, m=200, P=20, K=3)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids, theta, _, weights = _point(rng, block, space, False)
    cv = curvature(block, space, weights, ids)
    H = cv.hess / block.c.sum()
    # the gradient itself: orthogonal to the common shift of the biases, along
    # which H is singular
    g = np.concatenate([cv.lg.grad, cv.lg.grad_bias]) / block.c.sum()
    lo, hi = np.full(len(theta), -np.inf), np.full(len(theta), np.inf)
    lo[: len(ids)] = -0.2
    hi[: len(ids)] = 0.2
    task = LocalDirectionTask(space, weights, ids, g, lo, hi, 1e-11, 1000)
    part = LocalBackend([block], space).run(task)
    d = part.combined()
    d_cd, _ = box_qp_cd(H, g, lo, hi, 1e-12, 5000)
    n = len(ids)
    assert 0 < np.sum(np.abs(d[:n]) == 0.2) < n  # the box binds, not everywhere
    np.testing.assert_allclose(d[:n], d_cd[:n], atol=1e-7)
    # the biases up to their common shift, which changes nothing
    np.testing.assert_allclose(d[n:] - d[n:].mean(), d_cd[n:] - d_cd[n:].mean(), atol=1e-7)
    assert part.curvature / part.weight == pytest.approx(d @ H @ d, rel=1e-8)


@pytest.mark.parametrize("n_blocks", [1, 3])
def test_grafting_with_newton_cg_reaches_the_certified_optimum_of_exact_newton(n_blocks):
    _, block, space = planted(seed=2, n_copies=0)  # a unique support
    blocks = split_block(block, n_blocks)
    exact = train(LocalBackend(blocks, space), grafting_config(solver="newton"))
    free = train(LocalBackend(blocks, space), grafting_config(solver="newton-cg"))
    assert free.report.certificate.passed and free.report.converged
    assert free.report["solvers"] == {"newton-cg": free.report.rounds[-1].round}
    assert free.report.objective == pytest.approx(exact.report.objective, rel=1e-9)
    assert set(free.weights.ids.tolist()) == set(exact.weights.ids.tolist())
    # over blocks each block's CG stops at half the outer violation
    # (``forcing_blocks``) and the last round ends just below its tolerance
    # (1.2e-6 here), so the weights agree to what that tolerance fixes along
    # the flat directions; one block's step is the exact one
    np.testing.assert_allclose(
        free.weights.values, exact.weights.values, atol=1e-5 if n_blocks == 1 else 1e-4
    )


def test_newton_cg_certifies_where_a_bound_stops_the_blocks_cg_step_at_once():
    # 20 features a round over 3 blocks: a block's CG step met a bound at
    # once, its projection gained nothing, and the same step repeated until
    # max_products: a zero direction, 'no descent direction', a failed KKT
    _, block, space = planted(seed=2)
    blocks = split_block(block, 3)
    cfg = dict(l1=2e-3, n_best=20)
    exact = train(LocalBackend(blocks, space), grafting_config(solver="newton", **cfg))
    free = train(LocalBackend(blocks, space), grafting_config(solver="newton-cg", **cfg))
    assert free.report.certificate.passed and free.report.converged
    assert free.report.objective == pytest.approx(exact.report.objective, rel=1e-9)


def test_newton_cg_is_deterministic_for_a_fixed_partitioning():
    _, block, space = planted(seed=4)
    runs = [
        train(LocalBackend(split_block(block, 3), space), grafting_config(solver="newton-cg"))
        for _ in range(2)
    ]
    a, b = (r.weights for r in runs)
    assert np.array_equal(a.ids, b.ids) and np.array_equal(a.values, b.values)
    assert np.array_equal(a.bias, b.bias)
    assert runs[0].report.objective == runs[1].report.objective


def test_auto_solves_small_active_sets_exactly_and_large_ones_hessian_free():
    from sparkmaxent.solvers import choose_solver

    assert choose_solver("auto", 1000, 1000) == "newton"
    assert choose_solver("auto", 1001, 1000) == "newton-cg"
    assert choose_solver("newton-cg", 10, 1000) == "newton-cg"
    with pytest.raises(ValueError, match="unknown solver"):
        choose_solver("cg", 10, 1000)


@pytest.mark.parametrize("shape", ["multiclass", "candidates"])
def test_a_points_pass_is_bit_for_bit_one_pass_per_point(shape):
    rng = np.random.default_rng(11)
    block, space = random_block(rng, shape)
    ids, theta, scaling, _ = _point(rng, block, space, True)
    n = len(ids)
    thetas = [theta, 0.5 * theta, theta + rng.normal(size=len(theta))]
    points = tuple(Weights(ids, t[:n], t[n:] if space.bias else None) for t in thetas)
    blocks = split_block(block, 2)
    backend = LocalBackend(blocks, space)
    together = backend.run(PointsTask(space, points, scaling, ids)).points
    assert len(together) == len(points)
    for w, lg in zip(points, together):
        alone = backend.run(LossGradTask(space, w, scaling, ids))
        assert lg.loss == alone.loss and lg.weight == alone.weight
        assert np.array_equal(lg.grad, alone.grad)
        if alone.grad_bias is not None:
            assert np.array_equal(lg.grad_bias, alone.grad_bias)


def test_blocks_directions_are_averaged_by_their_curvature_coordinate_by_coordinate():
    # block b holds no event of the first active feature's predicate: its own
    # step there is unconstrained by data, and the combined step is block a's
    rng = np.random.default_rng(4)
    block = random_multiclass(rng, m=300, P=20, K=3)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids, theta, _, weights = _point(rng, block, space, False)
    lacking = ids[0] // space.n_labels
    has = np.asarray(block.X[:, lacking].todense()).ravel() != 0
    a, b = (
        take_events(block, has | (np.arange(block.n_events) < 150)),
        take_events(block, ~has & (np.arange(block.n_events) >= 150)),
    )
    g = (
        np.concatenate([loss_grad(block, space, weights).grad[ids], np.zeros(space.n_bias)])
        / block.c.sum()
    )
    lo, hi = np.full(len(theta), -1.0), np.full(len(theta), 1.0)
    task = LocalDirectionTask(space, weights, ids, g, lo, hi, 1e-11, 1000)
    own = [LocalBackend([x], space).run(task) for x in (a, b)]
    both = LocalBackend([a, b], space).run(task)
    d_a, d_b, d = own[0].combined(), own[1].combined(), both.combined()
    assert abs(d_b[0]) == 1.0 and abs(d_b[0] - d_a[0]) > 0.1  # b's step there: to the box
    assert d[0] == pytest.approx(d_a[0], abs=1e-9)
    # elsewhere between the two blocks' steps, weighted by their curvature
    assert np.all((d >= np.minimum(d_a, d_b) - 1e-12) & (d <= np.maximum(d_a, d_b) + 1e-12))
    c = [x.diagonal for x in own]
    np.testing.assert_allclose(d, (c[0] * d_a + c[1] * d_b) / (c[0] + c[1]), rtol=1e-10)


@pytest.mark.parametrize("seed", [3, 4])
def test_a_forcing_floor_at_the_rounds_tolerance_saves_products_not_iterations(seed):
    # the partitions' CG never asked below 0.7 of the round's tolerance
    # (``forcing_floor``) against the tenth of before: every round-like solve
    # (tolerances 1e-3 .. 1e-6) converges to its tolerance in as many
    # iterations and passes, with no more products, and fewer in all
    from sparkmaxent.problem.objective import Objective
    from sparkmaxent.problem.penalty import orthant_problem
    from sparkmaxent.solvers import SolverOptions
    from sparkmaxent.solvers.box_qp import solve_newton_cg

    _, block, space = planted(seed=seed, n_copies=0)
    ids = np.arange(0, space.n_features, 7)
    lg = LocalBackend([block], space).run(
        LossGradTask(space, Weights(ids, np.zeros(len(ids)), np.zeros(space.n_labels)), None, ids)
    )
    box = orthant_problem(np.where(lg.grad > 0, -1.0, 1.0), 1e-4, space.n_bias)
    theta0 = np.zeros(len(ids) + space.n_bias)
    totals = {0.1: 0, 0.7: 0}
    for tol in (1e-3, 1e-4, 1e-5, 1e-6):
        runs = {}
        for floor in totals:
            backend = _ProductCount(split_block(block, 3), space)
            obj = Objective(backend, ids)
            options = SolverOptions(
                tol=tol, forcing_floor=floor, region=len(ids), forcing_blocks=0.0
            )
            res = solve_newton_cg(obj, theta0, box, options)
            # independent: the projected gradient at the result, from a pass of its own
            ev = obj.at(res.theta, full_gradient=False, hessian=False)
            grad = ev.grad + box.l1_per_weight
            assert np.abs(projected_gradient(grad, res.theta, box.lower, box.upper)).max() <= tol
            runs[floor] = res, backend.products, backend.passes
            totals[floor] += backend.products
        (old, old_products, old_passes), (new, new_products, new_passes) = runs.values()
        assert old.converged and new.converged
        assert new.iterations == old.iterations and new_passes == old_passes
        assert new_products <= old_products, (tol, new_products, old_products)
    assert totals[0.7] < totals[0.1], totals


def test_grafting_with_the_forcing_floor_reaches_the_same_certified_optimum(monkeypatch):
    # whole newton-cg grafting runs over 3 blocks, the floor at 0.7 of each
    # round's tolerance against the tenth of the default: the same certified
    # objective. Fewer products on single rounds (the test above) do not add up
    # to fewer over whole runs: on planted seeds 0-5 the 0.7 floor took more in
    # all, on every seed with one BLAS kernel and on two of six with another
    import functools

    import sparkmaxent.methods.grafting as grafting
    from sparkmaxent.solvers import SolverOptions

    _, block, space = planted(seed=5, m=3000, P=200, n_copies=0)
    cfg = grafting_config(l1=1e-3, n_best=20, solver="newton-cg")
    runs = {}
    for floor in (0.1, 0.7):
        monkeypatch.setattr(
            grafting,
            "SolverOptions",
            functools.partial(SolverOptions, forcing_floor=floor, forcing_blocks=0.0),
        )
        backend = _ProductCount(split_block(block, 3), space)
        runs[floor] = train(backend, cfg), backend.products
    (old, old_products), (new, new_products) = runs.values()
    for res in (old, new):
        assert res.report.certificate.passed and res.report.converged
    # certified at gtol 1e-9: the two optima agree to the solvers' tolerance
    assert new.report.objective == pytest.approx(old.report.objective, rel=1e-9)
    assert new_products > 0 and old_products > 0


class _ProductCount(LocalBackend):
    """A LocalBackend that adds up the Hessian-vector products of its passes."""

    products = 0

    def run(self, task):
        merged = super().run(task)
        self.products += getattr(merged, "products", 0)
        return merged


def test_forcing_by_the_outer_contraction_takes_fewer_products_to_the_same_optimum():
    # the partitions' CG solved to the outer iteration's own contraction
    # (forcing_max 0.5) against a fixed tenth of the violation (forcing_max
    # = inner_ratio: the forcing of before), one round over 3 blocks
    from sparkmaxent.problem.objective import Objective
    from sparkmaxent.problem.penalty import orthant_problem
    from sparkmaxent.solvers import SolverOptions
    from sparkmaxent.solvers.box_qp import solve_newton_cg

    _, block, space = planted(seed=3, n_copies=0)
    ids = np.arange(0, space.n_features, 7)
    lg = LocalBackend([block], space).run(
        LossGradTask(space, Weights(ids, np.zeros(len(ids)), np.zeros(space.n_labels)), None, ids)
    )
    box = orthant_problem(np.where(lg.grad > 0, -1.0, 1.0), 1e-4, space.n_bias)
    runs = {}
    for forcing_max in (0.1, 0.5):
        backend = _ProductCount(split_block(block, 3), space)
        options = SolverOptions(
            tol=1e-8, forcing_max=forcing_max, region=len(ids), forcing_blocks=0.0
        )
        theta0 = np.zeros(len(ids) + space.n_bias)
        runs[forcing_max] = (
            solve_newton_cg(Objective(backend, ids), theta0, box, options),
            backend.products,
        )
    (fixed, fixed_products), (adaptive, adaptive_products) = runs[0.1], runs[0.5]
    assert fixed.converged and adaptive.converged
    assert adaptive.value == pytest.approx(fixed.value, rel=1e-10)
    assert adaptive_products < fixed_products, (adaptive_products, fixed_products)


def test_blocks_cg_stops_at_half_the_outer_violation_where_steps_are_averaged():
    # forcing_blocks: a direction pass over several blocks keeps their CG to
    # half the outer violation (not the outer contraction's tenth); one
    # block's exact step keeps the contraction rule
    from sparkmaxent.solvers import SolverOptions
    from sparkmaxent.solvers.newton import forcing

    options = SolverOptions()
    assert forcing(1e-6, 1e-4, options) == options.inner_ratio  # a fast contraction: a tenth
    assert forcing(1e-6, 1e-4, options, blocks=2) == 0.5
    assert forcing(1e-6, 1e-4, SolverOptions(forcing_blocks=0.0), blocks=2) == 0.1
    assert forcing(3e-5, 1e-4, options, blocks=1) == pytest.approx(0.3)


def test_direction_pass_counts_the_blocks_that_solved():
    from sparkmaxent.problem.objective import Objective

    _, block, space = planted(seed=3, n_copies=0)
    ids = np.arange(0, space.n_features, 7)
    theta = np.zeros(len(ids) + space.n_bias)
    lo, hi = np.full(len(theta), -1.0), np.full(len(theta), 1.0)
    grad = np.full(len(theta), 1e-3)
    for n_blocks in (1, 3):
        obj = Objective(LocalBackend(split_block(block, n_blocks), space), ids)
        assert obj.direction(theta, grad, lo, hi, 1e-8, 50)[3] == n_blocks


def test_newton_cg_over_uneven_blocks_reaches_the_same_optima_with_early_blocks_cg():
    # two blocks split by the events' first predicate, so most features sit
    # mostly in one of them, solved by the face model: with the blocks' CG
    # stopped at half the outer violation (forcing_blocks, its floor checked
    # above) the rounds reach the same certified optima. What it saves is
    # CoNLL-2000's stalled path points' passes (docs/methods/grafting.md); on
    # rounds this small it can take more passes or fewer, so none is asserted.
    import functools

    import sparkmaxent.methods.grafting as grafting
    from sparkmaxent.solvers import SolverOptions

    for seed in (1, 2, 3, 5):
        _, block, space = planted(seed=seed, m=3000, P=200, n_copies=0)
        first = np.asarray(block.X.argmax(axis=1)).ravel()
        low = np.zeros(block.n_events, dtype=bool)
        low[np.argsort(first, kind="stable")[: block.n_events // 2]] = True
        blocks = [take_events(block, low), take_events(block, ~low)]
        cfg = grafting_config(l1=1e-3, n_best=20, solver="newton-cg")
        results = []
        for early in (0.0, 0.5):
            partial = functools.partial(SolverOptions, forcing_blocks=early, cg_face=True)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(grafting, "SolverOptions", partial)
                res = train(LocalBackend(blocks, space), cfg)
            assert res.report.certificate.passed and res.report.converged
            results.append(res)
        assert results[1].report.objective == pytest.approx(results[0].report.objective, rel=1e-9)


def test_squared_columns_are_the_bits_of_the_element_wise_square():
    # the operator's diagonal squares the gathered columns: a canonical
    # matrix's data squared (an entry squaring to 0 and an explicit 0 kept),
    # and a matrix with duplicate entries summed before squaring, as multiply
    import scipy.sparse as sp

    from sparkmaxent.kernels.operator import squared

    rng = np.random.default_rng(3)
    X = sp.random(40, 15, density=0.3, format="csr", random_state=4)
    X.data = rng.normal(size=X.nnz)
    X.data[:3] = [0.0, 1e-200, -1e-170]
    assert X.has_canonical_format
    A = rng.normal(size=(40, 4))
    np.testing.assert_array_equal((squared(X).T @ A), (X.multiply(X).T @ A))
    assert squared(X).nnz == X.nnz  # the same entries, no merge
    # duplicates: (0, 1) twice, summed first (9, not 1 + 4)
    D = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([1, 1, 0]), np.array([0, 2, 3])), (2, 2))
    assert not D.has_canonical_format
    np.testing.assert_array_equal(squared(D).toarray(), [[0.0, 9.0], [9.0, 0.0]])


def test_the_multiclass_operator_keeps_one_matrix_of_the_blocks_size():
    """The operator holds the probabilities and the events' weights, not
    c_i P_ik beside them (formed a chunk of rows at a time where it is used,
    the bits of the whole product), and its build allocates about two
    (m, K) matrices, the probabilities and c_i P_ik (1 - P_ik)."""
    import dataclasses
    import tracemalloc

    from sparkmaxent.kernels.operator import build_operator, times_cP

    rng = np.random.default_rng(8)
    block = random_multiclass(rng, m=60_000, P=30, K=10, density=0.1)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids, _, _, weights = _point(rng, block, space, False)
    matrix = block.n_events * space.n_labels * 8
    tracemalloc.start()
    op = build_operator(block, space, weights, ids, None)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 3 * matrix
    entries = block.n_events * space.n_labels
    held = [f.name for f in dataclasses.fields(op) if np.size(getattr(op, f.name)) >= entries]
    assert held == ["P"]
    S = rng.normal(size=op.P.shape)
    expected = S * (block.c[:, None] * op.P)
    np.testing.assert_array_equal(times_cP(S.copy(), block.c, op.P, chunk_entries=70), expected)
    np.testing.assert_array_equal(times_cP(S, block.c, op.P), expected)
