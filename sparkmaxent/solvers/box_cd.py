"""The Newton round's model solve on the driver: the quadratic model
g.d + d^T H d / 2 minimized over a box by cyclic coordinate descent with
projected Newton face steps (newGLMNET's inner loop, Yuan, Ho & Lin 2012,
section 3; Bertsekas 1982), the step ``newton.minimize_box_newton`` takes
when the exact Hessian is on the driver (no direction pass). Also the box
problem's projected gradient, the optimality measure every solver here
reads. Details: docs/methods/grafting.md, "The round solver".
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .faces import FORCING, FORCING_MIN_TOL, face_step

#: the model solve runs on a CSR copy of H when at most this share of its
#: entries is non-zero: a product then costs H's non-zeros instead of n^2,
#: and a sweep a few dozen class updates (``box_qp_cd``). Features whose
#: predicates never fire together have a 0 entry (docs/benchmarks.md,
#: "Grafting: a sparse Hessian in the round's model solve")
SPARSE_MAX_DENSITY = 0.1


def model_matrix(
    H: np.ndarray, max_density: float = SPARSE_MAX_DENSITY
) -> np.ndarray | sp.csr_matrix:
    """``H`` itself, or as CSR when at most ``max_density`` of its entries
    are non-zero."""
    n = len(H)
    sample = H[::16]  # the density of every 16th row: a choice, not a result
    if n == 0 or np.count_nonzero(sample) > max_density * sample.size:
        return H
    return sp.csr_matrix(H)


def projected_gradient(
    grad: np.ndarray, theta: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> np.ndarray:
    """Gradient with the components that push outward at a bound zeroed:
    the box problem's optimality conditions hold where it is 0."""
    pg = grad.copy()
    at_lo = theta <= lower
    at_hi = theta >= upper
    pg[at_lo] = np.minimum(pg[at_lo], 0.0)
    pg[at_hi] = np.maximum(pg[at_hi], 0.0)
    return pg


def color_classes(H: sp.csr_matrix, coords: np.ndarray) -> list[np.ndarray]:
    """``coords`` split into classes with H_ij = 0 between any two of a
    class (a greedy colouring of H's graph in coordinate order). A
    coordinate-descent update of one coordinate does not change another's
    in its class, so one vectorized update per class is the sweep over its
    coordinates in sequence: multicolour Gauss-Seidel (Adams & Jordan
    1986), exact coordinate descent in the order of the classes. Coordinate
    order rather than largest degree first (Welsh & Powell 1967): about as
    few classes, and a sweep order nearer the dense one's, whose rounds
    ended with fewer non-zeros on the two-label data where the l1 optimum
    is not unique (docs/benchmarks.md)."""
    sub = H[coords][:, coords].tocsr()
    ptr, ind = sub.indptr, sub.indices
    color = np.full(len(coords), -1)
    for v in range(len(coords)):
        taken = color[ind[ptr[v] : ptr[v + 1]]]
        free = np.ones(len(taken) + 1, dtype=bool)
        free[taken[(taken >= 0) & (taken <= len(taken))]] = False
        color[v] = int(np.argmax(free))  # the smallest colour no neighbour has
    return [coords[color == c] for c in range(int(color.max(initial=-1)) + 1)]


def _sweep_rows(H, gl, d, Hd, lo, hi, il, movable) -> None:
    """One cyclic coordinate-descent sweep over ``movable`` on the dense H,
    in place on d and Hd (g, inv, the bounds as Python lists: per-coordinate
    scalars)."""
    dl = d.tolist()
    for j in movable:
        dj = dl[j]
        new = dj - (gl[j] + Hd[j]) * il[j]
        if new < lo[j]:
            new = lo[j]
        elif new > hi[j]:
            new = hi[j]
        if new != dj:
            dl[j] = new
            Hd += (new - dj) * H[j]
    d[:] = dl


def _sweep_classes(classes, g, d, Hd, dlo, dhi, inv) -> None:
    """One sweep class by class (``color_classes``), in place on d and Hd;
    ``classes`` holds each class's coordinates and H's columns over them."""
    for coords, columns in classes:
        new = np.clip(d[coords] - (g[coords] + Hd[coords]) * inv[coords], dlo[coords], dhi[coords])
        delta = new - d[coords]
        d[coords] = new
        Hd += columns @ delta


def box_qp_cd(
    H: np.ndarray,
    g: np.ndarray,
    dlo: np.ndarray,
    dhi: np.ndarray,
    tol: float,
    max_sweeps: int,
    face_every: int = 10,
    *,
    forcing: float = FORCING,
    forcing_min_tol: float = FORCING_MIN_TOL,
    sparse_max_density: float = SPARSE_MAX_DENSITY,
) -> tuple[np.ndarray, int]:
    """Minimize g.d + d^T H d / 2 over dlo <= d <= dhi by cyclic coordinate
    descent (H symmetric PSD, shape (n, n)); returns d and the sweeps run.

    Coordinate descent identifies which bounds are active in a few sweeps
    but converges only linearly on the free coordinates when features are
    correlated (hundreds of sweeps near a round's optimum). Every
    ``face_every`` sweeps a projected Newton step on the model follows
    (``faces.face_step``), and the sweeps go on from where it lands. On a
    sparse H (``model_matrix``) the products run on CSR and a sweep goes
    class by class (``color_classes``): a few dozen vectorized updates
    where the dense sweep makes a numpy call per coordinate. ``forcing``,
    ``forcing_min_tol``: the face steps' (``faces.face_step``);
    ``sparse_max_density``: ``model_matrix``'s ``max_density``."""
    n = len(g)
    products = model_matrix(H, sparse_max_density)
    d = np.zeros(n)
    Hd = np.zeros(n)
    diag = np.diag(H).copy()
    is_movable = diag > 1e-14 * max(float(diag.max(initial=0.0)), 1e-300)
    movable = np.flatnonzero(is_movable)
    # Without curvature (a feature whose probabilities saturated) the model
    # is linear along a coordinate (a PSD H has a zero row there): its
    # minimum is the bound that -g points to, when finite. For an l1 weight
    # that is 0, where the orthant ends; leaving it would stall the round
    # at a projected gradient of gamma1.
    to_lo = ~is_movable & (g > 0) & np.isfinite(dlo)
    to_hi = ~is_movable & (g < 0) & np.isfinite(dhi)
    d[to_lo], d[to_hi] = dlo[to_lo], dhi[to_hi]
    Hd += products @ d
    inv = np.zeros(n)
    inv[movable] = 1.0 / diag[movable]
    if isinstance(products, sp.csr_matrix):
        by_column = products.tocsc()
        classes = [(c, by_column[:, c]) for c in color_classes(products, movable)]

        def sweep_once() -> None:
            _sweep_classes(classes, g, d, Hd, dlo, dhi, inv)
    else:
        lo, hi, order = dlo.tolist(), dhi.tolist(), movable.tolist()
        gl, il = g.tolist(), inv.tolist()

        def sweep_once() -> None:
            _sweep_rows(H, gl, d, Hd, lo, hi, il, order)

    # what the face steps keep between them (``faces.face_step``)
    faces: dict = {}
    for sweep in range(1, max_sweeps + 1):
        sweep_once()
        pg = projected_gradient(g + Hd, d, dlo, dhi)
        if np.abs(pg[movable]).max(initial=0.0) <= tol:
            break
        if sweep % face_every == 0:
            stepped, Hd_stepped = face_step(
                products, g, d, Hd, dlo, dhi, is_movable, inv, faces, tol, forcing, forcing_min_tol
            )
            d[:], Hd[:] = stepped, Hd_stepped  # in place: the sweeps hold d and Hd
            if np.abs(projected_gradient(g + Hd, d, dlo, dhi)[movable]).max(initial=0.0) <= tol:
                return d, sweep
    return d, sweep
