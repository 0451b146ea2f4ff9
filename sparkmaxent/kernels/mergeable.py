"""The merge of pass results that add up field by field.

Most per-block results of a pass are sums over the block's events (a
loss, an event weight, a gradient, a Hessian's diagonal, counts): two
blocks' results merge into the sum of each field, which is what the
backends' tree reduction (``backends.base.merge_all``) calls. ``Summed``
gives a result dataclass that ``merge``; a field merged another way (a
maximum, a set union) names its rule in its metadata (``merged_by``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T", bound="Summed")

#: the field metadata key of ``merged_by``
MERGE = "merge"


def merged_by(rule: Callable[[Any, Any], Any]) -> dict:
    """The metadata of a dataclass field (``field(metadata=merged_by(rule))``)
    that ``Summed.merge`` merges by ``rule(mine, theirs)`` (e.g.
    ``np.maximum``, ``np.union1d``) instead of a sum."""
    return {MERGE: rule}


def _merged(name: str, mine: Any, theirs: Any) -> Any:
    if mine is None and theirs is None:
        return None
    if mine is None or theirs is None:
        raise ValueError(f"cannot merge pass results with {name!r} set in one of them only")
    if hasattr(mine, "merge"):  # a nested result (e.g. a LossGrad)
        return mine.merge(theirs)
    return mine + theirs


class Summed:
    """A mixin for result dataclasses merged field by field: each field the
    sum of both (numbers, numpy arrays), a nested result merged by its own
    ``merge``, None where both are None, or a ``merged_by`` field's rule."""

    def merge(self: T, other: T) -> T:
        values = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            rule = f.metadata.get(MERGE)
            values[f.name] = rule(mine, theirs) if rule else _merged(f.name, mine, theirs)
        return type(self)(**values)
