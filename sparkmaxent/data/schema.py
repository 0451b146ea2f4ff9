"""The prepared dataset: a directory every job after ``prepare`` reads.

``dataset.json`` holds the DatasetInfo, ``events/`` the events in Parquet,
one row per (merged) event with the columns of ``events_schema(shape)``, and
``features/`` the feature dictionary (``FEATURES_SCHEMA``); a table
prepared with a key column also has ``keys/`` (event_id and that column),
so predictions join back to the table's rows. A multiclass
label -(j + 1) is ``DatasetInfo.unseen_labels[j]``, a label the training
dictionary lacks.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa

from .. import storage
from ..errors import InputError
from ..kernels import CANDIDATES, MULTICLASS, Space
from ..kernels.blocks import Block, candidate_block, multiclass_block

FORMAT_VERSION = 1
INFO_FILE = "dataset.json"
EVENTS_DIR = "events"
FEATURES_DIR = "features"
KEYS_DIR = "keys"  # (event_id, the key column) of a table prepared with key_col

MULTICLASS_SCHEMA = pa.schema(
    [
        ("label", pa.int32()),
        ("weight", pa.float64()),
        ("indices", pa.list_(pa.int32())),
        ("values", pa.list_(pa.float64())),
        ("event_id", pa.int64()),
        ("group", pa.int64()),
    ]
)
CANDIDATES_SCHEMA = pa.schema(
    [
        ("weight", pa.float64()),
        ("correct", pa.list_(pa.bool_())),
        ("cand_nnz", pa.list_(pa.int32())),
        ("indices", pa.list_(pa.int32())),
        ("values", pa.list_(pa.float64())),
        ("event_id", pa.int64()),
        ("group", pa.int64()),
    ]
)
FEATURES_SCHEMA = pa.schema([("feature", pa.string()), ("id", pa.int32()), ("count", pa.float64())])


def events_schema(shape: str) -> pa.Schema:
    return MULTICLASS_SCHEMA if shape == MULTICLASS else CANDIDATES_SCHEMA


@dataclass
class DatasetInfo:
    """What ``dataset.json`` says about a prepared dataset."""

    shape: str
    n_features: int
    labels: list[str] = field(default_factory=list)
    n_events: int = 0
    total_weight: float = 0.0
    source: dict = field(default_factory=dict)
    cutoff: int = 0
    quarantined: int = 0
    unknown_features: int = 0
    # (event, feature) occurrences in the input, known or not; counted with
    # unknown_features (prepared with a vocabulary), 0 otherwise and in
    # dataset.json files written before it was recorded
    feature_occurrences: int = 0
    unknown_labels: int = 0
    unseen_labels: list[str] = field(default_factory=list)
    format_version: int = FORMAT_VERSION
    # Content fingerprints (data/fingerprint.py); {} = unknown (older datasets).
    events_fingerprint: dict = field(default_factory=dict)
    vocabulary_fingerprint: dict = field(default_factory=dict)

    def label_name(self, index: int) -> str:
        """Label string of an event label index (negative: an unseen label)."""
        return self.labels[index] if index >= 0 else self.unseen_labels[-index - 1]

    def space(self, bias: bool = False) -> Space:
        if self.shape == MULTICLASS:
            return Space(MULTICLASS, self.n_features, len(self.labels), bias=bias)
        return Space(CANDIDATES, self.n_features, 1)

    def save(self, directory: str) -> None:
        storage.write_json(storage.join(directory, INFO_FILE), asdict(self))

    @staticmethod
    def load(directory: str) -> DatasetInfo:
        path = storage.join(directory, INFO_FILE)
        if not storage.exists(path):
            raise FileNotFoundError(
                f"{directory} is not a prepared dataset: expected {INFO_FILE} in it "
                "(run jobs/prepare.py first)"
            )
        try:
            raw = json.loads(storage.read_bytes(path))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(
                f"{path}: expected the JSON of a dataset, got invalid JSON ({e})"
            ) from None
        if not isinstance(raw, dict):
            raise InputError(f"{path}: expected a JSON object, got {type(raw).__name__}")
        if raw.get("format_version") != FORMAT_VERSION:
            raise InputError(
                f"{path}: expected format_version {FORMAT_VERSION}, got {raw.get('format_version')}"
            )
        return DatasetInfo(**raw)


def _list_parts(arr: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """CSR (offsets from 0, flat values) of a possibly sliced list array."""
    if isinstance(arr, pa.ChunkedArray):  # one chunk is taken as it is, not copied
        arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    offsets = arr.offsets.to_numpy().astype(np.int64)
    return offsets - offsets[0], arr.flatten().to_numpy(zero_copy_only=False)


def block_from_arrow(table: pa.Table | pa.RecordBatch, info: DatasetInfo) -> Block:
    """A kernel block from event rows, with no per-row Python loop, carrying
    the rows' ``event_id`` and ``group`` when they have them (held-out chunk
    F1 and k folds need them)."""
    block = _block_from_arrow(table, info)
    names = table.schema.names
    if "event_id" in names and "group" in names:
        event_id = np.asarray(table.column("event_id").to_numpy(), dtype=np.int64)
        group = np.asarray(table.column("group").to_numpy(), dtype=np.int64)
        block = dataclasses.replace(block, event_id=event_id, group=group)
    return block


def _block_from_arrow(table: pa.Table | pa.RecordBatch, info: DatasetInfo) -> Block:
    indptr, indices = _list_parts(table.column("indices"))
    _, values = _list_parts(table.column("values"))
    weights = table.column("weight").to_numpy()
    if info.shape == MULTICLASS:
        return multiclass_block(
            indptr,
            indices,
            values,
            table.column("label").to_numpy(),
            weights,
            info.n_features,
            len(info.labels),
        )
    event_ptr, correct = _list_parts(table.column("correct"))
    _, cand_nnz = _list_parts(table.column("cand_nnz"))
    cand_indptr = np.concatenate([[0], np.cumsum(cand_nnz, dtype=np.int64)])
    return candidate_block(
        event_ptr, cand_indptr, indices, values, correct, weights, info.n_features
    )
