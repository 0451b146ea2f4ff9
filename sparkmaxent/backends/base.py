"""What a backend is: something that runs a kernel over every block and
merges the results.

A *task* is a picklable callable ``task(block) -> result`` whose result has a
``merge(other)`` method; the backend broadcasts the task (which carries the
current weights), applies it to every cached block and reduces the results.
A *keyed pass* (``Keyed(task)``, kernels/keyed.py: grafting's block-wise
gradient test) runs through the same entry point, ``run``. Every pass is
stateless, so a retried task never changes the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar, overload

from ..kernels import Block, Space
from ..kernels.keyed import Keyed, KeyedOn

R = TypeVar("R")


class Backend(Protocol):
    space: Space
    """The candidate feature space of the cached events."""

    passes: int
    """Number of passes over the data run so far."""

    def run(self, task: Callable[[Block], R] | Keyed) -> R:
        """One pass: apply ``task`` to every block and merge the results;
        for a ``Keyed`` request, its keyed pass (kernels/keyed.py: per key
        only the summarized result reaches the caller)."""
        ...

    def close(self) -> None:
        """Release cached data."""
        ...


class PassesOn:
    """A wrapper's ``passes``: the pass counter of the backend it holds in
    attribute ``owner``, read and written there (``passes = PassesOn("base")``
    in the class body), so that a pass through the wrapper counts where
    the wrapped backend's own passes do."""

    def __init__(self, owner: str):
        self.owner = owner

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> PassesOn: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> int: ...
    def __get__(self, obj: object, objtype: type | None = None) -> PassesOn | int:
        if obj is None:  # on the class: the descriptor itself
            return self
        return getattr(obj, self.owner).passes

    def __set__(self, obj: object, value: int) -> None:
        getattr(obj, self.owner).passes = value


class PassesOnFirst:
    """The pass counter of a union of training and held-out events (a
    refit's backend, union.py, spark_union.py): its passes count on the
    training part ``first``, as the training part's own passes do."""

    first: Backend
    passes = PassesOn("first")


class CachedBackend:
    """What the Spark backends share: a context manager that closes (releases
    its cached blocks) on exit, and a repr naming the dataset and state.
    Subclasses set ``name``, ``dataset_dir``, ``n_events``, ``passes``,
    ``partitions`` (the partitions the blocks are cached in) and give
    ``close`` and ``cached`` (the cached blocks' handle, None once closed)."""

    name: str
    dataset_dir: str
    n_events: int
    passes: int
    partitions: int

    def cached(self) -> object | None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.cached() is None else f"{self.n_events} events"
        return (
            f"{type(self).__name__}({self.name!r}, {self.dataset_dir!r}, {state}, "
            f"passes={self.passes})"
        )


class WrappingBackend:
    """A backend whose passes are another's (``base``), each task wrapped by
    ``wrap`` (a keyed task by ``KeyedOn`` with ``change``) so that it changes
    the blocks inside the pass (widened by conjunctions, cut to a fold):
    nothing is re-read or re-cached, passes count on ``base``, and ``base``
    is closed by its owner."""

    def __init__(self, base: Backend, space: Space):
        self.base = base
        self.space = space
        self.info = getattr(base, "info", None)
        self.dataset_dir = getattr(base, "dataset_dir", None)

    passes = PassesOn("base")

    def wrap(self, task: Callable[[Block], R]) -> Callable[[Block], R]:
        raise NotImplementedError

    def change(self) -> Callable[[Block], Block]:
        """The picklable ``Block -> Block`` a keyed task's blocks go through."""
        raise NotImplementedError

    def run(self, task: Callable[[Block], R] | Keyed) -> R:
        if isinstance(task, Keyed):
            return self.base.run(Keyed(KeyedOn(task.task, self.change())))
        return self.base.run(self.wrap(task))

    def close(self) -> None:
        """The base backend is closed by its owner."""


def merge_all(results: list):
    """Merge a non-empty list of mergeable results, pairwise as a tree."""
    if not results:
        raise ValueError("no blocks to merge: the dataset is empty")
    while len(results) > 1:
        results = [
            a.merge(b) if b is not None else a for a, b in zip(results[::2], results[1::2] + [None])
        ]
    return results[0]


def capped_partitions(partitions: int | None, n_events: int, min_partition_events: int):
    """``partitions`` (None: the source's own count), but no more than
    n_events // min_partition_events (at least one): each partition holds
    at least ``min_partition_events`` events (``data.min_partition_events``;
    0, or a dataset whose event count is not recorded: no cap). Returns
    (partitions, the cap or None)."""
    if min_partition_events <= 0 or n_events <= 0:
        return partitions, None
    cap = max(1, n_events // min_partition_events)
    return (None if partitions is None else min(partitions, cap)), cap
