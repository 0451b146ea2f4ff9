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
"""

from __future__ import annotations

import numpy as np


def free_face(theta: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The coordinates strictly inside their bounds (a mask)."""
    return (theta > lower) & (theta < upper)


class SecantMemory:
    """The last ``memory`` pairs (s, y) over the free coordinates of one
    face: s an accepted step, y the gradient's change along it."""

    def __init__(self, memory: int):
        self.memory = memory
        self.free: np.ndarray | None = None
        self.pairs: list[tuple[np.ndarray, np.ndarray, float]] = []

    def first_loop(self, grad: np.ndarray) -> tuple[np.ndarray, list[float]] | None:
        """The vector the direction pass solves on in place of ``grad`` and
        the coefficients the second loop needs; None without pairs (the
        plain step)."""
        if not self.pairs:
            return None
        assert self.free is not None, "pairs are kept with their face"
        q = grad.copy()
        qf = q[self.free]
        alphas = []
        for s, y, rho in reversed(self.pairs):
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
        for (s, y, rho), alpha in zip(self.pairs, alphas):
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
        if self.free is None or not np.array_equal(free, self.free):
            self.free, self.pairs = free, []
        if not np.array_equal(free_face(before, lower, upper), free):
            return
        s = (after - before)[free]
        y = (grad_after - grad_before)[free]
        sy = float(s @ y)
        if not sy > 1e-12 * float(np.linalg.norm(s) * np.linalg.norm(y)):
            return
        self.pairs.append((s, y, 1.0 / sy))
        del self.pairs[: -self.memory]

    def reset(self) -> None:
        """Forget the pairs (a corrected step that did not descend)."""
        self.pairs = []


__all__ = ["SecantMemory", "free_face"]
