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
The assignment is two functions over Arrow data, ``unit_strata`` and
``held_groups``, that both engines call: ``split_raw`` per partition on
Spark, ``split_local`` on the whole table for small inputs
(``data.in_process_max_events``), in the driver's process without Spark jobs.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import storage
from ..shapes import MULTICLASS
from .inputs import resolve_options
from .local_prepare import read_small
from .options import PrepareOptions
from .raw import KIND_EVENT, RawSource, read_files
from .readers import FORMATS, InputError
from .schema import DatasetInfo

logger = logging.getLogger("sparkmaxent.data.prepare")


def split_raw(raw, fraction: float, seed: int, shape: str):
    """(training part, held-out part) of raw events on Spark: see the module
    doc. ``unit_strata`` runs per partition of events grouped by unit,
    ``held_groups`` per partition of units grouped by stratum (a stratum
    meets in one task, as a window over it would). Parse errors stay in
    the training part, which reports them."""
    from pyspark.sql import functions as F

    events = raw.where(F.col("kind") == KIND_EVENT)
    label = F.col("label") if shape == MULTICLASS else F.lit(None).cast("string")

    def strata(batches):
        yield from unit_strata(_whole(batches, UNIT_COLUMNS), shape).to_batches()

    def held(batches):
        yield from held_groups(_whole(batches, STRATA_COLUMNS), fraction, seed).to_batches()

    units = events.select("group", label.alias("label")).repartition("group")
    units = units.mapInArrow(strata, "group long, stratum string").repartition("stratum")
    held_out = units.mapInArrow(held, "group long")
    return raw.join(held_out, "group", "left_anti"), events.join(held_out, "group", "left_semi")


def split_local(raw: pa.Table, fraction: float, seed: int, shape: str) -> tuple:
    """``split_raw`` on raw events read in this process (an Arrow table),
    with the same two functions on the whole table, so the same events are
    held out, without Spark jobs (data/local_prepare.py)."""
    is_event = pc.equal(raw.column("kind"), KIND_EVENT)
    events = raw.filter(is_event)
    label = (
        events.column("label") if shape == MULTICLASS else pa.nulls(events.num_rows, pa.string())
    )
    units = unit_strata(pa.table([events.column("group"), label], schema=UNIT_COLUMNS), shape)
    held = held_groups(units, fraction, seed).column("group")
    in_held = pc.and_(pc.is_in(raw.column("group"), value_set=held), is_event)
    return raw.filter(pc.invert(in_held)), raw.filter(in_held)


UNIT_COLUMNS = pa.schema([("group", pa.int64()), ("label", pa.string())])
STRATA_COLUMNS = pa.schema([("group", pa.int64()), ("stratum", pa.string())])


def unit_strata(events: pa.Table, shape: str) -> pa.Table:
    """(group, stratum) of each unit among ``events`` (group, label), all
    the events of a unit included: a one-event multiclass unit's stratum is
    its label, any other unit's the empty string."""
    units = events.group_by("group", use_threads=False).aggregate(
        [([], "count_all"), ("label", "min")]
    )
    one_event = pc.equal(units.column("count_all"), 1)
    if shape != MULTICLASS:
        one_event = pc.and_(one_event, False)
    stratum = pc.if_else(one_event, units.column("label_min"), "")
    return pa.table([units.column("group"), stratum.cast(pa.string())], schema=STRATA_COLUMNS)


def held_groups(units: pa.Table, fraction: float, seed: int) -> pa.Table:
    """The held-out units' groups among ``units`` (group, stratum), whole
    strata included: in each stratum of n units, ordered by the seeded hash
    of the group (``spark_xxhash64``) and then the group, the first
    round(fraction n)."""
    group = units.column("group").to_numpy()
    _, strata = np.unique(
        units.column("stratum").to_numpy(zero_copy_only=False), return_inverse=True
    )
    order = np.lexsort((group, spark_xxhash64(group, seed), strata))
    size = np.bincount(strata, minlength=1)
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    rank = np.empty(len(group), dtype=np.int64)
    rank[order] = np.arange(len(group)) - start[strata[order]] + 1
    held = group[rank <= np.floor(size[strata] * fraction + 0.5)]
    return pa.table({"group": pa.array(held, pa.int64())})


def _whole(batches, schema: pa.Schema) -> pa.Table:
    """A partition's Arrow batches as one table (``schema`` when empty)."""
    return pa.Table.from_batches(list(batches), schema=schema).cast(schema)


_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def spark_xxhash64(values: np.ndarray, seed: int) -> np.ndarray:
    """Spark's ``xxhash64(lit(seed), col)`` of a long column: XXH64 of the
    seed (an int literal below 2^31, else a long) with Spark's seed 42, then
    of each value with that hash as seed (Spark's XxHash64 / XXH64.hashInt,
    hashLong). Signed, as Spark orders it."""
    with np.errstate(over="ignore"):
        h = _xxh64_int(seed, 42) if -(2**31) <= seed < 2**31 else _xxh64_long(seed, 42)
        return _xxh64_long(np.asarray(values, dtype=np.int64), h).view(np.int64)


def _rotl(x, r: int):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _fmix(h):
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(_P2)
    h = h ^ (h >> np.uint64(29))
    h = h * np.uint64(_P3)
    return h ^ (h >> np.uint64(32))


def _xxh64_int(value: int, seed) -> np.uint64:
    h = np.uint64(seed) + np.uint64(_P5) + np.uint64(4)
    h = h ^ np.uint64(value & 0xFFFFFFFF) * np.uint64(_P1)
    return _fmix(_rotl(h, 23) * np.uint64(_P2) + np.uint64(_P3))


def _xxh64_long(value, seed):
    x = (
        np.asarray(value, dtype=np.int64).view(np.uint64)
        if np.ndim(value)
        else np.uint64(value % 2**64)
    )
    h = np.uint64(seed) + np.uint64(_P5) + np.uint64(8)
    h = h ^ _rotl(x * np.uint64(_P2), 31) * np.uint64(_P1)
    return _fmix(_rotl(h, 27) * np.uint64(_P1) + np.uint64(_P4))


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
    settings: PrepareOptions | None = None,
    **keywords: Any,
) -> tuple[DatasetInfo, DatasetInfo]:
    """Prepare ``inputs`` as a training dataset in ``out_dir`` less a
    held-out part in ``heldout_dir`` (the module doc says how); ``options``
    (the parser's), ``settings`` and ``keywords`` (cutoff, partitions,
    quarantine, overwrite, in_process_max_events, binary) as in
    ``prepare.prepare`` (small inputs are read, split and prepared in this
    process). The training part is merged, the held-out part is not and
    follows the training part's dictionary and ``binary``. Returns both
    DatasetInfos."""
    from pyspark import StorageLevel

    from .prepare import run_prepare, with_keywords

    if fmt not in FORMATS:
        raise InputError(
            f"a held-out fraction splits text input: expected a text format "
            f"{sorted(FORMATS)}, got {fmt!r} (split a table before, e.g. with "
            "DataFrame.randomSplit, and prepare the parts; held-out inputs then "
            "go to data.heldout_inputs)"
        )
    if not 0.0 < fraction < 1.0:
        raise InputError(f"expected a held-out fraction in (0, 1), got {fraction!r}")
    s = with_keywords(settings, keywords).replace(
        merge_duplicates=True, vocabulary=None, require_labels=True
    )
    storage.refuse_existing_output(out_dir, s.overwrite, "output directory", s.lock_stale_s)
    storage.refuse_existing_output(heldout_dir, s.overwrite, "output directory", s.lock_stale_s)
    files = [inputs] if isinstance(inputs, str) else list(inputs)
    opts = resolve_options(fmt, options)
    src = read_small(spark, files, fmt, opts, s.limits, s.quarantine)
    local = src is not None  # small inputs: split and prepared here, no Spark job
    if src is None:
        src = read_files(spark, files, fmt, opts, s.quarantine)
    raw = src.raw if local else src.raw.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        split_parts = split_local if local else split_raw
        train_raw, held_raw = split_parts(raw, fraction, seed, src.shape)
        split = {"fraction": fraction, "seed": seed}

        def part(frame, name: str) -> RawSource:
            source = {**src.source, "split": {**split, "part": name}}
            return RawSource(frame, src.shape, src.files, source)

        train_info = run_prepare(spark, part(train_raw, "train"), out_dir, s)
        held = s.replace(
            cutoff=0, merge_duplicates=False, vocabulary=out_dir, quarantine=False, binary=None
        )
        held_info = run_prepare(spark, part(held_raw, "heldout"), heldout_dir, held)
    finally:
        if not local:
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
