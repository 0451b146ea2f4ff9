"""In-process backend: the blocks live in this Python process."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TypeVar

from ..errors import check_total_weight
from ..kernels import Block, Space
from ..kernels.colcache import COLUMNS
from ..kernels.topk import GradientSummary, GradientTestTask
from .base import merge_all

R = TypeVar("R")


class LocalBackend:
    """Runs tasks over a list of in-memory blocks, for data that fits one
    machine and for tests. Same kernels, same merge order rules as Spark."""

    def __init__(
        self, blocks: list[Block], space: Space, info=None, dataset_dir: str | None = None
    ):
        if not blocks:
            raise ValueError("expected at least one block of events, got none")
        self.blocks = blocks
        self.space = space
        self.info = info  # the DatasetInfo the blocks came from, if any
        self.dataset_dir = dataset_dir  # where they were read from: feature names for reports
        self.passes = 0

    def run(self, task: Callable[[Block], R]) -> R:
        self.passes += 1
        return merge_all([task(b) for b in self.blocks])

    def gradient_test(self, task: GradientTestTask) -> GradientSummary:
        """The block-wise gradient test in one pass: the partial gradients
        summed as ``run`` sums them, then cut and summarized per feature
        block (the blocks are in this process anyway; this gives the
        selections of the distributed test, bit for bit those of the dense one)."""
        self.passes += 1
        lg = merge_all([task.partial(b) for b in self.blocks])
        return task.summarize_all(lg, check_total_weight(lg.weight))

    def derived(self, fn: Callable[[Block], Block], space: Space, what: str) -> LocalBackend:
        """A copy of this backend (its class and settings) over ``fn`` of
        every block, built now (``what`` names it for the Spark backends'
        logs): a wrapper whose passes would otherwise transform the blocks
        in every pass (widening by conjunctions) runs them on the copy. The
        copy counts its own passes; its ``close`` drops only its blocks."""
        out = copy.copy(self)
        out.blocks = [fn(b) for b in self.blocks]
        out.space, out.passes = space, 0
        return out

    def close(self) -> None:
        """Drop the blocks, and the columns gathered from them between passes."""
        self.blocks = []
        COLUMNS.clear()
