"""Gain statistics (kernels/gains.py) against brute force, finite differences,
closed forms and quadrature."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.integrate import quad
from scipy.special import softmax

from sparkmaxent.backends import LocalBackend
from sparkmaxent.kernels import (
    CANDIDATES,
    MULTICLASS,
    CandidateBlock,
    MulticlassBlock,
    Scaling,
    Space,
    Weights,
    loss_grad,
)
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.kernels.gain_sketch import GainSketchTask, _aggregate, _bin_keys, gain_sketch
from sparkmaxent.kernels.gains import (
    LOGIT_CLIP,
    EmpiricalExpectationTask,
    GainDerivativesTask,
    gain_derivatives,
    multiclass_logits,
)
from sparkmaxent.kernels.stats import feature_counts
from sparkmaxent.solvers.gain_fits import fit_gains, uniform_initial_gains

from .helpers import random_candidates, random_multiclass


def binary(block):
    """The same events with every stored predicate value set to 1."""
    if isinstance(block, MulticlassBlock):
        X = block.X.copy()
        X.data[:] = 1.0
        return MulticlassBlock(X=X, y=block.y, c=block.c, n_labels=block.n_labels)
    F = block.F.copy()
    F.data[:] = 1.0
    return CandidateBlock(F=F, event_ptr=block.event_ptr, correct=block.correct, c=block.c)


def setup(shape, rng, use_scaling, real=True):
    """A block, its space, sparse current weights (with bias for multiclass)
    and a scaling, on small random data."""
    if shape == MULTICLASS:
        block = random_multiclass(rng, m=50, P=8, K=3, density=0.35)
        space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    else:
        block = random_candidates(rng, m=20, D=8)
        space = Space(CANDIDATES, block.n_predicates, 1)
    if not real:
        block = binary(block)
    ids = np.sort(rng.choice(space.n_features, size=space.n_features // 3, replace=False))
    weights = Weights(
        ids,
        rng.normal(size=len(ids)) * 0.7,
        rng.normal(size=space.n_labels) if space.bias else None,
    )
    scaling = (
        Scaling(
            mean=rng.normal(size=space.n_predicates) * 0.5,
            inv_scale=rng.uniform(0.5, 2.0, size=space.n_predicates),
        )
        if use_scaling
        else None
    )
    return block, space, weights, scaling


def brute_loglik_change(block, space, weights, scaling, j, alpha):
    """S(alpha) by adding alpha to feature j and recomputing the loss."""
    theta = weights.to_dense(space)
    base = loss_grad(block, space, Weights.from_dense(space, theta, sparse=False), scaling).loss
    theta[j] += alpha
    return (
        base - loss_grad(block, space, Weights.from_dense(space, theta, sparse=False), scaling).loss
    )


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
@pytest.mark.parametrize("use_scaling", [False, True])
def test_loglik_change_matches_adding_the_feature(shape, use_scaling):
    rng = np.random.default_rng(10)
    block, space, weights, scaling = setup(shape, rng, use_scaling)
    ids = np.arange(space.n_features)
    ids = np.concatenate([ids, ids[:3]])  # repeats are evaluated independently
    alphas = rng.normal(size=len(ids)) * 1.5
    d = gain_derivatives(block, space, weights, scaling, ids, alphas)
    expected = [
        brute_loglik_change(block, space, weights, scaling, j, a) for j, a in zip(ids, alphas)
    ]
    np.testing.assert_allclose(d.loglik, expected, rtol=1e-10, atol=1e-11)
    assert d.weight == pytest.approx(block.c.sum())
    assert np.ptp(d.loglik) > 0.1  # the check is not vacuous


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
@pytest.mark.parametrize("use_scaling", [False, True])
def test_derivatives_match_finite_differences(shape, use_scaling):
    rng = np.random.default_rng(11)
    block, space, weights, scaling = setup(shape, rng, use_scaling)
    ids = np.arange(space.n_features)
    alphas, h = rng.normal(size=len(ids)), 1e-5
    d = gain_derivatives(block, space, weights, scaling, ids, alphas)
    dp = gain_derivatives(block, space, weights, scaling, ids, alphas + h)
    dm = gain_derivatives(block, space, weights, scaling, ids, alphas - h)
    np.testing.assert_allclose(d.grad, (dp.loglik - dm.loglik) / (2 * h), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(d.curv, (dp.grad - dm.grad) / (2 * h), rtol=1e-6, atol=1e-7)
    if shape == MULTICLASS:
        assert np.all(d.curv <= 0)  # one correct label: S is concave


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
def test_slope_at_zero_is_minus_the_loss_gradient(shape):
    rng = np.random.default_rng(12)
    block, space, weights, scaling = setup(shape, rng, True)
    ids = np.arange(space.n_features)
    d = gain_derivatives(block, space, weights, scaling, ids, np.zeros(len(ids)))
    g = loss_grad(block, space, weights, scaling, grad_ids=ids).grad
    np.testing.assert_allclose(d.grad, -g, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(d.loglik, 0, atol=1e-12)


def test_logits_are_accurate_near_probability_one():
    S = np.array([[0.0, -40.0, -45.0], [3.0, 3.0, -800.0], [0.0, -800.0, -900.0]])
    T = multiclass_logits(S)
    # P_top = 1 / (1 + e^-40 + e^-45): logit = -log(e^-40 + e^-45)
    assert T[0, 0] == pytest.approx(-np.log(np.exp(-40.0) + np.exp(-45.0)), rel=1e-14)
    assert T[0, 1] == pytest.approx(-40 - np.log1p(np.exp(-45.0)), rel=1e-14)
    assert T[1, 0] == pytest.approx(0.0, abs=1e-12) and T[1, 1] == pytest.approx(0.0, abs=1e-12)
    assert T[1, 2] == pytest.approx(-803 - np.log(2.0), rel=1e-14)
    # the other labels' mass underflows (e^-800), the logit does not
    assert T[2, 0] == pytest.approx(800 - np.log1p(np.exp(-100.0)), rel=1e-14)
    assert T[2, 2] == pytest.approx(-900.0, rel=1e-14)
    assert multiclass_logits(np.zeros((2, 1)))[0, 0] >= 1e6  # K = 1: P = 1


def test_huge_weights_keep_the_limits_exact():
    # a rare standardized predicate has values ~100, so alpha = 30 is a score
    # change of thousands: every limit must stay exact (no logit clipping)
    rng = np.random.default_rng(23)
    block, space, weights, _ = setup(MULTICLASS, rng, False, real=False)
    scaling = Scaling(
        mean=np.full(space.n_predicates, 0.01), inv_scale=np.full(space.n_predicates, 100.0)
    )
    ids = np.arange(space.n_features)
    alphas = np.where(np.arange(len(ids)) % 2, 30.0, -30.0)
    d = gain_derivatives(block, space, weights, scaling, ids, alphas)
    expected = [
        brute_loglik_change(block, space, weights, scaling, j, a) for j, a in zip(ids, alphas)
    ]
    np.testing.assert_allclose(d.loglik, expected, rtol=1e-9)
    sk = gain_sketch(block, space, weights, scaling, ids, bin_width=0.5)
    err = np.abs(sk.derivatives(alphas).loglik - d.loglik)
    assert np.all(err <= sk.error_bound() + 1e-9 * np.abs(d.loglik))


@pytest.mark.parametrize("bias_only", [False, True])
def test_uniform_closed_form_matches_newton(bias_only):
    rng = np.random.default_rng(13)
    K = 3
    block = binary(random_multiclass(rng, m=400, P=15, K=K, density=0.15))
    # a rare predicate seen with one label only: alpha* = +inf (capped),
    # and one never seen with label 2: alpha* = -inf for (p, 2)
    X = block.X.tolil()
    y = block.y.copy()
    X[:, 0] = 0
    X[[5, 9], 0] = 1
    y[[5, 9]] = 1
    X[:, 1] = 0
    X[10:40, 1] = 1
    y[10:40] = np.where(y[10:40] == 2, 0, y[10:40])
    block = MulticlassBlock(X=X.tocsr(), y=y, c=block.c, n_labels=K)
    space = Space(MULTICLASS, block.n_predicates, K, bias=bias_only)
    bias = np.array([0.4, -0.3, 0.1]) if bias_only else None
    weights = Weights(np.zeros(0, np.int64), np.zeros(0), bias)
    pi = softmax(bias) if bias_only else None
    closed = uniform_initial_gains(feature_counts(block).counts, block.c.sum(), K, pi)
    fit = fit_gains(
        LocalBackend([block], space),
        weights,
        np.arange(space.n_features),
        method="exact",
        xtol=1e-13,
    )
    assert closed.at_cap[0 * K + 1] and closed.at_cap[1 * K + 2]
    np.testing.assert_array_equal(fit.at_cap, closed.at_cap)
    np.testing.assert_allclose(fit.gain, closed.gain, rtol=0, atol=1e-9)
    free = ~closed.at_cap
    np.testing.assert_allclose(fit.alpha[free], closed.alpha[free], rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.abs(fit.alpha[~free]), 30.0)
    # (curvature from the last pass: within sqrt(xtol) of alpha)
    np.testing.assert_allclose(fit.curvature, closed.curvature, rtol=1e-5, atol=1e-12)
    assert fit.converged.all() and closed.gain.max() > 1e-3
    # under a constant P every logit bin holds one value: the sketch is exact
    sk = fit_gains(
        LocalBackend(split_block(block, 3), space),
        weights,
        np.arange(space.n_features),
        method="sketch",
        polish=False,
        xtol=1e-13,
    )
    assert sk.passes == 1 and np.all(sk.error_bound == 0)
    np.testing.assert_allclose(sk.gain, closed.gain, rtol=0, atol=1e-9)
    np.testing.assert_allclose(sk.alpha[free], closed.alpha[free], rtol=0, atol=1e-9)


def test_feature_seen_with_one_label_is_capped_in_few_passes():
    rng = np.random.default_rng(14)
    block, space, weights, _ = setup(MULTICLASS, rng, False, real=False)
    X = block.X.tolil()
    X[:, 2] = 0
    X[[1, 4, 7, 20], 2] = 1
    y = block.y.copy()
    y[[1, 4, 7, 20]] = 0
    block = MulticlassBlock(X=X.tocsr(), y=y, c=block.c, n_labels=block.n_labels)
    backend = LocalBackend([block], space)
    j = 2 * space.n_labels + 0
    fit = fit_gains(backend, weights, np.array([j, j + 1]), method="exact", max_alpha=25.0)
    assert fit.at_cap.tolist() == [True, True]
    assert fit.alpha.tolist() == [25.0, -25.0]
    assert fit.passes <= 10 and backend.passes == fit.passes
    # the likelihood change saturates at -sum c log P(0 | x) over those events
    P = softmax(loss_grad_scores(block, space, weights), axis=1)[[1, 4, 7, 20], 0]
    assert fit.loglik_change[0] == pytest.approx(-(block.c[[1, 4, 7, 20]] @ np.log(P)), rel=1e-8)


def loss_grad_scores(block, space, weights):
    from sparkmaxent.kernels.loss import multiclass_scores

    return multiclass_scores(block, space, weights)


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
@pytest.mark.parametrize("n_parts", [2, 5, 60])  # 60: some blocks have no events
def test_split_blocks_give_the_same_sums(shape, n_parts):
    rng = np.random.default_rng(15)
    block, space, weights, scaling = setup(shape, rng, True, real=False)
    ids = np.arange(space.n_features)
    alphas = rng.normal(size=len(ids))
    one = LocalBackend([block], space)
    many = LocalBackend(split_block(block, n_parts), space)
    task = GainDerivativesTask(space, weights, scaling, ids, alphas)
    a, b = one.run(task), many.run(task)
    for f in ("loglik", "grad", "curv"):
        np.testing.assert_allclose(getattr(b, f), getattr(a, f), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(b.value_range, a.value_range)
    sk_task = GainSketchTask(space, weights, scaling, ids, 0.25)
    s1, s2 = one.run(sk_task), many.run(sk_task)
    np.testing.assert_array_equal(s1.keys, s2.keys)
    np.testing.assert_allclose(s2.sums, s1.sums, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(
        s2.derivatives(alphas).loglik, s1.derivatives(alphas).loglik, rtol=1e-9, atol=1e-9
    )
    e1 = one.run(EmpiricalExpectationTask(space, scaling))
    e2 = many.run(EmpiricalExpectationTask(space, scaling))
    np.testing.assert_allclose(e2.value, e1.value, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(e2.count, e1.count)


@pytest.mark.parametrize(
    "shape,use_scaling", [(MULTICLASS, False), (MULTICLASS, True), (CANDIDATES, True)]
)
def test_sketch_stays_within_its_error_bound(shape, use_scaling):
    rng = np.random.default_rng(16)
    block, space, weights, scaling = setup(shape, rng, use_scaling, real=False)
    ids = np.arange(space.n_features)
    sketch = gain_sketch(block, space, weights, scaling, ids, bin_width=0.5)
    assert sketch.valid.all()
    for alpha in (-3.0, -0.7, 0.4, 2.0, 8.0):
        a = np.full(len(ids), alpha)
        exact = gain_derivatives(block, space, weights, scaling, ids, a).loglik
        for order in (1, 2):
            err = np.abs(sketch.derivatives(a, order=order).loglik - exact)
            assert np.all(err <= sketch.error_bound(order) + 1e-12)
    # one candidate at several alphas in one call, as the solver asks
    j = np.array([3, 3, 3, 5])
    a = np.array([-1.0, 0.5, 2.0, 0.5])
    both = sketch.derivatives(a, j)
    for q in range(4):
        single = sketch.derivatives(a[q : q + 1], j[q : q + 1])
        assert both.loglik[q] == pytest.approx(single.loglik[0], rel=1e-12, abs=1e-14)
        assert both.curv[q] == pytest.approx(single.curv[0], rel=1e-12, abs=1e-14)
    assert len(set(np.round(both.loglik[:3], 12))) == 3
    # the bound is not vacuous, and finer bins are exact where bins hold one event
    assert sketch.error_bound(1).max() > 0
    fine = gain_sketch(block, space, weights, scaling, ids, bin_width=1e-6)
    a = np.full(len(ids), 1.3)
    np.testing.assert_allclose(
        fine.derivatives(a).loglik,
        gain_derivatives(block, space, weights, scaling, ids, a).loglik,
        rtol=1e-8,
        atol=1e-8,
    )


@pytest.mark.parametrize("spread", [3.0, 1e5])
def test_sketch_aggregation_matches_a_sort(spread):
    """The bincount path (narrow logits) and the np.unique fallback (wide)
    give the sorted unique keys and per-key sums of a plain sort."""
    rng = np.random.default_rng(0)
    n = 5000
    t = rng.normal(0.0, spread, n)
    t[rng.random(n) < 0.1] = LOGIT_CLIP  # the correct side of multiclass events
    t[rng.random(n) < 0.05] = -LOGIT_CLIP
    slot = rng.integers(0, 40, n)
    keys = _bin_keys(slot, rng.integers(0, 2, n), t, 0.25)
    c = rng.random(n)
    uk, sums = _aggregate(keys, c, t, 0.25)
    ref_k, inv = np.unique(keys, return_inverse=True)
    ref = np.stack([np.bincount(inv, w) for w in (c, c * t, c * t * t)], axis=1)
    np.testing.assert_array_equal(uk, ref_k)
    np.testing.assert_allclose(sums, ref, rtol=1e-12)
    empty_k, empty_s = _aggregate(keys[:0], c[:0], t[:0], 0.25)
    assert empty_k.shape == (0,) and empty_s.shape == (0, 3)


@pytest.mark.parametrize("prior_variance", [None, 2.0])
def test_sketch_fit_with_polish_matches_exact_newton(prior_variance):
    rng = np.random.default_rng(17)
    block, space, weights, _ = setup(MULTICLASS, rng, False, real=False)
    ids = np.arange(space.n_features)
    backend = LocalBackend(split_block(block, 3), space)
    exact = fit_gains(backend, weights, ids, method="exact", prior_variance=prior_variance)
    sk = fit_gains(
        backend, weights, ids, method="sketch", bin_width=0.25, prior_variance=prior_variance
    )
    assert sk.passes == 2 and exact.passes > 2
    ok = ~exact.at_cap
    # the maximized objective S - alpha^2 / (2 sigma^2) is second order in alpha's error
    lam = 0.0 if prior_variance is None else 1.0 / prior_variance
    obj_sk = sk.loglik_change - lam * sk.alpha**2 / 2
    obj_ex = exact.loglik_change - lam * exact.alpha**2 / 2
    np.testing.assert_allclose(obj_sk[ok], obj_ex[ok], rtol=0, atol=1e-6)
    np.testing.assert_allclose(sk.alpha[ok], exact.alpha[ok], rtol=0, atol=1e-2)
    # the polish pass reports exact values at alpha: never above the optimum
    assert np.all(obj_sk[ok] <= obj_ex[ok] + 1e-9)
    if prior_variance is not None:
        np.testing.assert_allclose(sk.log_evidence, exact.log_evidence, rtol=0, atol=1e-4)


@pytest.mark.parametrize("use_scaling", [False, True])
def test_sketch_keeps_multiclass_real_values_apart_within_its_bound(use_scaling):
    """Counts and other multi-valued multiclass features are sketched, one
    histogram per (candidate, value): within the error bound at every
    alpha, exact with fine bins, the same over any partitioning, and fitted
    in 2 passes (they used to fall back to a pass per Newton iteration,
    ~10 passes per SGC stage on bag-of-words counts)."""
    rng = np.random.default_rng(18)
    block, space, weights, scaling = setup(MULTICLASS, rng, use_scaling, real=True)
    ids = np.arange(space.n_features)
    sketch = gain_sketch(block, space, weights, scaling, ids, bin_width=0.5)
    assert sketch.valid.all()
    assert np.any(sketch.v_hi - sketch.v_lo > 0.1)  # the data are multi-valued
    for alpha in (-3.0, -0.7, 0.4, 2.0):
        a = np.full(len(ids), alpha)
        exact = gain_derivatives(block, space, weights, scaling, ids, a)
        for order in (1, 2):
            err = np.abs(sketch.derivatives(a, order=order).loglik - exact.loglik)
            assert np.all(err <= sketch.error_bound(order) + 1e-12)
    fine = gain_sketch(block, space, weights, scaling, ids, bin_width=1e-6)
    a = np.full(len(ids), 1.3)
    exact = gain_derivatives(block, space, weights, scaling, ids, a)
    got = fine.derivatives(a)
    np.testing.assert_allclose(got.loglik, exact.loglik, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(got.grad, exact.grad, rtol=1e-6, atol=1e-6)
    one = LocalBackend([block], space)
    many = LocalBackend(split_block(block, 4), space)
    task = GainSketchTask(space, weights, scaling, ids, 0.5)
    s1, s4 = one.run(task), many.run(task)
    np.testing.assert_array_equal(s1.keys, s4.keys)
    np.testing.assert_array_equal(s1.vals, s4.vals)
    np.testing.assert_allclose(s4.sums, s1.sums, rtol=1e-12, atol=1e-9)
    ex = fit_gains(one, weights, ids, scaling, method="exact")
    sk = fit_gains(many, weights, ids, scaling, method="sketch")
    assert sk.passes == 2 and ex.passes > 2
    ok = ~ex.at_cap
    np.testing.assert_allclose(sk.loglik_change[ok], ex.loglik_change[ok], rtol=0, atol=1e-6)
    assert np.all(sk.loglik_change[ok] <= ex.loglik_change[ok] + 1e-9)


def test_sketch_leaves_real_valued_candidate_set_features_to_the_exact_method():
    rng = np.random.default_rng(18)
    block, space, weights, _ = setup(CANDIDATES, rng, False, real=True)
    ids = np.arange(space.n_features)
    backend = LocalBackend([block], space)
    sketch = backend.run(GainSketchTask(space, weights, None, ids))
    multi = np.isfinite(sketch.v_lo) & (sketch.v_hi > sketch.v_lo)
    assert multi.any() and not sketch.valid[multi].any()
    exact = fit_gains(backend, weights, ids, method="exact")
    sk = fit_gains(backend, weights, ids, method="sketch")
    np.testing.assert_allclose(
        sk.loglik_change[multi], exact.loglik_change[multi], rtol=1e-12, atol=1e-12
    )


def test_bayes_mode_is_stationary_and_curvature_includes_prior():
    rng = np.random.default_rng(19)
    block, space, weights, scaling = setup(MULTICLASS, rng, True)
    ids = np.arange(space.n_features)
    var = 0.5
    fit = fit_gains(
        LocalBackend([block], space), weights, ids, scaling, method="exact", prior_variance=var
    )
    assert fit.converged.all() and not fit.at_cap.any()
    np.testing.assert_allclose(fit.grad - fit.alpha / var, 0, atol=1e-7)
    d = gain_derivatives(block, space, weights, scaling, ids, fit.alpha)
    # the curvature is from the last pass, within sqrt(xtol) of alpha
    np.testing.assert_allclose(fit.curvature, -d.curv + 1 / var, rtol=1e-4)
    np.testing.assert_allclose(fit.loglik_change, d.loglik, rtol=1e-9, atol=1e-12)
    plain = fit_gains(LocalBackend([block], space), weights, ids, scaling, method="exact")
    assert np.all(np.abs(fit.alpha) <= np.abs(plain.alpha) + 1e-9)  # the prior shrinks


def quadrature_log_evidence(block, space, weights, j, var, mu, a):
    """log int exp(S(m)) N(m; 0, var) dm by adaptive quadrature."""

    def h(m):
        d = gain_derivatives(block, space, weights, None, np.array([j]), np.array([m]))
        return d.loglik[0] - m * m / (2 * var) - 0.5 * np.log(2 * np.pi * var)

    h0, sd = h(mu), 1 / np.sqrt(a)
    val, _ = quad(lambda m: np.exp(h(m) - h0), mu - 60 * sd, mu + 60 * sd, points=[mu], limit=400)
    return h0 + np.log(val)


def test_laplace_evidence_matches_quadrature():
    rng = np.random.default_rng(20)
    K, m = 3, 300
    X = sp.csr_matrix((rng.random((m, 4)) < 0.3).astype(float))
    y = rng.integers(0, K, m)
    fires = X[:, 0].toarray().ravel() > 0
    y[fires] = np.where(rng.random(fires.sum()) < 0.6, 0, y[fires])  # an informative feature
    block = MulticlassBlock(X=X, y=y, c=np.ones(m), n_labels=K)
    space = Space(MULTICLASS, 4, K)
    weights = Weights.zeros(space)
    ids = np.arange(space.n_features)
    fit = fit_gains(LocalBackend([block], space), weights, ids, method="exact", prior_variance=1.0)
    assert fit.log_evidence.max() > 10  # (p0, 0) is strongly supported
    for j in (0, 1, 5, 7):  # (p0, 0), (p0, 1), (p1, 2), (p2, 1)
        q = quadrature_log_evidence(block, space, weights, j, 1.0, fit.alpha[j], fit.curvature[j])
        assert abs(np.expm1(fit.log_evidence[j] - q)) < 0.02, j


def test_laplace_evidence_is_loose_for_a_feature_seen_once():
    # one event, a broad prior: exp(S(mu)) rises to a plateau (-log P) and the
    # posterior is far from Gaussian
    K = 3
    block = MulticlassBlock(
        X=sp.csr_matrix(np.ones((1, 1))), y=np.array([0]), c=np.ones(1), n_labels=K
    )
    space = Space(MULTICLASS, 1, K)
    weights = Weights.zeros(space)
    errors = {}
    for var in (0.5, 100.0):
        fit = fit_gains(
            LocalBackend([block], space), weights, np.array([0]), method="exact", prior_variance=var
        )
        q = quadrature_log_evidence(block, space, weights, 0, var, fit.alpha[0], fit.curvature[0])
        errors[var] = abs(np.expm1(fit.log_evidence[0] - q))
    assert errors[0.5] < 0.01  # a narrow prior dominates: nearly Gaussian
    assert errors[100.0] > 0.10


def test_empirical_expectations_match_brute_force():
    rng = np.random.default_rng(21)
    block, space, _, scaling = setup(MULTICLASS, rng, True)
    e = EmpiricalExpectationTask(space, scaling)(block)
    Xs = (block.X.toarray() - scaling.mean) * scaling.inv_scale
    Y = np.eye(space.n_labels)[block.y] * block.c[:, None]
    np.testing.assert_allclose(e.value, (Xs.T @ Y).ravel(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(e.count, feature_counts(block).counts)
    cblock, cspace, _, _ = setup(CANDIDATES, rng, False)
    ce = EmpiricalExpectationTask(cspace)(cblock)
    F = cblock.F.toarray()
    expected = np.zeros(cspace.n_features)
    for i in range(cblock.n_events):
        a, z = cblock.event_ptr[i], cblock.event_ptr[i + 1]
        ok = cblock.correct[a:z]
        expected += cblock.c[i] * F[a:z][ok].mean(axis=0)
    np.testing.assert_allclose(ce.value, expected, rtol=1e-12, atol=1e-12)


def test_a_candidate_that_never_fires_has_no_gain_unless_centered():
    rng = np.random.default_rng(24)
    block, space, weights, _ = setup(MULTICLASS, rng, False, real=False)
    X = block.X.tolil()
    X[:, 4] = 0
    block = MulticlassBlock(X=X.tocsr(), y=block.y, c=block.c, n_labels=block.n_labels)
    ids = 4 * space.n_labels + np.arange(space.n_labels)
    d = gain_derivatives(block, space, weights, None, ids, np.full(len(ids), 2.0))
    assert d.loglik.dtype == np.float64
    np.testing.assert_array_equal(np.r_[d.loglik, d.grad, d.curv, d.value_range], 0.0)
    fit = fit_gains(LocalBackend([block], space), weights, ids, method="sketch")
    np.testing.assert_array_equal(fit.gain, 0.0)
    # centered, the feature is -mean * inv_scale on every event: a label bias
    scaling = Scaling(mean=np.full(space.n_predicates, 0.5), inv_scale=np.ones(space.n_predicates))
    d = gain_derivatives(block, space, weights, scaling, ids, np.full(len(ids), 2.0))
    expected = [brute_loglik_change(block, space, weights, scaling, j, 2.0) for j in ids]
    np.testing.assert_allclose(d.loglik, expected, rtol=1e-10)
    assert np.all(d.loglik != 0)


def test_bad_input_fails_with_a_clear_message():
    rng = np.random.default_rng(22)
    block, space, weights, _ = setup(MULTICLASS, rng, False)
    with pytest.raises(ValueError, match="candidate feature ids in"):
        gain_derivatives(block, space, weights, None, np.array([space.n_features]), np.zeros(1))
    with pytest.raises(ValueError, match="one alpha per candidate"):
        gain_derivatives(block, space, weights, None, np.array([0, 1]), np.zeros(3))
    with pytest.raises(ValueError, match="expected method in"):
        fit_gains(LocalBackend([block], space), weights, np.array([0]), method="magic")
    unseen = MulticlassBlock(
        X=block.X,
        y=np.where(np.arange(block.n_events) == 0, -1, block.y),
        c=block.c,
        n_labels=block.n_labels,
    )
    with pytest.raises(ValueError, match="label -1"):
        gain_derivatives(unseen, space, weights, None, np.array([0]), np.zeros(1))


def test_sketch_polishes_only_the_largest_gains_when_asked():
    # polish_top k: the k largest S - alpha^2 / (2 sigma^2) by the sketch get
    # the exact values of the full polish; the others keep the sketch's
    rng = np.random.default_rng(17)
    block, space, weights, _ = setup(MULTICLASS, rng, False, real=False)
    ids = np.arange(space.n_features)
    backend = LocalBackend(split_block(block, 3), space)
    fits = {
        name: fit_gains(backend, weights, ids, prior_variance=2.0, **opts)
        for name, opts in (("full", {}), ("raw", {"polish": False}), ("top", {"polish_top": 5}))
    }
    full, raw, top = fits["full"], fits["raw"], fits["top"]
    assert top.passes == 2 and raw.passes == 1 and len(ids) > 5
    h = raw.loglik_change - raw.alpha**2 / 4.0
    polished = np.zeros(len(ids), dtype=bool)
    polished[np.argsort(-h)[:5]] = True
    np.testing.assert_array_equal(top.alpha, raw.alpha)
    np.testing.assert_allclose(top.loglik_change[polished], full.loglik_change[polished])
    np.testing.assert_allclose(top.curvature[polished], full.curvature[polished])
    np.testing.assert_array_equal(top.loglik_change[~polished], raw.loglik_change[~polished])
    assert np.any(raw.loglik_change[polished] != full.loglik_change[polished])
