"""The curvature kernel against finite differences of the gradient, and the
second-order pass through the backend and Objective."""

from __future__ import annotations

import pickle
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

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
from sparkmaxent.kernels.blocks import CandidateBlock, split_block
from sparkmaxent.kernels.curvature import (
    Curvature,
    CurvatureTask,
    MulticlassHessian,
    _dense_product,
    _row_chunks,
    curvature,
    multiclass_hessian,
)
from sparkmaxent.kernels.loss import LossGrad, loss_grad_feeding, loss_grad_proba
from sparkmaxent.problem import Objective

from .helpers import random_candidates, random_multiclass


def random_scaling(rng, n):
    return Scaling(mean=rng.normal(size=n), inv_scale=rng.uniform(0.5, 2.0, size=n))


def one_correct(block: CandidateBlock) -> CandidateBlock:
    correct = np.zeros_like(block.correct)
    correct[block.event_ptr[:-1]] = True
    return CandidateBlock(F=block.F, event_ptr=block.event_ptr, correct=correct, c=block.c)


def fd_hessian(grad, theta, eps=1e-6):
    return np.array(
        [(grad(theta + eps * e) - grad(theta - eps * e)) / (2 * eps) for e in np.eye(len(theta))]
    )


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("use_scaling", [False, True])
@pytest.mark.parametrize("ids_kind", ["sorted", "shuffled, a label without features"])
def test_multiclass_hessian_matches_finite_differences(bias, use_scaling, ids_kind):
    rng = np.random.default_rng(11)
    block = random_multiclass(rng, m=60)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=bias)
    K = space.n_labels
    # predicate 0 with every label: the kernel groups features by label
    ids = np.union1d(rng.choice(space.n_features, size=17, replace=False), np.arange(K))
    if ids_kind != "sorted":
        ids = rng.permutation(ids[ids % K != 1])
    scaling = random_scaling(rng, space.n_predicates) if use_scaling else None
    n = len(ids)
    theta = rng.normal(size=n + space.n_bias) * 0.5

    def grad(th):
        lg = loss_grad(block, space, Weights(ids, th[:n], th[n:] if bias else None), scaling, ids)
        return np.concatenate([lg.grad, lg.grad_bias]) if bias else lg.grad

    H = curvature(
        block, space, Weights(ids, theta[:n], theta[n:] if bias else None), ids, scaling
    ).hess
    assert H.shape == (n + space.n_bias,) * 2
    # every entry, both triangles (a pass carries the upper one, so H is symmetric by construction)
    np.testing.assert_allclose(H, fd_hessian(grad, theta), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("size", [1, 2, 9])
def test_curvature_carries_the_upper_triangle_and_merges(size):
    rng = np.random.default_rng(14)
    halves = [rng.normal(size=(size, size)) for _ in range(2)]
    H1, H2 = (A + A.T for A in halves)
    lg = LossGrad(loss=1.0, weight=1.0, correct=0.0, grad=np.zeros(size), grad_bias=None)
    one, two = Curvature.of(lg, H1), Curvature.of(lg, H2)
    assert one.hess_upper.shape == (size * (size + 1) // 2,)
    np.testing.assert_array_equal(one.hess, H1)
    np.testing.assert_array_equal(one.merge(two).hess, H1 + H2)


@pytest.mark.parametrize("use_scaling", [False, True])
def test_candidate_hessian_is_exact_with_one_correct_candidate(use_scaling):
    rng = np.random.default_rng(12)
    block = one_correct(random_candidates(rng, m=30))
    space = Space(CANDIDATES, block.n_predicates, 1)
    ids = np.array([0, 2, 3, 5, 7, 9])
    scaling = random_scaling(rng, space.n_predicates) if use_scaling else None
    theta = rng.normal(size=len(ids))
    H = curvature(block, space, Weights(ids, theta), ids, scaling).hess
    Hfd = fd_hessian(lambda th: loss_grad(block, space, Weights(ids, th), scaling, ids).grad, theta)
    np.testing.assert_allclose(H, Hfd, rtol=1e-6, atol=1e-7)


def test_candidate_curvature_bounds_the_hessian_with_several_correct():
    """With several correct candidates the loss is not convex; the kernel's
    curvature is Cov_p, which exceeds the true Hessian Cov_p - Cov_q by a PSD
    matrix and is itself PSD."""
    rng = np.random.default_rng(13)
    block = random_candidates(rng, m=40, max_cands=6)
    assert (np.add.reduceat(block.correct.astype(int), block.event_ptr[:-1]) > 1).any()
    space = Space(CANDIDATES, block.n_predicates, 1)
    ids = np.arange(space.n_features)
    theta = rng.normal(size=len(ids))
    H = curvature(block, space, Weights(ids, theta), ids).hess
    Hfd = fd_hessian(lambda th: loss_grad(block, space, Weights(ids, th), None, ids).grad, theta)
    assert np.linalg.eigvalsh(H).min() > -1e-10
    gap = np.linalg.eigvalsh(H - (Hfd + Hfd.T) / 2)
    assert gap.min() > -1e-6 and gap.max() > 1e-3  # a real gap: the bound is not the Hessian


def test_full_gradient_pass_equals_the_gradient_test_pass():
    """A curvature pass asked for the full gradient returns exactly what the
    loss+gradient pass over all features returns (same code path)."""
    rng = np.random.default_rng(14)
    block = random_multiclass(rng, m=80)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids = np.sort(rng.choice(space.n_features, size=9, replace=False))
    w = Weights(ids, rng.normal(size=9), rng.normal(size=space.n_labels))
    cv = curvature(block, space, w, ids, None, full_gradient=True)
    lg = loss_grad(block, space, w, None, None)
    assert np.array_equal(cv.lg.grad, lg.grad) and cv.lg.loss == lg.loss


@pytest.mark.parametrize("n_parts", [1, 3])
def test_objective_evaluate_normalizes_and_adds_l2(n_parts):
    rng = np.random.default_rng(15)
    block = random_multiclass(rng, m=90)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids = np.sort(rng.choice(space.n_features, size=11, replace=False))
    backend = LocalBackend(split_block(block, n_parts), space)
    obj = Objective(backend, ids, l2=0.3)
    theta = rng.normal(size=len(ids) + space.n_bias)
    ev = obj.at(theta, full_gradient=True)
    f, g = obj(theta)
    assert ev.value == pytest.approx(f, rel=1e-12)
    np.testing.assert_allclose(ev.grad, g, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(ev.full_grad[ids], g[: len(ids)], rtol=1e-10, atol=1e-14)
    Hfd = fd_hessian(lambda th: obj(th)[1], theta)
    np.testing.assert_allclose(ev.hess, Hfd, rtol=1e-6, atol=1e-7)
    assert backend.passes == 2 + 2 * len(theta)  # one pass per evaluation
    # the task pickles (it is what a Spark pass broadcasts)
    task = pickle.loads(pickle.dumps(CurvatureTask(space, obj.weights(theta), ids)))
    assert task(block).hess.shape == ev.hess.shape


def test_curvature_pickles_its_nonzeros_and_back_exactly():
    rng = np.random.default_rng(3)
    H = rng.normal(size=(40, 40)) * (rng.random((40, 40)) < 0.2)
    H = H + H.T
    lg = LossGrad(1.5, 2.0, 1.0, rng.normal(size=38), rng.normal(size=2))
    cv = Curvature.of(lg, H)
    back = pickle.loads(pickle.dumps(cv))
    np.testing.assert_array_equal(back.hess, H)
    assert back.lg.loss == 1.5 and np.array_equal(back.lg.grad_bias, lg.grad_bias)
    # the shipped form holds the non-zeros only
    assert (
        len(cv.__getstate__()["values"]) == np.count_nonzero(cv.hess_upper) < len(cv.hess_upper) / 2
    )


@pytest.mark.parametrize("size", [1, 7, 511, 512, 513, 1100])
def test_packed_triangle_unpacks_to_the_symmetric_matrix(size):
    """Curvature.hess fills the lower triangle in tiles of 512: sizes around
    and across a tile, and a permuted packing (``order``)."""
    rng = np.random.default_rng(size)
    A = rng.normal(size=(size, size))
    A = A + A.T
    np.testing.assert_array_equal(Curvature.of(None, A).hess, A)
    order = rng.permutation(size)
    np.testing.assert_array_equal(Curvature.of(None, A, order).hess, A[np.ix_(order, order)])


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_dense_product_is_scipys_product_bit_for_bit(index, monkeypatch):
    """The symbolic-free product gives (A @ B).toarray() exactly, with either
    index type and for empty operands."""
    rng = np.random.default_rng(21)
    A = sp.random(40, 300, density=0.05, format="csr", random_state=rng)
    B = sp.random(300, 17, density=0.05, format="csc", random_state=rng)
    for M in (A, B):
        M.indptr, M.indices = M.indptr.astype(index), M.indices.astype(index)

    def raw(M):
        return M.indptr, M.indices, M.data

    got = _dense_product(raw(A), raw(B), 40, 300, 17)
    assert got.dtype == np.float64 and np.array_equal(got, (A @ B).toarray())
    empty = sp.csr_matrix((0, 300))
    assert _dense_product(raw(empty), raw(B), 0, 300, 17).shape == (0, 17)
    monkeypatch.setattr(sparsetools, "private", None)  # a scipy without the kernels
    assert np.array_equal(_dense_product(raw(A), raw(B), 40, 300, 17), got)


@pytest.mark.parametrize("use_scaling", [False, True])
def test_curvature_is_that_of_scipys_products_bit_for_bit(use_scaling, monkeypatch):
    rng = np.random.default_rng(22)
    block = random_multiclass(rng, m=300, P=40, K=5)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids = np.sort(rng.choice(space.n_features, size=60, replace=False))
    w = Weights(ids, rng.normal(size=len(ids)), rng.normal(size=space.n_labels))
    scaling = random_scaling(rng, space.n_predicates) if use_scaling else None
    got = curvature(block, space, w, ids, scaling)
    monkeypatch.setattr(sparsetools, "private", None)  # the public product
    expected = curvature(block, space, w, ids, scaling)
    assert np.array_equal(got.hess_upper, expected.hess_upper)
    assert np.count_nonzero(got.hess_upper) > len(ids)  # off-diagonal entries too


@pytest.mark.parametrize("use_scaling", [False, True])
@pytest.mark.parametrize("chunk_entries", [1, 7, 40])
def test_multiclass_hessian_by_row_chunks_equals_one_chunk(use_scaling, chunk_entries):
    # the features repeat predicates across labels (their columns expand),
    # and chunks as small as one row sum to the whole block's Hessian
    rng = np.random.default_rng(5)
    block = random_multiclass(rng, m=50)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    K = space.n_labels
    preds = rng.choice(block.n_predicates, size=4, replace=False)
    ids = rng.permutation((preds[:, None] * K + np.arange(K)[None, :]).ravel()[::2])
    scaling = random_scaling(rng, space.n_predicates) if use_scaling else None
    w = Weights(ids, rng.normal(size=len(ids)) * 0.5, rng.normal(size=K) * 0.1)
    _, P = loss_grad_proba(block, space, w, scaling, ids)
    whole, order = multiclass_hessian(block, space, P, ids, scaling, chunk_entries=10**9)
    chunked, order2 = multiclass_hessian(block, space, P, ids, scaling, chunk_entries)
    assert len(_row_chunks(block.X, np.ones(block.n_predicates, np.int64), chunk_entries)) > 2
    np.testing.assert_array_equal(order, order2)
    np.testing.assert_allclose(chunked, whole, rtol=1e-12, atol=1e-12 * np.abs(whole).max())
    assert np.abs(whole).max() > 0


@pytest.mark.parametrize("chunk_entries", [1, 3, 10, 1000])
@pytest.mark.parametrize("dense_per_row", [0, 5])
def test_row_chunks_cover_the_rows_within_the_bound(chunk_entries, dense_per_row):
    rng = np.random.default_rng(8)
    X = sp.random(40, 6, density=0.4, random_state=3, format="csr")
    repeats = rng.integers(0, 4, size=6)
    bounds = _row_chunks(X, repeats, chunk_entries, dense_per_row)
    assert bounds[0] == 0 and bounds[-1] == 40 and np.all(np.diff(bounds) > 0)
    per_row = [
        repeats[X.indices[X.indptr[i] : X.indptr[i + 1]]].sum() + dense_per_row for i in range(40)
    ]
    for a, b in zip(bounds[:-1], bounds[1:]):
        # at most the bound, plus the entries of the chunk's first row
        assert sum(per_row[a:b]) <= chunk_entries + per_row[a]
    with pytest.raises(ValueError, match="chunk_entries"):
        multiclass_hessian(
            random_multiclass(rng, m=5), Space(MULTICLASS, 5, 3), np.ones((5, 3)) / 3,
            np.array([0]), None, chunk_entries=0,
        )  # fmt: skip


def test_multiclass_hessian_temporaries_follow_the_chunk_not_the_rows():
    """Active columns with fewer entries a row than there are labels still
    leave every row a K-vector of probabilities: a chunk is bounded in rows
    too, so the pass never builds an (m, K) product of P (P itself is the
    caller's)."""
    rng = np.random.default_rng(11)
    m, K = 20000, 10
    block = random_multiclass(rng, m=m, P=30, K=K)
    space = Space(MULTICLASS, block.n_predicates, K, bias=True)
    ids = np.array([3 * K + 1, 7 * K + 4])
    w = Weights(ids, np.array([0.3, -0.2]), rng.normal(size=K) * 0.1)
    _, P = loss_grad_proba(block, space, w, None, ids)
    tracemalloc.start()
    try:
        chunked, _ = multiclass_hessian(block, space, P, ids, chunk_entries=4096)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < P.nbytes / 2  # one chunk of all the rows came close to P
    whole, _ = multiclass_hessian(block, space, P, ids, chunk_entries=10**9)
    np.testing.assert_allclose(chunked, whole, rtol=1e-12, atol=1e-12 * np.abs(whole).max())


@pytest.mark.parametrize("chunk_entries", [7, 400, 10**9])
def test_the_hessian_takes_the_rows_in_any_pieces(chunk_entries):
    """Rows handed in pieces that cut the chunks anywhere (a loss pass's row
    chunks are not the Hessian's) give the Hessian of the whole matrix at
    once, bit for bit; a Hessian asked for before every row came is refused."""
    rng = np.random.default_rng(12)
    block = random_multiclass(rng, m=300, P=20, K=6)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids = np.sort(rng.choice(space.n_features, size=15, replace=False))
    scaling = random_scaling(rng, space.n_predicates)
    w = Weights(ids, rng.normal(size=len(ids)) * 0.5, rng.normal(size=6) * 0.1)
    _, P = loss_grad_proba(block, space, w, scaling, ids)
    whole, order = multiclass_hessian(block, space, P, ids, scaling, chunk_entries)
    hessian = MulticlassHessian(block, space, ids, scaling, chunk_entries)
    cuts = np.unique(np.r_[0, rng.integers(0, 300, size=25), 300])
    for a, b in zip(cuts[:-1], cuts[1:]):
        hessian.add_rows(a, b, P[a:b])
        if b < 300:  # refused part way, and refusing leaves the sums as they were
            with pytest.raises(ValueError, match="every row"):
                hessian.result()
    pieces, order2 = hessian.result()
    np.testing.assert_array_equal(pieces, whole)
    np.testing.assert_array_equal(order, order2)


def test_a_curvature_pass_holds_no_matrix_of_probabilities():
    """The pass sums its Hessian from the loss sweep's chunks of
    probabilities as they come: with Hessian chunks of a few rows it
    allocates less than a quarter of the (m, K) matrix beyond what the same
    loss sweep allocates alone (it held the whole matrix before), and its
    result is the one of the loss pass's kept probabilities
    (loss_grad_proba, then multiclass_hessian) bit for bit."""
    rng = np.random.default_rng(13)
    m, K = 40000, 10
    block = random_multiclass(rng, m=m, P=30, K=K)
    space = Space(MULTICLASS, block.n_predicates, K, bias=True)
    ids = np.array([3 * K + 1, 7 * K + 4, 9 * K])
    w = Weights(ids, np.array([0.3, -0.2, 0.1]), rng.normal(size=K) * 0.1)

    def peak(f, *args, **kwargs):
        tracemalloc.start()
        try:
            return f(*args, **kwargs), tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def hand_out(a, b, p):  # takes the rows, keeps none
        pass

    for grad_ids in (ids, None):  # the full gradient rides on the pass, or not
        _, alone = peak(loss_grad_feeding, block, space, w, None, grad_ids, hand_out)
        full = grad_ids is None
        got, with_hessian = peak(curvature, block, space, w, ids, None, full, chunk_entries=4096)
        assert with_hessian - alone < m * K * 8 / 4
        lg, P = loss_grad_proba(block, space, w, None, grad_ids)
        want = Curvature.of(lg, *multiclass_hessian(block, space, P, ids, chunk_entries=4096))
        np.testing.assert_array_equal(got.hess_upper, want.hess_upper)
        np.testing.assert_array_equal(got.lg.grad, want.lg.grad)
        assert got.lg.loss == want.lg.loss
