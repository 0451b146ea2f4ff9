"""Preparing a dataset: text files (or a Spark table) -> the layout of ``schema.py``.

``prepare`` and ``prepare_table`` run the stages in order, all on Spark but
for the bookkeeping on the driver: read (``raw``), check (``checks``),
dictionary (``dictionary``), index and merge (``indexing``), and write and
move into place atomically (``publish``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict

from .. import storage
from ..session_kind import default_parallelism
from .checks import check_raw, raw_stats
from .dictionary import (
    binary_setting,
    feature_dictionary,
    feature_space_size,
    labels_of,
    load_vocabulary,
)
from .indexing import index_events
from .indexing import merge_duplicates as merge_events
from .inputs import resolve_options
from .local_prepare import build_local, is_local, read_small
from .publish import save_info, write_events, write_features, write_keys
from .raw import KIND_EVENT, RawSource, read_files
from .rawtable import read_candidate_table, read_table
from .readers import FORMATS, InputError
from .schema import DatasetInfo

logger = logging.getLogger(__name__)


def prepare(
    spark,
    inputs: list[str],
    out_dir: str,
    fmt: str,
    *,
    options: dict | None = None,
    cutoff: int = 0,
    merge_duplicates: bool = True,
    vocabulary: str | None = None,
    partitions: int | None = None,
    quarantine: bool = False,
    overwrite: bool = False,
    require_labels: bool = True,
    lock_stale_s: float = 0.0,
    in_process_max_events: int = 0,
    binary: bool | None = None,
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
        ``local_prepare.BYTES_PER_EVENT`` bytes in all here without Spark
        jobs. The dataset (and quarantine) is the same either way.
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
    storage.refuse_existing_output(out_dir, overwrite, "output directory", lock_stale_s)
    t0 = time.perf_counter()
    opts = resolve_options(fmt, options)
    files = [inputs] if isinstance(inputs, str) else list(inputs)
    # small inputs: every stage in this process (data/local_prepare.py)
    src = read_small(spark, files, fmt, opts, in_process_max_events, quarantine)
    if src is None:
        src = read_files(spark, files, fmt, opts, quarantine)
    return _run(
        spark,
        src,
        out_dir,
        cutoff=cutoff,
        merge_duplicates=merge_duplicates,
        vocabulary=vocabulary,
        partitions=partitions,
        quarantine=quarantine,
        overwrite=overwrite,
        require_labels=require_labels,
        lock_stale_s=lock_stale_s,
        t0=t0,
        in_process_max_events=in_process_max_events,
        binary=binary,
    )


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
    cutoff: int = 0,
    merge_duplicates: bool = True,
    vocabulary: str | None = None,
    partitions: int | None = None,
    overwrite: bool = False,
    require_labels: bool = True,
    lock_stale_s: float = 0.0,
    in_process_max_events: int = 0,
    binary: bool | None = None,
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
    cutoff, merge_duplicates, vocabulary, partitions, overwrite, require_labels
        As in :func:`prepare`.
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
    if label_col is None and vocabulary is None:
        raise InputError(
            "a table without a label column is data to predict: expected a vocabulary "
            "(the model's), or a label column for training data"
        )
    storage.refuse_existing_output(out_dir, overwrite, "output directory", lock_stale_s)
    t0 = time.perf_counter()
    src = read_table(
        spark,
        table,
        label_col=label_col,
        features_col=features_col,
        weight_col=weight_col,
        values_col=values_col,
        key_col=key_col,
        in_process_max_events=in_process_max_events,
    )
    return _run(
        spark,
        src,
        out_dir,
        cutoff=cutoff,
        merge_duplicates=merge_duplicates,
        vocabulary=vocabulary,
        partitions=partitions,
        quarantine=False,
        overwrite=overwrite,
        require_labels=require_labels,
        lock_stale_s=lock_stale_s,
        t0=t0,
        in_process_max_events=in_process_max_events,
        binary=binary,
    )


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
    cutoff: int = 0,
    merge_duplicates: bool = True,
    vocabulary: str | None = None,
    partitions: int | None = None,
    overwrite: bool = False,
    require_labels: bool = True,
    lock_stale_s: float = 0.0,
    in_process_max_events: int = 0,
    binary: bool | None = None,
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
    cutoff, merge_duplicates, vocabulary, partitions, overwrite, require_labels
        As in :func:`prepare`.
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
    storage.refuse_existing_output(out_dir, overwrite, "output directory", lock_stale_s)
    t0 = time.perf_counter()
    src = read_candidate_table(
        spark,
        table,
        group_col=group_col,
        features_col=features_col,
        correct_col=correct_col,
        weight_col=weight_col,
        values_col=values_col,
        key_col=key_col,
        in_process_max_events=in_process_max_events,
    )
    return _run(
        spark,
        src,
        out_dir,
        cutoff=cutoff,
        merge_duplicates=merge_duplicates,
        vocabulary=vocabulary,
        partitions=partitions,
        quarantine=False,
        overwrite=overwrite,
        require_labels=require_labels,
        lock_stale_s=lock_stale_s,
        t0=t0,
        in_process_max_events=in_process_max_events,
        binary=binary,
    )


def run_prepare(
    spark,
    src: RawSource,
    out_dir: str,
    *,
    cutoff: int,
    merge_duplicates: bool,
    vocabulary: str | None,
    partitions: int | None,
    quarantine: bool,
    overwrite: bool,
    lock_stale_s: float = 0.0,
    in_process_max_events: int = 0,
    binary: bool | None = None,
) -> DatasetInfo:
    """Prepare raw events already read (one part of a split: data/split.py);
    the arguments as in :func:`prepare`."""
    return _run(
        spark,
        src,
        out_dir,
        cutoff=cutoff,
        merge_duplicates=merge_duplicates,
        vocabulary=vocabulary,
        partitions=partitions,
        quarantine=quarantine,
        overwrite=overwrite,
        require_labels=True,
        lock_stale_s=lock_stale_s,
        t0=time.perf_counter(),
        in_process_max_events=in_process_max_events,
        binary=binary,
    )


# ------------------------------------------------------------------ the run


def _run(
    spark,
    src: RawSource,
    out_dir: str,
    *,
    cutoff: int,
    merge_duplicates: bool,
    vocabulary: str | None,
    partitions: int | None,
    quarantine: bool,
    overwrite: bool,
    require_labels: bool,
    lock_stale_s: float,
    t0: float,
    in_process_max_events: int = 0,
    binary: bool | None = None,
) -> DatasetInfo:
    """Check the run's settings, then under the output's lock (temporaries
    of killed runs swept first) build the dataset in a temporary sibling and
    publish it; on any failure the temporary directory is removed."""
    if cutoff < 0:
        raise InputError(f"expected a count cutoff >= 0, got {cutoff}")
    if partitions is not None and partitions < 1:
        raise InputError(f"expected partitions >= 1, got {partitions}")
    if src.key_col and merge_duplicates:
        raise InputError(
            f"key column {src.key_col!r}: keys need one prepared event per row; "
            "prepare with merge_duplicates=False (--no-merge)"
        )
    vocab_info = load_vocabulary(vocabulary, src.shape)
    binary = binary_setting(binary, vocab_info, vocabulary)
    out_dir = storage.qualify(out_dir)
    parent, name = storage.split(out_dir)
    with storage.output_lock(out_dir, lock_stale_s, "prepare"):
        storage.sweep(parent, {name})
        storage.refuse_existing(out_dir, overwrite, "output directory")
        info = _build_and_publish(
            spark,
            src,
            out_dir,
            cutoff=cutoff,
            merge_duplicates=merge_duplicates,
            vocab_info=vocab_info,
            vocabulary=vocabulary,
            n_parts=partitions or default_parallelism(spark),
            quarantine=quarantine,
            require_labels=require_labels,
            in_process_max_events=in_process_max_events,
            binary=binary,
        )
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


def _build_and_publish(spark, src: RawSource, out_dir: str, **build) -> DatasetInfo:
    """The dataset built in a temporary sibling of ``out_dir``, then published."""
    from pyspark import StorageLevel

    tmp = storage.sibling(out_dir, "tmp")
    cached: list = []
    try:
        storage.mkdirs(tmp)
        if is_local(src):
            info = build_local(spark, src, tmp, **build)
        else:
            raw = src.raw.persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(raw)
            info = _build(spark, src, raw, tmp, cached=cached, **build)
        storage.publish(tmp, out_dir, overwrite=True)  # refused earlier unless overwrite
    except BaseException:
        storage.delete(tmp)
        raise
    finally:
        for df in cached:
            df.unpersist()
    return info


def _build(
    spark,
    src: RawSource,
    raw,
    tmp: str,
    *,
    cutoff: int,
    merge_duplicates: bool,
    vocab_info: DatasetInfo | None,
    vocabulary: str | None,
    n_parts: int,
    quarantine: bool,
    require_labels: bool,
    cached: list,
    in_process_max_events: int = 0,
    binary: bool = False,
) -> DatasetInfo:
    """The stages from the persisted raw events to a complete dataset in ``tmp``."""
    from pyspark.sql import functions as F

    training = require_labels and vocab_info is None
    stats = raw_stats(raw, src.shape, vocab_info, training)
    quarantined = check_raw(src, raw, stats, tmp, quarantine)
    labels, unknown_labels, unseen_labels = labels_of(src, stats, vocab_info, training)

    events = raw.where(F.col("kind") == KIND_EVENT)
    dictionary = feature_dictionary(spark, events, cutoff, vocabulary)
    cached.append(dictionary)
    n_features = write_features(dictionary, tmp)
    n_ids = feature_space_size(vocab_info, vocabulary, n_features)

    final, unknown_features, occurrences = index_events(
        events,
        dictionary,
        n_features,
        src.shape,
        labels,
        unseen_labels,
        count_unknown=vocab_info is not None,
        binary=binary,
    )
    if merge_duplicates:
        final = merge_events(final, src.shape)
    n_events = write_events(final, tmp, src.shape, n_parts)
    if src.key_col:
        write_keys(events, src.key_col, tmp)

    return save_info(
        spark,
        tmp,
        src.source,
        shape=src.shape,
        n_ids=n_ids,
        labels=labels,
        n_events=n_events,
        total_weight=stats["total_weight"],
        cutoff=cutoff,
        vocab_info=vocab_info,
        counts={
            "quarantined": quarantined,
            "unknown_features": unknown_features,
            "feature_occurrences": occurrences,
            "unknown_labels": unknown_labels,
            "unseen_labels": unseen_labels,
        },
        settings={
            "merge_duplicates": merge_duplicates,
            "vocabulary": vocabulary,
            "partitions": n_parts,
            "binary": binary,
        },
        in_process=n_events <= in_process_max_events,
    )


def info_summary(info: DatasetInfo) -> dict:
    """The figures of a DatasetInfo worth a log line (no label/input lists)."""
    d = asdict(info)
    d["n_labels"] = len(d.pop("labels"))
    d["n_inputs"] = len(d["source"].get("inputs", []))
    d["format"] = d.pop("source").get("format")
    return d


__all__ = ["prepare", "prepare_table", "prepare_candidate_table", "run_prepare", "info_summary"]
