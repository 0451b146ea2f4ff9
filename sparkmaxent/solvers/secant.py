"""A quasi-Newton correction of the Hessian-free Newton step on a fixed face.

The Hessian-free step (``kernels/direction.py``) is each block's own Newton
step averaged over the blocks: d = -M^-1 g with M^-1 = C^-1 sum_b C_b H_b^-1
(C_b block b's curvature, coordinate by coordinate), not the global
-H^-1 g. Once the round's bounds are settled the iterations are a
preconditioned Richardson iteration on the face, converging linearly at the
rate of I - M^-1 H's spectral radius: slowly when features are spread
unevenly over the blocks (a rare feature whose events one block holds, the
other's step there a guess).

The pairs (s, y) of the last accepted steps and the gradients the trial
points' pass already brings (y = H s on a quadratic) correct it: the L-BFGS
two-loop recursion (Nocedal & Wright, Algorithm 7.4) with the direction
pass as its initial inverse Hessian, the pass solving on the first loop's
vector in place of g. This is preconditioned L-BFGS (on a quadratic with
exact steps: preconditioned CG, as DiSCO's global CG with block solves as
preconditioner, Zhang & Xiao 2015) at no pass of its own. The pairs hold
while the face holds: the free coordinates (strictly inside their bounds)
are the same at both ends of every pair; a step that changes the face
starts the memory over.

In an l1 round weights reach their orthant's 0 one after another, so the
face changes at nearly every iteration and the memory holds no pair. With
``across`` faces the pairs are kept as OWL-QN keeps them across orthant
changes (Andrew & Gao 2007) and L-BFGS-B across changes of its free set
(Byrd, Lu, Nocedal & Zhu 1995): each pair over the coordinates free at both
ends of its step, and the two-loop over the pairs restricted to the
current face (a pair without positive curvature there left out). A pair is
then a secant of the current face's Hessian up to the coupling with the
coordinates that left the face since; the line search and the descent
check keep every step safe. The step's length is then the pairs' as much
as the model's, so the Newton loop (``newton.minimize_box_newton``) does not
size its trust region by a corrected step: a full one keeps the region, a
cut one drops the pairs and keeps it.
"""

from __future__ import annotations

import numpy as np


def free_face(theta: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The coordinates strictly inside their bounds (a mask)."""
    return (theta > lower) & (theta < upper)


def _inverse_curvature(s: np.ndarray, y: np.ndarray) -> float | None:
    """1 / s.y of a pair, None without positive curvature (s.y <= 0 up to
    rounding near the optimum), which the two-loop must leave out."""
    sy = float(s @ y)
    if not sy > 1e-12 * float(np.linalg.norm(s) * np.linalg.norm(y)):
        return None
    return 1.0 / sy


class SecantMemory:
    """The last ``memory`` pairs (s, y) over the free coordinates of one
    face: s an accepted step, y the gradient's change along it."""

    def __init__(self, memory: int, across: bool = False):
        self.memory, self.across = memory, across
        self.free: np.ndarray | None = None
        # one face: (s, y, 1 / s.y) over ``free``; across faces: (s, y) over
        # every coordinate, 0 where either end of the step was at a bound
        self.pairs: list[tuple[np.ndarray, np.ndarray, float]] = []
        self.used: list[tuple[np.ndarray, np.ndarray, float]] = []  # the two-loop's

    def _on_face(self) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """The pairs over the current face's coordinates, with positive curvature."""
        if not self.across:
            return self.pairs
        assert self.free is not None, "pairs are kept with a face"
        out = []
        for s, y, _ in self.pairs:
            sf, yf = s[self.free], y[self.free]
            rho = _inverse_curvature(sf, yf)
            if rho is not None:
                out.append((sf, yf, rho))
        return out

    def first_loop(self, grad: np.ndarray) -> tuple[np.ndarray, list[float]] | None:
        """The vector the direction pass solves on in place of ``grad`` and
        the coefficients the second loop needs; None without pairs (the
        plain step)."""
        self.used = self._on_face() if self.pairs else []
        if not self.used:
            return None
        assert self.free is not None, "pairs are kept with their face"
        q = grad.copy()
        qf = q[self.free]
        alphas = []
        for s, y, rho in reversed(self.used):
            alpha = rho * float(s @ qf)
            qf -= alpha * y
            alphas.append(alpha)
        q[self.free] = qf
        return q, alphas[::-1]

    def second_loop(self, r: np.ndarray, alphas: list[float]) -> np.ndarray:
        """The corrected step from the direction pass's step ``r`` on the
        first loop's vector: -(H_k q) in the two-loop's terms, as ``r`` is a
        step (a minus sign included)."""
        assert self.free is not None, "pairs are kept with their face"
        d = r.copy()
        df = d[self.free]
        for (s, y, rho), alpha in zip(self.used, alphas):
            beta = rho * float(y @ df)
            df -= s * (alpha + beta)  # d = -r_two_loop: r += s (alpha - beta)
        d[self.free] = df
        return d

    def update(
        self,
        before: np.ndarray,
        after: np.ndarray,
        grad_before: np.ndarray,
        grad_after: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
    ) -> None:
        """Keep the pair of an accepted step when the face held along it
        (else start over on the new face); a pair without positive
        curvature (s.y <= 0, rounding near the optimum) is left out."""
        free = free_face(after, lower, upper)
        if self.across:  # over the coordinates free at both ends, 0 elsewhere
            both = free & free_face(before, lower, upper)
            self.free = free
            self._keep(
                np.where(both, after - before, 0.0), np.where(both, grad_after - grad_before, 0.0)
            )
            return
        if self.free is None or not np.array_equal(free, self.free):
            self.free, self.pairs = free, []
        if not np.array_equal(free_face(before, lower, upper), free):
            return
        self._keep((after - before)[free], (grad_after - grad_before)[free])

    def _keep(self, s: np.ndarray, y: np.ndarray) -> None:
        """Keep the pair (s, y) unless its curvature is not positive."""
        rho = _inverse_curvature(s, y)
        if rho is None:
            return
        self.pairs.append((s, y, rho))
        del self.pairs[: -self.memory]

    def region(
        self, step: float, region: tuple[float, float | None], before: float
    ) -> tuple[float, float | None]:
        """The trust region and rho after an accepted ``step``: ``region``
        (``line_search.next_radius``'s), but across faces, after a corrected
        step (the pairs set its length, not the model's region of trust),
        the region ``before`` it, at least, when the step was taken whole,
        and ``before`` with the pairs dropped when the line search cut it."""
        corrected, self.used = bool(self.used), []
        if not (self.across and corrected):
            return region
        if step < 1:
            self.pairs = []
            return before, region[1]
        return max(region[0], before), region[1]

    def reset(self) -> None:
        """Forget the pairs (a corrected step that did not descend)."""
        self.pairs, self.used = [], []


__all__ = ["SecantMemory", "free_face"]
