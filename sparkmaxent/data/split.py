"""A held-out part carved out of the training data at prepare time
(``data.heldout_fraction``, ``prepare --heldout-fraction``).

The unit of the split is a ``group`` (a sentence of a tagging corpus, else
one event), so a tagged sentence stays whole. Units are stratified by label
(a unit of one multiclass event: its label; a longer unit or a candidate
set: one stratum) and, within each stratum, ordered by a seeded hash of the
group id; the first round(fraction n) of a stratum are held out. The split
depends only on the inputs, their order and the seed. The training part is
prepared first (its dictionary and count cutoff from its own events only);
the held-out part is then prepared against that dictionary, unmerged, as
test data would be, so predicates seen only in held-out events are unknown.
"""

from __future__ import annotations

import logging

from .. import storage
from ..shapes import MULTICLASS
from .inputs import resolve_options
from .raw import KIND_EVENT, RawSource, read_files
from .readers import FORMATS, InputError
from .schema import DatasetInfo

logger = logging.getLogger("sparkmaxent.data.prepare")


def split_raw(raw, fraction: float, seed: int, shape: str):
    """(training part, held-out part) of raw events: see the module doc.
    Parse errors stay in the training part, which reports them."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    events = raw.where(F.col("kind") == KIND_EVENT)
    if shape == MULTICLASS:
        units = events.groupBy("group").agg(
            F.count("*").alias("n"), F.min("label").alias("first_label")
        )
        stratum = F.when(F.col("n") == 1, F.col("first_label")).otherwise(F.lit(""))
    else:
        units = events.select("group").distinct()
        stratum = F.lit("")
    units = units.select(
        "group", stratum.alias("stratum"), F.xxhash64(F.lit(seed), "group").alias("u")
    )
    rank = F.row_number().over(Window.partitionBy("stratum").orderBy("u", "group"))
    size = F.count("*").over(Window.partitionBy("stratum"))
    ranked = units.select("group", rank.alias("rank"), size.alias("size"))
    held = ranked.where(F.col("rank") <= F.floor(F.col("size") * fraction + 0.5)).select("group")
    return raw.join(held, "group", "left_anti"), events.join(held, "group", "left_semi")


def prepare_split(
    spark,
    inputs: list[str],
    out_dir: str,
    heldout_dir: str,
    fmt: str,
    *,
    fraction: float,
    seed: int = 0,
    options: dict | None = None,
    cutoff: int = 0,
    partitions: int | None = None,
    quarantine: bool = False,
    overwrite: bool = False,
) -> tuple[DatasetInfo, DatasetInfo]:
    """Prepare ``inputs`` as a training dataset in ``out_dir`` less a
    held-out part in ``heldout_dir`` (the module doc says how); the other
    arguments as in ``prepare.prepare``. Returns both DatasetInfos."""
    from pyspark import StorageLevel

    from .prepare import run_prepare

    if fmt not in FORMATS:
        raise InputError(
            f"a held-out fraction splits text input: expected a text format "
            f"{sorted(FORMATS)}, got {fmt!r} (split a table before, e.g. with "
            "DataFrame.randomSplit, and prepare the parts; held-out inputs then "
            "go to data.heldout_inputs)"
        )
    if not 0.0 < fraction < 1.0:
        raise InputError(f"expected a held-out fraction in (0, 1), got {fraction!r}")
    storage.refuse_existing(out_dir, overwrite, "output directory")
    storage.refuse_existing(heldout_dir, overwrite, "output directory")
    src = read_files(
        spark, [inputs] if isinstance(inputs, str) else list(inputs), fmt,
        resolve_options(fmt, options), quarantine,
    )  # fmt: skip
    raw = src.raw.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        train_raw, held_raw = split_raw(raw, fraction, seed, src.shape)
        split = {"fraction": fraction, "seed": seed}

        def part(frame, name: str) -> RawSource:
            source = {**src.source, "split": {**split, "part": name}}
            return RawSource(frame, src.shape, src.files, source)

        train_info = run_prepare(
            spark, part(train_raw, "train"), out_dir, cutoff=cutoff, merge_duplicates=True,
            vocabulary=None, partitions=partitions, quarantine=quarantine, overwrite=overwrite,
        )  # fmt: skip
        held_info = run_prepare(
            spark, part(held_raw, "heldout"), heldout_dir, cutoff=0, merge_duplicates=False,
            vocabulary=out_dir, partitions=partitions, quarantine=False, overwrite=overwrite,
        )  # fmt: skip
    finally:
        raw.unpersist()
    logger.info(
        "held out %d events (fraction %g, seed %d) into %s; %d training events after merging",
        held_info.n_events,
        fraction,
        seed,
        heldout_dir,
        train_info.n_events,
    )
    return train_info, held_info
