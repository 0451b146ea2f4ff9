"""The dictionary stage of ``prepare``: the label list and the feature dictionary.

For training data, count(f) is the sum of the weights of the events f occurs
in; features with count >= cutoff are kept (the count-cutoff baseline) and
numbered in feature-string order, and labels are the sorted distinct label
strings. With a ``vocabulary`` (held-out and test data) the dictionary and
labels of a prepared training set are reused instead.
"""

from __future__ import annotations

from .. import storage
from ..shapes import MULTICLASS
from .checks import describe
from .raw import RawSource
from .readers import InputError
from .schema import FEATURES_DIR, DatasetInfo


def load_vocabulary(vocabulary: str | None, shape: str) -> DatasetInfo | None:
    """The DatasetInfo of the ``vocabulary`` dataset (None without one),
    checked to hold events of ``shape``."""
    if vocabulary is None:
        return None
    try:
        vocab_info = DatasetInfo.load(vocabulary)
    except (FileNotFoundError, ValueError) as e:
        raise InputError(f"vocabulary: {e}") from None
    if vocab_info.shape != shape:
        raise InputError(
            f"vocabulary {vocabulary} holds {vocab_info.shape} events, but the input is {shape}"
        )
    return vocab_info


def binary_setting(
    binary: bool | None, vocab_info: DatasetInfo | None, vocabulary: str | None
) -> bool:
    """Whether to prepare binary predicates (``prepare(binary=...)``): as
    given, or (None) as the ``vocabulary`` dataset was prepared, so data
    scored by a model is read as its training data was.

    Raises
    ------
    InputError
        ``binary`` given and unlike the vocabulary's: a model trained on
        presence would score counts (or the reverse) without a word.
    """
    recorded = None if vocab_info is None else vocab_info.source.get("binary")
    if binary is None:
        return bool(recorded)
    if recorded is not None and bool(recorded) != binary:
        raise InputError(
            f"vocabulary {vocabulary} was prepared with binary = {str(recorded).lower()}: "
            f"data indexed with it must be too, got binary = {str(binary).lower()} "
            "(leave data.binary / --binary unset to follow the vocabulary)"
        )
    return bool(binary)


def labels_of(
    src: RawSource, stats, vocab_info: DatasetInfo | None, training: bool
) -> tuple[list[str], int, list[str]]:
    """(labels, unknown_labels, unseen_labels) from the figures of
    ``checks.raw_stats``. Training data needs >= 2 labels (multiclass) or a
    correct candidate in every event (candidate sets)."""
    unknown_labels, unseen_labels = 0, []
    if src.shape == MULTICLASS:
        if vocab_info is None:
            labels = list(stats["labels"])
            if training and len(labels) < 2:
                raise InputError(
                    f"expected at least 2 distinct labels in training data, got "
                    f"{len(labels)} ({labels}) in {describe(src)}; pass a "
                    "vocabulary (or require_labels=False) for test data"
                )
        else:
            labels = list(vocab_info.labels)
            unknown_labels = int(stats["unknown_labels"] or 0)
            unseen_labels = list(stats["unseen_labels"] or [])
    else:
        labels = []
        nc = stats["no_correct"] if training else None
        if nc is not None:
            where = (
                src.where(nc["file_index"], nc["line"])
                if src.table is None
                else f"table {src.table}, event {nc['event_id']}"
            )
            raise InputError(
                f"{where}: expected at least one correct candidate in a training "
                f"event, got none among {nc['n']} candidate(s) (pass a "
                "vocabulary or require_labels=False for test data)"
            )
    return labels, unknown_labels, unseen_labels


def feature_dictionary(spark, events, cutoff: int, vocabulary: str | None):
    """The (feature, id, count) dictionary, persisted: counted from ``events``
    and cut off, or read from the ``vocabulary`` dataset."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if vocabulary is None:
        counts = (
            events.select("weight", F.explode(F.array_distinct("features")).alias("feature"))
            .groupBy("feature")
            .agg(F.sum("weight").alias("count"))
        )
        if cutoff > 0:
            counts = counts.where(F.col("count") >= cutoff)
        # One partition sorted by feature: monotonically_increasing_id is then
        # the row number, so ids follow feature-string order.
        return (
            counts.repartition(1)
            .sortWithinPartitions("feature")
            .withColumn("id", F.monotonically_increasing_id().cast("int"))
            .select("feature", "id", "count")
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
    return (
        spark.read.parquet(storage.join(vocabulary, FEATURES_DIR))
        .select(
            F.col("feature").cast("string"), F.col("id").cast("int"), F.col("count").cast("double")
        )
        .persist(StorageLevel.MEMORY_AND_DISK)
    )


def feature_space_size(
    vocab_info: DatasetInfo | None, vocabulary: str | None, n_features: int
) -> int:
    """How many feature ids the prepared dataset has: the ``n_features``
    rows of its dictionary, or with a reused vocabulary its dataset.json's
    count. A reused dictionary must hold that many rows, except a saved
    model's vocabulary, which holds only the predicates the model uses."""
    if vocab_info is None:
        return n_features
    model_vocabulary = "model" in (vocab_info.source or {})
    if n_features > vocab_info.n_features or (
        not model_vocabulary and n_features != vocab_info.n_features
    ):
        raise InputError(
            f"vocabulary {vocabulary}: dataset.json says {vocab_info.n_features} "
            f"features, {FEATURES_DIR}/ holds {n_features}"
        )
    return vocab_info.n_features


__all__ = ["load_vocabulary", "labels_of", "feature_dictionary", "feature_space_size"]
