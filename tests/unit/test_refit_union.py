"""The refit's union of training and held-out events in process
(backends/union.py ``union_of``): the held-out events shared out among the
training blocks, one pass counter (the training part's), and a path refit
that reaches the optimum of the two parts' union in fewer passes."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.union import InProcessUnion, UnionBackend, union_of
from sparkmaxent.choice.sections import PathRefit
from sparkmaxent.config import train_config
from sparkmaxent.kernels import Weights
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.kernels.loss import LossGradTask
from sparkmaxent.train import train

from . import test_choice

problem = test_choice.problem  # the planted problem's fixture


class Distributed(LocalBackend):
    """An in-process backend taken for a distributed one (``union_of``
    keeps two parts apart for any backend but the plain in-process one)."""


def test_held_out_events_are_shared_out_among_the_training_blocks(problem):
    tr, he, space = problem
    y = he.y.copy()
    y[:40] = -1  # a label the training part never had: left out of the union
    held = type(he)(he.X, y, he.c, he.n_labels)
    first, second = LocalBackend(split_block(tr, 3), space), LocalBackend([held], space)
    first.passes = 7
    union = union_of(first, second)
    assert isinstance(union, InProcessUnion) and first.passes == 7
    assert len(union.blocks) == 3
    assert sum(b.n_events for b in union.blocks) == tr.n_events + he.n_events - 40
    # every block holds a share of the held-out events
    assert all(b.n_events > n.n_events for b, n in zip(union.blocks, first.blocks, strict=True))
    # the same sums as a pass over both parts, counted once, on the training part
    rng = np.random.default_rng(0)
    ids = np.sort(rng.choice(space.n_features, 40, replace=False))
    w = Weights(ids, rng.normal(0, 0.3, 40), np.zeros(space.n_labels))
    task = LossGradTask(space, w, None, np.zeros(0, dtype=np.int64))
    apart = UnionBackend(LocalBackend(split_block(tr, 3), space), second).run(task)
    together = union.run(task)
    assert first.passes == 8
    assert together.weight == pytest.approx(apart.weight, rel=1e-12)
    assert together.loss == pytest.approx(apart.loss, rel=1e-12)
    np.testing.assert_allclose(together.grad, apart.grad, rtol=1e-10, atol=1e-12)
    # a derived copy counts its own passes
    copy = union.derived(lambda b: b, space, "test")
    assert type(copy) is LocalBackend and copy.passes == 0 and first.passes == 8
    assert isinstance(union_of(Distributed([tr], space), second), UnionBackend)


def test_an_in_process_path_refit_reaches_the_same_optimum_in_fewer_passes(problem):
    tr, he, space = problem
    keys = dict(method="grafting", path=True, points=5, gtol=1e-9, l2_mixes=[0.0], folds=1)
    together = train(LocalBackend([tr], space), train_config(**keys), LocalBackend([he], space))
    apart = train(Distributed([tr], space), train_config(**keys), Distributed([he], space))
    path = together.report.path
    assert path == apart.report.path  # the same path and choice
    a, b = together.report.refit, apart.report.refit
    assert isinstance(a, PathRefit) and isinstance(b, PathRefit)
    assert a.kkt_passed and b.kkt_passed
    assert a.objective == pytest.approx(b.objective, rel=1e-7)
    assert a.features == b.features
    assert a.passes < b.passes
    # the run's passes count the refit's
    points = sum(p.passes for p in path.points)
    assert together.report.passes >= points + a.passes


def test_an_in_process_refit_runs_with_the_block_wise_gradient_test(problem):
    tr, he, space = problem
    keys = dict(method="grafting", path=True, l1_grid=[0.02, 0.01], patience=0, folds=1)
    keys.update(dense_test_max=10, gtol=1e-9)  # fewer than the candidates: block-wise
    res = train(LocalBackend([tr], space), train_config(**keys), LocalBackend([he], space))
    assert res.report["gradient_test"]["path"] == "block-wise"
    assert res.report.refit.kkt_passed and res.report.refit.passes > 0
    dense = train(LocalBackend([tr], space), train_config(**{**keys, "dense_test_max": 10**6}),
                  LocalBackend([he], space))  # fmt: skip
    assert res.report.refit.objective == pytest.approx(dense.report.refit.objective, rel=1e-7)
    apart = train(Distributed([tr], space), train_config(**keys), Distributed([he], space))
    assert apart.report.refit.skipped.startswith(f"{space.n_features} candidates")
