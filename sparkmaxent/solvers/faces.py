"""The face step of the Newton round's model solve (``box_cd.box_qp_cd``).

Coordinate descent on the quadratic model q(d) = g.d + d^T H d / 2 over a
box finds which bounds are active in a few sweeps but converges only
linearly on the free coordinates when features are correlated. Every few
sweeps a projected Newton step (Bertsekas 1982) solves the model on the
free coordinates by conjugate gradients on H's free rows (a product per
iteration, n^2 flops, where a Cholesky factorization costs n^3 / 3), as an
inexact Newton step: to a residual of FORCING times the step's right-hand
side (Dembo, Eisenstat & Steihaug 1982), never below half the sweeps'
tolerance, on models asked for a tolerance of at least FORCING_MIN_TOL.
The free set of a face step is rarely the model's last, so a step solved
further is mostly thrown away by the sweeps that follow.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

#: forcing term of the face steps' conjugate gradients: a residual of this
#: times the right-hand side's largest entry, or half the sweeps' tolerance
FORCING = 0.1
#: ... on models asked for a tolerance of at least this; below it (rounds
#: near the final tolerance) loosely solved steps left the sweeps crawling
#: (docs/benchmarks.md), and the steps go to half the tolerance
FORCING_MIN_TOL = 1e-8


def face_step(
    H: np.ndarray | sp.csr_matrix,
    g: np.ndarray,
    d: np.ndarray,
    Hd: np.ndarray,
    dlo: np.ndarray,
    dhi: np.ndarray,
    is_movable: np.ndarray,
    inv_diag: np.ndarray,
    faces: dict,
    tol: float,
    forcing: float = FORCING,
    forcing_min_tol: float = FORCING_MIN_TOL,
) -> tuple[np.ndarray, np.ndarray]:
    """One projected Newton step on q(d) = g.d + d^T H d / 2 over the box
    (Bertsekas 1982); returns the new d and H d (the old ones when q does
    not decrease). ``H`` dense or CSR (``box_cd.model_matrix``).

    1. The epsilon-active set: a coordinate within one diagonal Newton step
       (eps) of a bound that its gradient pushes it towards is held at that
       bound. A weight a hair above 0 (1e-20 after a round's pruning) would
       otherwise stay free, and a step along a flat direction of H that
       crosses 0 there would be cut to nothing, face after face.
    2. Every other coordinate strictly inside its bounds is free; the step
       s on them approximately solves H_FF s = -(g + H d)_F by conjugate
       gradients (``_free_step``), to a residual of ``forcing`` times the
       right-hand side's largest entry, at least half the sweeps' ``tol``
       (only half of ``tol`` when ``tol`` < ``forcing_min_tol``).
    3. A projected search along it: d + t s clipped to the box for
       t = 1, 1/2, ..., the first that lowers q. Clipping lets several
       coordinates reach their bounds at once, where stopping at the first
       bound on the segment drops one per solve. When no t lowers q
       (holding the coordinates at their bounds costs more than the free
       step gains), the same search along the segment from d to that
       step's clipped end.
    Coordinates at a bound are freed again by the sweeps."""
    grad = g + Hd
    eps = float(np.abs(np.clip(d - grad * inv_diag, dlo, dhi) - d).max(initial=0.0))
    hold_lo = is_movable & (d - dlo <= eps) & (grad > 0)
    hold_hi = is_movable & (dhi - d <= eps) & (grad < 0)
    free = np.flatnonzero(is_movable & (d > dlo) & (d < dhi) & ~hold_lo & ~hold_hi)
    if not len(free):
        return d, Hd
    base = d.copy()
    base[hold_lo], base[hold_hi] = dlo[hold_lo], dhi[hold_hi]
    H_moved = H @ (base - d) if np.any(base != d) else np.zeros_like(Hd)
    rhs = -(grad + H_moved)[free]
    forcing = forcing if tol >= forcing_min_tol else 0.0
    s = _free_step(H, faces, free, rhs, max(tol / 2, forcing * float(np.abs(rhs).max())))
    if not np.all(np.isfinite(s)):
        return d, Hd
    step = np.zeros_like(d)
    step[free] = s
    H_step = H @ step
    for t in 0.5 ** np.arange(21):
        trial = base.copy()
        trial[free] = np.clip(base[free] + t * s, dlo[free], dhi[free])
        # q(trial) - q(d) from the difference: q itself sums terms far
        # larger than a late step's decrease, which its rounding would hide
        delta = trial - d
        clipped = np.any(trial[free] != base[free] + t * s)
        H_delta = H @ delta if clipped else H_moved + t * H_step
        if grad @ delta + delta @ H_delta / 2 < 0:
            return trial, Hd + H_delta
    # moving the held coordinates to their bounds cost more than the free
    # step gains at every t: the segment from d towards the face's minimizer
    target = np.clip(base + step, dlo, dhi)
    move = target - d
    H_move = H @ move
    for t in 0.5 ** np.arange(21):
        if t * (grad @ move) + t * t * (move @ H_move) / 2 < 0:
            return d + t * move, Hd + t * H_move
    return d, Hd


def face_cg(
    product: Callable[[np.ndarray], np.ndarray],
    diag: np.ndarray,
    b: np.ndarray,
    tol: float,
    max_iter: int,
) -> tuple[np.ndarray, float]:
    """An approximate solution of A x = b for a symmetric PSD A that may be
    singular, given by its ``product`` with a vector and its ``diag``:
    conjugate gradients from 0 with Jacobi preconditioning (Nocedal &
    Wright, Algorithm 5.3), until the residual's largest entry is <= ``tol``,
    after ``max_iter`` iterations, or at a direction without curvature; and
    the residual's largest entry there.

    Each iterate minimizes the model x^T A x / 2 - b.x over a growing
    Krylov subspace, so a capped solve is still a descent step; the sweeps
    and the next face step go on from it. From 0, the iterates of a
    consistent singular system stay off A's null space (the softmax's shift
    of all biases, a predicate's weights over all labels) and reach the
    solution of least norm in the metric of M = diag A. An iteration costs
    a matrix-vector product (n^2 flops) where a Cholesky factorization costs
    n^3 / 3."""
    n = len(b)
    inv = 1.0 / diag
    x = np.zeros(n)
    r = b.copy()
    z = inv * r
    p = z.copy()
    rz = float(r @ z)
    for _ in range(max_iter):
        if np.abs(r).max(initial=0.0) <= tol:
            break
        Ap = product(p)
        curvature = float(p @ Ap)
        if not curvature > 0:
            break
        alpha = rz / curvature
        x += alpha * p
        r -= alpha * Ap
        z = inv * r
        rz, rz_old = float(r @ z), rz
        p = z + (rz / rz_old) * p
    return x, float(np.abs(r).max(initial=0.0))


def cg_cap(n: int) -> int:
    """Iterations of a face step's conjugate gradients at most."""
    return max(50, n // 10)


def _free_step(
    H: np.ndarray | sp.csr_matrix, faces: dict, free: np.ndarray, b: np.ndarray, tol: float
) -> np.ndarray:
    """The face step on the ``free`` coordinates: H_FF s = b by conjugate
    gradients (``face_cg``) to a residual of ``tol``, at most ``cg_cap``
    iterations. The products run on a single-precision copy of all of H,
    made once per model: half the bytes of each product (they are bound by
    memory), no gather per free set. Their rounding (about 1e-7 of each
    product) can only make a face step less useful: the step is judged in
    double precision, and the sweeps go on in double precision."""
    if "H32" not in faces:
        faces["H32"] = H.astype(np.float32)
    H32, step32 = faces["H32"], np.zeros(H.shape[0], dtype=np.float32)

    def product(p: np.ndarray) -> np.ndarray:  # H_FF p
        step32[free] = p
        return (H32 @ step32)[free].astype(float)

    return face_cg(product, np.asarray(H.diagonal())[free], b, tol, cg_cap(len(free)))[0]


__all__ = ["FORCING", "FORCING_MIN_TOL", "cg_cap", "face_cg", "face_step"]
