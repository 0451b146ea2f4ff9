"""The quasi-Newton correction of the Hessian-free step (``solvers/secant.py``):
on a quadratic whose direction pass is a poor preconditioner (a Jacobi step,
as block-averaged Newton steps are when the blocks' Hessians differ), the
corrected iterations reach the same box minimum in fewer passes."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.problem.objective import Evaluation
from sparkmaxent.solvers import ConvergenceWarning, SolverOptions, minimize_box_newton
from sparkmaxent.solvers.box_cd import box_qp_cd
from sparkmaxent.solvers.secant import SecantMemory


def _quadratic(seed: int, n: int = 60):
    """f(x) = x^T H x / 2 + b.x with correlated coordinates, l1's orthant
    box on the first half (some of them binding at 0), free elsewhere."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, n)) + 0.5 * rng.normal(size=(n, 1))  # a common factor
    H = A @ A.T / n + 0.05 * np.eye(n)
    b = rng.normal(size=n)
    lower = np.full(n, -np.inf)
    lower[: n // 2] = 0.0
    upper = np.full(n, np.inf)
    return H, b, lower, upper


def _solve(H, b, lower, upper, memory: int, across: bool = False):
    diag = np.diag(H).copy()
    calls = {"direction": 0}

    def evaluation(x):
        return Evaluation(float(x @ H @ x / 2 + b @ x), H @ x + b, None, None, None)

    def fun(x, full, hessian):
        return evaluation(x)

    def points(xs):
        return [evaluation(x) for x in xs]

    def ray(x, d, steps):
        return np.array([evaluation(x + t * d).value for t in steps])

    def direction(x, grad, dlo, dhi, tol):
        # a Jacobi step on the model: what averaged block steps approximate
        calls["direction"] += 1
        d = np.clip(-grad / diag, dlo, dhi)
        return d, 1, float(d @ H @ d)

    options = SolverOptions(
        tol=1e-9, max_iter=2000, secant_memory=memory, secant_across=across, stall=50
    )
    res = minimize_box_newton(
        fun, np.zeros(len(b)), np.zeros(len(b)), lower, upper, options,
        ray=ray, direction=direction, points=points,
    )  # fmt: skip
    return res, calls["direction"]


@pytest.mark.parametrize("seed", range(3))
def test_secant_correction_reaches_the_same_box_minimum_in_fewer_passes(seed):
    H, b, lower, upper = _quadratic(seed)
    exact, _ = box_qp_cd(H, b, lower - 0, upper, 1e-12, 20000)  # from 0: d is the minimizer
    with pytest.warns(ConvergenceWarning):  # the plain Jacobi iteration crawls on the face
        plain, plain_dirs = _solve(H, b, lower, upper, memory=0)
    corrected, corrected_dirs = _solve(H, b, lower, upper, memory=5)
    assert corrected.converged
    assert np.any(exact[: len(b) // 2] == 0.0)  # the box binds
    np.testing.assert_allclose(corrected.theta, exact, atol=1e-7)
    assert corrected.value == pytest.approx(float(exact @ H @ exact / 2 + b @ exact), abs=1e-12)
    assert corrected.evaluations < plain.evaluations / 2, (corrected.evaluations, plain.evaluations)
    assert corrected_dirs < plain_dirs / 2


def test_secant_pairs_start_over_when_the_face_changes():
    memory = SecantMemory(3)
    lower, upper = np.array([0.0, -np.inf, -np.inf]), np.full(3, np.inf)
    x0, x1, x2 = np.array([1.0, 0, 0]), np.array([0.5, 1, 0]), np.array([0.0, 1, 1])
    memory.update(x0, x1, np.zeros(3), np.array([-1.0, 1, 0]), lower, upper)
    assert len(memory.pairs) == 1 and memory.first_loop(np.ones(3)) is not None
    memory.update(x1, x2, np.zeros(3), np.array([0.0, 0, 1]), lower, upper)  # x2 at its bound
    assert memory.pairs == [] and memory.first_loop(np.ones(3)) is None
    # no curvature along the step: no pair
    memory.update(x2, x2 + [0, 1, 0], np.zeros(3), np.array([0.0, -1, 0]), lower, upper)
    assert memory.pairs == []


def test_two_loop_with_an_exact_initial_inverse_keeps_the_newton_step():
    # with H0 = H^-1 exactly and pairs from H, the two-loop returns -H^-1 g
    rng = np.random.default_rng(1)
    A = rng.normal(size=(6, 6))
    H = A @ A.T + np.eye(6)
    memory = SecantMemory(4)
    lower, upper = np.full(6, -np.inf), np.full(6, np.inf)
    x = np.zeros(6)
    for _ in range(4):
        s = rng.normal(size=6)
        memory.update(x, x + s, H @ x, H @ (x + s), lower, upper)
        x = x + s
    g = rng.normal(size=6)
    loops = memory.first_loop(g)
    assert loops is not None
    r = -np.linalg.solve(H, loops[0])  # the pass's step on the first loop's vector
    np.testing.assert_allclose(memory.second_loop(r, loops[1]), -np.linalg.solve(H, g), rtol=1e-8)


def test_pairs_kept_across_faces_are_restricted_to_the_current_one():
    memory = SecantMemory(3, across=True)
    lower, upper = np.array([0.0, -np.inf, -np.inf]), np.full(3, np.inf)
    x0, x1, x2 = np.array([1.0, 0, 0]), np.array([0.5, 1, 0]), np.array([0.0, 1, 1])
    memory.update(x0, x1, np.zeros(3), np.array([-1.0, 1, 0]), lower, upper)
    memory.update(x1, x2, np.zeros(3), np.array([0.0, 0, 1]), lower, upper)  # x2 at its bound
    assert len(memory.pairs) == 2  # kept, the second over the coordinates free at both ends
    np.testing.assert_array_equal(memory.pairs[1][0], [0.0, 0, 1])
    loops = memory.first_loop(np.ones(3))
    assert loops is not None and len(memory.used) == 2
    # on the face of x2 (coordinates 1 and 2) the first pair is (1, 0) against (1, 0)
    np.testing.assert_array_equal(memory.used[0][0], [1.0, 0.0])
    assert loops[0][0] == 1.0  # the bound coordinate's entry untouched


@pytest.mark.parametrize("seed", range(3))
def test_pairs_kept_across_faces_reach_the_same_box_minimum(seed):
    """Kept across faces (OWL-QN's memory), the corrected iterations reach the
    box minimum the one-face memory reaches, in fewer passes: the face
    changes as the bounds settle, and each change emptied that memory."""
    H, b, lower, upper = _quadratic(seed)
    exact, _ = box_qp_cd(H, b, lower - 0, upper, 1e-12, 20000)
    across, across_dirs = _solve(H, b, lower, upper, memory=5, across=True)
    one_face, one_face_dirs = _solve(H, b, lower, upper, memory=5)
    assert across.converged
    np.testing.assert_allclose(across.theta, exact, atol=1e-7)
    assert across.value == pytest.approx(one_face.value, abs=1e-12)
    assert across.evaluations < one_face.evaluations and across_dirs < one_face_dirs
