"""The optimality certificate of C = L + penalty over *all* candidate
features, from the gradient of the smooth part (a dense vector, or what the
block-wise gradient test keeps of it, ``kernels/topk.py``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..kernels import Weights
from .penalty import Penalty

#: what a combination certificate says of the conjunctions never formed
UNEXAMINED = "every conjunction never formed has |gradient| <= bound by Eq. 5"


@dataclass(frozen=True)
class ConjunctionCheck:
    """The certificate's extension to every conjunction up to ``degree``
    (methods/combination.py): the largest |dC/dw_j| over the conjunctions
    the search examined, against ``bound``; those never formed are bounded
    by Eq. 5 of the search."""

    degree: int
    examined_conjunctions: int
    examined_features: int
    max_examined_gradient: float
    unexamined: str = field(default=UNEXAMINED, init=False)
    bound: float
    passed: bool


@dataclass(frozen=True)
class Certificate:
    """The KKT certificate of C over all candidate features (``kkt_from_parts``).

    Attributes
    ----------
    passed : bool
        Every condition holds (and every figure is finite).
    violation : float
        The largest violation of the three conditions (gradient units; 0 at
        an exact optimum): one figure for comparing solvers.
    tol, l1, bound : float
        The tolerance at non-zero weights and biases, gamma1, and the
        zero-weight bound gamma1_kkt (``Penalty.gamma1_kkt``), under the
        names the run report and the checkpoint have always carried.
    zero_tol : float
        The margin checked at zero weights: |dC/dw_j| <= bound + zero_tol
        (``Penalty.zero_margin``; bound * tol where none is given).
    nonzero_weights, features_checked : int
    max_active_violation, max_zero_gradient, max_bias_gradient : float
        The largest violation at a non-zero weight, |dC/dw_j| at a zero
        weight, and |dC/db_k|.
    zero_weights_over_bound : int
        Zero weights with |dC/dw_j| > bound + zero_tol.
    finite : bool
        No gradient entry or weight is NaN or infinite.
    conjunctions : ConjunctionCheck or None
        With combination features: the check over every conjunction.
    """

    passed: bool
    violation: float
    tol: float
    l1: float
    bound: float
    nonzero_weights: int
    features_checked: int
    max_active_violation: float
    max_zero_gradient: float
    max_bias_gradient: float
    zero_weights_over_bound: int
    finite: bool
    zero_tol: float = float("nan")
    conjunctions: ConjunctionCheck | None = None

    def __post_init__(self) -> None:
        if self.zero_tol != self.zero_tol:  # NaN: written before the field (bound * tol)
            object.__setattr__(self, "zero_tol", self.bound * self.tol)

    @property
    def zero_bound(self) -> float:
        """The largest |dC/dw_j| a zero weight may have: bound + zero_tol."""
        return self.bound + self.zero_tol

    def with_conjunctions(self, check: ConjunctionCheck) -> Certificate:
        """This certificate extended to the conjunctions: it passes when both do."""
        return dataclasses.replace(
            self, passed=bool(self.passed and check.passed), conjunctions=check
        )

    def to_json(self) -> dict:
        """Its JSON object (docs/formats.md, the report's ``kkt``)."""
        doc = dataclasses.asdict(self)
        if self.conjunctions is None:
            del doc["conjunctions"]
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Certificate:
        """The certificate ``to_json`` wrote (a checkpoint's, a report's).

        Raises KeyError or TypeError for an object that is not one."""
        doc = dict(doc)
        check = doc.pop("conjunctions", None)
        if check is not None:
            check = dict(check)
            check.pop("unexamined", None)
            check = ConjunctionCheck(**check)
        return cls(**doc, conjunctions=check)


def _penalty(penalty: Penalty | float, grad_threshold: float | None) -> Penalty:
    """``penalty`` itself, or gamma1 given as a float (with an optional
    ``grad_threshold`` in its place at zero weights) as a Penalty."""
    if isinstance(penalty, Penalty):
        if grad_threshold is not None:
            raise TypeError(
                "pass the zero-weight bound as Penalty.grad_threshold, not as grad_threshold"
            )
        return penalty
    return Penalty(gamma1=float(penalty), grad_threshold=grad_threshold)


def kkt_certificate(
    full_grad: np.ndarray,
    weights: Weights,
    grad_bias: np.ndarray | None,
    penalty: Penalty | float,
    tol: float,
    grad_threshold: float | None = None,
    margin: float | None = None,
) -> Certificate:
    """Optimality conditions of C over *all* candidate features.

    For the l1 problem (subdifferential of gamma1 |w_j|)::

        |dC/dw_j + gamma1 sign(w_j)| <= tol            for w_j != 0
        |dC/dw_j| <= gamma1_kkt + margin                for w_j == 0
        |dC/db_k| <= tol                                for the bias

    with ``gamma1_kkt = penalty.gamma1_kkt``: gamma1 (grafting), or for the
    thresholded variants without l1 (mle-ifs, l2-ifs) their grad_threshold; the
    certificate then says no candidate passes the test and the active
    weights are stationary. It never passes on a non-finite gradient entry
    or weight (``finite`` is False then).

    Parameters
    ----------
    full_grad : ndarray, shape (n_features,)
        dC/dw_j of the smooth part L + gamma2/2 ||w||^2 at ``weights``.
    weights : Weights
    grad_bias : ndarray, shape (K,), or None
    penalty : Penalty, or gamma1 as a float (then ``grad_threshold`` in its
        place at zero weights, default none)
    margin : float or None
        The zero-weight margin (``Penalty.zero_margin``); None: gamma1_kkt * tol.
    """
    penalty = _penalty(penalty, grad_threshold)
    margin = penalty.gamma1_kkt * tol if margin is None else margin
    ids = weights.active_ids()
    inactive = np.ones(len(full_grad), dtype=bool)
    inactive[ids] = False
    score = np.abs(full_grad[inactive])
    return kkt_from_parts(
        full_grad[ids],
        weights,
        float(score.max(initial=0.0)),
        int(np.count_nonzero(score > penalty.gamma1_kkt + margin)),
        len(full_grad),
        grad_bias,
        penalty,
        tol,
        margin=margin,
    )


def kkt_from_parts(
    active_grad: np.ndarray,
    weights: Weights,
    max_inactive: float,
    inactive_over: int,
    n_features: int,
    grad_bias: np.ndarray | None,
    penalty: Penalty | float,
    tol: float,
    grad_threshold: float | None = None,
    margin: float | None = None,
) -> Certificate:
    """``kkt_certificate`` from what the block-wise gradient test keeps
    (kernels/topk.py): dC/dw_j of the active features only, and over the
    inactive ones the largest |dC/dw_j| and how many exceed gamma1_kkt +
    margin (None: gamma1_kkt * tol).

    Parameters
    ----------
    active_grad : ndarray, shape (n_active,)
        dC/dw_j at ``weights.active_ids()``, in that order.
    """
    penalty = _penalty(penalty, grad_threshold)
    gamma1, gamma1_kkt = penalty.gamma1, penalty.gamma1_kkt
    margin = gamma1_kkt * tol if margin is None else margin
    nz = weights.values != 0
    nz_sign = np.sign(weights.values[nz])
    active_violation = float(np.abs(active_grad[nz] + gamma1 * nz_sign).max(initial=0.0))
    # zero weights: the inactive features and active ones at exactly 0
    zero_active = np.abs(active_grad[~nz])
    max_zero = max(max_inactive, float(zero_active.max(initial=0.0)))
    over = inactive_over + int(np.count_nonzero(zero_active > gamma1_kkt + margin))
    bias_violation = float(np.abs(grad_bias).max(initial=0.0)) if grad_bias is not None else 0.0
    # NaN compares False, but max() and abs().max() can drop or hide it: check outright
    finite = bool(
        np.isfinite(max_inactive)
        and np.all(np.isfinite(active_grad))
        and np.all(np.isfinite(weights.values))
        and (weights.bias is None or np.all(np.isfinite(weights.bias)))
        and (grad_bias is None or np.all(np.isfinite(grad_bias)))
    )
    passed = (
        finite
        and max_zero <= gamma1_kkt + margin
        and active_violation <= tol
        and bias_violation <= tol
    )
    # one figure for comparing solvers: the largest violation of the three
    # conditions (absolute, gradient units; 0 at an exact optimum)
    violation = max(max_zero - gamma1_kkt, active_violation, bias_violation, 0.0)
    return Certificate(
        passed=bool(passed),
        violation=violation,
        tol=tol,
        l1=gamma1,
        bound=gamma1_kkt,
        nonzero_weights=int(nz.sum()),
        features_checked=int(n_features),
        max_active_violation=active_violation,
        max_zero_gradient=max_zero,
        max_bias_gradient=bias_violation,
        zero_weights_over_bound=over,
        finite=finite,
        zero_tol=margin,
    )


__all__ = ["Certificate", "ConjunctionCheck", "kkt_certificate", "kkt_from_parts"]
