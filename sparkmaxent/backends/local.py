"""In-process backend: the blocks live in this Python process."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import check_total_weight
from ..kernels import Block, Space
from ..kernels.colcache import COLUMNS
from ..kernels.keyed import Keyed, KeyedTask
from ..kernels.pointcache import OPERATORS
from .base import merge_all

R = TypeVar("R")


def summarize_all(task: KeyedTask, partial: Any, weight: float) -> Any:
    """Split merged partials ``partial`` and summarize every piece
    in-process, merged in key order (an in-process backend's keyed pass:
    the numbers of a distributed one)."""
    out = None
    for key, piece in task.split(partial):
        result = task.summarize(key, piece, weight)
        out = result if out is None else out.merge(result)
    if out is None:
        raise ValueError("a keyed task split its partials into no piece")
    return out


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

    def run(self, task: Callable[[Block], R] | Keyed) -> R:
        """One pass. A keyed pass (kernels/keyed.py): the partials merged
        as a task's results merge, then split and summarized per key here
        (the blocks are in this process anyway; for the block-wise gradient
        test, the selections of the distributed test, bit for bit those of
        the dense one)."""
        self.passes += 1
        if isinstance(task, Keyed):
            keyed = task.task
            merged = merge_all([keyed.partial(b) for b in self.blocks])
            return summarize_all(keyed, merged, check_total_weight(keyed.partial_weight(merged)))
        return merge_all([task(b) for b in self.blocks])

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
        """Drop the blocks, and the columns gathered from them and the
        operators built on them between passes."""
        self.blocks = []
        COLUMNS.clear()
        OPERATORS.clear()
