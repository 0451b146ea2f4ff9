"""Keyed passes (kernels/keyed.py): one entry point, ``backend.run``, for
a plain task and for a ``Keyed`` request (the block-wise gradient test),
on the in-process backend and through every wrapping backend."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.expanded import ExpandedBackend
from sparkmaxent.backends.local import summarize_all
from sparkmaxent.backends.subset import FoldBackend
from sparkmaxent.backends.union import UnionBackend
from sparkmaxent.kernels import MULTICLASS, Space, Weights
from sparkmaxent.kernels.blocks import MulticlassBlock
from sparkmaxent.kernels.conjunctions import Conjunctions
from sparkmaxent.kernels.infold import in_fold
from sparkmaxent.kernels.keyed import Keyed, KeyedOn
from sparkmaxent.kernels.topk import GradientSummary, GradientTestTask

from .helpers import random_multiclass


def _blocks(rng, n=3, P=12, K=4) -> list[MulticlassBlock]:
    blocks = []
    for _ in range(n):
        b = random_multiclass(rng, m=40, P=P, K=K)
        X = b.X.copy()
        X.data = rng.uniform(0.1, 1.0, size=X.nnz)  # values in [0, 1], as conjunctions need
        blocks.append(dataclasses.replace(b, X=X, group=rng.integers(0, 4, size=b.n_events)))
    return blocks


def _task(space: Space, rng) -> GradientTestTask:
    ids = np.sort(rng.choice(space.n_features, size=6, replace=False)).astype(np.int64)
    weights = Weights(ids, rng.normal(size=len(ids)), rng.normal(size=space.n_labels))
    return GradientTestTask(space, weights, None, 1e-3, 1e-3, 5, 7)


def _same(a: GradientSummary, b: GradientSummary) -> None:
    for f in dataclasses.fields(GradientSummary):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "lg":
            assert (x.loss, x.weight, x.correct) == (y.loss, y.weight, y.correct)
        elif isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y, f.name


def test_a_keyed_request_runs_the_keyed_pass_in_one_counted_pass():
    rng = np.random.default_rng(3)
    blocks = _blocks(rng)
    space = Space(MULTICLASS, 12, 4, bias=True)
    task = _task(space, rng)
    backend = LocalBackend(blocks, space)
    got = backend.run(Keyed(task))
    assert backend.passes == 1
    merged = task.partial(blocks[0]).merge(task.partial(blocks[1])).merge(task.partial(blocks[2]))
    _same(got, summarize_all(task, merged, merged.weight))
    assert task.result_weight(got) == merged.weight == task.partial_weight(merged)


@pytest.mark.parametrize("inside", [True, False])
def test_a_fold_backend_runs_a_keyed_pass_on_the_folds_events(inside):
    rng = np.random.default_rng(4)
    blocks = _blocks(rng)
    space = Space(MULTICLASS, 12, 4, bias=True)
    task = _task(space, rng)
    groups = np.array([0, 2])
    base = LocalBackend(blocks, space)
    got = FoldBackend(base, groups, inside).run(Keyed(task))
    want = LocalBackend([in_fold(b, groups, inside) for b in blocks], space).run(Keyed(task))
    _same(got, want)
    assert base.passes == 1


@pytest.mark.parametrize("cache", [False, True])
def test_an_expanded_backend_runs_a_keyed_pass_on_the_widened_events(cache):
    rng = np.random.default_rng(5)
    blocks = _blocks(rng)
    conj = Conjunctions.from_tuples(12, [(0, 1), (2, 5), (1, 3, 7)])
    base = LocalBackend(blocks, Space(MULTICLASS, 12, 4, bias=True))
    expanded = ExpandedBackend(base, conj, cache=cache)
    task = _task(expanded.space, rng)
    got = expanded.run(Keyed(task))
    want = LocalBackend([conj.expand(b) for b in blocks], expanded.space).run(Keyed(task))
    _same(got, want)
    assert base.passes == 1


def test_a_wrapped_keyed_request_pickles_for_the_executors():
    rng = np.random.default_rng(6)
    blocks = _blocks(rng, n=1)
    space = Space(MULTICLASS, 12, 4, bias=True)
    conj = Conjunctions.from_tuples(12, [(0, 1)])
    for wrapper in (FoldBackend(LocalBackend(blocks, space), np.array([1]), True),
                    ExpandedBackend(LocalBackend(blocks, space), conj)):  # fmt: skip
        task = _task(wrapper.space, rng)
        request = KeyedOn(task, wrapper.change())
        copy = pickle.loads(pickle.dumps(request))
        a, b = request.partial(blocks[0]), copy.partial(blocks[0])
        np.testing.assert_array_equal(a.grad, b.grad)
        assert copy.n_keys == task.n_keys == task.n_blocks + 1


def test_a_union_of_backends_refuses_a_keyed_pass():
    rng = np.random.default_rng(7)
    space = Space(MULTICLASS, 12, 4, bias=True)
    union = UnionBackend(LocalBackend(_blocks(rng, 1), space), LocalBackend(_blocks(rng, 1), space))
    with pytest.raises(NotImplementedError, match="dense test"):
        union.run(Keyed(_task(space, rng)))
