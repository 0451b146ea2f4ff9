"""A backend whose events carry conjunctions: every pass of another backend
runs on its blocks widened by a set of conjunctions (kernels/conjunctions.py),
formed inside each block on the executors, so every existing task (loss and
gradient, curvature, rays, the gradient test) works over atoms followed by
conjunctions without the blocks being rebuilt."""

from __future__ import annotations

import copy

from ..kernels import Space
from ..kernels.conjunctions import Conjunctions, Expanding
from .base import Backend, WrappingBackend
from .local import LocalBackend


class ExpandedBackend(WrappingBackend):
    """``base`` with ``conjunctions`` formed in its events (passes count on ``base``).

    ``cache``: form the conjunctions in the events once and run every pass
    on the widened blocks, instead of forming them again in every pass (a
    fit of many passes over a fixed set of conjunctions, such as the
    lattice's generalization refits): when ``base`` holds its blocks in
    this process (``LocalBackend``), on a copy of ``base`` (same class and
    settings) holding the widened blocks; when it caches them on Spark
    executors (``derived``), on a derived cached copy of its blocks (an RDD
    for ``SparkBackend``, a DataFrame for ``FrameBackend``). Other backends
    widen inside each pass."""

    def __init__(self, base: Backend, conjunctions: Conjunctions, cache: bool = False):
        if conjunctions.n_atoms != base.space.n_predicates:
            raise ValueError(
                f"conjunctions over {conjunctions.n_atoms} atoms, events over "
                f"{base.space.n_predicates} predicates"
            )
        s = base.space
        super().__init__(base, Space(s.shape, conjunctions.n_predicates, s.n_labels, s.bias))
        self.conjunctions = conjunctions
        self.widened: Backend | None = None
        derived = getattr(base, "derived", None)
        if cache and len(conjunctions) and isinstance(base, LocalBackend):
            # a copy of base (its class and settings) holding the widened blocks
            local = copy.copy(base)
            local.blocks = [conjunctions.expand(b) for b in base.blocks]
            local.space = self.space
            self.widened = local
        elif cache and len(conjunctions) and derived is not None:
            what = f"widened by {len(conjunctions)} conjunctions"
            self.widened = derived(conjunctions.expand, self.space, what)

    def run(self, task):
        if self.widened is None:
            return super().run(task)
        self.base.passes += 1
        return self.widened.run(task)

    def close(self) -> None:
        """Drops the widened copies (the base backend is closed by its owner)."""
        if self.widened is not None:
            self.widened.close()  # a local copy's blocks, or the derived RDD
        self.widened = None

    def wrap(self, task):
        return Expanding(task, self.conjunctions) if len(self.conjunctions) else task

    def change(self):
        return self.conjunctions.expand
