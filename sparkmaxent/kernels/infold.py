"""k-fold cross-validation without re-reading data: the tasks that run
another task on a fold's events, or on all but a fold's, taken out of each
block where it lies (on the executors, for a Spark backend). The folds
themselves (whole groups, stratified, seeded) are assigned on the driver
(``choice/folds.py`` ``fold_of_groups``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .blocks import Block, take_events


def in_fold(block: Block, groups: np.ndarray, inside: bool) -> Block:
    """The events of ``block`` whose group is among ``groups`` (``inside``),
    or the others."""
    if block.group is None:
        raise ValueError("k-fold choice needs blocks that carry each event's group")
    member = np.isin(block.group, groups)
    return take_events(block, member if inside else ~member)


@dataclass(frozen=True)
class InFold:
    """A task run on the events of ``groups`` (``inside``) or on the others (picklable)."""

    task: object
    groups: np.ndarray
    inside: bool

    def __call__(self, block: Block):
        return self.task(in_fold(block, self.groups, self.inside))  # type: ignore[operator]


__all__ = ["in_fold", "InFold"]
