"""The penalty of the regularized problem, as one object:

    C(w) = L(w) + gamma1 ||w||_1 + gamma2/2 ||w||_2^2

l1 (gamma1 > 0, gamma2 = 0), a Gaussian prior (gamma1 = 0, gamma2 > 0:
l2), the elastic net (both), or none. The bias is never penalized.

What gamma1 implies is decided here and nowhere else:

* the orthant box of a round (Riezler & Vasserman 2004, section 5, after
  Perkins et al. 2003): every active weight is confined to the orthant of
  its sign, where |w_j| = sign_j w_j is linear, so a round's problem is
  smooth with box constraints (``box``);
* the KKT bound on |dC/dw_j| at a zero weight (``gamma1_kkt``): gamma1, or
  the gradient-test threshold of the thresholded variants without l1;
* whether weights driven to exactly 0 are pruned (``prunes``: footnote 2);
* the certificate's margin at zero weights, and the solver tolerance that
  moves a new weight off 0 (``zero_margin``, ``solver_tol``).

gamma1 has one name in the code, ``gamma1`` (the configuration's key
``train.grafting.l1`` becomes ``Penalty.gamma1`` in one place,
``methods/grafting.py`` ``variant``), and what is derived from it is named
after it:

* ``gamma1_kkt``: the bound of Riezler & Vasserman's Eq. 1, |dL/dw_j| <=
  gamma at a zero weight: gamma1, or ``grad_threshold`` in its place (the
  threshold gamma of mle-ifs and l2-ifs, section 5);
* ``gamma1_tested``: gamma1_kkt plus the zero-weight margin; the gradient
  test (Figure 1, step 1: |dL/dw_j| > gamma) passes a candidate when
  |dC/dw_j| > gamma1_tested, and the certificate checks the same bound;
* ``gamma1_cut``: ``partial_cut`` times gamma1_tested, the level above which
  a data block ships its part of |dC/dw_j| (``kernels/thresholded.py``);
* ``l1_per_weight``: gamma1 sign_j for each active weight (0 for the bias),
  the linear term that gamma1 |w_j| is inside its orthant (the solvers').

gamma2 is smooth: the objective (``objective.py``) adds it to L.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BoxProblem:
    """The smooth box problem of one round over theta = [w (n), bias]:

        minimize  C_smooth(theta) + l1_per_weight . theta   s.t.  lower <= theta <= upper

    Attributes
    ----------
    l1_per_weight : ndarray, shape (n + n_bias,)
        gamma1 * sign for weights, 0 for the bias.
    lower, upper : ndarray, shape (n + n_bias,)
        Orthant bounds (0 on the side the sign excludes), infinite for the
        bias and when gamma1 = 0.
    """

    l1_per_weight: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def orthant_problem(signs: np.ndarray, gamma1: float, n_bias: int) -> BoxProblem:
    """Box problem for weights confined to the orthants ``signs`` (+-1 each).

    Parameters
    ----------
    signs : ndarray of float, shape (n,)
        +1 or -1 per active weight; ignored when ``gamma1 == 0``.
    gamma1 : float
        gamma1 >= 0.
    n_bias : int
    """
    if gamma1 < 0:
        raise ValueError(f"expected gamma1 >= 0, got {gamma1}")
    n = len(signs)
    l1_per_weight = np.zeros(n + n_bias)
    lower = np.full(n + n_bias, -np.inf)
    upper = np.full(n + n_bias, np.inf)
    if gamma1 > 0:
        signs = np.asarray(signs, dtype=np.float64)
        if not np.all(np.abs(signs) == 1):
            raise ValueError("expected every active weight to have sign +1 or -1, got a 0")
        l1_per_weight[:n] = gamma1 * signs
        lower[:n] = np.where(signs > 0, 0.0, -np.inf)
        upper[:n] = np.where(signs < 0, 0.0, np.inf)
    return BoxProblem(l1_per_weight, lower, upper)


@dataclass(frozen=True)
class Penalty:
    """gamma1 ||w||_1 + gamma2/2 ||w||_2^2, and the zero-weight bound.

    Attributes
    ----------
    gamma1 : float
        gamma1 >= 0.
    l2 : float
        gamma2 >= 0 (a Gaussian prior of variance 1 / gamma2 per weight,
        in mean-loss units).
    grad_threshold : float or None
        The bound on |dC/dw_j| a zero weight must meet in place of gamma1
        (the subdifferential of gamma1 |w_j| at 0); None: gamma1. The
        thresholded variants without l1 (mle-ifs, l2-ifs) set it.
    """

    gamma1: float = 0.0
    l2: float = 0.0
    grad_threshold: float | None = None

    def __post_init__(self):
        if self.gamma1 < 0:
            raise ValueError(f"expected gamma1 >= 0, got {self.gamma1}")
        if self.l2 < 0:
            raise ValueError(f"expected l2 >= 0, got {self.l2}")

    @property
    def gamma1_kkt(self) -> float:
        """gamma1, or grad_threshold in its place: the KKT bound on |dC/dw_j|
        at w_j = 0 (Riezler & Vasserman Eq. 1, |dL/dw_j| <= gamma)."""
        return self.gamma1 if self.grad_threshold is None else self.grad_threshold

    @property
    def prunes(self) -> bool:
        """Weights a round drives to exactly 0 leave the active set (with l1
        only: without it 0 is an ordinary value)."""
        return self.gamma1 > 0

    def l1_value(self, w: np.ndarray) -> float:
        """gamma1 ||w||_1: the non-smooth part, which the objective leaves out."""
        return self.gamma1 * float(np.abs(w).sum())

    def value(self, w: np.ndarray) -> float:
        """gamma1 ||w||_1 + gamma2/2 ||w||_2^2."""
        w = np.asarray(w, dtype=np.float64)
        return self.l1_value(w) + 0.5 * self.l2 * float(w @ w)

    def box(self, signs: np.ndarray, n_bias: int) -> BoxProblem:
        """The round's box problem for weights held in the orthants ``signs``."""
        return orthant_problem(signs, self.gamma1, n_bias)

    def solver_tol(self, gtol: float, kkt_tol: float) -> float:
        """The final projected-gradient tolerance of a round: ``gtol``, kept
        below kkt_tol / 2 (the certificate's condition on non-zero weights
        and biases, in gradient units)."""
        return min(gtol, 0.5 * kkt_tol)

    def zero_margin(self, gtol: float, kkt_tol: float) -> float:
        """How far above ``gamma1_kkt`` |dC/dw_j| may be at a zero weight:
        gamma1_kkt * kkt_tol, but at least twice ``solver_tol``. A new weight's
        projected gradient at 0 exceeds the margin, so a round solved to
        ``solver_tol`` moves it off 0 (a looser tolerance could end the round
        at once, prune it and re-add it forever). Without the floor the
        margin, and with it the rounds' tolerance, shrinks with gamma1 to far
        below what the non-zero weights are certified to (kkt_tol): the last
        rounds of a path's small gamma1 then ground through linearly
        converging Newton iterations (docs/methods/grafting.md, "The
        certificate")."""
        return max(self.gamma1_kkt * kkt_tol, 2.0 * self.solver_tol(gtol, kkt_tol))

    def gamma1_tested(self, gtol: float, kkt_tol: float) -> float:
        """gamma1_kkt plus ``zero_margin``: a candidate enters only if
        |dC/dw_j| > gamma1_tested (Riezler & Vasserman, Figure 1: |dL/dw_j|
        > gamma), the certificate's own bound, so a run that stops is
        certified."""
        return self.gamma1_kkt + self.zero_margin(gtol, kkt_tol)


__all__ = ["Penalty", "BoxProblem", "orthant_problem"]
