"""A box-constrained quadratic model solved face by face, after TRON (Lin &
More 1999): the block's Newton step of ``direction.LocalDirectionTask``
with ``SolverOptions.cg_face``.

Minimizes q(d) = g.d + d^T H d / 2 over lo <= d <= hi (lo <= 0 <= hi, H PSD
given only by its products and its diagonal). An outer step:

1. the face: every coordinate is free but those a bound holds (at the
   bound, the model gradient pushing outward: in an l1 round the weights
   at their orthant's 0 whose gradient keeps them there, the binding set
   of Bertsekas 1982);
2. Jacobi-preconditioned CG on the free coordinates to the tolerance, run
   on through the bounds: the face's own Newton step, with no restart
   where its path crosses a bound;
3. a projected search along CG's step p: P(d + beta p) for beta = 1, 1/2,
   ... until q falls by a fraction of its first-order decrease (TRON's
   section 4, their Eq. 2.4): the projection puts every coordinate the
   step pushes past its bound there at once, so the next face has them;
4. if no trial gains, CG's last iterate inside the box (every CG iterate
   lowers q by a sufficient decrease, and it needs no product), or where
   the first already left it a Cauchy step (the same search along the
   Jacobi-scaled projected gradient from the model's minimizer along it,
   their section 3), which always gains while the projected gradient is
   above the tolerance.

TRON takes the Cauchy step first and fixes its face; on an l1 round's
partition models the binding set needs fewer products for the same q
(the Cauchy step restarts CG once more per step), so here it is the
fallback that keeps every outer step a descent. It stops at a projected
gradient of ``tol`` or after ``max_products`` products (the searches'
trials may go a few past it, and are counted). Coordinates without
curvature go to the bound -g points to, as in ``box_qp_pcg``
(``direction.py``), which stops CG at the first bound its step crosses:
where thousands of weights sit at their orthant's 0 it restarts after a
product or two.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Product = Callable[[np.ndarray], np.ndarray]

#: sufficient decrease of both projected searches: q(x) - q(d) <= MU g_q . (x - d)
#: (Lin & More 1999, Eq. 2.4 and section 4, their mu_0)
MU = 0.01
#: halvings each projected search tries before it gives up
SEARCH_TRIALS = 8


def starting_point(
    product: Product, diag: np.ndarray, g: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
    """Where both box-QP solvers (this one, ``direction.box_qp_pcg``) start:
    coordinates without curvature (a diagonal of nil against the largest)
    at the bound -g points to, the rest at 0. Returns (d, H d, products
    used, the movable coordinates, the Jacobi preconditioner 1/diag on
    them and 0 elsewhere)."""
    n = len(g)
    d, Hd, used = np.zeros(n), np.zeros(n), 0
    movable = diag > 1e-14 * max(float(diag.max(initial=0.0)), 1e-300)
    to_lo = ~movable & (g > 0) & np.isfinite(lo)
    to_hi = ~movable & (g < 0) & np.isfinite(hi)
    if np.any(to_lo | to_hi):
        d[to_lo], d[to_hi] = lo[to_lo], hi[to_hi]
        Hd, used = product(d), 1
    inv = np.zeros(n)
    inv[movable] = 1.0 / diag[movable]
    return d, Hd, used, movable, inv


def projected(r: np.ndarray, d: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The model gradient with the entries pushing out at a bound zeroed."""
    pg = r.copy()
    pg[(d <= lo) & (pg > 0)] = 0.0
    pg[(d >= hi) & (pg < 0)] = 0.0
    return pg


def box_qp_face(
    product: Product,
    diag: np.ndarray,
    g: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    tol: float,
    max_products: int,
) -> tuple[np.ndarray, int, float]:
    """Minimize q(d) = g.d + d^T H d / 2 over lo <= d <= hi face by face:
    CG on the free coordinates through the bounds, a projected search along
    its step, a Cauchy step where that gains nothing (the module's scheme).

    Returns (d, products, d^T H d)."""
    d, Hd, used, movable, inv = starting_point(product, diag, g, lo, hi)
    radius = _radius(lo, hi)
    while used < max_products:
        r = g + Hd
        pg = np.where(movable, projected(r, d, lo, hi), 0.0)
        if np.abs(pg).max(initial=0.0) <= tol:
            break
        # the face: every coordinate but those a bound holds (at it, pushed outward)
        free = movable & ((pg != 0) | ((d > lo) & (d < hi)))
        budget = max_products - used
        p, Hp, spent, inside = _face_cg(product, inv, r, free, tol, budget, radius, d, lo, hi)
        used += spent
        found, spent = _search(product, r, d, p, Hp, lo, hi) if np.any(p) else (None, 0)
        used += spent
        if found is None and inside is not None:  # CG's last iterate in the box: q fell there
            found = d + inside[0], inside[1]
        if found is None:  # CG's step gains nothing on the box: a Cauchy step
            found, spent = _cauchy(product, inv, r, pg, d, lo, hi)
            used += spent
        if found is None:  # not even a short Cauchy step lowers q: rounding
            break
        d, Hd = found[0], Hd + found[1]
    return d, used, float(d @ Hd)


def _radius(lo: np.ndarray, hi: np.ndarray) -> float:
    """CG's region: the largest finite bound (of a weight: its orthant's 0,
    the trust region); inf if there is none but 0 (no scale to bound by)."""
    bounds = np.abs(np.concatenate([lo[np.isfinite(lo)], hi[np.isfinite(hi)]]))
    largest = float(bounds.max(initial=0.0))
    return largest if largest > 0 else np.inf


def _cauchy(product, inv, r, pg, d, lo, hi) -> tuple[tuple[np.ndarray, np.ndarray] | None, int]:
    """The Cauchy step: the projected search along the Jacobi-scaled
    projected gradient s = -D^-1 pg from the model's minimizer along it
    (``_search``'s result and products; one product more for H s)."""
    s = -inv * pg
    Hs = product(s)
    curv = float(s @ Hs)
    if not curv > 0:
        return None, 1
    t = -float(r @ s) / curv
    found, used = _search(product, r, d, t * s, t * Hs, lo, hi)
    return found, used + 1


def _face_cg(product, inv, r, free, tol, budget, radius, d, lo, hi) -> tuple:
    """Jacobi-preconditioned CG on the free coordinates for H p = -r, to a
    residual of ``tol`` (largest entry) or ``budget`` products, through any
    bound but within ``radius`` (largest entry of p; ``inf``: none): an iterate past
    it is cut back to it and ends CG (Steihaug 1983, as TRON's CG stops at
    its trust region). A face whose Hessian is near singular (features that
    always fire together, l1's gradient along them) is otherwise left along
    the near-null directions by far: (p, H p, products, and the last
    iterate (p, H p) with d + p in the box [lo, hi], None if the first
    left it). Every CG iterate lowers q (q(d + p_k) - q(d) = r.p_k / 2, as
    CG's residual is orthogonal to its iterate), so where the projected
    search along the last fails, the last inside is a step with sufficient
    decrease that costs no product."""
    n = len(r)
    p, Hp, used, inside = np.zeros(n), np.zeros(n), 0, None
    res = np.where(free, -r, 0.0)
    if np.abs(res).max(initial=0.0) <= tol:
        return p, Hp, 0, None
    z = inv * res
    s, rz = z.copy(), float(res @ z)
    while used < budget and rz > 0:
        Hs = product(s)
        used += 1
        curv = float(s @ Hs)
        if not curv > 0:
            break
        alpha = rz / curv
        beyond = np.abs(p + alpha * s) > radius
        if np.any(beyond):  # to where the first coordinate reaches the radius
            with np.errstate(divide="ignore", invalid="ignore"):
                room = np.where(s != 0, (radius - np.sign(s) * p) / np.abs(s), np.inf)
            alpha = float(np.clip(room.min(initial=alpha), 0.0, alpha))
            return p + alpha * s, Hp + alpha * Hs, used, inside
        p += alpha * s
        Hp += alpha * Hs
        if np.all((d + p >= lo) & (d + p <= hi)):
            inside = p.copy(), Hp.copy()
        res -= alpha * np.where(free, Hs, 0.0)
        if np.abs(res).max(initial=0.0) <= tol:
            break
        z = inv * res
        rz, previous = float(res @ z), rz
        s = z + (rz / previous) * s
    return p, Hp, used, inside


def _search(product, r, d, p, Hp, lo, hi) -> tuple[tuple[np.ndarray, np.ndarray] | None, int]:
    """The projected search from d along p (H p given; r the model's gradient
    at d): the first of P(d + beta p), beta = 1, 1/2, ..., with sufficient
    decrease, as (the point, H times its step from d) or None if none has;
    and the products the trials took."""
    used, beta = 0, 1.0
    for _ in range(SEARCH_TRIALS):
        x = d + beta * p
        if np.all((x >= lo) & (x <= hi)):
            step, Hstep = beta * p, beta * Hp
        else:
            x = np.clip(x, lo, hi)
            step = x - d
            Hstep = product(step)
            used += 1
        linear = float(r @ step)
        if linear < 0 and linear + 0.5 * float(step @ Hstep) <= MU * linear:
            return (x, Hstep), used
        beta *= 0.5
    return None, used
