"""Two backends' events as one (the refit after a held-out choice fits the
training and the held-out events together, choice/path.py): every
pass runs on both and the two results merge, as the blocks of one backend
merge. Nothing is re-read or re-cached; each part is closed by its owner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ..kernels import Block, Space
from ..kernels.blocks import concat_blocks, split_block, trainable_events
from ..kernels.keyed import Keyed
from .base import Backend, PassesOnFirst
from .local import LocalBackend

R = TypeVar("R")


@dataclass(frozen=True)
class OnTrainable:
    """A task run on a block's events that a fit can use (picklable):
    held-out events of a label unseen in training are left out."""

    task: Callable

    def __call__(self, block: Block):
        return self.task(trainable_events(block))


class UnionBackend(PassesOnFirst):
    """``first``'s events followed by ``second``'s (the held-out part:
    its untrainable events left out inside the pass, ``OnTrainable``).
    Both must share the candidate space (held-out data is prepared with
    the training dictionary). A pass counts once, on ``first``."""

    def __init__(self, first: Backend, second: Backend, owns_parts: bool = False):
        if first.space != second.space:
            raise ValueError(
                f"a union of backends needs one feature space, got {first.space} and {second.space}"
            )
        self.first, self.second = first, second
        self.owns_parts = owns_parts  # a derived union closes its parts
        self.space = first.space
        self.info = getattr(first, "info", None)
        self.dataset_dir = getattr(first, "dataset_dir", None)

    def run(self, task: Callable[[Block], R] | Keyed) -> R:
        """A pass over both parts; not a keyed pass: the block-wise test's
        summaries keep each part's best candidates, not those of the sum
        (the refit runs the dense test)."""
        if isinstance(task, Keyed):
            raise NotImplementedError(
                "the block-wise gradient test of a union of backends (the refit after a "
                "held-out choice runs the dense test: train.grafting.dense_test_max)"
            )
        result = self.first.run(task)
        return result.merge(self.second.run(OnTrainable(task)))  # type: ignore[attr-defined]

    @property
    def derived(self) -> Callable[[Callable[[Block], Block], Space, str], UnionBackend] | None:
        """Both parts' ``derived`` copies as one union (owning them), when
        both parts have one (else None: a wrapper transforms in every pass)."""
        if getattr(self.first, "derived", None) is None:
            return None
        if getattr(self.second, "derived", None) is None:
            return None
        return self._derived

    def _derived(self, fn: Callable[[Block], Block], space: Space, what: str) -> UnionBackend:
        first = self.first.derived(fn, space, what)  # type: ignore[attr-defined]
        try:
            second = self.second.derived(fn, space, what)  # type: ignore[attr-defined]
        except BaseException:
            first.close()
            raise
        return UnionBackend(first, second, owns_parts=True)

    def close(self) -> None:
        """The parts are closed by their owners (by this union if derived)."""
        if self.owns_parts:
            self.first.close()
            self.second.close()


class InProcessUnion(PassesOnFirst, LocalBackend):
    """Two in-process parts (training and held-out ``LocalBackend``) as one:
    the held-out part's trainable events cut into as many pieces as
    ``first`` has blocks, each piece appended to one of its blocks, so that
    every block is a sample of the union as the training blocks are of the
    training data. The Hessian-free round solver combines the blocks' own
    Newton steps (``kernels/direction.py``): exact with one block, and as
    good as for the training part's fits with several; a small held-out
    block of its own lacks the curvature of many rare features and its step
    slows the combined one (more iterations, Newton stalls at the final
    tolerance). The blocks are copies of both parts' events (in-process
    data are small); a pass counts once, on ``first``, as ``UnionBackend``'s."""

    def __init__(self, first: LocalBackend, second: LocalBackend):
        if first.space != second.space:
            raise ValueError(
                f"a union of backends needs one feature space, got {first.space} and {second.space}"
            )
        held = concat_blocks([trainable_events(b) for b in second.blocks])
        pieces = split_block(held, len(first.blocks))
        # LocalBackend's attributes, but for its pass counter (``first``'s)
        self.first, self.space = first, first.space
        self.blocks = [concat_blocks([b, p]) for b, p in zip(first.blocks, pieces, strict=True)]
        self.info, self.dataset_dir = first.info, first.dataset_dir

    def derived(self, fn: Callable[[Block], Block], space: Space, what: str) -> LocalBackend:
        """A plain in-process copy over ``fn`` of every block, counting its
        own passes (``LocalBackend.derived``)."""
        return LocalBackend([fn(b) for b in self.blocks], space, self.info, self.dataset_dir)


def union_of(first: Backend, second: Backend) -> Backend:
    """The training and held-out events as one backend for a refit, each
    block a training block with a share of the held-out events: both in
    process (``LocalBackend``), ``InProcessUnion``; both cached on Spark
    (``SparkBackend``), ``spark_union.SparkUnion`` (one cached RDD, built
    on the executors); else (e.g. Spark Connect's ``FrameBackend``) a
    ``UnionBackend`` (every pass runs on both parts). The caller closes
    what it gets (``close_union``)."""
    if type(first) is LocalBackend and type(second) is LocalBackend:
        return InProcessUnion(first, second)
    from .spark import SparkBackend  # pyspark only where Spark backends exist

    if isinstance(first, SparkBackend) and isinstance(second, SparkBackend):
        from .spark_union import SparkUnion

        return SparkUnion(first, second)
    return UnionBackend(first, second)


def close_union(union: Backend) -> None:
    """Release what ``union_of`` built: a ``SparkUnion``'s joined blocks
    (its parts stay open, closed by their owners); the in-process copies
    and the plain union hold nothing to release."""
    if not isinstance(union, LocalBackend | UnionBackend):
        union.close()
