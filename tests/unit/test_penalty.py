"""The penalty object (problem/penalty.py): what gamma1 and gamma2 imply."""

import numpy as np
import pytest

from sparkmaxent.kernels import Weights
from sparkmaxent.problem import Penalty, kkt_certificate


def test_l1_penalty_bounds_prunes_and_boxes():
    pen = Penalty(l1=0.1, l2=0.2)
    w = np.array([1.0, -2.0])
    assert pen.bound == 0.1 and pen.prunes
    assert pen.value(w) == pytest.approx(0.1 * 3 + 0.1 * 5)
    assert pen.l1_value(w) == pytest.approx(0.3)
    box = pen.box(np.array([1.0, -1.0]), n_bias=1)
    assert box.lin.tolist() == [0.1, -0.1, 0.0]
    assert box.lower.tolist() == [0.0, -np.inf, -np.inf]
    assert box.upper.tolist() == [np.inf, 0.0, np.inf]
    assert pen.test_bound(1e-6) == 0.1 * (1 + 1e-6)
    assert pen.solver_tol(1e-9, 1e-6) == 1e-9
    assert pen.solver_tol(1.0, 1e-6) == 0.5 * 0.1 * 1e-6


def test_thresholded_penalty_without_l1_keeps_zeros_and_an_open_box():
    pen = Penalty(l2=0.5, threshold=0.3)
    assert pen.bound == 0.3 and not pen.prunes
    box = pen.box(np.zeros(2), n_bias=0)
    assert np.all(box.lin == 0) and np.all(np.isinf(box.lower)) and np.all(np.isinf(box.upper))
    with pytest.raises(ValueError):
        Penalty(l1=-1.0)


def test_certificate_from_a_penalty_equals_the_one_from_floats():
    g = np.array([0.05, -0.1, 0.02, 0.2])
    w = Weights(np.array([1]), np.array([0.5]), None)
    by_floats = kkt_certificate(g, w, None, 0.0, 1e-6, bound=0.15)
    by_penalty = kkt_certificate(g, w, None, Penalty(threshold=0.15), 1e-6)
    assert by_floats == by_penalty and not by_penalty.passed
