"""k-fold cross-validation without re-reading data: folds of whole groups
(a tagged sentence, else one event), and the tasks that run another task
on a fold's events, or on all but a fold's, taken out of each block where
it lies (on the executors, for a Spark backend).

The assignment follows data/split.py's held-out split: units are groups,
stratified by label (a unit of one multiclass event: its label; a longer
unit or a candidate set: one stratum), ordered within a stratum by a
seeded hash of the group id; the i-th unit of a stratum goes to fold
i mod k, so each fold holds each label within one unit of 1/k.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .blocks import Block, take_events
from .topk import BlockGradient, GradientTestTask

_MIX = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)


def _hash(values: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of int64 values xor a seed: a fixed, seeded order."""
    with np.errstate(over="ignore"):
        z = values.astype(np.uint64) ^ np.uint64(seed * _MIX[0] % 2**64)
        z = z + np.uint64(_MIX[0])
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX[1])
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX[2])
        return z ^ (z >> np.uint64(31))


def fold_of_groups(
    group: np.ndarray, y: np.ndarray, k: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct groups, sorted; the fold 0..k-1 of each), from every
    event's ``group`` and label ``y`` (-1 for candidate sets: one stratum)."""
    if k < 2:
        raise ValueError(f"expected k >= 2 folds, got {k}")
    units, inverse, size = np.unique(group, return_inverse=True, return_counts=True)
    first_label = np.full(len(units), np.iinfo(np.int64).max)
    np.minimum.at(first_label, inverse, y.astype(np.int64))
    stratum = np.where(size == 1, first_label, -1)
    order = np.lexsort((units, _hash(units, seed), stratum))
    s = stratum[order]
    starts = np.r_[0, np.flatnonzero(s[1:] != s[:-1]) + 1]
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    fold = np.empty(len(units), dtype=np.int64)
    fold[order] = rank % k
    return units, fold


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


@dataclass(frozen=True)
class InFoldGradientTest(GradientTestTask):
    """The block-wise gradient test (kernels/topk.py) on a fold's events or the others'."""

    groups: np.ndarray | None = None
    inside: bool = False

    def partial(self, block: Block) -> BlockGradient:
        assert self.groups is not None, "set by FoldBackend"
        return super().partial(in_fold(block, self.groups, self.inside))


__all__ = ["fold_of_groups", "in_fold", "InFold", "InFoldGradientTest"]
