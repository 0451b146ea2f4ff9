"""What a backend is: something that runs a kernel over every block and
merges the results.

A *task* is a picklable callable ``task(block) -> result`` whose result has a
``merge(other)`` method; the backend broadcasts the task (which carries the
current weights), applies it to every cached block and reduces the results.
Every pass is stateless, so a retried task never changes the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from ..kernels import Block, Space
from ..kernels.topk import GradientSummary, GradientTestTask

R = TypeVar("R")


class Backend(Protocol):
    space: Space
    """The candidate feature space of the cached events."""

    passes: int
    """Number of passes over the data run so far."""

    def run(self, task: Callable[[Block], R]) -> R:
        """Apply ``task`` to every block and merge the results."""
        ...

    def gradient_test(self, task: GradientTestTask) -> GradientSummary:
        """The block-wise gradient test of grafting (kernels/topk.py) in one
        pass: per feature block only its summary reaches the caller."""
        ...

    def close(self) -> None:
        """Release cached data."""
        ...


def merge_all(results: list):
    """Merge a non-empty list of mergeable results, pairwise as a tree."""
    if not results:
        raise ValueError("no blocks to merge: the dataset is empty")
    while len(results) > 1:
        results = [
            a.merge(b) if b is not None else a for a, b in zip(results[::2], results[1::2] + [None])
        ]
    return results[0]
