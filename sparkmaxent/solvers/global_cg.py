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

A second switch fires where a round crawls: once a second averaged
step was cut by the line search after its partitions' CG ran into
``max_products``, the rest of the round's steps are the whole data's,
solved face by face (``kernels.box_face.box_qp_face``, TRON's scheme) to the
forcing tolerance. There the average converges only linearly and every
iteration pays the partitions' full product budget (an ill-conditioned
active set at a tolerance far below the features' own scale: a very small
gamma1 without an l2 part), while the face CG on the whole Hessian reaches
the Newton step in a few outer iterations.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from ..kernels.box_face import box_qp_face
from ..kernels.direction import box_qp_pcg

log = logging.getLogger(__name__)

#: a round crawls at its second averaged step cut after the product cap: one
#: such step alone also happens in a round the average still converges in a
#: few more iterations
CRAWL_STEPS = 2

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

    ``budget``: at most this many product passes per iteration once the
    free set is unchanged (0: never switch on that). ``crawl_budget``: at
    most this many per iteration once the round crawls (``crawled``; 0:
    never). The preconditioner is the diagonal of the last product pass
    (one pass of its own at the first switched iteration)."""

    def __init__(self, budget: int, crawl_budget: int = 0):
        self.budget = budget
        self.crawl_budget = crawl_budget
        self.crawling = False
        self.cut_at_cap = 0  # averaged steps cut after the product cap
        self.switched = False  # whether the last step was CG across passes
        self.previous: np.ndarray | None = None
        self.diagonal: np.ndarray | None = None

    def ready(self, theta: np.ndarray, grad: np.ndarray, lower, upper) -> bool:
        """Whether this iteration's step is CG across passes: the round
        crawls, or the switch is on and the free set is the same as at the
        last iteration's point."""
        same = False
        if self.budget > 0:
            free = free_set(theta, grad, lower, upper)
            same = self.previous is not None and np.array_equal(free, self.previous)
            self.previous = free
        self.switched = self.crawling or same
        return self.switched

    def crawled(self, step: float, products: int, cap: int, blocks: int) -> None:
        """Note an accepted step of the partitions' average: cut by the line
        search (``step`` < 1) after their CG ran ``products`` >= ``cap``
        over several ``blocks``. At the ``CRAWL_STEPS``-th such step the
        round crawls: from then on every step is the face CG across passes."""
        if self.crawl_budget > 0 and not self.switched and blocks > 1:
            if step < 1 and products >= cap:
                self.cut_at_cap += 1
            if not self.crawling and self.cut_at_cap >= CRAWL_STEPS:
                log.debug(
                    "the round crawls (step %.3g after %d products): CG across passes",
                    step,
                    products,
                )
                self.crawling = True

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
        ``tol``: (d, passes, d^T H d), every product one pass at theta; by
        the face CG once the round crawls, else by the stop-at-bound CG."""
        passes = 0
        if self.diagonal is None:
            _, self.diagonal = product_pass(theta, np.zeros_like(grad))
            passes += 1
        latest: list[np.ndarray] = []

        def product(v: np.ndarray) -> np.ndarray:
            Hv, diagonal = product_pass(theta, v)
            latest[:] = [diagonal]
            return Hv

        if self.crawling:
            model = (product, self.diagonal, grad, dlo, dhi, tol, self.crawl_budget)
            d, used, curvature = box_qp_face(*model)
        else:
            model = (product, self.diagonal, grad, dlo, dhi, tol, self.budget)
            d, used, curvature = box_qp_pcg(*model)
        if latest:  # this point's diagonal: the next iteration's preconditioner
            self.diagonal = latest[0]
        return d, passes + used, curvature


__all__ = ["AcrossPasses", "ProductPass", "free_set"]
