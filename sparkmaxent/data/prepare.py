"""Preparing a dataset: text files (or a Spark table) -> the layout of ``schema.py``.

``prepare`` and ``prepare_table`` run the stages in order, all on Spark but
for the bookkeeping on the driver: read (``raw``), check (``checks``),
dictionary (``dictionary``), index and merge (``indexing``), and write and
move into place atomically (``publish``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, fields
from typing import Any

from .. import storage
from ..session_kind import default_parallelism
from .dictionary import binary_setting, load_vocabulary
from .inputs import resolve_options
from .local_prepare import build_local, is_local, read_small
from .options import PrepareOptions, TableColumns
from .raw import RawSource, read_files
from .rawtable import read_candidate_table, read_table
from .readers import FORMATS, InputError
from .schema import DatasetInfo
from .stages import SparkEngine, build

logger = logging.getLogger(__name__)


def prepare(
    spark,
    inputs: list[str],
    out_dir: str,
    fmt: str,
    *,
    options: dict | None = None,
    settings: PrepareOptions | None = None,
    **keywords: Any,
) -> DatasetInfo:
    """Prepare text files of a registered format as a dataset (``schema.py``).

    Parameters
    ----------
    spark : SparkSession
    inputs : list of str
        Files, directories (read recursively) and globs; local paths or URIs.
    out_dir : str
        Directory to create (a local path or a Hadoop URI), written to a
        temporary sibling and published when complete; a second run on the
        same ``out_dir`` is refused while this one holds its lock.
    fmt : str
        A name in ``readers.FORMATS``.
    options : dict, optional
        Parser options (e.g. ``{"mode": "basenp"}`` for ``conll``).
    settings : PrepareOptions, optional
        The run's settings (``options.PrepareOptions``) as one object; the
        ``keywords`` below (its fields) are set over it.
    cutoff : int
        Keep features whose weighted event count is >= cutoff (0 keeps all).
        Ignored with ``vocabulary``.
    merge_duplicates : bool
        Merge identical events, summing weights (training data). Keep False
        for test/prediction data so every event keeps its own row.
    vocabulary : str, optional
        A prepared training dataset whose feature dictionary and labels are
        reused; unseen features are dropped and counted, unseen labels are
        counted and listed in DatasetInfo.unseen_labels, event label -(j + 1)
        for the j-th of them, so their names survive for evaluation.
        ``unknown_features`` counts dropped (event, feature) occurrences
        (``feature_occurrences`` all of them, known or not),
        ``unknown_labels`` events (before merging).
    partitions : int, optional
        Number of event files (default: ``spark.sparkContext.defaultParallelism``).
    quarantine : bool
        Set malformed records aside in ``<out_dir>/_quarantine/`` instead of
        failing at the first one.
    overwrite : bool
        Replace an existing ``out_dir`` (only once the new one is complete).
    lock_stale_s : float
        A lock on ``out_dir`` older than this is stale (``output.lock_stale_s``).
    require_labels : bool
        Training data: require >= 2 labels (multiclass) or a correct
        candidate in every event (candidate sets). Not checked with
        ``vocabulary``.
    in_process_max_events : int
        Fingerprint a dataset of at most this many events in this process
        rather than with two more Spark jobs (``data.in_process_max_events``;
        0: on Spark), and prepare input files of at most this many times
        ``in_process_bytes_per_event`` (512) bytes in all here without Spark
        jobs (``sparkmaxent.plan.Limits``). The dataset (and quarantine) is
        the same either way.
    binary : bool or None
        Binary predicates: a feature present in an event (candidate) has the
        value 1.0 however often it occurs or whatever value it is given
        (non-zero; as CountVectorizer's ``binary=True``), see
        ``indexing.presence``; ``data.binary``, ``--binary``. False: repeated
        features' values are summed (counts). None: as the ``vocabulary``
        was prepared (a model's vocabulary: as its training data), else
        False; a value that contradicts the vocabulary's is refused.

    Returns
    -------
    DatasetInfo
        As saved in ``<out_dir>/dataset.json``.

    Raises
    ------
    InputError
        Bad input, named by file and line: unknown format or option, no
        matching file, a malformed record (without ``quarantine``), no
        events, a single label, a training event without a correct
        candidate, an existing ``out_dir`` without ``overwrite``.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown input format {fmt!r}: expected one of {sorted(FORMATS)}")
    s = with_keywords(settings, keywords)
    storage.refuse_existing_output(out_dir, s.overwrite, "output directory", s.lock_stale_s)
    t0 = time.perf_counter()
    opts = resolve_options(fmt, options)
    files = [inputs] if isinstance(inputs, str) else list(inputs)
    # small inputs: every stage in this process (data/local_prepare.py)
    src = read_small(spark, files, fmt, opts, s.limits, s.quarantine)
    if src is None:
        src = read_files(spark, files, fmt, opts, s.quarantine)
    return _run(spark, src, out_dir, s, t0)


def with_keywords(settings: PrepareOptions | None, keywords: dict) -> PrepareOptions:
    """``settings`` (default: ``PrepareOptions()``) with a caller's keywords
    (its field names) set over it: where the public functions build the one
    object every stage reads."""
    base = settings if settings is not None else PrepareOptions()
    unknown = sorted(set(keywords) - {f.name for f in fields(PrepareOptions)})
    if unknown:
        raise TypeError(f"unexpected prepare keyword(s) {unknown}")
    return base.replace(**keywords) if keywords else base


def prepare_table(
    spark,
    table,
    out_dir: str,
    *,
    label_col: str | None = "label",
    features_col: str = "features",
    weight_col: str | None = None,
    values_col: str | None = None,
    key_col: str | None = None,
    settings: PrepareOptions | None = None,
    **keywords: Any,
) -> DatasetInfo:
    """Prepare a Spark DataFrame or table of multiclass events.

    Parameters
    ----------
    spark : SparkSession
    table : DataFrame or str
        A DataFrame, or the name of a table in the catalog.
    out_dir : str
        As in :func:`prepare`.
    label_col : str or None
        Label column (any type; labels are its values as strings). None for
        data to predict, with a ``vocabulary``: every gold label is then "".
    features_col : str
        Features: ``array<string>`` names, ``map<string,double>`` name ->
        value, or a pyspark.ml ``Vector`` (names are the indices as strings);
        see :mod:`sparkmaxent.data.columns`.
    weight_col : str, optional
        Numeric event weights (default 1.0).
    values_col : str, optional
        ``array<double>`` feature values, aligned with an ``array<string>``
        ``features_col`` (default 1.0 each).
    key_col : str, optional
        A column (of any orderable type) saved with each event's id in
        ``<out_dir>/keys``, so predictions carry it and join back to the
        table's rows; needs ``merge_duplicates=False``.
    settings, cutoff, merge_duplicates, vocabulary, partitions, overwrite, require_labels
        As in :func:`prepare` (no ``quarantine``: tables are checked).
    lock_stale_s, binary
        As in :func:`prepare` (``binary``: a ``map`` or Vector value becomes
        1.0 where it is non-zero; ``array<string>`` repeats count once).
    in_process_max_events : int
        As in :func:`prepare`; a table of at most this many rows (without
        ``key_col``) is also collected with Arrow in one Spark job and
        prepared in this process (``rawtable.read_table``): the same dataset.

    Returns
    -------
    DatasetInfo

    Raises
    ------
    InputError
        A missing column (the columns present are listed), a features column
        that is not ``array<string>``, nulls, NaN or infinite values or
        negative weights (the column is named), and the checks of
        :func:`prepare`.
    """
    s = with_keywords(settings, keywords).replace(quarantine=False)
    if label_col is None and s.vocabulary is None:
        raise InputError(
            "a table without a label column is data to predict: expected a vocabulary "
            "(the model's), or a label column for training data"
        )
    storage.refuse_existing_output(out_dir, s.overwrite, "output directory", s.lock_stale_s)
    t0 = time.perf_counter()
    cols = TableColumns(
        label=label_col or "",
        features=features_col,
        values=values_col,
        weight=weight_col,
        key=key_col,
    )
    src = read_table(spark, table, cols, s.limits)
    return _run(spark, src, out_dir, s, t0)


def prepare_candidate_table(
    spark,
    table,
    out_dir: str,
    *,
    group_col: str = "group",
    features_col: str = "features",
    correct_col: str = "correct",
    weight_col: str | None = None,
    values_col: str | None = None,
    key_col: str | None = None,
    settings: PrepareOptions | None = None,
    **keywords: Any,
) -> DatasetInfo:
    """Prepare a Spark DataFrame or table of candidate sets, one row per
    candidate: the same dataset as the ``tadm`` reader gives for the same
    events (``raw.read_candidate_table``).

    Parameters
    ----------
    spark : SparkSession
    table : DataFrame or str
        A DataFrame, or the name of a table in the catalog.
    out_dir : str
        As in :func:`prepare`.
    group_col : str
        The candidate set (event) a row belongs to; an integer group id is
        the event id.
    features_col, values_col : str
        The candidate's features, as in :func:`prepare_table`.
    correct_col : str
        Boolean, or numeric with > 0 meaning correct (TADM's score); an
        event may have several correct candidates.
    weight_col : str, optional
        Numeric event weight (default 1.0), the same on every row of a group.
    key_col : str, optional
        As in :func:`prepare_table`, the same on every row of a group (e.g.
        ``group_col`` itself).
    settings, cutoff, merge_duplicates, vocabulary, partitions, overwrite, require_labels
        As in :func:`prepare` (no ``quarantine``: tables are checked).
    lock_stale_s, in_process_max_events, binary
        As in :func:`prepare_table` (the checks of a small table stay Spark
        jobs: its candidates are grouped into events on Spark).

    Returns
    -------
    DatasetInfo

    Raises
    ------
    InputError
        The errors of :func:`prepare_table` for these columns, a correct
        column that is neither boolean nor numeric, and weights or keys that
        differ within a group (the column and group are named).
    """
    s = with_keywords(settings, keywords).replace(quarantine=False)
    storage.refuse_existing_output(out_dir, s.overwrite, "output directory", s.lock_stale_s)
    t0 = time.perf_counter()
    cols = TableColumns(
        features=features_col,
        values=values_col,
        weight=weight_col,
        group=group_col,
        correct=correct_col,
        key=key_col,
    )
    src = read_candidate_table(spark, table, cols, s.limits)
    return _run(spark, src, out_dir, s, t0)


def run_prepare(spark, src: RawSource, out_dir: str, settings: PrepareOptions) -> DatasetInfo:
    """Prepare raw events already read (one part of a split: data/split.py)."""
    return _run(spark, src, out_dir, settings, time.perf_counter())


# ------------------------------------------------------------------ the run


def _run(spark, src: RawSource, out_dir: str, settings: PrepareOptions, t0: float) -> DatasetInfo:
    """Check the run's settings, then under the output's lock (temporaries
    of killed runs swept first) build the dataset in a temporary sibling and
    publish it; on any failure the temporary directory is removed."""
    if src.key_col and settings.merge_duplicates:
        raise InputError(
            f"key column {src.key_col!r}: keys need one prepared event per row; "
            "prepare with merge_duplicates=False (--no-merge)"
        )
    vocab_info = load_vocabulary(settings.vocabulary, src.shape)
    # the settings as the stages use them: binary and partitions resolved
    settings = settings.replace(
        binary=binary_setting(settings.binary, vocab_info, settings.vocabulary),
        partitions=settings.partitions or default_parallelism(spark),
    )
    out_dir = storage.qualify(out_dir)
    parent, name = storage.split(out_dir)
    with storage.output_lock(out_dir, settings.lock_stale_s, "prepare"):
        storage.sweep(parent, {name})
        storage.refuse_existing(out_dir, settings.overwrite, "output directory")
        info = _build_and_publish(spark, src, out_dir, settings, vocab_info)
    logger.info(
        "prepared %s: %d events (total weight %g), %d features, %d labels, "
        "%d quarantined, %d unknown features, %d unknown labels, in %.1f s",
        out_dir,
        info.n_events,
        info.total_weight,
        info.n_features,
        len(info.labels),
        info.quarantined,
        info.unknown_features,
        info.unknown_labels,
        time.perf_counter() - t0,
    )
    return info


def _build_and_publish(
    spark, src: RawSource, out_dir: str, settings: PrepareOptions, vocab_info: DatasetInfo | None
) -> DatasetInfo:
    """The dataset built in a temporary sibling of ``out_dir``, then published
    (in place where nothing renames: ``storage.staged``)."""
    from pyspark import StorageLevel

    cached: list = []
    try:
        with storage.staged(out_dir) as tmp:
            storage.mkdirs(tmp)
            if is_local(src):
                info = build_local(spark, src, tmp, settings, vocab_info)
            else:
                raw = src.raw.persist(StorageLevel.MEMORY_AND_DISK)
                cached.append(raw)
                info = build(SparkEngine(spark, src, raw, cached), tmp, settings, vocab_info)
        if settings.plan is not None:
            settings.plan.prepared(is_local(src))
    finally:
        for df in cached:
            df.unpersist()
    return info


def info_summary(info: DatasetInfo) -> dict:
    """The figures of a DatasetInfo worth a log line (no label/input lists)."""
    d = asdict(info)
    d["n_labels"] = len(d.pop("labels"))
    d["n_inputs"] = len(d["source"].get("inputs", []))
    d["format"] = d.pop("source").get("format")
    return d


__all__ = [
    "PrepareOptions",
    "prepare",
    "prepare_table",
    "prepare_candidate_table",
    "run_prepare",
    "info_summary",
    "with_keywords",
]
