"""The operator store an executor's Python workers share
(``backends/opstore.py``, ``kernels/pointcache.py``'s ``store``): a second
worker (another cache, another process) is served the operator the first
built, bit for bit and without building; a half-written entry is never
read; the store stays within its bound and keeps one point per block."""

from __future__ import annotations

import multiprocessing
import os
import pickle

import numpy as np
import pytest

from sparkmaxent.backends import opstore
from sparkmaxent.backends.opstore import OperatorStore
from sparkmaxent.kernels import MULTICLASS, Space, Weights
from sparkmaxent.kernels.direction import hessian_operator
from sparkmaxent.kernels.operator import (
    CandidateOperator,
    MulticlassOperator,
    build_operator,
    operator_from_parts,
)
from sparkmaxent.kernels.pointcache import PointCache

from .helpers import random_block, random_multiclass
from .test_curvature import random_scaling


def _point(rng, space, n=12, scaling=False):
    ids = np.sort(rng.choice(space.n_features, size=min(n, space.n_features), replace=False))
    theta = rng.normal(size=len(ids) + space.n_bias) * 0.5
    weights = Weights(ids, theta[: len(ids)], theta[len(ids) :] if space.bias else None)
    return ids, weights, random_scaling(rng, space.n_predicates) if scaling else None


def _lookup(cache, block, space, weights, ids, scaling, built):
    """A product pass's lookup, as ``direction.point_operator`` makes it."""
    keys = (space, ids, weights.ids, weights.values, weights.bias)

    def build(sink=None):
        built.append(1)
        return build_operator(block, space, weights, ids, scaling, sink)

    return cache.get(block, keys, build, operator_from_parts)


def _worker_product(directory, block, space, weights, ids, scaling, v):
    """In another process: the product of the operator the store holds
    (a build there fails the test)."""
    cache = PointCache(store=OperatorStore(directory))

    def refuse(sink=None):
        raise AssertionError("the second process built the operator")

    keys = (space, ids, weights.ids, weights.values, weights.bias)
    op = cache.get(block, keys, refuse, operator_from_parts)
    return op(v).tobytes(), op.diag.tobytes(), cache.shared


@pytest.mark.parametrize("shape", ["multiclass", "candidates"])
@pytest.mark.parametrize("use_scaling", [False, True])
def test_a_second_worker_is_served_the_first_ones_operator_bit_for_bit(
    tmp_path, shape, use_scaling
):
    rng = np.random.default_rng(4)
    block, space = random_block(rng, shape)
    ids, weights, scaling = _point(rng, space, scaling=use_scaling)
    v = rng.normal(size=len(ids) + space.n_bias)
    store = OperatorStore(str(tmp_path))
    first, second = PointCache(store=store), PointCache(store=OperatorStore(str(tmp_path)))
    built: list[int] = []
    a = _lookup(first, block, space, weights, ids, scaling, built)
    b = _lookup(second, pickle.loads(pickle.dumps(block)), space, weights, ids, scaling, built)
    assert built == [1] and (first.misses, second.misses, second.shared) == (1, 0, 1)
    assert isinstance(b, MulticlassOperator if shape == "multiclass" else CandidateOperator)
    _, fresh, fresh_diag = hessian_operator(block, space, weights, ids, scaling)
    assert np.array_equal(b(v), fresh(v)) and np.array_equal(a(v), b(v))
    assert np.array_equal(b.diag, fresh_diag) and b.weight == fresh.weight
    assert not b.diag.flags.writeable  # a mapped read-only file: no worker changes it
    # the same lookup again: the second worker's own entry
    assert _lookup(second, block, space, weights, ids, scaling, built) is b
    assert second.hits == 1 and built == [1]
    # a moved point is another name: built afresh, and its block's old point dropped
    moved = Weights(ids, weights.values + 0.25, weights.bias)
    c = _lookup(second, block, space, moved, ids, scaling, built)
    assert built == [1, 1] and len(store) == 1
    assert np.array_equal(c(v), hessian_operator(block, space, moved, ids, scaling)[1](v))
    assert not np.array_equal(c(v), b(v))


def test_another_process_maps_the_operator_exactly(tmp_path):
    rng = np.random.default_rng(5)
    block = random_multiclass(rng, m=300, P=20, K=4)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids, weights, scaling = _point(rng, space, scaling=True)
    v = rng.normal(size=len(ids) + space.n_bias)
    own: list[int] = []
    op = _lookup(PointCache(store=OperatorStore(str(tmp_path))), block, space, weights, ids,
                 scaling, own)  # fmt: skip
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        args = (str(tmp_path), block, space, weights, ids, scaling, v)
        product, diag, shared = pool.apply(_worker_product, args)
    assert shared == 1 and own == [1]
    assert product == op(v).tobytes() and diag == op.diag.tobytes()


def _crash_mid_write(directory, parts):
    """A worker that dies halfway through writing its entry."""

    def die(out, a):
        half = a.size // 2
        out.reshape(-1)[:half] = a.reshape(-1)[:half]
        os._exit(3)

    opstore._write_array = die
    OperatorStore(directory).put("blk-point", "blk", parts)


def test_a_worker_dying_mid_write_leaves_no_entry_anyone_reads(tmp_path):
    rng = np.random.default_rng(6)
    block = random_multiclass(rng, m=200, P=15, K=3)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids, weights, _ = _point(rng, space)
    parts = build_operator(block, space, weights, ids, None).parts()
    child = multiprocessing.get_context("fork").Process(
        target=_crash_mid_write, args=(str(tmp_path), parts)
    )
    child.start()
    child.join()
    assert child.exitcode == 3
    left = os.listdir(tmp_path)
    assert len(left) == 1 and left[0].endswith(".tmp")  # its half-written file, never renamed
    store = OperatorStore(str(tmp_path))
    assert store.fetch("blk-point") is None and len(store) == 0
    # the next put clears the dead writer's file and stores a whole entry
    stored = store.put("blk-point", "blk", parts)
    assert stored is not None and os.listdir(tmp_path) == ["blk-point.op"]
    op = operator_from_parts(*stored)
    v = rng.normal(size=len(ids) + space.n_bias)
    assert np.array_equal(op(v), build_operator(block, space, weights, ids, None)(v))
    # a file cut short under the final name (not whole) is never read either
    path = tmp_path / "blk-point.op"
    path.write_bytes(path.read_bytes()[:-8])
    assert store.fetch("blk-point") is None


def test_the_store_stays_within_its_bound_least_recently_used_first(tmp_path):
    arrays = {"a": np.zeros(1000)}  # 8,000 bytes and a header
    # three such entries, and room for a fourth's header before it is written
    store = OperatorStore(str(tmp_path), max_bytes=3 * 8400 + opstore.HEADER_ROOM)
    for k in range(3):
        assert store.put(f"b{k}-p", f"b{k}", ({"kind": "x"}, arrays)) is not None
    os.utime(tmp_path / "b0-p.op", (1, 1))
    os.utime(tmp_path / "b1-p.op", (2, 2))
    assert store.fetch("b0-p") is not None  # marks b0 used: b1 is now the oldest
    store.put("b3-p", "b3", ({"kind": "x"}, arrays))
    names = sorted(os.listdir(tmp_path))
    assert names == ["b0-p.op", "b2-p.op", "b3-p.op"]
    total = sum(os.path.getsize(tmp_path / n) for n in names)
    assert total <= store.max_bytes
    # larger than half the bound: not kept, and the cache still hands back the built value
    assert store.put("big-p", "big", ({"kind": "x"}, {"a": np.zeros(2000)})) is None
    assert "big-p.op" not in os.listdir(tmp_path)


def test_a_store_that_cannot_write_leaves_the_operator_in_memory(tmp_path, monkeypatch):
    """A full disk (or a directory gone) never fails a pass: the build's
    own arrays serve it, nothing half-made is left, and a lookup afterwards
    builds again rather than reading anything."""
    rng = np.random.default_rng(7)
    block = random_multiclass(rng, m=200, P=15, K=3)
    space = Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    ids, weights, _ = _point(rng, space)
    v = rng.normal(size=len(ids) + space.n_bias)

    def full(fd, offset, size):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    cache, built = PointCache(store=OperatorStore(str(tmp_path))), []
    op = _lookup(cache, block, space, weights, ids, None, built)
    assert built == [1] and os.listdir(tmp_path) == []
    assert np.array_equal(op(v), build_operator(block, space, weights, ids, None)(v))
    # the directory replaced by a file: fetches find nothing, builds stay in memory
    monkeypatch.undo()
    gone = tmp_path / "gone"
    other = PointCache(store=OperatorStore(str(gone)))
    gone.rmdir()
    gone.write_text("not a directory")
    again = _lookup(other, block, space, weights, ids, None, built)
    assert built == [1, 1] and np.array_equal(again(v), op(v))
