"""The box-constrained Newton solver (solvers/newton.py) against scipy's
L-BFGS-B on the same problems."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from sparkmaxent.problem.objective import Evaluation
from sparkmaxent.solvers import box_cd, faces
from sparkmaxent.solvers.box_cd import box_qp_cd, projected_gradient
from sparkmaxent.solvers.faces import face_cg
from sparkmaxent.solvers.newton import minimize_box_newton
from sparkmaxent.solvers.options import SolverOptions


def correlated_box_qp(seed: int, n: int = 40, m: int = 200, noise: float = 0.1, room: float = 0.0):
    """A PSD model with near-duplicate columns (``noise`` apart: slow for
    coordinate descent), a null direction (like the softmax's shift of all
    biases), and mixed orthant bounds ``room`` away from 0."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, n))
    A[:, 1::2] = A[:, ::2] + noise * rng.normal(size=(m, n // 2))  # near twins
    A[:, -1] = A[:, -2]  # an exact twin: H singular
    H = A.T @ A / m
    g = rng.normal(size=n)
    g[-1] = g[-2]  # g in H's range, as a gradient is
    kind = rng.integers(0, 3, size=n)
    lo = np.where(kind == 1, -room, -np.inf)
    hi = np.where(kind == 2, room, np.inf)
    return H, g, lo, hi


def box_qp_reference(H, g, lo, hi):
    res = minimize(
        lambda d: (g @ d + d @ H @ d / 2, g + H @ d),
        np.zeros(len(g)),
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lo, hi)),
        options={"maxiter": 100000, "ftol": 1e-15, "gtol": 1e-12},
    )
    return res.fun


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_box_qp_face_solve_reaches_the_optimum_in_few_sweeps(seed):
    H, g, lo, hi = correlated_box_qp(seed)
    tol = 1e-9
    d, sweeps = box_qp_cd(H, g, lo, hi, tol, max_sweeps=5000)
    q = g @ d + d @ H @ d / 2
    assert np.all(d >= lo) and np.all(d <= hi)
    assert np.abs(projected_gradient(g + H @ d, d, lo, hi)).max() <= tol
    assert q <= box_qp_reference(H, g, lo, hi) + 1e-9
    # plain coordinate descent needs far more sweeps on the same model
    # (measured: 130-530 against 3,168-3,687)
    _, cd_sweeps = box_qp_cd(H, g, lo, hi, tol, max_sweeps=5000, face_every=10**9)
    assert 5 * sweeps < cd_sweeps


@pytest.mark.parametrize("seed,noise", [(1, 0.03), (0, 0.01), (3, 0.01), (5, 0.03)])
def test_box_qp_holds_coordinates_a_hair_from_their_bound(seed, noise):
    """The face step holds a coordinate at the bound it is pushed towards
    when it is that close. The earlier step (free = strictly inside, stop
    at the first bound) cut every face step to nothing on the first three
    cases and ran out of 5,000 sweeps far from the optimum. The model is
    like a late grafting round's: near twins (flat directions of H) and
    weights a hair (1e-20) above 0 that the optimum takes to 0."""
    H, g, lo, hi = correlated_box_qp(seed, n=60, m=300, noise=noise, room=1e-20)
    tol = 1e-9
    d, sweeps = box_qp_cd(H, g, lo, hi, tol, max_sweeps=5000)
    assert np.all(d >= lo) and np.all(d <= hi)
    assert np.abs(projected_gradient(g + H @ d, d, lo, hi)).max() <= tol
    assert sweeps <= 300  # measured 30-130
    q = g @ d + d @ H @ d / 2
    assert q <= box_qp_reference(H, g, lo, hi) + 1e-9 * abs(q)


def exact_direction(pb: LogisticBox, factor: float = 1.0):
    """A direction pass over one block, ``pb``'s whole data: the exact
    Newton step on the box, with d^T H d reported ``factor`` times."""

    def direction(theta, grad, dlo, dhi, tol):
        _, p = pb.gradient(theta)
        H = (pb.X * (p * (1 - p))[:, None]).T @ pb.X / len(pb.y)
        d, sweeps = box_qp_cd(H, grad, dlo, dhi, tol, 500)
        return d, sweeps, factor * float(d @ H @ d)

    return direction


class LogisticBox:
    """Mean logistic loss with l1 terms and mixed orthant bounds: a smooth
    convex box problem whose Newton steps from far away are cut. Records
    whether each pass asked for the Hessian."""

    def __init__(self):
        rng = np.random.default_rng(3)
        self.X = rng.normal(size=(300, 6))
        self.y = (self.X @ rng.normal(size=6) + rng.normal(size=300) > 0).astype(float)
        self.l1_per_weight = np.array([0.05, -0.05, 0.05, 0.0, 0.0, 0.0])
        self.lower = np.array([0.0, -np.inf, 0.0, -np.inf, -np.inf, -np.inf])
        self.upper = np.array([np.inf, 0.0, np.inf, np.inf, np.inf, np.inf])
        self.hessians: list[bool] = []

    def value(self, theta):
        z = self.X @ theta
        return (np.logaddexp(0, z) - self.y * z).mean()

    def gradient(self, theta):
        p = 0.5 * (1 + np.tanh(self.X @ theta / 2))
        return self.X.T @ (p - self.y) / len(self.y), p

    def fun(self, theta, full, hessian):
        self.hessians.append(hessian)
        grad, p = self.gradient(theta)
        hess = (self.X * (p * (1 - p))[:, None]).T @ self.X / len(self.y) if hessian else None
        return Evaluation(self.value(theta), grad, hess, None, None)

    def ray(self, theta, d, steps):
        return np.array([self.value(theta + t * d) for t in steps])

    def points(self, thetas):
        return [self.fun(t, False, False) for t in thetas]

    def solve(self, theta0, ray=False):
        return minimize_box_newton(
            self.fun,
            theta0,
            self.l1_per_weight,
            self.lower,
            self.upper,
            SolverOptions(tol=1e-10),
            ray=self.ray if ray else None,
        )


def test_newton_evaluates_cut_steps_without_curvature():
    """A far start: the full step is cut, the cut trials ask for no Hessian,
    the next direction still gets one at its own point, and the optimum
    matches L-BFGS-B's."""
    pb = LogisticBox()
    theta0 = np.array([3.0, -3.0, 3.0, 5.0, -5.0, 5.0])
    res = pb.solve(theta0)
    assert res.converged
    assert not all(pb.hessians)
    ref = minimize(
        lambda t: (pb.value(t) + pb.l1_per_weight @ t, pb.gradient(t)[0] + pb.l1_per_weight),
        theta0,
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(pb.lower, pb.upper)),
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000},
    )
    assert res.value <= ref.fun + 1e-12
    np.testing.assert_allclose(res.theta, ref.x, atol=1e-5)


def test_a_ray_pass_tries_the_cut_steps_at_once():
    """The same problem from farther with a ray (every cut step in one
    pass): the same optimum, no pass without curvature at a trial point, at
    most 3 passes per iteration, and fewer passes than one per trial."""
    theta0 = np.array([15.0, -15.0, 15.0, 25.0, -25.0, 25.0])  # far: cut to 1/8
    plain = LogisticBox().solve(theta0)
    pb = LogisticBox()
    res = pb.solve(theta0, ray=True)
    assert res.converged and all(pb.hessians)
    assert any(t["step"] < 1 for t in res.trace)  # steps were cut
    np.testing.assert_allclose(res.theta, plain.theta, atol=1e-8)
    assert res.evaluations <= 3 * res.iterations + 1
    assert res.evaluations < plain.evaluations
    # the start, the full step's own pass, the ray, curvature at the step taken
    assert res.trace[0]["step"] < 1 and res.trace[0]["evaluations"] == 4


@pytest.mark.parametrize("region", [None, 3])
def test_an_initial_trust_region_bounds_the_first_step_and_keeps_the_optimum(region):
    """With ``radius`` (grafting's train.grafting.round_radius) no coordinate of the
    ``region`` (all, or the first 3: grafting leaves its biases out) moves by
    more than it in the first step, the region then grows, and the optimum
    is the one reached without a region."""
    theta0 = np.array([15.0, -15.0, 15.0, 25.0, -25.0, 25.0])
    plain = LogisticBox().solve(theta0, ray=True)
    pb = LogisticBox()
    # where a pass asked for the Hessian: the start, each full-step trial and
    # each accepted cut step; consecutive ones lie within the region of the
    # iteration between them, so a move past 1 means the region grew
    points = []

    def fun(theta, full, hessian):
        if hessian:
            points.append(theta.copy())
        return pb.fun(theta, full, hessian)

    res = minimize_box_newton(
        fun,
        theta0,
        pb.l1_per_weight,
        pb.lower,
        pb.upper,
        SolverOptions(tol=1e-10, radius=1.0, region=region),
        ray=pb.ray,
    )
    assert res.converged
    moves = np.abs(np.diff(np.array(points), axis=0))
    inside = moves[:, :region].max(axis=1)
    assert inside[0] <= 1.0 + 1e-12
    assert inside.max() > 1.0  # the region grew past its start
    if region is not None:
        assert moves[0, region:].max() > 1.0  # outside it, the first step is not bounded
    np.testing.assert_allclose(res.theta, plain.theta, atol=1e-8)
    assert abs(res.value - plain.value) <= 1e-12


def test_a_weight_without_curvature_moves_to_its_orthant_bound():
    """A weight the loss no longer depends on (probabilities saturated:
    zero gradient and curvature) but inside its orthant with an l1 term:
    its minimum is 0. Newton must get it there instead of stalling at a
    projected gradient of gamma1 (what CoNLL-2000's second n = 1,000 round
    did for 750 iterations)."""
    rng = np.random.default_rng(4)
    A = rng.normal(size=(50, 4))
    b = rng.normal(size=50)
    gamma = 1e-4

    def fun(theta, full, hessian):  # least squares in theta[:4]; theta[4] unused
        r = A @ theta[:4] - b
        grad = np.append(A.T @ r / 50, 0.0)
        hess = np.zeros((5, 5))
        hess[:4, :4] = A.T @ A / 50
        return Evaluation(r @ r / 100, grad, hess if hessian else None, None, None)

    l1_per_weight = np.array([0.0, 0.0, 0.0, 0.0, gamma])
    lower = np.array([-np.inf] * 4 + [0.0])
    upper = np.full(5, np.inf)
    res = minimize_box_newton(
        fun, np.array([0, 0, 0, 0, 0.7]), l1_per_weight, lower, upper, SolverOptions(tol=1e-12)
    )
    assert res.converged and res.theta[4] == 0.0
    np.testing.assert_allclose(res.theta[:4], np.linalg.lstsq(A, b, rcond=None)[0], atol=1e-10)
    # and the model step alone: the flat coordinate goes to its bound
    d, _ = box_qp_cd(
        fun(res.theta, False, True).hess,
        np.array([0, 0, 0, 0, gamma]),
        np.array([-1.0] * 4 + [-0.7]),
        np.full(5, np.inf),
        1e-12,
        10,
    )
    assert d[4] == -0.7 and np.all(d[:4] == 0)


def test_face_cg_solves_a_singular_system_off_its_null_space():
    """The face step's conjugate gradients reach the residual asked for on a
    singular PSD system (as the multinomial Hessian is along the all-bias
    shift) and stay off the null space: the least-squares solution of least
    norm in the preconditioner's metric (M = diag A), from the SVD."""
    rng = np.random.default_rng(3)
    n = 60
    B = rng.standard_normal((n, n - 5))
    A = B @ B.T  # PSD, rank n - 5
    b = A @ rng.standard_normal(n)  # consistent
    tol = 1e-9 * np.abs(b).max()
    x, residual = face_cg(lambda p: A @ p, np.diag(A).copy(), b, tol, 10 * n)
    root = np.sqrt(np.diag(A))
    expected = np.linalg.lstsq(A / np.outer(root, root), b / root, rcond=1e-12)[0] / root
    assert np.abs(A @ x - b).max() <= tol and residual <= tol
    np.testing.assert_allclose(x, expected, atol=1e-6 * np.abs(expected).max())
    # a capped solve is a descent step of the model x^T A x / 2 - b.x
    # (measured: 5 iterations leave a residual far above tol)
    short, residual = face_cg(lambda p: A @ p, np.diag(A).copy(), b, tol, 5)
    assert np.abs(A @ short - b).max() > 1e3 * tol and residual > 1e3 * tol
    assert short @ A @ short / 2 - b @ short < 0


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_face_step_without_cholesky_matches_an_independent_solver_on_a_late_round_model():
    """A model like a late grafting round's (near twins, a null direction,
    orthant bounds a hair from 0): the sweeps with conjugate-gradient face
    steps reach tol and the same minimum as scipy's L-BFGS-B, in fewer
    sweeps than plain coordinate descent."""
    for seed in range(4):
        H, g, lo, hi = correlated_box_qp(seed, n=120, m=400, noise=0.02, room=1e-20)
        tol = 1e-10
        d, sweeps = box_qp_cd(H, g, lo, hi, tol, max_sweeps=20000)
        q = g @ d + d @ H @ d / 2
        assert np.abs(projected_gradient(g + H @ d, d, lo, hi)).max() <= tol
        reference = box_qp_reference(H, g, lo, hi)
        assert abs(q - reference) <= 1e-9 * abs(reference)
        _, cd_sweeps = box_qp_cd(H, g, lo, hi, tol, max_sweeps=20000, face_every=10**9)
        assert 3 * sweeps < cd_sweeps


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inexact_face_steps_reach_the_minimum_of_an_independent_solver(seed):
    """Face steps solved to a residual of ``forcing`` times their right-hand
    side (inexact Newton) reach tol and the same minimum as scipy's L-BFGS-B,
    as face steps solved to half the tolerance (forcing 0) do."""
    H, g, lo, hi = correlated_box_qp(seed, n=120, m=400, noise=0.02, room=1e-20)
    tol = 1e-10
    reference = box_qp_reference(H, g, lo, hi)
    assert faces.FORCING > 0
    for forcing in (faces.FORCING, 0.0):
        # forcing_min_tol = tol: forcing at this tol too
        d, _ = box_qp_cd(H, g, lo, hi, tol, max_sweeps=20000, forcing=forcing, forcing_min_tol=tol)
        q = g @ d + d @ H @ d / 2
        assert np.all(d >= lo) and np.all(d <= hi)
        assert np.abs(projected_gradient(g + H @ d, d, lo, hi)).max() <= tol
        assert abs(q - reference) <= 1e-9 * abs(reference)


def grouped_box_qp(seed: int, groups: int = 30, size: int = 10):
    """A model like a grafting round's on sparse data: features fire with
    the few features of their own group only (H block-diagonal, density
    1/groups), each block with near twins and a null direction, orthant
    bounds a hair from 0."""
    blocks = [
        correlated_box_qp(seed * 1000 + k, n=size, m=60, noise=0.02, room=1e-20)
        for k in range(groups)
    ]
    H = np.zeros((groups * size, groups * size))
    for k, block in enumerate(blocks):
        H[k * size : (k + 1) * size, k * size : (k + 1) * size] = block[0]
    g, lo, hi = (np.concatenate([b[i] for b in blocks]) for i in (1, 2, 3))
    return H, g, lo, hi


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_sparse_model_is_solved_as_csr_to_the_minimum_of_an_independent_solver(seed):
    """A model with few non-zeros is held as CSR (``model_matrix``); its
    solve reaches tol and the minimum of scipy's L-BFGS-B, as the dense
    solve of the same model does."""
    H, g, lo, hi = grouped_box_qp(seed)
    assert sp.issparse(box_cd.model_matrix(H))
    tol = 1e-10
    reference = box_qp_reference(H, g, lo, hi)
    solutions = {}
    for density in (box_cd.SPARSE_MAX_DENSITY, -1.0):  # CSR, then dense
        d, _ = box_qp_cd(H, g, lo, hi, tol, max_sweeps=20000, sparse_max_density=density)
        q = g @ d + d @ H @ d / 2
        assert np.all(d >= lo) and np.all(d <= hi)
        assert np.abs(projected_gradient(g + H @ d, d, lo, hi)).max() <= tol
        assert abs(q - reference) <= 1e-9 * abs(reference)
        solutions[density] = q
    assert not sp.issparse(box_cd.model_matrix(H, -1.0))  # density -1: dense
    assert len(solutions) == 2


def test_model_matrix_keeps_a_dense_hessian_dense():
    H, *_ = correlated_box_qp(0)
    assert box_cd.model_matrix(H) is H


class SparseLogisticBox(LogisticBox):
    """LogisticBox on sparse binary data: 40 groups of 5 features, each
    event firing 2 features of one group, so the Hessian is block-diagonal
    (density 1/40) and the model solves run on CSR."""

    def __init__(self):
        rng = np.random.default_rng(5)
        groups, size, m = 40, 5, 4000
        group = rng.integers(0, groups, size=m)
        X = np.zeros((m, groups * size))
        for i, k in enumerate(group):
            X[i, k * size + rng.choice(size, 2, replace=False)] = 1.0
        self.X = X
        w = rng.normal(size=groups * size)
        self.y = (X @ w + rng.normal(size=m) > 0).astype(float)
        # every weight in an orthant with an l1 term: a feature that separates
        # its events would otherwise have no finite optimum
        signs = rng.integers(1, 3, size=groups * size)
        self.l1_per_weight = np.where(signs == 1, 0.002, -0.002)
        self.lower = np.where(signs == 1, 0.0, -np.inf)
        self.upper = np.where(signs == 2, 0.0, np.inf)
        self.hessians = []


def test_newton_on_a_sparse_hessian_reaches_the_minimum_of_lbfgsb():
    box = SparseLogisticBox()
    theta0 = np.zeros(box.X.shape[1])
    hess = box.fun(theta0, False, True).hess
    assert sp.issparse(box_cd.model_matrix(hess))
    res = box.solve(theta0, ray=True)
    assert res.converged and res.violation <= 1e-10
    ref = minimize(
        lambda t: (box.value(t) + box.l1_per_weight @ t, box.gradient(t)[0] + box.l1_per_weight),
        theta0,
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(box.lower, box.upper)),
        options={"maxiter": 100000, "ftol": 1e-16, "gtol": 1e-11},
    )
    assert res.value <= ref.fun + 1e-12
    assert abs(res.value - ref.fun) <= 1e-9 * abs(ref.fun)
    assert np.abs(res.theta - ref.x).max() <= 1e-6


def test_a_class_sweep_is_the_coordinate_sweep_in_class_order():
    """Within a colour class no two coordinates share a non-zero of H, so
    one vectorized update per class equals coordinate descent over the
    classes' coordinates in sequence (multicolour Gauss-Seidel)."""
    H, g, lo, hi = grouped_box_qp(0)
    H[:, 0] = H[0, :] = 0.01  # a coordinate coupled with every other (a bias)
    H[0, 0] = 1.0
    H[5, 17] = H[17, 5] = 0.001  # and a coupling across two groups
    S = sp.csr_matrix(H)
    movable = np.arange(len(g))
    classes = box_cd.color_classes(S, movable)
    assert np.array_equal(np.sort(np.concatenate(classes)), movable)
    for c in classes:
        assert not np.any(H[np.ix_(c, c)] - np.diag(np.diag(H)[c]))
    assert len(classes) < len(g) // 5
    inv = 1.0 / np.diag(H)
    order = np.concatenate(classes).tolist()
    d_rows, Hd_rows = np.zeros(len(g)), np.zeros(len(g))
    d_cls, Hd_cls = np.zeros(len(g)), np.zeros(len(g))
    columns = S.tocsc()
    for _ in range(3):
        box_cd._sweep_rows(
            H, g.tolist(), d_rows, Hd_rows, lo.tolist(), hi.tolist(), inv.tolist(), order
        )
        box_cd._sweep_classes([(c, columns[:, c]) for c in classes], g, d_cls, Hd_cls, lo, hi, inv)
        np.testing.assert_allclose(d_cls, d_rows, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(Hd_cls, H @ d_cls, rtol=1e-10, atol=1e-14)


def test_a_points_pass_takes_cut_steps_with_their_gradients():
    """The Hessian-free form (a direction pass, no Hessian in any
    evaluation): with a points pass the first trial steps and their
    gradients come in one pass, so an iteration whose step is cut to one of
    them costs two passes (direction, points) where the ray takes three or
    four; the same optimum."""
    theta0 = np.array([3.0, -3.0, 3.0, 5.0, -5.0, 5.0])
    options = SolverOptions(tol=1e-10)

    def run(with_points: bool):
        pb = LogisticBox()
        res = minimize_box_newton(
            pb.fun, theta0, pb.l1_per_weight, pb.lower, pb.upper, options, ray=pb.ray,
            direction=exact_direction(pb), points=pb.points if with_points else None,
        )  # fmt: skip
        assert res.converged and not any(pb.hessians)
        return res

    plain, res = run(False), run(True)
    np.testing.assert_allclose(res.theta, plain.theta, atol=1e-8)
    smallest = options.backtrack ** (options.trial_points - 1)
    later = res.trace[1:]  # the first iteration retries in a smaller region
    assert any(smallest <= t["step"] < 1 for t in later)  # cut within the points
    assert all(t["step"] >= smallest for t in later)
    assert set(np.diff([t["evaluations"] for t in res.trace])) == {2}
    assert res.evaluations < plain.evaluations


@pytest.mark.parametrize("secant_memory", [0, 5])
def test_a_direction_pass_curvature_does_not_steer_the_face_models_region(secant_memory):
    """A direction pass's d^T H d is each partition's own, not the averaged
    step's: with the face model (``cg_face``, whose CG the region truncates)
    the trust region's rho takes the step's curvature from the gradients at
    both ends instead, so a pass that reports it 10x too small or too large
    gives the same iterations (rho, steps, passes) and the optimum of an
    independent solver (scipy's L-BFGS-B)."""
    theta0 = np.array([3.0, -3.0, 3.0, 5.0, -5.0, 5.0])
    options = SolverOptions(tol=1e-10, secant_memory=secant_memory, cg_face=True)

    def run(factor: float):
        pb = LogisticBox()
        return pb, minimize_box_newton(
            pb.fun, theta0, pb.l1_per_weight, pb.lower, pb.upper, options, ray=pb.ray,
            direction=exact_direction(pb, factor), points=pb.points,
        )  # fmt: skip

    (pb, low), (_, high) = run(0.1), run(10.0)
    assert low.converged and high.converged
    rows = [[(t["rho"], t["step"], t["evaluations"]) for t in r.trace] for r in (low, high)]
    assert rows[0] == rows[1] and any(t["rho"] is not None for t in low.trace)
    np.testing.assert_array_equal(low.theta, high.theta)
    ref = minimize(
        lambda w: (pb.value(w) + pb.l1_per_weight @ w, pb.gradient(w)[0] + pb.l1_per_weight),
        theta0, jac=True, method="L-BFGS-B", bounds=list(zip(pb.lower, pb.upper)),
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000},
    )  # fmt: skip
    assert pb.value(low.theta) + pb.l1_per_weight @ low.theta <= ref.fun + 1e-10
