"""Scoring a prepared dataset at scale with a vectorised UDF per partition."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import storage
from ..data.schema import EVENTS_DIR, KEYS_DIR, DatasetInfo, block_from_arrow
from ..errors import InputError
from ..kernels import MULTICLASS, CandidateBlock, MulticlassBlock
from ..model import MaxentModel
from ..session_kind import is_connect

# label: the gold label (also one unseen in training); predicted: the model's
MULTICLASS_OUTPUT = pa.schema(
    [
        ("event_id", pa.int64()),
        ("group", pa.int64()),
        ("label", pa.string()),
        ("predicted", pa.string()),
        ("probability", pa.float64()),
        ("probabilities", pa.list_(pa.float64())),
    ]
)
CANDIDATES_OUTPUT = pa.schema(
    [
        ("event_id", pa.int64()),
        ("group", pa.int64()),
        ("predicted", pa.int32()),
        ("correct", pa.list_(pa.bool_())),
        ("probabilities", pa.list_(pa.float64())),
    ]
)


def check_compatible(model: MaxentModel, info: DatasetInfo, where: str) -> None:
    """The dataset must be indexed with the model's dictionary."""
    if info.shape != model.space.shape:
        raise InputError(
            f"{where}: model is for {model.space.shape} events, data holds {info.shape}"
        )
    if info.n_features != model.n_atoms or (
        info.shape == MULTICLASS and info.labels != model.labels
    ):
        raise InputError(
            f"{where}: events were not prepared with this model's dictionary "
            f"(expected {model.n_atoms} features and labels {model.labels[:5]}..., "
            f"got {info.n_features} and {info.labels[:5]}...); prepare them with "
            f"--vocabulary <model>/vocabulary"
        )


def _score_batches(model: MaxentModel, info: DatasetInfo, batches):
    labels = np.asarray(model.labels, dtype=object)
    # gold label strings by index, unseen labels (negative indices) included
    gold_names = np.asarray(list(model.labels) + list(reversed(info.unseen_labels)), dtype=object)
    for batch in batches:
        if batch.num_rows == 0:
            continue
        block = block_from_arrow(batch, info)
        ids = batch.column("event_id")
        groups = batch.column("group")
        if info.shape == MULTICLASS:
            assert isinstance(block, MulticlassBlock), "block_from_arrow follows info.shape"
            pred, P = model.predict(block)
            K = P.shape[1]
            yield pa.RecordBatch.from_arrays(
                [
                    ids,
                    groups,
                    pa.array(gold_names[block.y]),
                    pa.array(labels[pred]),
                    pa.array(P[np.arange(len(pred)), pred]),
                    pa.ListArray.from_arrays(
                        pa.array(np.arange(0, P.size + 1, K, dtype=np.int32)), pa.array(P.ravel())
                    ),
                ],
                schema=MULTICLASS_OUTPUT,
            )
        else:
            assert isinstance(block, CandidateBlock), "block_from_arrow follows info.shape"
            p = model.candidate_proba(block)
            ptr, lengths = block.event_ptr, np.diff(block.event_ptr)
            # first candidate reaching its event's maximum probability
            top = np.repeat(np.maximum.reduceat(p, ptr[:-1]), lengths)
            position = np.arange(len(p)) - np.repeat(ptr[:-1], lengths)
            best = np.minimum.reduceat(np.where(p == top, position, len(p)), ptr[:-1]).astype(
                np.int32
            )
            offsets = pa.array(ptr.astype(np.int32))
            yield pa.RecordBatch.from_arrays(
                [
                    ids,
                    groups,
                    pa.array(best),
                    pa.ListArray.from_arrays(offsets, pa.array(block.correct)),
                    pa.ListArray.from_arrays(offsets, pa.array(p)),
                ],
                schema=CANDIDATES_OUTPUT,
            )


def predictions_table(model: MaxentModel, dataset_dir: str) -> pa.Table:
    """The predictions of :func:`predictions` computed in this process (the
    same scoring code over the events read with pyarrow), for datasets that
    fit the driver."""
    from ..data.load import read_events_table

    info = DatasetInfo.load(dataset_dir)
    check_compatible(model, info, dataset_dir)
    schema = MULTICLASS_OUTPUT if info.shape == MULTICLASS else CANDIDATES_OUTPUT
    events = read_events_table(dataset_dir, info)
    return pa.Table.from_batches(list(_score_batches(model, info, events.to_batches())), schema)


def key_column(info: DatasetInfo) -> str | None:
    """The table column a dataset was prepared to carry into predictions
    (``prepare_table(key_col=...)``), if any."""
    return (info.source.get("options") or {}).get("key_col") or None


def check_key_column(key_col: str, shape: str) -> None:
    """A key column must not take the name of a prediction column."""
    names = (MULTICLASS_OUTPUT if shape == MULTICLASS else CANDIDATES_OUTPUT).names
    if key_col in names:
        raise InputError(
            f"key column {key_col!r}: expected a name other than the prediction "
            f"columns {names}; rename it in the table"
        )


class _Held:
    """What stands for the model's broadcast under Spark Connect (no
    broadcasts there): the model itself, carried in the UDF's closure."""

    def __init__(self, value: MaxentModel):
        self.value = value

    def destroy(self) -> None:
        pass


def predictions(spark, model: MaxentModel, dataset_dir: str):
    """A DataFrame of predictions for a prepared dataset, plus the broadcast
    of the model to destroy once the DataFrame has been consumed. A dataset
    prepared with a key column gets it joined on by event_id (on the
    executors), so predictions join back to the source table's rows."""
    info = DatasetInfo.load(dataset_dir)
    check_compatible(model, info, dataset_dir)
    schema = MULTICLASS_OUTPUT if info.shape == MULTICLASS else CANDIDATES_OUTPUT
    events = spark.read.parquet(storage.join(dataset_dir, EVENTS_DIR))
    bc = _Held(model) if is_connect(spark) else spark.sparkContext.broadcast(model)

    def score(batches):
        yield from _score_batches(bc.value, info, batches)

    from pyspark.sql.pandas.types import from_arrow_schema

    frame = events.mapInArrow(score, from_arrow_schema(schema))
    key_col = key_column(info)
    if key_col:
        check_key_column(key_col, info.shape)
        keys = spark.read.parquet(storage.join(dataset_dir, KEYS_DIR))
        frame = frame.join(keys, "event_id", "left").select(key_col, *schema.names)
    return frame, bc
