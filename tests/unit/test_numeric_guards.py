"""Issue 23, item 1: no exit-0 NaN or empty models. A non-finite loss,
gradient or objective raises NumericError naming the pass (every method,
every solver), L-BFGS's "ABNORMAL" stop on NaN is an error rather than a
result, and the KKT certificate never passes on non-finite numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.config import train_config
from sparkmaxent.errors import NumericError, check_finite
from sparkmaxent.kernels import MULTICLASS, Space, Weights
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.methods.gradient_test import blockwise_summary
from sparkmaxent.problem import Objective, Penalty, kkt_certificate, kkt_from_parts
from sparkmaxent.selection.base import RoundOutcome, TrainingContext
from sparkmaxent.selection.loop import run_rounds
from sparkmaxent.solvers import SolverOptions, minimize_lbfgs
from sparkmaxent.train import METHODS, train

from .helpers import random_multiclass


def problem(seed=0, m=200, P=15, K=3, scale=1.0):
    rng = np.random.default_rng(seed)
    block = random_multiclass(rng, m=m, P=P, K=K, density=0.3)
    block = type(block)(X=block.X * scale, y=block.y, c=np.ones(m), n_labels=K)
    return split_block(block, 2), Space(MULTICLASS, P, K, bias=True)


class NaNBackend(LocalBackend):
    """A local backend whose passes return a NaN loss from pass ``after`` on:
    a stand-in for any arithmetic that overflowed on the executors."""

    def __init__(self, blocks, space, after=0):
        super().__init__(blocks, space)
        self.after = after

    def _poison(self, result):
        if self.passes > self.after:
            for lg in (result, getattr(result, "lg", None)):
                if lg is not None and hasattr(lg, "grad") and hasattr(lg, "loss"):
                    lg.loss = float("nan")
        return result

    def run(self, task):  # a keyed pass (the block-wise test) too
        return self._poison(super().run(task))


def test_check_finite_names_the_pass_and_what_to_check():
    check_finite("a pass", loss=1.0, gradient=np.ones(3), bias_gradient=None)
    with pytest.raises(NumericError) as e:
        check_finite("curvature pass", loss=1.0, gradient=np.array([0.0, np.inf]))
    msg = str(e.value)
    assert msg.startswith("curvature pass: non-finite gradient")
    for hint in ("feature values", "standardize", "train.l2"):
        assert hint in msg


def test_objective_refuses_a_nan_pass():
    blocks, space = problem()
    obj = Objective(NaNBackend(blocks, space), np.arange(space.n_features), l2=0.1)
    theta = np.zeros(space.n_features + space.n_bias)
    with pytest.raises(NumericError, match=r"^loss\+gradient pass: non-finite loss"):
        obj(theta)
    with pytest.raises(NumericError, match=r"^curvature pass: non-finite loss"):
        obj.at(theta)
    with pytest.raises(NumericError, match=r"^full-gradient pass: non-finite loss"):
        obj.at(theta, full_gradient=True, hessian=False)
    with pytest.raises(NumericError, match=r"^gradient-test pass: non-finite loss"):
        blockwise_summary(obj, theta, 0.1, 3, 4)


def test_lbfgs_abnormal_on_nan_raises_instead_of_returning():
    """Without the check scipy stops with "ABNORMAL" (a NaN in its line
    search) and returns a result a caller would save."""

    def fun(x):
        f = float(np.sum((x - 3.0) ** 2))
        if np.any(np.abs(x) > 1.0):  # the region the first step lands in
            return float("nan"), np.full_like(x, np.nan)
        return f, 2 * (x - 3.0)

    from scipy.optimize import minimize

    raw = minimize(fun, np.zeros(2), jac=True, method="L-BFGS-B")
    assert not raw.success and "ABNORMAL" in str(raw.message)  # what the guard stands in for
    with pytest.raises(NumericError, match=r"^L-BFGS-B evaluation \d+: non-finite objective"):
        minimize_lbfgs(fun, np.zeros(2), SolverOptions())


def test_lbfgs_refuses_a_nan_start():
    with pytest.raises(NumericError, match=r"^L-BFGS-B evaluation 1: non-finite objective"):
        minimize_lbfgs(lambda x: (float("nan"), np.zeros_like(x)), np.zeros(3), SolverOptions())


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_raises_on_a_nan_pass(method):
    """No method turns a NaN pass into a model: train() raises NumericError
    naming the method and the pass."""
    blocks, space = problem(1)
    keys = {"cutoff": 1} if method == "cutoff" else {}
    cfg = train_config(method=method, max_features=3, max_rounds=3, plots=False, **keys)
    heldout = None
    if method == "lattice":  # binary atoms, and held-out data for its stops (clean)
        blocks = [
            type(b)(X=(b.X != 0).astype(float), y=b.y, c=b.c, n_labels=b.n_labels) for b in blocks
        ]
        heldout = LocalBackend(blocks, space)
    with pytest.raises(NumericError) as e:
        train(NaNBackend(blocks, space), cfg, heldout)
    msg = str(e.value)
    assert msg.startswith(f"{method}: ") and "non-finite loss" in msg and "standardize" in msg


@pytest.mark.parametrize(
    "method, solver",
    [
        ("l2", "auto"),
        ("grafting", "newton"),
        ("grafting", "newton-cg"),
        ("grafting", "lbfgs-b"),
        ("bayes-factor", "auto"),
    ],
)
def test_nan_after_some_passes_is_still_an_error(method, solver):
    blocks, space = problem(2)
    cfg = train_config(method=method, solver=solver, l1=1e-3, max_features=3, plots=False)
    with pytest.raises(NumericError, match=rf"^{method}: .*non-finite loss"):
        train(NaNBackend(blocks, space, after=4), cfg)


def test_huge_values_overflow_to_an_error_not_a_model():
    """The issue's case in-process (prepare now refuses it): values of
    1e300 overflow the arithmetic; training raises instead of returning."""
    blocks, space = problem(3, scale=1e300)
    with pytest.raises(NumericError, match=r"^l2: .*non-finite"):
        train(LocalBackend(blocks, space), train_config(method="l2"))


def test_a_round_with_a_nan_objective_is_not_recorded_or_checkpointed(tmp_path):
    blocks, space = problem()
    backend = LocalBackend(blocks, space)
    ctx = TrainingContext(
        backend, train_config(method="grafting", plots=False), output_dir=str(tmp_path)
    )

    class NaNRound:
        def round(self, state):
            return RoundOutcome(
                None, Weights.zeros(space), added=1, objective=float("nan"), score=1.0
            )

    with pytest.raises(NumericError, match=r"^grafting round 1: non-finite objective"):
        run_rounds(ctx, NaNRound(), "grafting")
    assert not (tmp_path / "checkpoint").exists()


# ----------------------------------------------------------------- certificate


def passing_parts():
    """Parts of a certificate that passes: weights at the optimum of l1."""
    weights = Weights(np.array([0, 2]), np.array([1.0, -0.5]), np.zeros(2))
    full_grad = np.array([-0.1, 0.05, 0.1, 0.0])  # -l1 sign(w) on 0 and 2, small on 1, 3
    return weights, full_grad, np.zeros(2), Penalty(gamma1=0.1)


def test_certificate_passes_on_finite_numbers():
    weights, full_grad, grad_bias, penalty = passing_parts()
    cert = kkt_certificate(full_grad, weights, grad_bias, penalty, 1e-6)
    assert cert.passed and cert.finite


@pytest.mark.parametrize(
    "where", ["inactive gradient", "active gradient", "weight", "bias", "bias gradient"]
)
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_certificate_never_passes_on_non_finite_numbers(where, bad):
    weights, full_grad, grad_bias, penalty = passing_parts()
    if where == "inactive gradient":
        full_grad[1] = bad
    elif where == "active gradient":
        full_grad[0] = bad
    elif where == "weight":
        weights.values[1] = bad
    elif where == "bias":
        weights.bias[0] = bad
    else:
        grad_bias[1] = bad
    cert = kkt_certificate(full_grad, weights, grad_bias, penalty, 1e-6)
    assert not cert.passed and not cert.finite


def test_block_wise_certificate_never_passes_on_a_nan_max():
    weights, full_grad, grad_bias, penalty = passing_parts()
    cert = kkt_from_parts(full_grad[weights.ids], weights, math.nan, 0, 4, grad_bias, penalty, 1e-6)
    assert not cert.passed and not cert.finite


class NaNGainBackend(LocalBackend):
    """Gain passes (IFS/SGC gains, Bayes-factor mu_g and a_g) return NaN."""

    def run(self, task):
        result = super().run(task)
        if hasattr(result, "loglik"):
            result.loglik = np.full_like(result.loglik, np.nan)
            result.grad = np.full_like(result.grad, np.nan)
        return result


@pytest.mark.parametrize(
    "gain_method, pass_name", [("exact", "gain pass"), ("sketch", "gain (polish )?pass")]
)
@pytest.mark.parametrize("method", ["ifs", "sgc", "bayes-factor"])
def test_a_nan_gain_fit_is_an_error_not_a_silent_stop(method, gain_method, pass_name):
    """Newton absorbed NaN sums as a zero gain: the run stopped at 'best gain
    0' with exit 0 and a model without features. (The sketch falls back to
    exact gain passes for real-valued candidates.)"""
    blocks, space = problem(4)
    cfg = train_config(method=method, gain_method=gain_method, max_features=3, plots=False)
    with pytest.raises(NumericError, match=rf"^{method}: {pass_name}: non-finite loglik"):
        train(NaNGainBackend(blocks, space), cfg)


@pytest.mark.parametrize("method", ["l2", "grafting", "sgc"])
def test_events_of_zero_total_weight_are_bad_input(method):
    from sparkmaxent.errors import InputError

    rng = np.random.default_rng(4)
    block = random_multiclass(rng, m=30, P=8, K=3, density=0.3)
    block = type(block)(X=block.X, y=block.y, c=np.zeros(30), n_labels=3)
    backend = LocalBackend([block], Space(MULTICLASS, 8, 3, bias=True))
    with pytest.raises(InputError, match="zero total weight"):
        train(backend, train_config(method=method, gain_threshold=0.0, max_features=3))
