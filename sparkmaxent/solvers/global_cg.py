"""A Hessian-free round's late iterations: conjugate gradients across passes.

The Hessian-free step (``kernels/direction.py``) has every partition solve
the quadratic model with its own Hessian by local CG and the driver average
the steps (GIANT, DANE): a pass ships n-vectors, but the average is not the
Newton step, so the outer iterations contract linearly, each paying up to
``max_products`` local products per partition. Near a round's optimum the
free set (the coordinates not held at a bound) stops changing, and the
model is the same quadratic on a fixed face. From then on the driver runs
projected, Jacobi-preconditioned CG (``kernels.direction.box_qp_pcg``) on
the whole data's model at the iteration's point, each Hessian-vector product
one pass (``kernels.direction.HessianProductTask``): the Newton step to the
forcing tolerance, with communication linear in the active set
(Hessian-free Newton-CG with a pass budget; DiSCO, Zhang & Xiao 2015, with
a diagonal preconditioner in place of DiSCO's local Hessian).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..kernels.direction import box_qp_pcg

#: one pass: (theta, v) -> (H v, H's diagonal) at theta
ProductPass = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def free_set(
    theta: np.ndarray, grad: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> np.ndarray:
    """The coordinates not held at a bound by a gradient that pushes outward
    (boolean mask): the face the projected gradient lives on."""
    held = ((theta <= lower) & (grad > 0)) | ((theta >= upper) & (grad < 0))
    return ~held


class AcrossPasses:
    """The switch to CG across passes and its state within one round.

    ``budget``: at most this many product passes per iteration (0: never
    switch). The switch happens at an iteration whose free set equals the
    last iteration's (``ready``); the preconditioner is the diagonal of the
    last product pass (one pass of its own at the first such iteration)."""

    def __init__(self, budget: int):
        self.budget = budget
        self.previous: np.ndarray | None = None
        self.diagonal: np.ndarray | None = None

    def ready(self, theta: np.ndarray, grad: np.ndarray, lower, upper) -> bool:
        """Whether this iteration's step is CG across passes: on, and the
        free set the same as at the last iteration's point."""
        if self.budget <= 0:
            return False
        free = free_set(theta, grad, lower, upper)
        same = self.previous is not None and np.array_equal(free, self.previous)
        self.previous = free
        return same

    def step(
        self,
        product_pass: ProductPass,
        theta: np.ndarray,
        grad: np.ndarray,
        dlo: np.ndarray,
        dhi: np.ndarray,
        tol: float,
    ) -> tuple[np.ndarray, int, float]:
        """The model's step over dlo <= d <= dhi to a projected gradient of
        ``tol``: (d, passes, d^T H d), every product one pass at theta."""
        passes = 0
        if self.diagonal is None:
            _, self.diagonal = product_pass(theta, np.zeros_like(grad))
            passes += 1
        latest: list[np.ndarray] = []

        def product(v: np.ndarray) -> np.ndarray:
            Hv, diagonal = product_pass(theta, v)
            latest[:] = [diagonal]
            return Hv

        d, used, curvature = box_qp_pcg(product, self.diagonal, grad, dlo, dhi, tol, self.budget)
        if latest:  # this point's diagonal: the next iteration's preconditioner
            self.diagonal = latest[0]
        return d, passes + used, curvature


__all__ = ["AcrossPasses", "ProductPass", "free_set"]
