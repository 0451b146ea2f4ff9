"""Kernels against finite differences and against brute-force per-event sums."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.special import logsumexp

from sparkmaxent.backends import LocalBackend
from sparkmaxent.kernels import (
    CANDIDATES,
    MULTICLASS,
    Scaling,
    Space,
    Weights,
    loss_grad,
    sparsetools,
)
from sparkmaxent.kernels.blocks import concat_blocks, split_block
from sparkmaxent.kernels.loss import ray_losses
from sparkmaxent.kernels.stats import moments
from sparkmaxent.problem import Objective

from .helpers import random_block, random_candidates, random_multiclass


def brute_multiclass_loss(block, W, b, scaling):
    X = block.X.toarray()
    if scaling is not None:
        X = (X - scaling.mean) * scaling.inv_scale
    total = 0.0
    for i in range(block.n_events):
        s = X[i] @ W + (b if b is not None else 0.0)
        total += block.c[i] * (logsumexp(s) - s[block.y[i]])
    return total


def brute_candidate_loss(block, w, scaling):
    F = block.F.toarray()
    if scaling is not None:
        F = (F - scaling.mean) * scaling.inv_scale
    total = 0.0
    for i in range(block.n_events):
        a, z = block.event_ptr[i], block.event_ptr[i + 1]
        s = F[a:z] @ w
        total += block.c[i] * (logsumexp(s) - logsumexp(s[block.correct[a:z]]))
    return total


def random_scaling(rng, n):
    return Scaling(mean=rng.normal(size=n), inv_scale=rng.uniform(0.5, 2.0, size=n))


@pytest.mark.parametrize("use_scaling", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_multiclass_loss_matches_brute_force(use_scaling, bias):
    rng = np.random.default_rng(1)
    block = random_multiclass(rng)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=bias)
    theta = rng.normal(size=space.n_params)
    weights = Weights.from_dense(space, theta, sparse=False)
    scaling = random_scaling(rng, space.n_predicates) if use_scaling else None
    lg = loss_grad(block, space, weights, scaling)
    W = theta[: space.n_features].reshape(space.n_predicates, space.n_labels)
    expected = brute_multiclass_loss(block, W, weights.bias, scaling)
    assert lg.loss == pytest.approx(expected, rel=1e-12)
    assert lg.weight == pytest.approx(block.c.sum())


@pytest.mark.parametrize("use_scaling", [False, True])
def test_candidate_loss_matches_brute_force(use_scaling):
    rng = np.random.default_rng(2)
    block = random_candidates(rng)
    space = Space(CANDIDATES, block.n_predicates, 1)
    w = rng.normal(size=space.n_features)
    scaling = random_scaling(rng, space.n_predicates) if use_scaling else None
    lg = loss_grad(block, space, Weights(None, w), scaling)
    assert lg.loss == pytest.approx(brute_candidate_loss(block, w, scaling), rel=1e-12)


def finite_difference(f, theta, eps=1e-6):
    g = np.zeros_like(theta)
    for j in range(len(theta)):
        e = np.zeros_like(theta)
        e[j] = eps
        g[j] = (f(theta + e)[0] - f(theta - e)[0]) / (2 * eps)
    return g


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
@pytest.mark.parametrize("use_scaling", [False, True])
@pytest.mark.parametrize("l2", [0.0, 0.3])
def test_gradient_matches_finite_differences(shape, use_scaling, l2):
    rng = np.random.default_rng(3)
    block, space = random_block(rng, shape)
    scaling = random_scaling(rng, space.n_predicates) if use_scaling else None
    obj = Objective(LocalBackend([block], space), None, l2=l2, scaling=scaling)
    theta = rng.normal(size=space.n_params) * 0.5
    _, g = obj(theta)
    np.testing.assert_allclose(g, finite_difference(obj, theta), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
def test_active_set_gradient_is_the_full_gradient_restricted(shape):
    rng = np.random.default_rng(4)
    block, space = random_block(rng, shape)
    ids = np.sort(rng.choice(space.n_features, size=space.n_features // 3, replace=False))
    values = rng.normal(size=len(ids))
    bias = rng.normal(size=space.n_labels) if space.bias else None
    scaling = random_scaling(rng, space.n_predicates)
    sparse = loss_grad(block, space, Weights(ids, values, bias), scaling, grad_ids=ids)
    theta = np.zeros(space.n_features)
    theta[ids] = values
    full = loss_grad(block, space, Weights(None, theta, bias), scaling)
    assert sparse.loss == pytest.approx(full.loss, rel=1e-12)
    np.testing.assert_allclose(sparse.grad, full.grad[ids], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
@pytest.mark.parametrize("n_parts", [1, 2, 3, 7])
def test_blocks_split_any_way_give_the_same_sums(shape, n_parts):
    rng = np.random.default_rng(5)
    block = random_multiclass(rng) if shape == MULTICLASS else random_candidates(rng)
    space = (
        Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
        if shape == MULTICLASS
        else Space(CANDIDATES, block.n_predicates, 1)
    )
    theta = rng.normal(size=space.n_params)
    obj1 = Objective(LocalBackend([block], space), None, l2=0.1)
    objn = Objective(LocalBackend(split_block(block, n_parts), space), None, l2=0.1)
    f1, g1 = obj1(theta)
    fn, gn = objn(theta)
    assert fn == pytest.approx(f1, rel=1e-12)
    np.testing.assert_allclose(gn, g1, rtol=1e-10, atol=1e-14)
    again = concat_blocks(split_block(block, n_parts))
    assert (again.c == block.c).all()


def test_moments_give_zero_mean_unit_variance():
    rng = np.random.default_rng(6)
    block = random_multiclass(rng, m=200)
    sc = moments(block).scaling()
    Xs = (block.X.toarray() - sc.mean) * sc.inv_scale
    w = block.c / block.c.sum()
    np.testing.assert_allclose(w @ Xs, 0, atol=1e-12)
    np.testing.assert_allclose(w @ Xs**2, 1, rtol=1e-10)


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
@pytest.mark.parametrize("l2", [0.0, 0.3])
def test_ray_pass_gives_the_objective_at_every_step(shape, l2):
    """One ray pass (a line search's trial steps at once) equals a separate
    pass at each point theta + t d, over two blocks, with scaling."""
    rng = np.random.default_rng(7)
    block, space = random_block(rng, shape)
    ids = np.sort(rng.choice(space.n_features, size=space.n_features // 3, replace=False))
    backend = LocalBackend(split_block(block, 2), space)
    obj = Objective(backend, ids, l2=l2, scaling=random_scaling(rng, space.n_predicates))
    theta = rng.normal(size=len(ids) + space.n_bias)
    d = rng.normal(size=len(theta))
    steps = np.array([1.0, 0.5, 0.25, 1e-3, 0.0])
    before = backend.passes
    along = obj.ray(theta, d, steps)
    assert backend.passes == before + 1
    np.testing.assert_allclose(along, [obj(theta + t * d)[0] for t in steps], rtol=1e-12)


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("chunk_entries", [1, 9, 10**9])
def test_ray_losses_by_row_chunks_are_the_losses_at_each_step(dense, chunk_entries):
    """The multiclass ray kernel over row chunks (one row each at the
    smallest) gives the loss sums a loss pass gives at each point, for
    sparse weights (their gathered columns) and dense ones."""
    rng = np.random.default_rng(12)
    block = random_multiclass(rng, m=40, P=10, K=4)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    scaling = random_scaling(rng, space.n_predicates)
    ids = None if dense else np.sort(rng.choice(space.n_features, size=15, replace=False))
    n = space.n_features if dense else len(ids)
    w = Weights(ids, rng.normal(size=n), rng.normal(size=space.n_labels))
    d = Weights(ids, rng.normal(size=n), rng.normal(size=space.n_labels))
    steps = np.array([1.0, 0.5, 1e-3, 0.0])
    got = ray_losses(block, space, w, d, steps, scaling, chunk_entries=chunk_entries)
    at = [Weights(ids, w.values + t * d.values, w.bias + t * d.bias) for t in steps]
    want = [loss_grad(block, space, p, scaling, np.arange(3)).loss for p in at]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(ValueError, match="chunk_entries"):
        ray_losses(block, space, w, d, steps, scaling, chunk_entries=0)


@pytest.mark.parametrize("bias", [False, True])
def test_full_gradient_at_sparse_weights_is_the_dense_one(bias):
    """The full-gradient pass at sparse weights scores with the gathered
    predicate columns; the dense weights' pass multiplies all of them."""
    rng = np.random.default_rng(11)
    block = random_multiclass(rng, m=60, P=20, K=5)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=bias)
    ids = np.sort(rng.choice(space.n_features, size=17, replace=False))
    values = rng.normal(size=len(ids))
    b = rng.normal(size=space.n_labels) if bias else None
    scaling = random_scaling(rng, space.n_predicates)
    sparse = loss_grad(block, space, Weights(ids, values, b), scaling)
    theta = np.zeros(space.n_features)
    theta[ids] = values
    dense = loss_grad(block, space, Weights(None, theta, b), scaling)
    assert sparse.loss == pytest.approx(dense.loss, rel=1e-12)
    assert sparse.correct == dense.correct
    np.testing.assert_allclose(sparse.grad, dense.grad, rtol=1e-12, atol=1e-12)


def test_correct_count_breaks_ties_to_the_first_label_as_argmax():
    """Events count as correct when their label is the first top-scoring
    one: at w = 0 (every label tied) those of label 0 only; with ties
    between some labels, as ``argmax`` decides."""
    rng = np.random.default_rng(12)
    block = random_multiclass(rng, m=200, P=6, K=4)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    zero = Weights(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(space.n_labels))
    assert loss_grad(block, space, zero).correct == pytest.approx(block.c[block.y == 0].sum())
    # labels 1 and 2 share every weight and the bias: tied on every event
    W = rng.normal(size=(space.n_predicates, space.n_labels))
    W[:, 2] = W[:, 1]
    bias = np.array([0.0, 0.5, 0.5, -0.2])
    weights = Weights(None, W.ravel(), bias)
    S = block.X @ W + bias
    expected = block.c @ (S.argmax(axis=1) == block.y)
    assert np.any(block.y == 2) and np.any(S.argmax(axis=1) == 1)
    assert loss_grad(block, space, weights).correct == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("shape", [MULTICLASS, CANDIDATES])
def test_concat_blocks_keeps_event_ids_and_groups(shape):
    """Chunk F1 rebuilds sentences from group / event_id: stacking blocks
    must carry them along (and drop them only when a block lacks them)."""
    rng = np.random.default_rng(11)
    make = random_multiclass if shape == MULTICLASS else random_candidates
    blocks = []
    for k in range(3):
        b = make(rng)
        m = b.n_events
        blocks.append(
            dataclasses.replace(
                b, event_id=np.arange(m, dtype=np.int64) + 100 * k, group=np.full(m, k, np.int64)
            )
        )
    both = concat_blocks(blocks)
    np.testing.assert_array_equal(both.event_id, np.concatenate([b.event_id for b in blocks]))
    np.testing.assert_array_equal(both.group, np.concatenate([b.group for b in blocks]))
    assert both.n_events == sum(b.n_events for b in blocks)
    partial = concat_blocks([blocks[0], dataclasses.replace(blocks[1], group=None)])
    assert partial.group is None
    np.testing.assert_array_equal(
        partial.event_id, np.concatenate([blocks[0].event_id, blocks[1].event_id])
    )


@pytest.mark.parametrize("weights_kind", ["sparse", "dense"])
@pytest.mark.parametrize("grad", ["active", "all"])
@pytest.mark.parametrize("scaled", [False, True])
def test_the_row_chunked_kernel_is_the_whole_block_kernel_bit_for_bit(
    weights_kind, grad, scaled, monkeypatch
):
    """The loss kernel over row chunks (scipy's own product kernels, a few
    rows at a time) gives the same sums, bit for bit, as the public products
    over the whole block, probabilities included; except the bias sums,
    which add chunk by chunk (equal to rounding), and through them the
    centered gradient of a scaled pass."""
    from sparkmaxent.kernels import loss as loss_module

    rng = np.random.default_rng(5)
    block = random_multiclass(rng, m=301, P=30, K=5)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids = np.sort(rng.choice(space.n_features, size=40, replace=False))
    values = rng.normal(size=len(ids))
    weights = Weights(ids, values, rng.normal(size=5))
    if weights_kind == "dense":
        theta = np.zeros(space.n_features)
        theta[ids] = values
        weights = Weights(None, theta, weights.bias)
    scaling = random_scaling(rng, space.n_predicates) if scaled else None
    grad_ids = ids if grad == "active" else None

    def run(**chunks):
        return loss_module.loss_grad_proba(block, space, weights, scaling, grad_ids, **chunks)

    chunked, p_chunked = run(chunk_entries=7 * 5)  # 7 rows a chunk: 43 chunks
    monkeypatch.setattr(sparsetools, "private", None)  # the public products, whole block
    whole, p_whole = run()
    for a, b in [
        (p_chunked, p_whole),
        (np.array([chunked.loss, chunked.correct]), np.array([whole.loss, whole.correct])),
    ]:
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(chunked.grad_bias, whole.grad_bias, rtol=1e-13, atol=1e-13)
    if scaled:
        np.testing.assert_allclose(chunked.grad, whole.grad, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_array_equal(chunked.grad, whole.grad)


@pytest.mark.parametrize("scaled", [False, True])
@pytest.mark.parametrize("rows_per_chunk", [8, 1000])
@pytest.mark.parametrize("grad_subset", [False, True])
def test_the_active_set_sweep_keeps_no_residual_matrix_and_gives_the_same_sums(
    scaled, rows_per_chunk, grad_subset, monkeypatch
):
    """An active-set pass (sparse weights, the gradient over their own
    gathered columns, no probabilities) runs ``_active_sweep``, never the
    general ``_sweep``, and gives the general sweep's loss, correct count
    and gradient sums (the whole block through the public products): bit
    for bit without centering, to rounding with it (the bias sums enter the
    centered gradient, and they add chunk by chunk)."""
    from sparkmaxent.kernels import loss as loss_module

    rng = np.random.default_rng(11)
    block = random_multiclass(rng, m=301, P=30, K=5)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids = np.sort(rng.choice(space.n_features, size=40, replace=False))
    weights = Weights(ids, rng.normal(size=len(ids)), rng.normal(size=5))
    scaling = random_scaling(rng, space.n_predicates) if scaled else None
    # the gradient over all weights, or at a few of them (in another order)
    grad_ids = ids[::-3] if grad_subset else ids
    general = loss_module._sweep

    def refuse(*args, **kwargs):
        raise AssertionError("the active-set pass ran the general sweep")

    monkeypatch.setattr(loss_module, "_sweep", refuse)
    # 301 rows: a remainder
    got = loss_grad(block, space, weights, scaling, grad_ids, chunk_entries=rows_per_chunk * 5)
    monkeypatch.setattr(loss_module, "_sweep", general)
    monkeypatch.setattr(sparsetools, "private", None)  # the public products, whole block
    want = loss_grad(block, space, weights, scaling, grad_ids)
    assert (got.loss, got.weight, got.correct) == (want.loss, want.weight, want.correct)
    np.testing.assert_allclose(got.grad_bias, want.grad_bias, rtol=1e-13, atol=1e-13)
    if scaled:
        np.testing.assert_allclose(got.grad, want.grad, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_array_equal(got.grad, want.grad)
    assert len(got.grad) == len(grad_ids)


@pytest.mark.parametrize("hand_out_proba", [False, True])
def test_the_general_sweep_holds_no_residual_matrix_and_its_bias_sums_are_the_active_sweeps(
    hand_out_proba,
):
    """The general sweep (a full-gradient pass) scores, turns into residuals
    and sums each row chunk in one chunk-sized buffer: its allocations stay
    under half the (m, K) residual matrix, also when it hands out the
    probabilities (each chunk's, in row order, to a taker that keeps none
    of them); its gradient sums are the whole block's product bit for bit,
    its bias sums the whole columns' to rounding and the active-set sweep's
    (the same chunks) bit for bit, the same on every call."""
    import tracemalloc

    from sparkmaxent.kernels.softmax import row_softmax
    from sparkmaxent.kernels.sweep import _active_sweep, _residual_rows, _sweep

    rng = np.random.default_rng(5)
    block = random_multiclass(rng, m=20000, P=30, K=10)
    X, y, c, (m, K) = block.X.tocsr(), block.y, block.c, (block.n_events, block.n_labels)
    W, bias = rng.normal(size=(X.shape[1], K)) * 0.3, rng.normal(size=K)
    handed: list[tuple[int, int, float]] = []

    def take(a, b, p):  # keeps a checksum of the rows, not the rows
        handed.append((a, b, float(p @ np.arange(1.0, K + 1) @ np.arange(1.0, b - a + 1))))

    taker = take if hand_out_proba else None
    tracemalloc.start()
    r_sum, G, gold, top, lse = _sweep(X, W, bias, None, None, X, y, c, taker, 4096)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < m * K * 8 / 2
    R = X @ W + bias  # the whole block at once: scores, then residuals in place
    P = row_softmax(R)[1]
    if hand_out_proba:
        assert handed[0][0] == 0 and handed[-1][1] == m and len(handed) > 1
        assert all(prev[1] == nxt[0] for prev, nxt in zip(handed, handed[1:]))
        for a, b, checksum in handed:
            want = float(P[a:b] @ np.arange(1.0, K + 1) @ np.arange(1.0, b - a + 1))
            assert checksum == pytest.approx(want, rel=1e-13)
    want_gold, want_top, want_lse, _ = _residual_rows(R, y, c, False)
    np.testing.assert_array_equal(G, X.T @ R)
    np.testing.assert_allclose(r_sum, R.sum(axis=0), rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(np.c_[gold, top, lse], np.c_[want_gold, want_top, want_lse])
    active = _active_sweep(X, W, bias, None, None, y, c, 4096)
    np.testing.assert_array_equal(active[1], r_sum)
    again = _sweep(X, W, bias, None, None, X, y, c, taker, 4096)
    np.testing.assert_array_equal(again[0], r_sum)


def test_scipys_own_kernels_are_its_public_products_and_refused_when_missing(monkeypatch):
    """kernels/sparsetools.py, the one caller of scipy's private kernels:
    each product is scipy's public one bit for bit; without the module
    (another scipy) a call is refused and the kernels take the public
    products (the fallback tests above and in test_curvature.py)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(5)
    A = sp.random(30, 20, density=0.2, format="csr", random_state=rng)
    x, z = rng.normal(size=(20, 3)), rng.normal(size=(30, 3))
    y, t = np.zeros((30, 3)), np.zeros((20, 3))
    sparsetools.csr_matvecs(30, 20, 3, A.indptr, A.indices, A.data, x.reshape(-1), y.reshape(-1))
    # A's CSR arrays are the CSC arrays of A^T
    sparsetools.csc_matvecs(20, 30, 3, A.indptr, A.indices, A.data, z.reshape(-1), t.reshape(-1))
    assert sparsetools.available()
    assert np.array_equal(y, A @ x) and np.array_equal(t, A.T @ z)
    monkeypatch.setattr(sparsetools, "private", None)
    assert not sparsetools.available()
    with pytest.raises(RuntimeError, match="check available"):
        sparsetools.csr_matvecs(30, 20, 3, A.indptr, A.indices, A.data, x.ravel(), y.ravel())


@pytest.mark.parametrize("chunk_entries", [1, 7, 15, 10**9])
@pytest.mark.parametrize("scaled", [False, True])
def test_scored_chunks_cover_the_rows_once_in_order_with_their_scores(chunk_entries, scaled):
    """The row chunks the sweeps and the probabilities share
    (``sweep.scored_chunks``): consecutive, each of chunk_entries // K rows
    (at least one, the last what is left), every row once, each chunk's
    scores the whole block's rows (in one reused buffer, or in ``out``)."""
    import scipy.sparse as sp

    from sparkmaxent.kernels.sweep import _linear_scores, scored_chunks

    rng = np.random.default_rng(5)
    m, n, K = 23, 9, 4
    X = sp.random(m, n, density=0.3, format="csr", random_state=6, dtype=np.float64)
    W, bias = rng.normal(size=(n, K)), rng.normal(size=K)
    mean, inv = (rng.normal(size=n), 1 + rng.random(n)) if scaled else (None, None)
    whole = _linear_scores(X, W, bias, mean, inv)
    step = max(1, chunk_entries // K)
    seen = []
    for a, b, S in scored_chunks(X, W, bias, mean, inv, chunk_entries):
        np.testing.assert_allclose(S, whole[a:b], rtol=1e-12, atol=1e-12)
        seen.append((a, b))
    assert seen == [(a, min(m, a + step)) for a in range(0, m, step)]
    out = np.full((m, K), np.nan)
    for a, b, S in scored_chunks(X, W, bias, mean, inv, chunk_entries, out=out):
        assert np.shares_memory(S, out[a:b]) and S.shape == (b - a, K)
    np.testing.assert_allclose(out, whole, rtol=1e-12, atol=1e-12)
