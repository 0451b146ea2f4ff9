"""benchmarks/model_choice.py: scikit-learn's folds are the events of ours."""

from __future__ import annotations

import dataclasses

import numpy as np

from benchmarks.model_choice import event_folds
from sparkmaxent.backends import LocalBackend
from sparkmaxent.config import train_config
from sparkmaxent.kernels import MULTICLASS, Weights
from sparkmaxent.kernels.predict import EventScoresTask
from sparkmaxent.selection.base import TrainingContext
from sparkmaxent.selection.folds import fold_backends

from ..unit.helpers import random_block


def test_event_folds_hold_the_events_of_each_fold_backend():
    rng = np.random.default_rng(3)
    block, space = random_block(rng, MULTICLASS)
    group = np.sort(rng.integers(0, block.n_events // 2, block.n_events))  # units of 1-4 events
    block = dataclasses.replace(block, group=group, event_id=np.arange(block.n_events))
    ctx = TrainingContext(
        LocalBackend([block], space), train_config(method="l2", folds=3, fold_seed=7)
    )
    fold = event_folds(block, 3, 7)
    assert set(np.unique(fold)) == {0, 1, 2}
    task = EventScoresTask(space, Weights.zeros(space), None)
    for f, (train, validation) in enumerate(fold_backends(ctx)):
        assert np.array_equal(np.sort(validation.run(task).event_id), np.flatnonzero(fold == f))
        assert np.array_equal(np.sort(train.run(task).event_id), np.flatnonzero(fold != f))
