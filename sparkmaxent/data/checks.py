"""The check stage of ``prepare``: one pass over the raw events for every check.

The first parse error stops the run with ``path:line: reason`` unless
``quarantine`` sets the rejected records aside in ``<out>/_quarantine/``
(JSON lines: path, line, reason, text). No events, or an event weight that
is not finite and >= 0, are errors too.
"""

from __future__ import annotations

import logging

from .. import storage
from ..shapes import MULTICLASS
from .raw import KIND_ERROR, KIND_EVENT, RawSource
from .readers import InputError
from .schema import DatasetInfo

logger = logging.getLogger("sparkmaxent.data.prepare")  # a prepare run logs under one name

QUARANTINE_DIR = "_quarantine"


def raw_stats(raw, shape: str, vocab_info: DatasetInfo | None, training: bool):
    """One Row of figures over the raw events: error and event counts, total
    weight, first error, first bad weight, and the label figures
    (``dictionary.labels_of``) or the first training event without a correct
    candidate."""
    from pyspark.sql import functions as F

    is_event = F.col("kind") == KIND_EVENT
    is_error = F.col("kind") == KIND_ERROR
    pos = F.struct("file_index", "line")
    aggs = [
        F.sum(is_error.cast("long")).alias("n_errors"),
        F.sum(is_event.cast("long")).alias("n_raw"),
        F.sum(F.when(is_event, F.col("weight"))).alias("total_weight"),
        F.min(F.when(is_error, pos)).alias("first_error"),
        F.min(
            F.when(
                is_event
                & (F.isnan("weight") | (F.col("weight") < 0) | F.col("weight").isin(float("inf"))),
                F.struct("file_index", "line", "weight"),
            )
        ).alias("bad_weight"),
    ]
    if shape == MULTICLASS:
        if vocab_info is None:
            aggs.append(
                F.array_sort(F.collect_set(F.when(is_event, F.col("label")))).alias("labels")
            )
        else:
            known = (
                F.array(*[F.lit(x) for x in vocab_info.labels])
                if vocab_info.labels
                else F.array().cast("array<string>")
            )
            unseen = is_event & ~F.array_contains(known, F.col("label"))
            aggs.append(F.sum(unseen.cast("long")).alias("unknown_labels"))
            aggs.append(
                F.array_sort(F.collect_set(F.when(unseen, F.col("label")))).alias("unseen_labels")
            )
    elif training:
        no_correct = is_event & ~F.exists("correct", lambda x: x)
        aggs.append(
            F.min(
                F.when(
                    no_correct,
                    F.struct("file_index", "line", "event_id", F.size("correct").alias("n")),
                )
            ).alias("no_correct")
        )
    return raw.agg(*aggs).first()


def check_raw(src: RawSource, raw, stats, tmp: str, quarantine: bool) -> int:
    """Raise for the first parse error (without ``quarantine``), no events or
    a bad weight; with ``quarantine``, write the rejected records under
    ``tmp`` and return how many there were."""
    from pyspark.sql import functions as F

    is_error = F.col("kind") == KIND_ERROR
    n_errors = int(stats["n_errors"] or 0)
    if n_errors and not quarantine:
        fe = stats["first_error"]
        rec = (
            raw.where(
                is_error & (F.col("file_index") == fe["file_index"]) & (F.col("line") == fe["line"])
            )
            .select("reason")
            .first()
        )
        raise parse_error(src, fe["file_index"], fe["line"], rec["reason"])
    quarantined = 0
    if n_errors:
        names = F.array(*[F.lit(p) for p in src.files])
        (
            raw.where(is_error)
            .select(
                F.element_at(names, F.col("file_index") + 1).alias("path"),
                "line",
                "reason",
                "text",
                "file_index",
            )
            .repartition(1)
            .sortWithinPartitions("file_index", "line")
            .drop("file_index")
            .write.json(storage.join(tmp, QUARANTINE_DIR))
        )
        quarantined = n_errors
        logger.warning("quarantined %d malformed record(s) in %s", n_errors, f"{QUARANTINE_DIR}/")
    check_counts(src, stats, n_errors)
    return quarantined


def parse_error(src: RawSource, file_index: int, line: int, reason: str) -> InputError:
    """The error that stops a run at its first malformed record."""
    more = (
        " (stopped at the first malformed record; quarantine=True / --quarantine "
        "sets malformed records aside)"
    )
    return InputError(f"{src.where(file_index, line)}: {reason}{more}")


def check_counts(src: RawSource, stats, n_errors: int) -> None:
    """Raise for no events or a bad weight, from ``raw_stats``' figures
    (``n_raw``, ``bad_weight``; any mapping of them)."""
    if not stats["n_raw"]:
        raise InputError(
            f"expected events in {describe(src)}, got none after parsing"
            + (f" ({n_errors} malformed record(s) quarantined)" if n_errors else "")
        )
    bw = stats["bad_weight"]
    if bw is not None:
        raise InputError(
            f"{src.where(bw['file_index'], bw['line'])}: expected a finite "
            f"event weight >= 0, got {bw['weight']}"
        )


def describe(src: RawSource) -> str:
    """The input of a run in a few words, for messages."""
    if src.table is not None:
        return f"table {src.table}"
    if len(src.files) <= 3:
        return ", ".join(src.files)
    return f"{len(src.files)} files ({src.files[0]}, ..., {src.files[-1]})"


__all__ = ["QUARANTINE_DIR", "raw_stats", "check_raw", "check_counts", "describe", "parse_error"]
