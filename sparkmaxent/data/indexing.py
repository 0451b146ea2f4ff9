"""The index stage of ``prepare``: feature strings -> ids, then merging events.

Features are mapped to ids by looking them up in the dictionary (on Spark
broadcast to every task); within an event (candidate) features are sorted by id and repeated
features' values summed, or, for binary data (``prepare(binary=True)``),
each feature present 1.0 (:func:`presence`). Features outside the dictionary are dropped (an
event may end up empty; it keeps its label). Identical events (label,
indices, values) may then be merged into one with the summed weight and the
smallest event_id/group.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..shapes import CANDIDATES, MULTICLASS
from .schema import events_schema


def index_table(
    events: pa.Table | pa.RecordBatch,
    dictionary: pa.Table,
    shape: str,
    labels: list[str],
    unseen_labels: list[str],
    binary: bool = False,
) -> pa.Table:
    """Raw events (event_id, group, weight, label or correct, features,
    values, cand) indexed in the columns of ``schema.events_schema``: each
    feature looked up in the (feature, id) ``dictionary`` (unknown ones
    dropped; an event may end up empty and keeps its label), then finished
    by :func:`_finalize_udf` (``binary`` included). A multiclass label
    becomes its index in ``labels``, or -(j + 1) for the j-th of
    ``unseen_labels``. Both engines index with this function (Spark per
    batch, the dictionary broadcast to its tasks)."""
    feats = _one_array(events.column("features"))
    rows = pc.list_parent_indices(feats).to_numpy()
    pos = _positions(feats, dictionary)
    known = pos.is_valid().to_numpy(zero_copy_only=False)
    ids = dictionary.column("id").take(pos.filter(pa.array(known)))
    values = pc.list_flatten(_one_array(events.column("values"))).filter(pa.array(known))
    entries = {"id": _one_array(ids), "value": values}
    if shape != MULTICLASS:
        cands = pc.list_flatten(_one_array(events.column("cand"))).filter(pa.array(known))
        entries = {"cand": cands, **entries}
    per_event = np.bincount(rows[known], minlength=events.num_rows)
    offsets = pa.array(np.concatenate([[0], np.cumsum(per_event)]).astype(np.int32))
    fs = pa.ListArray.from_arrays(
        offsets, pa.StructArray.from_arrays(list(entries.values()), names=list(entries))
    )
    cols = {c: _one_array(events.column(c)) for c in ("event_id", "group", "weight")}
    if shape == MULTICLASS:
        cols["label"] = label_index(_one_array(events.column("label")), labels, unseen_labels)
    else:
        cols["correct"] = _one_array(events.column("correct"))
    batch = pa.RecordBatch.from_arrays([*cols.values(), fs], names=[*cols, "fs"])
    schema = events_schema(shape)
    return pa.Table.from_batches(
        list(_finalize_udf(shape, schema, binary)(iter([batch]))), schema=schema
    )


def unknown_occurrences(events: pa.Table | pa.RecordBatch, dictionary: pa.Table) -> tuple[int, int]:
    """(feature occurrences of ``events`` outside the ``dictionary``, all
    its (event, feature) occurrences, known or not)."""
    feats = _one_array(events.column("features"))
    return _positions(feats, dictionary).null_count, len(pc.list_flatten(feats))


def label_index(label: pa.Array, labels: list[str], unseen: list[str]) -> pa.Array:
    """A known label's index in ``labels``; the j-th of ``unseen`` -(j + 1)."""
    known = pc.index_in(label, value_set=pa.array(labels, pa.string()))
    other = pc.index_in(label, value_set=pa.array(unseen, pa.string()))
    known_np = known.to_numpy(zero_copy_only=False)
    other_np = other.to_numpy(zero_copy_only=False)
    out = np.where(np.isnan(known_np), -(np.nan_to_num(other_np, nan=-1.0) + 1), known_np)
    return pa.array(out.astype(np.int32))


def merge_table(events: pa.Table, shape: str) -> pa.Table:
    """Identical events (label or correct and cand_nnz, indices, values) as
    one, with the summed weight (summed in event_id order, so the sum does
    not depend on the order rows arrive in) and the smallest event_id and
    group. Both engines merge with this function (Spark per partition of
    events hashed by their indices)."""
    events = events.sort_by("event_id")
    keys = ["label"] if shape == MULTICLASS else ["correct", "cand_nnz"]
    group_of = _first_seen_groups(events, [*keys, "indices", "values"])
    n = int(group_of.max()) + 1 if len(group_of) else 0
    reps = np.empty(n, dtype=np.int64)
    reps[group_of[::-1]] = np.arange(events.num_rows)[::-1]  # each group's first row
    weight = np.bincount(group_of, events.column("weight").to_numpy(), minlength=n)
    group = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(group, group_of, events.column("group").to_numpy())
    out = events.take(pa.array(reps))  # first rows in event_id order: the smallest event_id
    for name, col in (("weight", weight), ("group", group)):
        out = out.set_column(out.schema.get_field_index(name), name, pa.array(col))
    return out


def _first_seen_groups(table: pa.Table, columns: list[str]) -> np.ndarray:
    """Each row's group of rows identical in ``columns``, groups numbered in
    the order of their first row: each row's values as one byte string
    (a list: its length, then its items), dictionary-encoded."""
    if table.num_rows == 0:
        return np.empty(0, dtype=np.int64)
    parts = [p for c in columns for p in _row_bytes(_one_array(table.column(c)))]
    key = pc.binary_join_element_wise(*parts, pa.scalar(b"", pa.large_binary()))
    return pc.dictionary_encode(key).indices.to_numpy().astype(np.int64)


def _row_bytes(column: pa.Array) -> list[pa.Array]:
    """A column's rows as byte strings: a scalar's bytes, or a list's length
    and its items' bytes (floats with -0.0 as 0.0, equal as numbers)."""
    if not pa.types.is_list(column.type):
        return [_binary(_numbers(column), np.arange(len(column) + 1))]
    offsets = column.offsets.to_numpy().astype(np.int64)
    offsets = offsets - offsets[0]
    items = _numbers(column.flatten())
    return [_binary(np.diff(offsets), np.arange(len(column) + 1)), _binary(items, offsets)]


def _numbers(array: pa.Array) -> np.ndarray:
    values = array.to_numpy(zero_copy_only=False)
    return values + 0.0 if values.dtype.kind == "f" else values


def _binary(items: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """Row r: the bytes of ``items[offsets[r]:offsets[r + 1]]``."""
    items = np.ascontiguousarray(items)
    buffers = [None, pa.py_buffer(offsets * items.itemsize), pa.py_buffer(items.tobytes())]
    return pa.Array.from_buffers(pa.large_binary(), len(offsets) - 1, buffers)


def _positions(feats: pa.Array, dictionary: pa.Table) -> pa.Array:
    """Each (flattened) feature's row in the dictionary; null when unknown."""
    return pc.index_in(pc.list_flatten(feats), value_set=dictionary.column("feature"))


def _one_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def presence(values: np.ndarray) -> np.ndarray:
    """Binary predicates from summed feature values: 1.0 where a value is
    non-zero, 0.0 where it is zero (as CountVectorizer's ``binary=True``), so
    a token repeated in an event counts once (``prepare(binary=True)``, the
    ``data.binary`` key, ``--binary``; the one place every prepare path
    binarizes)."""
    return (values != 0).astype(np.float64)


def _finalize_udf(shape: str, schema: pa.Schema, binary: bool = False):
    """Per batch of indexed events: sort each event's (candidate, id) entries,
    sum the values of repeated features (``binary``: then :func:`presence`),
    and rebuild cand_nnz, all without a per-event Python loop. The Spark
    stage and the in-process one (``local_prepare``) both finish events here."""

    def finalize(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            m = batch.num_rows
            fs = batch.column("fs")
            offsets = fs.offsets.to_numpy().astype(np.int64)
            # ListArray.flatten and StructArray.flatten honour slice offsets
            # (StructArray.field does not).
            flat = fs.flatten()
            parts = {f.name: a for f, a in zip(flat.type, flat.flatten())}
            ids = parts["id"].to_numpy(zero_copy_only=False)
            vals = parts["value"].to_numpy(zero_copy_only=False)
            offsets = offsets - offsets[0]
            rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(offsets))
            if shape == CANDIDATES:
                cands = parts["cand"].to_numpy(zero_copy_only=False).astype(np.int64)
                correct = batch.column("correct")
                c_off = correct.offsets.to_numpy().astype(np.int64)
                c_off = c_off - c_off[0]
                gcand = c_off[rows] + cands  # candidate index within the batch
                order = np.lexsort((ids, gcand))
                key_hi = gcand[order]
            else:
                order = np.lexsort((ids, rows))
                key_hi = rows[order]
            ids_s, vals_s, rows_s = ids[order], vals[order], rows[order]
            n = len(ids_s)
            new = np.ones(n, dtype=bool)
            if n > 1:
                new[1:] = (key_hi[1:] != key_hi[:-1]) | (ids_s[1:] != ids_s[:-1])
            starts = np.flatnonzero(new)
            out_vals = np.add.reduceat(vals_s, starts) if n else vals_s
            if binary:
                out_vals = presence(out_vals)
            out_ids = ids_s[starts].astype(np.int32)
            per_event = np.bincount(rows_s[starts], minlength=m)
            new_off = np.concatenate([[0], np.cumsum(per_event)]).astype(np.int32)
            indices = pa.ListArray.from_arrays(pa.array(new_off), pa.array(out_ids, pa.int32()))
            values = pa.ListArray.from_arrays(pa.array(new_off), pa.array(out_vals, pa.float64()))
            cols: dict[str, pa.Array] = {
                "weight": batch.column("weight"),
                "indices": indices,
                "values": values,
                "event_id": batch.column("event_id"),
                "group": batch.column("group"),
            }
            if shape == MULTICLASS:
                cols["label"] = batch.column("label")
            else:
                n_cands = int(c_off[-1])
                nnz = np.bincount(key_hi[starts], minlength=n_cands).astype(np.int32)
                cols["correct"] = batch.column("correct")
                cols["cand_nnz"] = pa.ListArray.from_arrays(
                    pa.array(c_off.astype(np.int32)), pa.array(nnz, pa.int32())
                )
            yield pa.RecordBatch.from_arrays(
                [cols[f.name].cast(f.type) for f in schema], schema=schema
            )

    return finalize


__all__ = ["index_table", "unknown_occurrences", "label_index", "merge_table", "presence"]
