"""The index stage of ``prepare``: feature strings -> ids, then merging events.

Features are mapped to ids with a join (broadcast when the dictionary is
small); within an event (candidate) features are sorted by id and repeated
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

from ..shapes import CANDIDATES, MULTICLASS
from .schema import events_schema

# Dictionaries up to this size are broadcast to every task for the feature join
# (about 40 bytes a feature); larger ones go through a shuffle join.
BROADCAST_MAX_FEATURES = 2_000_000


def index_events(
    events,
    dictionary,
    n_features: int,
    shape: str,
    labels: list[str],
    unseen_labels: list[str],
    count_unknown: bool,
    binary: bool = False,
):
    """(indexed events in the columns of ``schema.events_schema``, number of
    (event, feature) occurrences dropped as unknown, number of (event,
    feature) occurrences in all, known or not; both counted only when
    ``count_unknown``, else 0). Multiclass labels become their index in
    ``labels``, or -(j + 1) for the j-th of ``unseen_labels``. ``binary``:
    values as :func:`presence` gives them."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    # Explode (event, feature), join the dictionary, regroup by event. Event
    # columns ride along (first()) so no join back to the events is needed;
    # explode_outer keeps events without features.
    if shape == MULTICLASS:
        # known label: its index; unseen label j (of DatasetInfo.unseen_labels): -(j + 1)
        def position(names):
            return (
                F.array_position(F.array(*[F.lit(x) for x in names]), F.col("label")).cast("int")
                if names
                else F.lit(0)
            )

        label_index = (
            F.when(position(labels) > 0, position(labels) - 1)
            .otherwise(-position(unseen_labels))
            .cast("int")
        )
        head, zipped = [label_index.alias("label")], F.arrays_zip("features", "values")
        entry = ["id", "value"]
    else:
        head, zipped = [F.col("correct")], F.arrays_zip("features", "values", "cand")
        entry = ["cand", "id", "value"]
    carried = ["group", "weight", "label" if shape == MULTICLASS else "correct"]
    occ = events.select(
        "event_id", "group", "weight", *head, F.explode_outer(zipped).alias("z")
    ).select(
        "event_id",
        "group",
        "weight",
        carried[2],
        F.col("z.features").alias("feature"),
        F.col("z.values").alias("value"),
        *([F.col("z.cand").alias("cand")] if shape == CANDIDATES else []),
    )
    lookup = dictionary.select("feature", "id")
    if n_features <= BROADCAST_MAX_FEATURES:
        lookup = F.broadcast(lookup)
    joined = occ.join(lookup, "feature", "left")
    unknown_features = occurrences = 0
    if count_unknown:  # occurrences of features outside the vocabulary, and all of them
        counts = (
            joined.where(F.col("feature").isNotNull())
            .agg(
                F.count(F.lit(1)).alias("all"),
                F.sum(F.col("id").isNull().cast("long")).alias("unknown"),
            )
            .first()
        )
        unknown_features, occurrences = int(counts["unknown"] or 0), int(counts["all"] or 0)
    indexed = joined.groupBy("event_id").agg(
        *[F.first(c).alias(c) for c in carried],
        F.collect_list(F.when(F.col("id").isNotNull(), F.struct(*entry))).alias("fs"),
    )
    final_struct = _spark_schema(events_schema(shape))
    finalize = _finalize_udf(shape, to_arrow_schema(final_struct), binary)
    final = indexed.mapInArrow(finalize, final_struct)
    return final, unknown_features, occurrences


def merge_duplicates(events, shape: str):
    """Identical events (label, indices, values) as one, with the summed
    weight and the smallest event_id and group."""
    from pyspark.sql import functions as F

    keys = ["label"] if shape == MULTICLASS else ["correct", "cand_nnz"]
    return events.groupBy(*keys, "indices", "values").agg(
        F.sum("weight").alias("weight"),
        F.min("event_id").alias("event_id"),
        F.min("group").alias("group"),
    )


def _spark_schema(arrow_schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema)


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


__all__ = ["index_events", "merge_duplicates", "presence", "BROADCAST_MAX_FEATURES"]
