"""Hessian-free Newton directions: Hessian-vector products from the data,
and each block's own Newton direction on the round's box.

The exact curvature pass (``curvature.py``) ships the Hessian block over the
active set, (n + K)^2 / 2 numbers per partition, and the driver's model
solve costs n^2 per sweep. Here the Hessian is never formed:

* ``hessian_operator``: v -> H v over theta = [w over ids, bias] from a
  block's events and probabilities, two sparse products with the active
  columns (a gradient pass's cost), built in ``operator.py``.
* ``box_qp_pcg``: the quadratic model g.d + d^T H d / 2 minimized over a box
  by projected, Jacobi-preconditioned conjugate gradients with the products
  alone (the face of the bounds that push outward held fixed, CG on the
  rest, a projected step when CG leaves the box, or optionally once CG
  reached its tolerance; More & Toraldo 1991); ``box_face.box_qp_face``
  solves the same model face by face as TRON does (Lin & More 1999).
* ``LocalDirectionTask``: each block solves that model with its own
  Hessian (its sums over its own event weight) and the global gradient;
  the driver averages the directions by event weight (GIANT, Wang et al.
  2018; DANE, Shamir et al. 2014): a partition ships an n-vector. With one
  block it is the exact Newton direction (to the inner tolerance).
* ``HessianProductTask``: one product H v with the whole data's Hessian
  (and its diagonal) in a pass, for CG run by the driver across passes
  (``solvers/global_cg.py``); the passes at one point after the first take
  the block's operator from the process's cache (``pointcache.py``, and on
  Spark its store shared by the executor's Python workers).

Like every kernel this returns sums; the driver divides by the weight.
Details: docs/methods/grafting.md, "The round solver".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .blocks import Block
from .box_face import box_qp_face, starting_point
from .box_face import projected as projected_model_gradient
from .mergeable import Summed
from .operator import Operator, build_operator, operator_from_parts
from .params import Scaling, Space, Weights
from .pointcache import OPERATORS

Product = Callable[[np.ndarray], np.ndarray]


def hessian_operator(
    block: Block, space: Space, weights: Weights, ids: np.ndarray, scaling: Scaling | None
) -> tuple[float, Operator, np.ndarray]:
    """The block's event weight, and its Hessian operator (v -> H v, sums)
    and diagonal over [w over ids, bias] at ``weights``
    (``operator.build_operator``: from the probabilities alone, no gradient)."""
    op = build_operator(block, space, weights, ids, scaling)
    return op.weight, op, op.diag


def point_operator(
    block: Block, space: Space, weights: Weights, ids: np.ndarray, scaling: Scaling | None
) -> tuple[float, Operator, np.ndarray]:
    """``hessian_operator`` through the process's operator cache
    (``pointcache.OPERATORS``): the passes at one point after the first
    reuse the block's probabilities and diagonal there, bit for bit, from
    the process's own entry or, where the cache has a shared store (Spark's
    Python workers), from the operator another worker built there."""
    ids = np.asarray(ids, dtype=np.int64)
    keys = (
        type(block).__name__, space, ids, weights.ids, weights.values, weights.bias,
        None if scaling is None else scaling.mean, None if scaling is None else scaling.inv_scale,
    )  # fmt: skip
    build = lambda sink=None: build_operator(block, space, weights, ids, scaling, sink)  # noqa: E731
    op = OPERATORS.get(block, keys, build, operator_from_parts)
    return op.weight, op, op.diag


def box_qp_pcg(
    product: Product,
    diag: np.ndarray,
    g: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    tol: float,
    max_products: int,
    through: bool = False,
) -> tuple[np.ndarray, int, float]:
    """Minimize q(d) = g.d + d^T H d / 2 over lo <= d <= hi (lo <= 0 <= hi,
    H PSD given by ``product``) by projected preconditioned CG.

    Each outer step holds the coordinates at a bound whose model gradient
    pushes outward and runs Jacobi-preconditioned CG on the others from the
    current point: to the tolerance (``through``), or only until its step
    first leaves the box. A step outside the box is cut where it first
    meets a bound or projected onto the box, whichever lowers q more (the
    cut lowers q: q falls along a CG step up to its end); run ``through``,
    the step CG ended with, the one that first left the box and the last
    one inside are all tried (``_box_step``), so an outer step gains at
    least what stopping at the bound gains. The projection puts every
    coordinate the step pushes past its bound there at once. Stopped at
    the first bound it crosses, CG restarts after a product or two wherever
    many free coordinates sit at a bound (an l1 round's orthant bounds at 0,
    new weights among them): a projected gradient method that runs into
    ``max_products``; run through, an outer step is a CG solve of the face
    (the projected search of More & Toraldo 1991 and of TRON, Lin & More
    1999). Coordinates without curvature go to the bound -g points to, as in
    ``solvers.box_cd.box_qp_cd``. Stops at a projected gradient of ``tol``
    or after ``max_products`` products.

    Returns (d, products, d^T H d)."""
    d, Hd, used, movable, inv = starting_point(product, diag, g, lo, hi)
    n = len(g)
    held = np.zeros(n, dtype=bool)  # at a bound that stopped the last CG step at once
    while used < max_products:
        r = g + Hd
        if np.abs(projected_model_gradient(r, d, lo, hi)[movable]).max(initial=0.0) <= tol:
            break
        free = movable & ~held & ~((d <= lo) & (r > 0)) & ~((d >= hi) & (r < 0))
        held = np.zeros(n, dtype=bool)
        res = np.where(free, -r, 0.0)
        z = inv * res
        s, rz = z.copy(), float(res @ z)
        p, Hp = np.zeros(n), np.zeros(n)
        left = None  # the CG step and H times it where it first left the box
        while used < max_products and rz > 0:
            Hs = product(s)
            used += 1
            curv = float(s @ Hs)
            if not curv > 0:
                break
            alpha = rz / curv
            p += alpha * s
            Hp += alpha * Hs
            res -= alpha * np.where(free, Hs, 0.0)
            if np.abs(res).max(initial=0.0) <= tol:
                break
            if left is None and np.any((d + p < lo) | (d + p > hi)):
                if not through:
                    break
                # the step that left, and the last one inside (alpha s back)
                left = p.copy(), Hp.copy(), p - alpha * s, Hp - alpha * Hs
            z = inv * res
            rz, previous = float(res @ z), rz
            s = z + (rz / previous) * s
        if not np.any(p):  # no curvature along the residual: nothing to gain
            break
        trial = d + p
        if np.all((trial >= lo) & (trial <= hi)):
            d, Hd = trial, Hd + Hp
            continue
        # the CG step left the box: the best of where it first meets a bound
        # and its projection, for the step CG ended with and (``through``)
        # the step that first left the box
        steps = [(p, Hp)] if left is None else [(p, Hp), left[:2], left[2:]]
        d, Hd, room, spent = _box_step(product, g, d, Hd, steps, lo, hi)
        used += spent
        if room is not None:  # a bound stops the step at once and its projection gains
            # nothing: the next CG holds those coordinates there (else it repeats this one)
            held = room <= 0
    return d, used, float(d @ Hd)


def _first_bound(g, d, Hd, p, Hp, lo, hi) -> tuple[float, np.ndarray, float, np.ndarray]:
    """Where the step d -> d + p first meets a bound: (t in [0, 1], the
    point, q there from H d and H p without a product, each coordinate's
    room t along p)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.where(p < 0, (lo - d) / p, np.where(p > 0, (hi - d) / p, np.inf))
    t = float(np.clip(room.min(initial=1.0), 0.0, 1.0))
    q = float(g @ d + 0.5 * d @ Hd + t * ((g + Hd) @ p) + 0.5 * t * t * (p @ Hp))
    return t, np.clip(d + t * p, lo, hi), q, room


def _box_step(product, g, d, Hd, steps, lo, hi):
    """The lowest q among, for each CG step (p, H p) of ``steps`` that leaves
    the box, the point where d -> d + p first meets a bound and d + p
    projected onto the box (one product each; steps inside the box are taken
    at t = 1, no product): (d, H d, the first step's room when nothing
    lowers q, else None; the products)."""
    best, used, room0 = (float(g @ d + 0.5 * d @ Hd), d, Hd), 0, None
    for k, (p, Hp) in enumerate(steps):
        t, first, q, room = _first_bound(g, d, Hd, p, Hp, lo, hi)
        room0 = room if k == 0 else room0
        if q < best[0] and t > 0:  # first - d is t p but for the bound it reached exactly
            best = (q, first, Hd + t * Hp)
        if t < 1:  # ... or its projection, which may put several on their bounds at once
            projected = np.clip(d + p, lo, hi)
            H_projected = Hd + product(projected - d)
            used += 1
            q_projected = float(g @ projected + 0.5 * projected @ H_projected)
            if q_projected < best[0]:
                best = (q_projected, projected, H_projected)
    if best[1] is d:
        return d, Hd, room0, used
    return best[1], best[2], None, used


#: curvature per unit event weight added to every block's weights in
#: ``LocalDirection`` (far below any feature's own): a coordinate without
#: curvature in any block is averaged by event weight
CURVATURE_FLOOR = 1e-12


@dataclass
class LocalDirection(Summed):
    """Mergeable sums of a local-direction pass: sum_b c_b * d_b and
    sum_b c_b (per coordinate: c_b is block b's Hessian diagonal, its sums
    over its events, ridge included), sum_b W_b, sum_b W_b d_b^T H_b d_b,
    the products the blocks ran and the blocks that solved (those with
    events: with one the step is the exact Newton step). ``combined`` is the blocks' directions
    averaged coordinate by coordinate with their curvature as weights: a
    block that holds few events of a feature has little say in its step
    (a refit's held-out part, a small partition: GIANT's plain average
    by event weight takes their poorly determined steps at full weight)."""

    direction: np.ndarray
    diagonal: np.ndarray
    weight: float
    curvature: float
    products: int
    blocks: int = 0

    def combined(self) -> np.ndarray:
        """The step: sum_b c_b d_b / sum_b c_b; with one block its own
        direction (to rounding)."""
        return self.direction / self.diagonal


@dataclass(frozen=True)
class LocalDirectionTask:
    """A picklable pass: each block's Newton direction on the box
    [lower, upper] from the global gradient ``grad`` (of C, l2 included)
    and the block's own Hessian (its sums over its event weight, plus
    ``l2`` on the weights), solved to ``tol`` by ``box_qp_pcg`` (its CG
    run ``through`` the box before projecting, or stopped at a bound), or
    with ``face`` by ``box_face.box_qp_face`` (Cauchy step, CG on its face
    through the bounds, projected search: TRON's scheme)."""

    space: Space
    weights: Weights
    ids: np.ndarray
    grad: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    tol: float
    max_products: int
    l2: float = 0.0
    scaling: Scaling | None = None
    through: bool = False
    face: bool = False

    def __call__(self, block: Block) -> LocalDirection:
        weight, product, diag = hessian_operator(
            block, self.space, self.weights, self.ids, self.scaling
        )
        n = len(self.ids)
        if not weight > 0:  # an empty block: no opinion
            return LocalDirection(
                np.zeros(len(self.grad)), np.zeros(len(self.grad)), 0.0, 0.0, 0, 0
            )
        ridge = np.zeros(len(self.grad))
        ridge[:n] = self.l2
        model = (
            lambda v: product(v) / weight + ridge * v,
            diag / weight + ridge,
            self.grad,
            self.lower,
            self.upper,
            self.tol,
            self.max_products,
        )
        if self.face:
            d, used, dHd = box_qp_face(*model)
        else:
            d, used, dHd = box_qp_pcg(*model, self.through)
        # the block's curvature sums, coordinate by coordinate; the floor makes a
        # coordinate no block has curvature at an average by event weight
        c = diag + weight * (ridge + CURVATURE_FLOOR)
        return LocalDirection(c * d, c, weight, weight * dHd, used, 1)


@dataclass
class HessianProduct(Summed):
    """Mergeable sums of a product pass: sum_b H_b v and sum_b diag(H_b)
    (each block's sums over its events), sum_b W_b, and the blocks that
    ran a product (``products``, as ``LocalDirection`` counts them)."""

    product: np.ndarray
    diagonal: np.ndarray
    weight: float
    products: int


@dataclass(frozen=True)
class HessianProductTask:
    """A picklable pass: H v over [w over ``ids``, bias] at ``weights``
    and H's diagonal, as sums over each block's events (no l2: the driver
    adds it, as it divides by the weight)."""

    space: Space
    weights: Weights
    ids: np.ndarray
    vector: np.ndarray
    scaling: Scaling | None = None

    def __call__(self, block: Block) -> HessianProduct:
        # every product pass at a point after the first: the block's operator
        # there from the process's cache (``point_operator``)
        weight, product, diag = point_operator(
            block, self.space, self.weights, self.ids, self.scaling
        )
        if not weight > 0:  # an empty block: nothing to add
            zeros = np.zeros(len(self.vector))
            return HessianProduct(zeros, zeros.copy(), 0.0, 0)
        return HessianProduct(product(self.vector), diag, weight, 1)
