"""A backend whose events carry conjunctions: every pass of another backend
runs on its blocks widened by a set of conjunctions (kernels/conjunctions.py),
formed inside each block on the executors, so every existing task (loss and
gradient, curvature, rays, the gradient test) works over atoms followed by
conjunctions without the blocks being rebuilt."""

from __future__ import annotations

from ..kernels import Space
from ..kernels.conjunctions import Conjunctions, Expanding, ExpandingGradientTest
from ..kernels.topk import GradientTestTask
from .base import Backend, WrappingBackend, task_fields


class ExpandedBackend(WrappingBackend):
    """``base`` with ``conjunctions`` formed in its events (passes count on ``base``)."""

    def __init__(self, base: Backend, conjunctions: Conjunctions):
        if conjunctions.n_atoms != base.space.n_predicates:
            raise ValueError(
                f"conjunctions over {conjunctions.n_atoms} atoms, events over "
                f"{base.space.n_predicates} predicates"
            )
        s = base.space
        super().__init__(base, Space(s.shape, conjunctions.n_predicates, s.n_labels, s.bias))
        self.conjunctions = conjunctions

    def wrap(self, task):
        return Expanding(task, self.conjunctions) if len(self.conjunctions) else task

    def wrap_gradient_test(self, task: GradientTestTask) -> GradientTestTask:
        return ExpandingGradientTest(**task_fields(task), conjunctions=self.conjunctions)
