"""The stages of a prepare, once, over two engines.

``build`` is the one sequence of stages from raw events to a complete
dataset: raw figures, checks (and quarantine), labels, the feature
dictionary (with its cutoff, or a vocabulary's), indexing, merging
identical events, writing the events (and keys), and ``dataset.json``.
What each stage does with the data is written once, as pure functions over
Arrow data: counting, cutting off and numbering features
(``dictionary.count_features``, ``number_features``), indexing
(``indexing.index_table``) and merging (``indexing.merge_table``). An
engine runs them: ``SparkEngine`` per Arrow batch on the executors (the
dictionary collected to the driver and broadcast to the tasks, looked up
per run of batches (``lookup_runs``), partial counts summed and events
grouped for merging by Spark) or ``local_prepare.ArrowEngine`` on whole
tables in the driver's process (small inputs: ``plan.Limits``). Both also
call the same parser, checks, messages and label list, and give the same
events, dictionary and ``dataset.json`` (tests/spark/test_local_prepare.py,
tests/spark/test_prepare_engines.py).
"""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa

from ..session_kind import is_connect
from ..shapes import CANDIDATES, MULTICLASS
from .checks import check_raw, raw_stats
from .dictionary import (
    count_features,
    feature_space_size,
    keep_frequent,
    labels_of,
    number_features,
    read_dictionary,
)
from .indexing import index_table, merge_table, unknown_occurrences
from .options import PrepareOptions
from .publish import save_info, write_events, write_features, write_keys
from .raw import KIND_EVENT, RawSource
from .schema import DatasetInfo, events_schema

COUNTS_DDL = "feature string, count double"  # count_features' columns on Spark
#: the most feature occurrences gathered into one lookup run (``lookup_runs``)
MAX_RUN_OCCURRENCES = 2_000_000


class Engine(Protocol):
    """Where the stages of ``build`` run, over one source's raw events: the
    engine-specific parts only (how events are read, spread and written).
    What a stage does with the data is one pure function over Arrow data
    (``dictionary``, ``indexing``) that both engines call. ``events``
    values are the engine's own (a DataFrame, an Arrow table)."""

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

    def feature_counts(self, cutoff: int) -> pa.Table:
        """``dictionary.count_features`` of the events (rows below
        ``cutoff`` may be left out), in the driver's process."""
        ...

    def index(
        self, dictionary: pa.Table, labels: list[str], unseen_labels: list[str], binary: bool
    ) -> Any:
        """The events indexed by ``indexing.index_table``."""
        ...

    def unknown_occurrences(self, dictionary: pa.Table) -> tuple[int, int]:
        """``indexing.unknown_occurrences`` of all the events."""
        ...

    def merge(self, events: Any) -> Any:
        """Identical events as one (``indexing.merge_table``)."""
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

    if settings.vocabulary is not None:
        dictionary = read_dictionary(settings.vocabulary)
    else:
        dictionary = number_features(engine.feature_counts(settings.cutoff), settings.cutoff)
    n_features = write_features(dictionary, tmp)
    n_ids = feature_space_size(vocab_info, settings.vocabulary, n_features)

    final = engine.index(dictionary, labels, unseen_labels, bool(settings.binary))
    unknown_features = occurrences = 0
    if vocab_info is not None:
        unknown_features, occurrences = engine.unknown_occurrences(dictionary)
    if settings.merge_duplicates:
        final = engine.merge(final)
    n_events = engine.write_events(final, tmp, settings.partitions or 1)  # resolved by _run
    if src.key_col:
        engine.write_keys(src.key_col, tmp)

    counts = {
        "n_ids": n_ids,
        "n_events": n_events,
        "total_weight": stats["total_weight"],
        "quarantined": quarantined,
        "unknown_features": unknown_features,
        "feature_occurrences": occurrences,
        "unknown_labels": unknown_labels,
        "unseen_labels": unseen_labels,
    }
    here = engine.in_process or settings.limits.events(n_events)
    return save_info(engine.spark, tmp, src, labels, counts, settings, vocab_info, here)


class SparkEngine:
    """The stages as Spark jobs over the persisted raw events, each stage's
    function run per Arrow batch on the executors (``mapInArrow``); the
    DataFrames it caches and the dictionary's broadcasts are added to
    ``cached`` (unpersisted by the caller)."""

    in_process = False

    def __init__(self, spark, src: RawSource, raw, cached: list) -> None:
        from pyspark.sql import functions as F

        self.spark, self.src, self.raw, self.cached = spark, src, raw, cached
        self.events = raw.where(F.col("kind") == KIND_EVENT)

    def raw_stats(self, vocab_info: DatasetInfo | None, training: bool) -> dict:
        return raw_stats(self.raw, self.src.shape, vocab_info, training)

    def check(self, stats: dict, tmp: str, quarantine: bool) -> int:
        return check_raw(self.src, self.raw, stats, tmp, quarantine)

    def feature_counts(self, cutoff: int) -> pa.Table:
        """Partial counts per batch, summed by feature on Spark, cut off
        there and collected (one row a kept feature)."""
        from pyspark.sql import functions as F

        def partial(batches):
            for batch in batches:
                yield from count_features(batch).to_batches()

        def frequent(batches):
            for batch in batches:
                yield keep_frequent(batch, cutoff)

        counts = (
            self.events.select("features", "weight")
            .mapInArrow(partial, COUNTS_DDL)
            .groupBy("feature")
            .agg(F.sum("count").alias("count"))
            .mapInArrow(frequent, COUNTS_DDL)
        )
        return counts.toArrow()

    def index(self, dictionary, labels, unseen_labels, binary):
        shape = self.src.shape
        held = self._ship(dictionary)

        def index_batches(batches):
            for run in lookup_runs(batches, held.value.num_rows):
                table = index_table(run, held.value, shape, labels, unseen_labels, binary)
                yield from table.to_batches()

        return self.events.select(*_raw_event_columns(shape)).mapInArrow(
            index_batches, _spark_schema(events_schema(shape))
        )

    def unknown_occurrences(self, dictionary) -> tuple[int, int]:
        from pyspark.sql import functions as F

        held = self._ship(dictionary)

        def count(batches):
            for run in lookup_runs(batches, held.value.num_rows):
                unknown, occurrences = unknown_occurrences(run, held.value)
                yield pa.RecordBatch.from_pydict({"unknown": [unknown], "all": [occurrences]})

        row = (
            self.events.select("features")
            .mapInArrow(count, "unknown long, all long")
            .agg(F.sum("unknown").alias("unknown"), F.sum("all").alias("all"))
            .first()
        )
        return int(row["unknown"] or 0), int(row["all"] or 0)

    def merge(self, events):
        """Events hashed by their indices (identical events meet in one
        partition), each partition merged by ``merge_table``."""
        shape = self.src.shape
        schema = events_schema(shape)

        def merge_partition(batches):
            batches = list(batches)
            if batches:
                table = pa.Table.from_batches(batches).cast(schema)
                yield from merge_table(table, shape).to_batches()

        return events.repartition("indices").mapInArrow(merge_partition, events.schema)

    def write_events(self, events, tmp: str, n_parts: int) -> int:
        return write_events(events, tmp, self.src.shape, n_parts)

    def write_keys(self, key_col: str, tmp: str) -> None:
        write_keys(self.events, key_col, tmp)

    def _ship(self, value):
        """``value`` for the executors: broadcast (unpersisted with the
        cached DataFrames), or under Spark Connect (no broadcasts) carried
        in the function's closure."""
        if is_connect(self.spark):
            return _Carried(value)
        shipped = self.spark.sparkContext.broadcast(value)
        self.cached.append(shipped)
        return shipped


def lookup_runs(batches, n_features: int):
    """Consecutive Arrow batches of events gathered into tables of at least
    ``n_features`` feature occurrences (at most ``MAX_RUN_OCCURRENCES``; the
    last run may be shorter). Each lookup in the dictionary
    (``pyarrow.compute.index_in``) first builds a hash set of all its
    features, so a large dictionary is hashed once per run rather than once
    per batch; a run's rows are its batches' rows, indexed alike."""
    run: list = []
    occurrences, least = 0, min(n_features, MAX_RUN_OCCURRENCES)
    for batch in batches:
        offsets = batch.column("features").offsets
        run.append(batch)
        occurrences += offsets[len(offsets) - 1].as_py() - offsets[0].as_py()
        if occurrences >= least:
            yield pa.Table.from_batches(run)
            run, occurrences = [], 0
    if run:
        yield pa.Table.from_batches(run)


class _Carried:
    """What stands for a broadcast under Spark Connect: the value itself."""

    def __init__(self, value) -> None:
        self.value = value


def _raw_event_columns(shape: str) -> list[str]:
    """The raw event columns ``indexing.index_table`` reads."""
    head = ["event_id", "group", "weight", "label" if shape == MULTICLASS else "correct"]
    return [*head, "features", "values", *(["cand"] if shape == CANDIDATES else [])]


def _spark_schema(arrow_schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema)


__all__ = ["Engine", "SparkEngine", "build"]
