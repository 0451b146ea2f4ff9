"""The penalty object (problem/penalty.py): what gamma1 and gamma2 imply."""

import numpy as np
import pytest

from sparkmaxent.kernels import Weights
from sparkmaxent.problem import Penalty, kkt_certificate


def test_l1_penalty_bounds_prunes_and_boxes():
    pen = Penalty(gamma1=0.1, l2=0.2)
    w = np.array([1.0, -2.0])
    assert pen.gamma1_kkt == 0.1 and pen.prunes
    assert pen.value(w) == pytest.approx(0.1 * 3 + 0.1 * 5)
    assert pen.l1_value(w) == pytest.approx(0.3)
    box = pen.box(np.array([1.0, -1.0]), n_bias=1)
    assert box.l1_per_weight.tolist() == [0.1, -0.1, 0.0]
    assert box.lower.tolist() == [0.0, -np.inf, -np.inf]
    assert box.upper.tolist() == [np.inf, 0.0, np.inf]
    assert pen.solver_tol(1e-9, 1e-6) == 1e-9
    assert pen.solver_tol(1.0, 1e-6) == 0.5e-6  # below the certificate's kkt_tol
    # the zero-weight margin: bound * kkt_tol, at least twice the solver's tolerance
    assert pen.zero_margin(1e-9, 1e-6) == 0.1 * 1e-6
    assert pen.zero_margin(1e-7, 1e-6) == 2e-7
    assert pen.gamma1_tested(1e-7, 1e-6) == 0.1 + 2e-7
    small = Penalty(gamma1=1e-5)  # a path's small gamma1: the margin no longer shrinks with it
    assert small.zero_margin(1e-7, 1e-6) == 2e-7  # was 1e-11: below what the rounds reach


def test_thresholded_penalty_without_l1_keeps_zeros_and_an_open_box():
    pen = Penalty(l2=0.5, grad_threshold=0.3)
    assert pen.gamma1_kkt == 0.3 and not pen.prunes
    box = pen.box(np.zeros(2), n_bias=0)
    assert (
        np.all(box.l1_per_weight == 0)
        and np.all(np.isinf(box.lower))
        and np.all(np.isinf(box.upper))
    )
    with pytest.raises(ValueError):
        Penalty(gamma1=-1.0)


def test_certificate_from_a_penalty_equals_the_one_from_floats():
    g = np.array([0.05, -0.1, 0.02, 0.2])
    w = Weights(np.array([1]), np.array([0.5]), None)
    by_floats = kkt_certificate(g, w, None, 0.0, 1e-6, grad_threshold=0.15)
    by_penalty = kkt_certificate(g, w, None, Penalty(grad_threshold=0.15), 1e-6)
    assert by_floats == by_penalty and not by_penalty.passed


def test_certificate_checks_the_margin_it_reports():
    w = Weights(np.array([0]), np.array([0.5]), None)
    g = np.array([-0.1, 0.1 + 1.5e-7, 0.0])  # a zero weight 1.5e-7 above gamma1
    old = kkt_certificate(g, w, None, Penalty(gamma1=0.1), 1e-6)  # margin 0.1 * 1e-6
    assert old.zero_tol == pytest.approx(1e-7) and not old.passed
    assert old.zero_weights_over_bound == 1
    cert = kkt_certificate(g, w, None, Penalty(gamma1=0.1), 1e-6, margin=2e-7)
    assert cert.passed and cert.zero_tol == 2e-7 and cert.zero_bound == 0.1 + 2e-7
    assert cert.zero_weights_over_bound == 0
    # written before the field existed: the margin it checked, bound * tol
    doc = cert.to_json()
    del doc["zero_tol"]
    assert type(cert).from_json(doc).zero_tol == pytest.approx(0.1 * 1e-6)
