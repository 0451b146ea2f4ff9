"""A backend over one fold of another's events, or over all but that fold
(k-fold choice, selection/folds.py): every pass runs on the base backend's
blocks, each cut to the fold's events inside the task (kernels/folds.py),
so nothing is re-read or re-cached."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from ..kernels.folds import InFold, InFoldGradientTest
from ..kernels.topk import GradientSummary, GradientTestTask
from .base import Backend

R = TypeVar("R")


class FoldBackend:
    """``base`` restricted to the events of ``groups`` (``inside``) or to
    the others; passes count on ``base``."""

    def __init__(self, base: Backend, groups: np.ndarray, inside: bool):
        self.base = base
        self.groups = np.asarray(groups)
        self.inside = inside
        self.space = base.space
        self.info = getattr(base, "info", None)
        self.dataset_dir = getattr(base, "dataset_dir", None)

    @property
    def passes(self) -> int:
        return self.base.passes

    @passes.setter
    def passes(self, value: int) -> None:
        self.base.passes = value

    def run(self, task: Callable) -> R:  # type: ignore[type-var]
        return self.base.run(InFold(task, self.groups, self.inside))

    def gradient_test(self, task: GradientTestTask) -> GradientSummary:
        fields = {f.name: getattr(task, f.name) for f in dataclasses.fields(task)}
        return self.base.gradient_test(
            InFoldGradientTest(**fields, groups=self.groups, inside=self.inside)
        )

    def close(self) -> None:
        """The base backend is closed by its owner."""
