"""Keyed passes: a pass whose per-block results are too large to reach the
driver whole (the block-wise gradient test, ``topk.GradientTestTask``),
so they are cut into keyed pieces, the pieces of one key are summed
wherever they meet, and each sum is reduced to a small mergeable result
there; only those results reach the driver, merged.

The request ``Keyed(task)`` names this kind of pass; a backend runs it,
as any task, through its one entry point ``run`` (backends/base.py).
This module is the executor half: what a keyed task provides
(``KeyedTask``) and one run on blocks changed first (``KeyedOn``: widened
by conjunctions, cut to a fold); the backends orchestrate the pass
(in-process: ``backends/local.py`` ``summarize_all``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from .blocks import Block


class KeyedTask(Protocol):
    """What a keyed pass runs (picklable): ``partial(block)`` per data
    block, mergeable (``merge``); ``split(partial)`` into ``(key, piece)``
    pairs, the pieces mergeable; ``summarize(key, piece, weight)`` of a
    key's summed piece, mergeable, ``weight`` the total event weight
    (normalizes sums to means); ``n_keys`` keys at most (reduce partitions).
    ``partial_weight(partial)``: the event weight a merged partial summed;
    ``result_weight(result)``: the event weight the merged result's own
    sums hold (None: it keeps none), checked against the total."""

    @property
    def n_keys(self) -> int: ...

    def partial(self, block: Block) -> Any: ...

    def split(self, partial: Any) -> Iterable[tuple[int, Any]]: ...

    def summarize(self, key: int, piece: Any, weight: float) -> Any: ...

    def partial_weight(self, partial: Any) -> float: ...

    def result_weight(self, result: Any) -> float | None: ...


@dataclass(frozen=True)
class Keyed:
    """The request of a keyed pass (``backend.run(Keyed(task))``); a plain
    callable ``task(block)`` is the request of a map-and-merge pass."""

    task: KeyedTask


@dataclass(frozen=True)
class KeyedOn:
    """``task`` run on every block changed by ``change`` first (a
    picklable ``Block -> Block``): the keyed half of a wrapping backend."""

    task: KeyedTask
    change: Callable[[Block], Block]

    @property
    def n_keys(self) -> int:
        return self.task.n_keys

    def partial(self, block: Block) -> Any:
        return self.task.partial(self.change(block))

    def split(self, partial: Any) -> Iterable[tuple[int, Any]]:
        return self.task.split(partial)

    def summarize(self, key: int, piece: Any, weight: float) -> Any:
        return self.task.summarize(key, piece, weight)

    def partial_weight(self, partial: Any) -> float:
        return self.task.partial_weight(partial)

    def result_weight(self, result: Any) -> float | None:
        return self.task.result_weight(result)


__all__ = ["Keyed", "KeyedOn", "KeyedTask"]
