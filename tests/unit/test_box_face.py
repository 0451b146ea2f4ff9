"""The box model solved face by face (``kernels/box_face.py``, after
TRON): against the exact minimum of tiny box QPs found by enumerating
every face, against scipy's L-BFGS-B, against the projected CG on an l1
round's orthant face (fewer products), newton-cg with it
(``SolverOptions.cg_face``) against exact Newton on a planted round, and
the trust region it keeps after a short, very successful step (TRON's
update, ``line_search.next_radius``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.optimize

from sparkmaxent.backends import LocalBackend
from sparkmaxent.kernels import box_face
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.kernels.box_face import box_qp_face
from sparkmaxent.kernels.direction import box_qp_pcg
from sparkmaxent.problem.objective import Evaluation, Objective
from sparkmaxent.solvers import SolverOptions
from sparkmaxent.solvers.box_qp import face_model, solve_newton, solve_newton_cg
from sparkmaxent.solvers.lbfgs import ConvergenceWarning
from sparkmaxent.solvers.line_search import next_radius
from sparkmaxent.solvers.newton import minimize_box_newton, projected_gradient

from .helpers import orthant_box_qp, planted_round
from .test_grafting import planted


def _brute_force(H, g, lo, hi):
    """The box QP's minimum by trying every face: each coordinate at its
    lower bound, its upper bound or free (the free ones solving H_FF d_F =
    -(g + H_FB d_B)), keeping the lowest q among the feasible points."""
    n, best = len(g), (np.inf, None)
    for face in itertools.product((0, 1, 2), repeat=n):
        state = np.array(face)
        if np.any((state == 0) & ~np.isfinite(lo)) or np.any((state == 1) & ~np.isfinite(hi)):
            continue
        d = np.where(state == 0, lo, np.where(state == 1, hi, 0.0))
        d[state == 2] = 0.0
        free = state == 2
        if free.any():
            rhs = -(g[free] + H[np.ix_(free, ~free)] @ d[~free])
            d[free] = np.linalg.lstsq(H[np.ix_(free, free)], rhs, rcond=None)[0]
        if np.all((d >= lo - 1e-12) & (d <= hi + 1e-12)):
            q = g @ d + 0.5 * d @ H @ d
            best = min(best, (q, d), key=lambda b: b[0])
    return best


def _orthant_box(rng, n):
    """An l1 round's step box: each weight bounded at 0 on one side, a few
    within a trust region of 0.3."""
    lo = np.where(rng.random(n) < 0.5, 0.0, -np.inf)
    hi = np.where(lo == 0.0, np.inf, 0.0)
    lo[: n // 4], hi[: n // 4] = -0.3, 0.3
    return lo, hi


@pytest.mark.parametrize("seed", range(6))
def test_tiny_box_models_reach_the_minimum_over_every_face(seed):
    rng = np.random.default_rng(seed)
    n = 6
    A = rng.normal(size=(n, n + 2))
    H = A @ A.T / n + 0.01 * np.eye(n)
    g = rng.normal(size=n) * 2
    lo, hi = _orthant_box(rng, n)
    q_best, d_best = _brute_force(H, g, lo, hi)
    d, used, dHd = box_qp_face(lambda v: H @ v, np.diag(H).copy(), g, lo, hi, 1e-11, 1000)
    assert used < 1000 and np.all((d >= lo) & (d <= hi))
    assert g @ d + 0.5 * dHd == pytest.approx(q_best, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(d, d_best, atol=1e-7)
    assert dHd == pytest.approx(d @ H @ d, rel=1e-9)


def test_a_coordinate_without_curvature_goes_to_the_bound_its_gradient_points_to():
    H = np.diag([2.0, 0.0, 1.0])
    g = np.array([-1.0, 3.0, 0.5])
    lo, hi = np.array([-1.0, -0.5, 0.0]), np.array([1.0, 0.5, np.inf])
    d, _, _ = box_qp_face(lambda v: H @ v, np.diag(H).copy(), g, lo, hi, 1e-12, 100)
    np.testing.assert_allclose(d, [0.5, -0.5, 0.0], atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_a_larger_box_model_reaches_scipys_bounded_minimum(seed):
    rng = np.random.default_rng(seed)
    n = 60
    A = rng.normal(size=(n, 2 * n)) * np.exp(rng.uniform(-2, 1, size=n))[:, None]
    H = A @ A.T / n + 1e-3 * np.eye(n)
    g = rng.normal(size=n) * 3
    lo, hi = _orthant_box(rng, n)
    ref = scipy.optimize.minimize(
        lambda d: (g @ d + 0.5 * d @ H @ d, g + H @ d), np.zeros(n), jac=True,
        method="L-BFGS-B", bounds=list(zip(lo, hi)),
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000},
    )  # fmt: skip
    d, used, dHd = box_qp_face(lambda v: H @ v, np.diag(H).copy(), g, lo, hi, 1e-10, 5000)
    assert used < 5000
    assert np.abs(projected_gradient(g + H @ d, d, lo, hi)).max() <= 1e-10
    q, q_ref = g @ d + 0.5 * dHd, ref.fun
    assert q <= q_ref + 1e-10 * abs(q_ref)  # as low as scipy's, or lower
    np.testing.assert_allclose(d, ref.x, atol=1e-4)
    # the box binds: the unconstrained minimum lies outside
    assert not np.all((lo <= -np.linalg.solve(H, g)) & (-np.linalg.solve(H, g) <= hi))


def test_an_orthant_face_takes_fewer_products_than_cg_stopped_at_each_bound():
    # an l1 round's model (orthant_box_qp)
    H, g, lo, hi, tol = orthant_box_qp()
    face = box_qp_face(lambda v: H @ v, np.diag(H).copy(), g, lo, hi, tol, 2000)
    stopped = box_qp_pcg(lambda v: H @ v, np.diag(H).copy(), g, lo, hi, tol, 2000)
    for d, used, dHd in (face, stopped):
        assert np.all((d >= lo) & (d <= hi)) and used < 2000
        assert np.abs(projected_gradient(g + H @ d, d, lo, hi)).max() <= tol
        assert dHd == pytest.approx(d @ H @ d, rel=1e-9)
    assert 3 * face[1] < stopped[1], (face[1], stopped[1])


def test_cgs_last_iterate_inside_the_box_lowers_q_by_half_its_linear_term():
    # the fallback where the projected search along CG's step fails: the last
    # CG iterate with d + p in the box, q(d + p) - q(d) = r.p / 2 < 0 (CG's
    # residual is orthogonal to its iterate), H p carried without a product
    H, g, lo, hi, tol = orthant_box_qp(n=400, m=2000)
    d = np.zeros(len(g))
    free = box_face.projected(g, d, lo, hi) != 0  # the solver's first face
    inv = 1.0 / np.diag(H)
    p, Hp, used, inside = box_face._face_cg(
        lambda v: H @ v, inv, g, free, 1e-3 * tol, 500, np.inf, d, lo, hi
    )
    assert np.any((p < lo) | (p > hi))  # CG ran on through the bounds
    assert inside is not None
    p_in, Hp_in = inside
    assert np.all((p_in >= lo) & (p_in <= hi)) and np.any(p_in)
    np.testing.assert_allclose(Hp_in, H @ p_in, rtol=1e-9, atol=1e-14)
    drop = g @ p_in + 0.5 * p_in @ H @ p_in
    assert drop < 0 and drop == pytest.approx(0.5 * g @ p_in, rel=1e-6)


def _round(n_blocks, seed=3, **options):
    block, space, ids, box, theta0 = planted_round(planted(seed=seed, n_copies=0), step=7)
    backend = LocalBackend(split_block(block, n_blocks), space)
    opts = SolverOptions(tol=1e-8, region=len(ids), **{"cg_face": True, **options})
    return solve_newton_cg(Objective(backend, ids), theta0, box, opts), (block, space, ids, box)


@pytest.mark.parametrize("n_blocks", [1, 3])
def test_newton_cg_with_the_face_model_reaches_the_optimum_of_exact_newton(n_blocks):
    out, (block, space, ids, box) = _round(n_blocks)
    theta0 = np.zeros(len(ids) + space.n_bias)
    exact = solve_newton(
        Objective(LocalBackend([block], space), ids), theta0, box, SolverOptions(tol=1e-8)
    )
    assert out.converged and out.violation <= 1e-8
    assert out.value == pytest.approx(exact.value, rel=1e-12, abs=1e-12)
    n = len(ids)
    assert np.array_equal(out.theta[:n] != 0, exact.theta[:n] != 0)
    np.testing.assert_allclose(out.theta[:n], exact.theta[:n], atol=1e-5)


def test_newton_cg_with_the_face_model_is_deterministic_for_a_fixed_partitioning():
    (a, _), (b, _) = _round(3, seed=4), _round(3, seed=4)
    assert np.array_equal(a.theta, b.theta) and a.value == b.value
    assert a.evaluations == b.evaluations


def test_a_very_successful_full_step_keeps_the_region_it_was_taken_in():
    # rho = 1 (the decrease the model predicted) for a step far shorter than the region
    args = (1.0, 1e-3, -2e-6, 2e-6, 1.0, 1.0 - 1e-6, 1e-15)
    assert next_radius(*args) == (pytest.approx(2e-3), pytest.approx(1.0))  # its length
    assert next_radius(*args, kept=0.5)[0] == 0.5  # TRON: kept
    # a full step the model overestimated (rho 0.6) follows its length, as before
    assert next_radius(1.0, 1e-3, -2e-6, 2e-6, 1.0, 1.0 - 6e-7, 1e-15, kept=0.5)[0] == 2e-3


def _short_steps(cg_face: bool):
    """newton-cg's outer loop on a quadratic whose minimum lies far outside
    a trust region of 1, with a direction pass that stops its model solve
    early (a quarter of the step to the model's minimum over the region,
    as a loose forcing term does; no secant correction): every step is
    full with rho = 1. Returns the result and the region each direction
    pass was given."""
    n = 8
    H = np.diag(np.linspace(1.0, 3.0, n))  # the model's minimum over a box: a clip
    b = -H @ np.full(n, 10.0)  # the minimum at theta = 10
    lower, upper = np.full(n, -np.inf), np.full(n, np.inf)
    regions = []

    def fun(theta, full, hessian):
        value = float(0.5 * theta @ H @ theta + b @ theta)
        return Evaluation(value, H @ theta + b, None, None, None)

    def direction(theta, grad, dlo, dhi, tol):
        regions.append(float(dhi.min()))
        d = np.clip(-grad / np.diag(H), dlo, dhi) / 4.0
        return d, 1, float(d @ H @ d)

    options = SolverOptions(
        tol=1e-6, radius=1.0, cg_face=cg_face, secant_memory=0, max_iter=300, stall=300
    )
    out = minimize_box_newton(
        fun, np.zeros(n), np.zeros(n), lower, upper, options, direction=direction
    )
    return out, regions


def test_with_the_face_model_a_short_inexact_step_does_not_shrink_the_region():
    out, regions = _short_steps(cg_face=True)
    assert out.converged
    np.testing.assert_allclose(out.theta, 10.0, atol=1e-5)
    assert min(regions) >= 1.0  # every step full with rho = 1: the region is kept
    assert all(t["step"] == 1.0 and t["rho"] > 0.9 for t in out.trace)  # rho 1 to rounding
    # the rule before (still newton-cg's without the face model): the region
    # follows the short step's length and halves at every step, so the
    # steps sum to less than the distance and the minimum is never reached
    with pytest.warns(ConvergenceWarning):
        plain, shrunk = _short_steps(cg_face=False)
    assert min(shrunk) < 1e-3 and not plain.converged


def test_by_default_a_round_solves_face_by_face_from_face_from_parameters():
    assert SolverOptions().cg_face is None  # automatic
    options = SolverOptions(face_from=100)
    assert face_model(options, 99).cg_face is False
    assert face_model(options, 100).cg_face is True
    assert face_model(SolverOptions(cg_face=False, face_from=1), 10**6).cg_face is False
    assert face_model(SolverOptions(cg_face=True), 1).cg_face is True
    # a planted round solved by the automatic choice at face_from just at and
    # just above its parameters is the one solved with the choice set, to the bit
    face, _ = _round(2, cg_face=True)
    stop, _ = _round(2, cg_face=False)
    n = len(face.theta)
    for face_from, same in ((n, face), (n + 1, stop)):
        auto, _ = _round(2, cg_face=None, face_from=face_from)
        assert np.array_equal(auto.theta, same.theta) and auto.evaluations == same.evaluations
    assert face.evaluations != stop.evaluations or not np.array_equal(face.theta, stop.theta)
