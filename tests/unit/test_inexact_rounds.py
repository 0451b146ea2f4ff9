"""Grafting's inexact rounds (``train.grafting.round_tol_ratio``) against an
independent solver: however loosely the intermediate rounds are solved,
the run ends at the certified l1 optimum over all candidates, the one
scipy's L-BFGS-B finds on the split-variable problem (w = u - v, u, v >= 0)
without any active set."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from sparkmaxent.backends import LocalBackend
from sparkmaxent.config import train_config
from sparkmaxent.config.method_sections import GraftingConfig
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.train import train

from .test_grafting import planted

L1 = 1e-3


def split_variable_optimum(block, n_predicates: int, n_labels: int, l1: float):
    """min_w,b L(w, b) + l1 ||w||_1 over every (predicate, label) feature by
    L-BFGS-B on w = u - v (u, v >= 0), the biases free: the multinomial
    loss written here from the block's arrays alone (feature p * K + k)."""
    X, y, c = block.X.tocsr(), block.y, block.c
    P, K, W = n_predicates, n_labels, c.sum()
    Y = np.zeros((len(y), K))
    Y[np.arange(len(y)), y] = 1.0

    def fun(z):
        u, v, b = z[: P * K], z[P * K : 2 * P * K], z[2 * P * K :]
        w = (u - v).reshape(P, K)
        s = X @ w + b
        s -= s.max(axis=1, keepdims=True)
        logp = s - np.log(np.exp(s).sum(axis=1, keepdims=True))
        loss = -(c * (logp * Y).sum(axis=1)).sum() / W
        r = (np.exp(logp) - Y) * (c / W)[:, None]
        gw = (X.T @ r).ravel()
        value = loss + l1 * (u.sum() + v.sum())
        return value, np.concatenate([gw + l1, -gw + l1, r.sum(axis=0)])

    n = 2 * P * K + K
    bounds = [(0, None)] * (2 * P * K) + [(None, None)] * K
    res = minimize(
        fun,
        np.zeros(n),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": 100_000, "maxfun": 200_000, "ftol": 1e-16, "gtol": 1e-11},
    )
    return res.x[: P * K] - res.x[P * K : 2 * P * K], res.x[2 * P * K :], res.fun


def probabilities(block, w: np.ndarray, b: np.ndarray, n_labels: int) -> np.ndarray:
    """p(y | x_i) of every event and label under dense weights ``w`` (feature
    p * K + k) and biases ``b``."""
    s = block.X @ w.reshape(-1, n_labels) + b
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("solver", ["newton-cg", "newton"])
def test_loose_rounds_end_at_the_split_variable_l1_optimum(solver):
    data_block = planted(seed=5, m=3000, P=60, K=4, n_support=12, n_copies=0)
    _, block, space = data_block
    w_ref, b_ref, c_ref = split_variable_optimum(block, space.n_predicates, space.n_labels, L1)
    runs = {}
    for ratio in (GraftingConfig().round_tol_ratio, 0.9, 0.0):
        backend = LocalBackend(split_block(block, 2), space)
        cfg = train_config(
            method="grafting", l1=L1, n_best=10, gtol=1e-9, kkt_tol=1e-6,
            round_tol_ratio=ratio, solver=solver,
        )  # fmt: skip
        runs[ratio] = (train(backend, cfg), backend.passes)
    for ratio, (res, _) in runs.items():
        report = res.report
        assert report.certificate.passed and report.converged, ratio
        # the certified optimum is the reference's
        assert report.objective == pytest.approx(c_ref, rel=1e-8, abs=1e-10), ratio
        w = np.zeros(len(w_ref))
        w[res.weights.ids] = res.weights.values
        # the l1 optimum's weights need not be unique (a predicate on in every
        # event may shift its labels' weights at no cost); its probabilities are
        K = space.n_labels
        p_ref = probabilities(block, w_ref, b_ref, K)
        p = probabilities(block, w, res.weights.bias, K)
        np.testing.assert_allclose(p, p_ref, atol=1e-4)
        # the loose runs' first rounds stopped far above the final tolerance
        tols = [r.solve.tol for r in report.rounds]
        if ratio > 0:
            assert tols[0] > 1e3 * 1e-9
        else:
            assert tols == [pytest.approx(1e-9)] * len(tols)
    # loose rounds cost no more passes than rounds solved to the final tolerance
    assert runs[0.9][1] <= runs[0.0][1]
