"""A backend whose events carry conjunctions: every pass of another backend
runs on its blocks widened by a set of conjunctions (kernels/conjunctions.py),
formed inside each block on the executors, so every existing task (loss and
gradient, curvature, rays, the gradient test) works over atoms followed by
conjunctions without the blocks being rebuilt."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar

from ..kernels import Space
from ..kernels.conjunctions import Conjunctions, Expanding, ExpandingGradientTest
from ..kernels.topk import GradientSummary, GradientTestTask
from .base import Backend

R = TypeVar("R")


class ExpandedBackend:
    """``base`` with ``conjunctions`` formed in its events (passes count on ``base``)."""

    def __init__(self, base: Backend, conjunctions: Conjunctions):
        if conjunctions.n_atoms != base.space.n_predicates:
            raise ValueError(
                f"conjunctions over {conjunctions.n_atoms} atoms, events over "
                f"{base.space.n_predicates} predicates"
            )
        self.base = base
        self.conjunctions = conjunctions
        s = base.space
        self.space = Space(s.shape, conjunctions.n_predicates, s.n_labels, s.bias)
        self.info = getattr(base, "info", None)
        self.dataset_dir = getattr(base, "dataset_dir", None)

    @property
    def passes(self) -> int:
        return self.base.passes

    @passes.setter
    def passes(self, value: int) -> None:
        self.base.passes = value

    def run(self, task: Callable) -> R:  # type: ignore[type-var]
        if not len(self.conjunctions):
            return self.base.run(task)
        return self.base.run(Expanding(task, self.conjunctions))

    def gradient_test(self, task: GradientTestTask) -> GradientSummary:
        fields = {f.name: getattr(task, f.name) for f in dataclasses.fields(task)}
        return self.base.gradient_test(
            ExpandingGradientTest(**fields, conjunctions=self.conjunctions)
        )

    def close(self) -> None:
        """The base backend is closed by its owner."""
