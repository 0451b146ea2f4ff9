"""The stages of a prepare, once, over two engines.

``build`` is the one sequence of stages from raw events to a complete
dataset: raw figures, checks (and quarantine), labels, the feature
dictionary (with its cutoff, or a vocabulary's), indexing, merging
identical events, writing the events (and keys), and ``dataset.json``.
What each stage does with the data is an engine's: ``SparkEngine`` (Spark
jobs on the executors: checks, dictionary, indexing) or
``local_prepare.ArrowEngine`` (pyarrow in the driver's process, for small
inputs: ``plan.Limits``). Both call the same parser, checks, messages,
label list and per-event finishing (``indexing._finalize_udf``), and give
the same events, dictionary and ``dataset.json`` (tested stage by stage:
tests/spark/test_local_prepare.py).
"""

from __future__ import annotations

from typing import Any, Protocol

from .checks import check_raw, raw_stats
from .dictionary import feature_dictionary, feature_space_size, labels_of
from .indexing import index_events
from .indexing import merge_duplicates as merge_events
from .options import PrepareOptions
from .publish import save_info, write_events, write_features, write_keys
from .raw import KIND_EVENT, RawSource
from .schema import DatasetInfo


class Engine(Protocol):
    """Where the stages of ``build`` run, over one source's raw events.
    ``dictionary`` and ``events`` values are the engine's own (a DataFrame,
    an Arrow table)."""

    spark: Any
    src: RawSource
    #: whether the dataset is built in the driver's process (then also
    #: fingerprinted here, whatever its size)
    in_process: bool

    def raw_stats(self, vocab_info: DatasetInfo | None, training: bool) -> dict:
        """``checks.raw_stats``' figures of the raw events."""
        ...

    def check(self, stats: dict, tmp: str, quarantine: bool) -> int:
        """Raise for the first parse error (without ``quarantine``), no
        events or a bad weight; with ``quarantine`` write the rejected
        records under ``tmp``; returns how many were quarantined."""
        ...

    def dictionary(self, cutoff: int, vocabulary: str | None) -> Any:
        """The (feature, id, count) dictionary of the events (``cutoff``),
        or the ``vocabulary``'s."""
        ...

    def write_features(self, dictionary: Any, tmp: str) -> int:
        """The dictionary written under ``tmp``; its size."""
        ...

    def index(
        self,
        dictionary: Any,
        n_features: int,
        labels: list[str],
        unseen_labels: list[str],
        count_unknown: bool,
        binary: bool,
    ) -> tuple[Any, int, int]:
        """(indexed events, unknown feature occurrences, occurrences)."""
        ...

    def merge(self, events: Any) -> Any:
        """Identical events as one, with the summed weight."""
        ...

    def write_events(self, events: Any, tmp: str, n_parts: int) -> int:
        """The events in ``n_parts`` files in event_id order; their number."""
        ...

    def write_keys(self, key_col: str, tmp: str) -> None:
        """Each event's id with its key (``src.key_col``) under ``tmp``."""
        ...


def build(
    engine: Engine, tmp: str, settings: PrepareOptions, vocab_info: DatasetInfo | None
) -> DatasetInfo:
    """The stages from the engine's raw events to a complete dataset in
    ``tmp`` (``settings`` with binary and partitions resolved by
    ``prepare._run``)."""
    src = engine.src
    training = settings.require_labels and vocab_info is None
    stats = engine.raw_stats(vocab_info, training)
    quarantined = engine.check(stats, tmp, settings.quarantine)
    labels, unknown_labels, unseen_labels = labels_of(src, stats, vocab_info, training)

    dictionary = engine.dictionary(settings.cutoff, settings.vocabulary)
    n_features = engine.write_features(dictionary, tmp)
    n_ids = feature_space_size(vocab_info, settings.vocabulary, n_features)

    final, unknown_features, occurrences = engine.index(
        dictionary,
        n_features,
        labels,
        unseen_labels,
        count_unknown=vocab_info is not None,
        binary=bool(settings.binary),
    )
    if settings.merge_duplicates:
        final = engine.merge(final)
    n_events = engine.write_events(final, tmp, settings.partitions or 1)  # resolved by _run
    if src.key_col:
        engine.write_keys(src.key_col, tmp)

    counts = {
        "quarantined": quarantined,
        "unknown_features": unknown_features,
        "feature_occurrences": occurrences,
        "unknown_labels": unknown_labels,
        "unseen_labels": unseen_labels,
    }
    size = {"n_ids": n_ids, "n_events": n_events, "total_weight": stats["total_weight"]}
    here = engine.in_process or settings.limits.events(n_events)
    return save_info(engine.spark, tmp, src, labels, size, counts, settings, vocab_info, here)


class SparkEngine:
    """The stages as Spark jobs over the persisted raw events; the
    DataFrames it caches are added to ``cached`` (unpersisted by the caller)."""

    in_process = False

    def __init__(self, spark, src: RawSource, raw, cached: list) -> None:
        from pyspark.sql import functions as F

        self.spark, self.src, self.raw, self.cached = spark, src, raw, cached
        self.events = raw.where(F.col("kind") == KIND_EVENT)

    def raw_stats(self, vocab_info: DatasetInfo | None, training: bool) -> dict:
        return raw_stats(self.raw, self.src.shape, vocab_info, training)

    def check(self, stats: dict, tmp: str, quarantine: bool) -> int:
        return check_raw(self.src, self.raw, stats, tmp, quarantine)

    def dictionary(self, cutoff: int, vocabulary: str | None):
        dictionary = feature_dictionary(self.spark, self.events, cutoff, vocabulary)
        self.cached.append(dictionary)
        return dictionary

    def write_features(self, dictionary, tmp: str) -> int:
        return write_features(dictionary, tmp)

    def index(self, dictionary, n_features, labels, unseen_labels, count_unknown, binary):
        return index_events(
            self.events,
            dictionary,
            n_features,
            self.src.shape,
            labels,
            unseen_labels,
            count_unknown=count_unknown,
            binary=binary,
        )

    def merge(self, events):
        return merge_events(events, self.src.shape)

    def write_events(self, events, tmp: str, n_parts: int) -> int:
        return write_events(events, tmp, self.src.shape, n_parts)

    def write_keys(self, key_col: str, tmp: str) -> None:
        write_keys(self.events, key_col, tmp)


__all__ = ["Engine", "SparkEngine", "build"]
