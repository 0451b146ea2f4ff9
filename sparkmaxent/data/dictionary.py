"""The dictionary stage of ``prepare``: the label list and the feature dictionary.

For training data, count(f) is the sum of the weights of the events f occurs
in; features with count >= cutoff are kept (the count-cutoff baseline) and
numbered in feature-string order, and labels are the sorted distinct label
strings. With a ``vocabulary`` (held-out and test data) the dictionary and
labels of a prepared training set are reused instead. The counting,
cutoff and numbering are pure functions over Arrow data that both engines
call (``stages.SparkEngine`` per batch on the executors, then sums the
partial counts; ``local_prepare.ArrowEngine`` on the whole table).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import storage
from ..shapes import MULTICLASS
from .checks import describe
from .raw import RawSource
from .readers import InputError
from .schema import FEATURES_DIR, FEATURES_SCHEMA, DatasetInfo


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


def count_features(events: pa.Table | pa.RecordBatch) -> pa.Table:
    """(feature, count) of ``events`` (its ``features`` and ``weight``
    columns): count(f) the summed weight of the events f occurs in, each
    event once however often f repeats in it. Partial counts (of parts of
    the events) add up: :func:`number_features` sums them."""
    feats = _one_array(events.column("features"))
    pairs = pa.table({"row": pc.list_parent_indices(feats), "feature": pc.list_flatten(feats)})
    pairs = pairs.group_by(["row", "feature"], use_threads=False).aggregate([])  # once an event
    weight = _one_array(events.column("weight")).take(pairs.column("row"))
    return _sum_counts(pa.table({"feature": pairs.column("feature"), "count": weight}))


def keep_frequent(counts: pa.Table | pa.RecordBatch, cutoff: int) -> pa.Table | pa.RecordBatch:
    """The (feature, count) rows with count >= ``cutoff`` (all with 0): the
    count-cutoff baseline."""
    if cutoff <= 0:
        return counts
    return counts.filter(pc.greater_equal(counts.column("count"), float(cutoff)))


def number_features(counts: pa.Table, cutoff: int) -> pa.Table:
    """The (feature, id, count) dictionary (``schema.FEATURES_SCHEMA``) of
    (partial) feature counts: summed by feature, cut off
    (:func:`keep_frequent`), ids in feature-string (UTF-8 byte) order."""
    kept = keep_frequent(_sum_counts(counts), cutoff).sort_by("feature")
    ids = pa.array(np.arange(kept.num_rows, dtype=np.int32))
    feature = kept.column("feature").cast(pa.string())
    return pa.table([feature, ids, kept.column("count")], schema=FEATURES_SCHEMA)


def read_dictionary(vocabulary: str) -> pa.Table:
    """The (feature, id, count) dictionary of the ``vocabulary`` dataset, in id order."""
    table = storage.read_parquet(storage.join(vocabulary, FEATURES_DIR))
    return table.select(FEATURES_SCHEMA.names).cast(FEATURES_SCHEMA).sort_by("id")


def _sum_counts(counts: pa.Table) -> pa.Table:
    """The counts summed by feature, in the order of the rows (one thread)."""
    summed = counts.group_by("feature", use_threads=False).aggregate([("count", "sum")])
    return pa.table({"feature": summed.column("feature"), "count": summed.column("count_sum")})


def _one_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


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


__all__ = [
    "load_vocabulary",
    "labels_of",
    "count_features",
    "keep_frequent",
    "number_features",
    "read_dictionary",
    "feature_space_size",
]
