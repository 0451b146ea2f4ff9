"""The column cache kept between passes (kernels/colcache.py): exact, bounded,
and never a stale entry for a changed block or active set."""

from __future__ import annotations

import pickle
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from sparkmaxent.backends import LocalBackend
from sparkmaxent.kernels import MULTICLASS, LossGradTask, Scaling, Space, Weights, colcache
from sparkmaxent.kernels.colcache import ColumnCache, gather_columns
from sparkmaxent.kernels.curvature import CurvatureTask

from .helpers import random_multiclass


def gather(cache: ColumnCache, X, preds):
    return cache.get("columns", X, (preds,), lambda: X[:, preds])


def test_a_block_unpickled_afresh_is_served_the_same_columns():
    rng = np.random.default_rng(0)
    X = random_multiclass(rng, m=50, P=10).X
    cache = ColumnCache()
    preds = np.array([1, 4, 7])
    first = gather(cache, X, preds)
    again = pickle.loads(pickle.dumps(X))  # new arrays, equal contents: a Spark pass
    assert again.indices is not X.indices
    second = gather(cache, again, preds.copy())
    assert second is first and (cache.hits, cache.misses) == (1, 1)
    np.testing.assert_array_equal(second.toarray(), X[:, preds].toarray())
    assert not second.data.flags.writeable  # no caller can change an entry ...
    with pytest.raises(ValueError, match="read-only"):
        again.data[0] += 1.0  # ... nor the block it was gathered from, in place


@pytest.mark.parametrize("change", ["value", "column", "row", "preds", "shape"])
def test_a_changed_block_or_active_set_is_never_served_a_stale_entry(change):
    rng = np.random.default_rng(1)
    X = random_multiclass(rng, m=50, P=10).X
    cache = ColumnCache()
    preds = np.array([0, 3, 5, 9])
    gather(cache, X, preds)
    Y = X.copy()
    if change == "value":  # same sparsity, one value differs
        Y.data[len(Y.data) // 2] += 1e-12
    elif change == "column":  # same values, one entry moved to another column
        row = int(np.flatnonzero(np.diff(Y.indptr) == 1)[0])
        k = Y.indptr[row]
        Y.indices[k] = next(p for p in preds if p != Y.indices[k])
    elif change == "row":  # same entries, another event split
        Y = X[::-1].tocsr()
    elif change == "preds":  # the active set changed
        preds = np.array([0, 3, 5, 8])
    else:
        Y = X[:-1].tocsr()
    got = gather(cache, Y, preds)
    assert cache.misses == 2 and cache.hits == 0
    np.testing.assert_array_equal(got.toarray(), Y[:, preds].toarray())


def test_the_cache_stays_within_its_bound_least_recently_used_first():
    rng = np.random.default_rng(2)
    blocks = [random_multiclass(rng, m=400, P=30).X for _ in range(3)]
    preds = np.arange(0, 30, 2)
    probe = ColumnCache()
    gather(probe, blocks[0], preds)
    one = probe.nbytes  # an entry: the block's arrays, the keys and the gathered columns
    cache = ColumnCache(max_bytes=int(2.5 * one))  # room for two entries, not three
    for X in blocks:
        gather(cache, X, preds)
    assert len(cache) == 2 and cache.nbytes <= cache.max_bytes
    gather(cache, blocks[2], preds)  # kept
    gather(cache, blocks[0], preds)  # evicted: built afresh
    assert (cache.hits, cache.misses) == (1, 4)
    tiny = ColumnCache(max_bytes=10)  # an entry larger than the bound is never kept
    gather(tiny, blocks[0], preds)
    assert len(tiny) == 0


def test_entries_of_one_block_hold_its_arrays_once():
    """Two kinds of matrices of one block (an active set's columns, a fetch
    pass's) hold the block's arrays once: the bytes count them once, a pass
    on a freshly unpickled copy leaves one copy held for both, and the block
    goes with its last entry."""
    rng = np.random.default_rng(6)
    X = random_multiclass(rng, m=400, P=30).X
    block_bytes = X.indptr.nbytes + X.indices.nbytes + X.data.nbytes
    a, b = np.arange(0, 30, 2), np.arange(1, 30, 3)
    cache = ColumnCache()
    first = gather(cache, X, a)
    other = cache.get("fetch", X, (b,), lambda: X[:, b])
    own = sum(m.indptr.nbytes + m.indices.nbytes + m.data.nbytes for m in (first, other))
    assert cache.nbytes == block_bytes + own + a.nbytes + b.nbytes
    again = pickle.loads(pickle.dumps(X))  # a later pass's copy
    assert gather(cache, again, a) is first
    assert (cache.hits, cache.misses) == (1, 2)
    assert all(
        held is new
        for held, new in zip(cache._blocks[0][1], (again.indptr, again.indices, again.data))
    )
    assert cache.get("fetch", again, (b,), lambda: X[:, b]) is other and cache.hits == 2
    # room for this block and its two entries: another block evicts both, and the block
    small = ColumnCache(max_bytes=block_bytes + own + a.nbytes + b.nbytes)
    gather(small, X, a)
    small.get("fetch", X, (b,), lambda: X[:, b])
    assert len(small) == 2
    Y = random_multiclass(rng, m=400, P=30).X
    gather(small, Y, a)
    assert len(small) == 1 and len(small._blocks) == 1 and small.nbytes <= small.max_bytes


def test_a_matrix_over_half_the_bound_never_evicts_the_others():
    """A matrix larger than half the bound (the curvature's columns of a
    large block) is built and not kept, even where it would fit with its
    block alone, so the active set's columns stay."""
    rng = np.random.default_rng(7)
    X = random_multiclass(rng, m=400, P=30).X
    block_bytes = X.indptr.nbytes + X.indices.nbytes + X.data.nbytes
    a, wide = np.arange(0, 30, 5), np.repeat(np.arange(30), 6)  # a matrix six times X
    big_bytes = sum(m.nbytes for m in (X[:, wide].indptr, X[:, wide].indices, X[:, wide].data))
    cache = ColumnCache(max_bytes=block_bytes + big_bytes + wide.nbytes)
    assert 2 * (big_bytes + wide.nbytes) > cache.max_bytes
    small = gather(cache, X, a)
    big = cache.get("csr", X, (wide,), lambda: X[:, wide])
    assert big.shape == (400, len(wide)) and len(cache) == 1
    assert gather(cache, X, a) is small and (cache.hits, cache.misses) == (1, 2)


@pytest.mark.parametrize("scaled", [False, True])
def test_passes_served_from_the_cache_equal_those_without_it(scaled, monkeypatch):
    """Loss, gradient and curvature passes of one active set, each pass on a
    freshly unpickled block as a Spark worker sees it, bit for bit those of
    the same passes with caching off; a new active set is not served the
    old one's columns."""
    rng = np.random.default_rng(3)
    block = random_multiclass(rng, m=300, P=40, K=5)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    scaling = (
        Scaling(rng.normal(size=space.n_predicates), rng.uniform(0.5, 2, space.n_predicates))
        if scaled
        else None
    )

    def tasks(ids):
        w = Weights(ids, rng.normal(size=len(ids)), rng.normal(size=space.n_labels))
        return [
            LossGradTask(space, w, scaling, ids),
            LossGradTask(space, w, scaling, None),
            CurvatureTask(space, w, ids, scaling),
        ]

    rounds = [np.sort(rng.choice(space.n_features, size=n, replace=False)) for n in (12, 30)]
    passes = [t for ids in rounds for t in tasks(ids) for _ in range(2)]
    data = pickle.dumps(block)

    def run_all(cache: ColumnCache) -> list[bytes]:
        for module in ("loss", "curvature"):
            monkeypatch.setattr(f"sparkmaxent.kernels.{module}.COLUMNS", cache)
        return [pickle.dumps(t(pickle.loads(data))) for t in passes]

    off = ColumnCache(max_bytes=0)
    expected = run_all(off)
    assert off.hits == 0
    cache = ColumnCache()
    got = run_all(cache)
    assert got == expected
    # the curvature gathers the loss pass's columns (the distinct predicates): one miss a round
    assert cache.hits > 0 and cache.misses == len(rounds)


def test_closing_an_in_process_backend_empties_the_cache():
    rng = np.random.default_rng(4)
    block = random_multiclass(rng)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels)
    ids = np.array([1, 6, 9])
    backend = LocalBackend([block], space)
    backend.run(LossGradTask(space, Weights(ids, np.ones(3)), None, ids))
    assert len(colcache.COLUMNS) > 0
    backend.close()
    assert len(colcache.COLUMNS) == 0


@pytest.mark.parametrize("n_cols", [12, 5000])  # a table of the columns, or binary search
@pytest.mark.parametrize("k", [0, 1, 4, 12])
@pytest.mark.parametrize("chunk_entries", [1, 7, 1 << 20])  # slices cut rows, or hold all
def test_gather_columns_gives_scipys_arrays(n_cols, k, chunk_entries):
    """``gather_columns`` equals scipy's ``X[:, preds]`` array for array
    (dtypes included), with empty rows, whichever way it finds the columns."""
    rng = np.random.default_rng(n_cols + k)
    A = rng.normal(size=(40, n_cols)) * (rng.random((40, n_cols)) < min(0.3, 60 / n_cols))
    A[5:8] = 0.0  # empty rows
    X = sp.csr_matrix(A)
    held = np.unique(X.indices)
    pool = held if len(held) >= k else np.arange(n_cols)
    preds = np.sort(rng.choice(pool, size=min(k, len(pool)), replace=False)).astype(np.int64)
    got, want = gather_columns(X, preds, chunk_entries), X[:, preds]
    assert got.shape == want.shape
    for a, b in zip((got.indptr, got.indices, got.data), (want.indptr, want.indices, want.data)):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype


def test_gather_columns_temporaries_follow_the_slice_not_the_block():
    """Beyond its result, the gather allocates a few arrays per entry of a
    slice, far less than the block's own column indices (scipy's gather
    allocates several arrays over all of the block's entries)."""
    rng = np.random.default_rng(3)
    X = sp.random(4000, 300, density=0.25, format="csr", random_state=rng)
    preds = np.arange(0, 300, 10)
    chunk = 1000
    tracemalloc.start()
    try:
        got = gather_columns(X, preds, chunk)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    result = got.data.nbytes + got.indices.nbytes + got.indptr.nbytes
    assert peak <= 2 * result + 64 * chunk + (X.shape[0] + 1) * 8 < X.indices.nbytes + result
    np.testing.assert_array_equal(got.toarray(), X[:, preds].toarray())
