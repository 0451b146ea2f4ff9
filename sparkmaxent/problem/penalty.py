"""The penalty of the regularized problem, as one object:

    C(w) = L(w) + gamma1 ||w||_1 + gamma2/2 ||w||_2^2

l1 (gamma1 > 0, gamma2 = 0), a Gaussian prior (gamma1 = 0, gamma2 > 0:
l2), the elastic net (both), or none. The bias is never penalized.

What gamma1 implies is decided here and nowhere else:

* the orthant box of a round (Riezler & Vasserman 2004, section 5, after
  Perkins et al. 2003): every active weight is confined to the orthant of
  its sign, where |w_j| = sign_j w_j is linear, so a round's problem is
  smooth with box constraints (``box``);
* the KKT bound on |dC/dw_j| at a zero weight (``bound``): gamma1, or the
  gradient-test threshold of the thresholded variants without l1;
* whether weights driven to exactly 0 are pruned (``prunes``: footnote 2);
* the certificate's margin at zero weights, and the solver tolerance that
  moves a new weight off 0 (``zero_margin``, ``solver_tol``).

gamma2 is smooth: the objective (``objective.py``) adds it to L.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BoxProblem:
    """The smooth box problem of one round over theta = [w (n), bias]:

        minimize  C_smooth(theta) + lin . theta   s.t.  lower <= theta <= upper

    Attributes
    ----------
    lin : ndarray, shape (n + n_bias,)
        gamma1 * sign for weights, 0 for the bias.
    lower, upper : ndarray, shape (n + n_bias,)
        Orthant bounds (0 on the side the sign excludes), infinite for the
        bias and when gamma1 = 0.
    """

    lin: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def orthant_problem(signs: np.ndarray, l1: float, n_bias: int) -> BoxProblem:
    """Box problem for weights confined to the orthants ``signs`` (+-1 each).

    Parameters
    ----------
    signs : ndarray of float, shape (n,)
        +1 or -1 per active weight; ignored when ``l1 == 0``.
    l1 : float
        gamma1 >= 0.
    n_bias : int
    """
    if l1 < 0:
        raise ValueError(f"expected l1 >= 0, got {l1}")
    n = len(signs)
    lin = np.zeros(n + n_bias)
    lower = np.full(n + n_bias, -np.inf)
    upper = np.full(n + n_bias, np.inf)
    if l1 > 0:
        signs = np.asarray(signs, dtype=np.float64)
        if not np.all(np.abs(signs) == 1):
            raise ValueError("expected every active weight to have sign +1 or -1, got a 0")
        lin[:n] = l1 * signs
        lower[:n] = np.where(signs > 0, 0.0, -np.inf)
        upper[:n] = np.where(signs < 0, 0.0, np.inf)
    return BoxProblem(lin, lower, upper)


@dataclass(frozen=True)
class Penalty:
    """gamma1 ||w||_1 + gamma2/2 ||w||_2^2, and the zero-weight bound.

    Attributes
    ----------
    l1 : float
        gamma1 >= 0.
    l2 : float
        gamma2 >= 0 (a Gaussian prior of variance 1 / gamma2 per weight,
        in mean-loss units).
    threshold : float or None
        The bound on |dC/dw_j| a zero weight must meet; None: gamma1 (the
        subdifferential of gamma1 |w_j| at 0). The thresholded variants
        without l1 (mle-ifs, l2-ifs) set their gradient-test threshold.
    """

    l1: float = 0.0
    l2: float = 0.0
    threshold: float | None = None

    def __post_init__(self):
        if self.l1 < 0:
            raise ValueError(f"expected l1 >= 0, got {self.l1}")
        if self.l2 < 0:
            raise ValueError(f"expected l2 >= 0, got {self.l2}")

    @property
    def bound(self) -> float:
        """KKT bound on |dC/dw_j| for w_j = 0 (and the gradient test's threshold)."""
        return self.l1 if self.threshold is None else self.threshold

    @property
    def prunes(self) -> bool:
        """Weights a round drives to exactly 0 leave the active set (with l1
        only: without it 0 is an ordinary value)."""
        return self.l1 > 0

    def l1_value(self, w: np.ndarray) -> float:
        """gamma1 ||w||_1: the non-smooth part, which the objective leaves out."""
        return self.l1 * float(np.abs(w).sum())

    def value(self, w: np.ndarray) -> float:
        """gamma1 ||w||_1 + gamma2/2 ||w||_2^2."""
        w = np.asarray(w, dtype=np.float64)
        return self.l1_value(w) + 0.5 * self.l2 * float(w @ w)

    def box(self, signs: np.ndarray, n_bias: int) -> BoxProblem:
        """The round's box problem for weights held in the orthants ``signs``."""
        return orthant_problem(signs, self.l1, n_bias)

    def solver_tol(self, gtol: float, kkt_tol: float) -> float:
        """The final projected-gradient tolerance of a round: ``gtol``, kept
        below kkt_tol / 2 (the certificate's condition on non-zero weights
        and biases, in gradient units)."""
        return min(gtol, 0.5 * kkt_tol)

    def zero_margin(self, gtol: float, kkt_tol: float) -> float:
        """How far above ``bound`` |dC/dw_j| may be at a zero weight:
        bound * kkt_tol, but at least twice ``solver_tol``. A new weight's
        projected gradient at 0 exceeds the margin, so a round solved to
        ``solver_tol`` moves it off 0 (a looser tolerance could end the round
        at once, prune it and re-add it forever). Without the floor the
        margin, and with it the rounds' tolerance, shrinks with gamma1 to far
        below what the non-zero weights are certified to (kkt_tol): the last
        rounds of a path's small gamma1 then ground through linearly
        converging Newton iterations (docs/methods/grafting.md, "The
        certificate")."""
        return max(self.bound * kkt_tol, 2.0 * self.solver_tol(gtol, kkt_tol))

    def test_bound(self, gtol: float, kkt_tol: float) -> float:
        """A candidate enters only if |dC/dw_j| > bound + ``zero_margin``:
        the certificate's own bound, so a run that stops is certified."""
        return self.bound + self.zero_margin(gtol, kkt_tol)


__all__ = ["Penalty", "BoxProblem", "orthant_problem"]
