"""A backend whose events carry conjunctions: every pass of another backend
runs on its blocks widened by a set of conjunctions (kernels/conjunctions.py),
formed inside each block on the executors, so every existing task (loss and
gradient, curvature, rays, the gradient test) works over atoms followed by
conjunctions without the blocks being rebuilt."""

from __future__ import annotations

from ..kernels import Space
from ..kernels.conjunctions import Conjunctions, Expanding
from .base import Backend, WrappingBackend


class ExpandedBackend(WrappingBackend):
    """``base`` with ``conjunctions`` formed in its events (passes count on ``base``).

    ``cache``: form the conjunctions in the events once and run every pass
    on the widened blocks, instead of forming them again in every pass (a
    fit of many passes over a fixed set of conjunctions: a combination
    round, the refit after a path, the lattice's generalization refits):
    on ``base.derived``'s copy of the blocks (``LocalBackend``: in this
    process; ``SparkBackend``: a cached RDD; ``FrameBackend``: a cached
    DataFrame; ``UnionBackend``: both parts'). A base without ``derived``
    widens inside each pass. ``builds`` counts how often the conjunctions
    were formed over all the events (once when cached, else once a pass)."""

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
        self.builds = 0
        derived = getattr(base, "derived", None)
        if cache and len(conjunctions) and derived is not None:
            what = f"widened by {len(conjunctions)} conjunctions"
            self.widened = derived(conjunctions.expand, self.space, what)
            self.builds = 1

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
        if len(self.conjunctions):
            self.builds += 1
        return Expanding(task, self.conjunctions) if len(self.conjunctions) else task

    def change(self):
        if len(self.conjunctions):
            self.builds += 1
        return self.conjunctions.expand
