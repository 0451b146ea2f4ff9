"""The application API: prepare, train, predict and evaluate as plain
functions over a Spark session and a Config. The command line
(sparkmaxent/cli.py), the benchmarks and notebooks call these."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from . import storage
from .config import Config
from .config.schema import DataConfig
from .data.options import MAX_UNKNOWN, ScoringOptions
from .data.tables import TableColumns
from .errors import InputError
from .jsonio import write_json
from .plan import IN_PROCESS, ExecutionPlan, Limits
from .report import PipelineReport

log = logging.getLogger(__name__)

MODEL_DIR = "model"
TRAIN_REPORT = "train_report.json"
PIPELINE_REPORT = "report.json"
#: predict/evaluate refuse data with a larger fraction of unknown feature occurrences


def session(cfg: Config, job: str = ""):
    """The running Spark session, or a new one from the [spark] section,
    named ``<spark.app_name>-<job>``."""
    from .backends.session import spark_session

    name = f"{cfg.spark.app_name}-{job}" if job else cfg.spark.app_name
    return spark_session(cfg.spark.master or None, name, cfg.spark.conf, cfg.spark.remote or None)


def train_model(
    spark,
    cfg: Config,
    train_dir: str,
    heldout_dir: str = "",
    output_dir: str | None = None,
    resume: bool = False,
    warm_start=None,
    plan: ExecutionPlan | None = None,
):
    """Train ``cfg.train.method`` on a prepared dataset; returns (model,
    ``RunReport``).

    Selection methods checkpoint every round into ``<output_dir>/checkpoint``
    and write their plots to ``<output_dir>/plots``; ``resume`` continues
    from that checkpoint. ``warm_start``: grafting's warm start (weights over this
    dataset's candidate space, e.g. an earlier model's ``weights`` at a
    stronger gamma1). ``plan``: the run's execution plan (decided here from
    the datasets' sizes when not given), completed with the partitions the
    backends cached the events in and logged; the report's ``plan``
    records it."""
    import numpy as np

    from .backends.factory import make_backend
    from .data.schema import DatasetInfo
    from .model import MaxentModel, feature_names_for
    from .model_conjunctions import atoms_used, conjunction_names
    from .train import train

    info = DatasetInfo.load(train_dir)
    partitions = cfg.data.partitions or None
    # small data in fewer partitions than Spark's default (not than asked)
    few = 0 if partitions else cfg.data.min_partition_events
    bias = cfg.train.bias and info.shape == "multiclass"
    watchdog = {
        "no_executor_timeout_s": cfg.spark.no_executor_timeout_s,
        "pass_timeout_s": cfg.spark.pass_timeout_s,
        "pass_timeout_factor": cfg.spark.pass_timeout_factor,
        "pass_timeout_floor_s": cfg.spark.pass_timeout_floor_s,
        "max_executor_losses": cfg.spark.max_executor_losses,
    }
    if plan is None:
        plan = plan_for(cfg, train_dir, heldout_dir)
    backend = make_backend(
        plan.stages["train"].backend,
        train_dir,
        spark=spark,
        bias=bias,
        partitions=partitions,
        watchdog=watchdog,
        min_partition_events=few,
    )
    heldout = (
        make_backend(
            plan.stages["heldout"].backend,
            heldout_dir,
            spark=spark,
            bias=bias,
            partitions=partitions,
            watchdog=watchdog,
            min_partition_events=few,
        )
        if heldout_dir
        else None
    )
    plan.built("train", backend)
    if heldout is not None:
        plan.built("heldout", heldout)
    plan.log()  # once the backends are built: the partitions actually used
    try:
        result = train(
            backend, cfg.train, heldout, output_dir=output_dir, resume=resume, warm_start=warm_start
        )
    finally:
        backend.close()
        if heldout is not None:
            heldout.close()
    space, conj = result.space(backend.space), result.conjunctions
    predicates = space.split(result.weights.active_ids())[0]
    atoms = predicates[predicates < backend.space.n_predicates]
    names = feature_names_for(train_dir, np.union1d(atoms, atoms_used(conj)))
    if conj is not None:
        names.update(conjunction_names(conj, names))
    result.report.plan = plan
    model = MaxentModel(
        space,
        result.weights,
        list(info.labels),
        names,
        result.scaling,
        cfg.to_dict(),
        result.report.to_json(rounds=False),
        dictionary=train_dir,
        conjunctions=conj,
    )
    return model, result.report


def plan_for(
    cfg: Config,
    train_dir: str,
    heldout_dir: str = "",
    test_dir: str = "",
    plan: ExecutionPlan | None = None,
) -> ExecutionPlan:
    """The execution plan of training on ``train_dir`` (and scoring
    ``heldout_dir``, evaluating ``test_dir``), decided from the prepared
    datasets' sizes by ``plan.ExecutionPlan`` (added to ``plan``, e.g. one
    holding how the datasets were prepared)."""
    from .data.schema import DatasetInfo

    plan = plan if plan is not None else ExecutionPlan.from_config(cfg)
    plan.backend_for("train", DatasetInfo.load(train_dir).n_events)
    if heldout_dir:
        plan.backend_for("heldout", DatasetInfo.load(heldout_dir).n_events)
    if test_dir:
        plan.scores_in_process("evaluate", DatasetInfo.load(test_dir).n_events)
    return plan


@contextmanager
def run_output(cfg: Config, output_dir: str, command: str) -> Iterator[str]:
    """Hold a run's output directory: its lock (a second run is refused,
    exit 2), what killed runs left in it swept (model, reports,
    checkpoint/, plots/), and checked writable, all before the first pass.
    Yields the qualified directory."""
    from .selection.checkpoint import CHECKPOINT_DIR
    from .selection.reporting import PLOTS_DIR

    out = storage.qualify(output_dir)
    with storage.output_lock(out, cfg.output.lock_stale_s, command):
        for directory in (out, storage.join(out, CHECKPOINT_DIR), storage.join(out, PLOTS_DIR)):
            storage.sweep(directory)
        storage.check_writable(out)
        yield out


def fit(
    spark,
    cfg: Config,
    train_dir: str,
    output_dir: str,
    heldout_dir: str = "",
    resume: bool = False,
    plan: ExecutionPlan | None = None,
):
    """Train and save: ``<output_dir>/model`` and ``<output_dir>/train_report.json``,
    under :func:`run_output` (``plan`` as in :func:`train_model`). Returns
    (model, ``RunReport``)."""
    with run_output(cfg, output_dir, "train") as out:
        model_dir = storage.join(out, MODEL_DIR)
        storage.refuse_existing(model_dir, cfg.output.overwrite, "model output")
        model, report = train_model(spark, cfg, train_dir, heldout_dir, out, resume, plan=plan)
        model.save(model_dir, overwrite=cfg.output.overwrite)
        write_json(storage.join(out, TRAIN_REPORT), report.to_json())
    return model, report


def prepared_for_model(
    spark,
    model_dir: str,
    data: str,
    fmt: str | None,
    workdir: str,
    settings: ScoringOptions | None = None,
    **keywords,
) -> str:
    """A prepared dataset indexed with the model's dictionary: ``data`` itself
    if it is one, else ``data`` (text or a table in ``fmt``, read with
    ``settings.options`` and ``settings.columns`` as in
    ``data.tables.prepare_input``) prepared into ``workdir``, one event per
    record (never merged), as the model's training data was (binary
    predicates or counts: the vocabulary's setting); small inputs in this
    process (``settings.in_process_max_events`` and
    ``in_process_bytes_per_event``, ``plan.Limits``; the same dataset as on
    Spark). Checked by :func:`check_unknown` (``settings.max_unknown``,
    ``allow_unknown``). ``keywords`` (fields of ``ScoringOptions``) are set
    over ``settings`` (default: ``ScoringOptions()``)."""
    from .data.options import PrepareOptions
    from .data.tables import prepare_input
    from .model import VOCABULARY_DIR

    s = (settings or ScoringOptions()).replace(**keywords)
    columns = s.columns
    if is_prepared(data):
        if columns is not None and columns != TableColumns():
            raise InputError(
                f"{data} is a prepared dataset: column options (--label-col, --key-col, ...) "
                "are for table input (prepare it with them, or give the table)"
            )
        out = data
    elif not fmt:
        raise InputError(
            f"{data} is not a prepared dataset; give --format to read it as text or a table"
        )
    else:
        out = storage.join(workdir, "prepared")
        prepare = PrepareOptions(
            merge_duplicates=False,
            vocabulary=storage.join(model_dir, VOCABULARY_DIR),
            overwrite=True,
            in_process_max_events=s.in_process_max_events,
            in_process_bytes_per_event=s.in_process_bytes_per_event,
        )
        prepare_input(spark, [data], out, fmt, columns=columns, options=s.options, settings=prepare)
    check_unknown(model_dir, out, data, fmt, s.max_unknown, s.allow_unknown)
    return out


def is_prepared(data: str) -> bool:
    """Whether ``data`` is a prepared dataset (has a dataset.json)."""
    from .data.schema import INFO_FILE

    return storage.exists(storage.join(data, INFO_FILE))


@contextmanager
def scratch_for(spark, cfg: Config, near: str | None) -> Iterator[str]:
    """Where predict or evaluate prepares text input: under
    ``output.scratch_dir``, else a hidden sibling of the output ``near``;
    without either (evaluate with no --report), the driver's temporary
    directory, which only a local master's executors share."""
    if cfg.output.scratch_dir or near:
        with storage.scratch(near or "", cfg.output.scratch_dir) as path:
            yield path
        return
    from .session_kind import is_connect

    master = spark.conf.get("spark.master", "") if is_connect(spark) else spark.sparkContext.master
    if not master.startswith("local"):
        raise InputError(
            f"evaluating text input on the cluster {master} needs a scratch directory the "
            "executors can reach: give --report PATH (scratch beside it) or set "
            "output.scratch_dir"
        )
    path = storage.local_temp_dir("sparkmaxent-eval-")
    try:
        yield path
    finally:
        storage.delete(path)


def check_unknown(
    model_dir: str,
    dataset_dir: str,
    data: str,
    fmt: str | None = None,
    max_unknown: float = MAX_UNKNOWN,
    allow_unknown: bool = False,
) -> float | None:
    """The fraction of ``data``'s feature occurrences unknown to the model,
    from the counts ``prepare`` recorded in ``dataset_dir`` (``data``
    prepared for the model); None when they were not recorded.

    Raises InputError (exit 2) when it exceeds ``max_unknown``: the input
    was most likely read with the wrong format or prepared with another
    vocabulary. With ``allow_unknown``, a WARNING instead. Not raised for a
    model whose vocabulary holds only the features it uses (older models):
    there, unknown features are expected."""
    from .data.schema import DatasetInfo
    from .model import vocabulary_is_complete

    info = DatasetInfo.load(dataset_dir)
    unknown, total = info.unknown_features, info.feature_occurrences
    if not unknown:
        return 0.0
    if total < unknown:  # dataset.json from before feature_occurrences was recorded
        log.warning(
            "%s: %d feature occurrences unknown to the model %s; their fraction "
            "was not recorded (prepared by an older version), so it is not checked",
            data,
            unknown,
            model_dir,
        )
        return None
    fraction = unknown / total
    if fraction <= max_unknown:
        log.info(
            "%s: %d of %d feature occurrences (%.1f%%) unknown to the model, dropped",
            data,
            unknown,
            total,
            100 * fraction,
        )
        return fraction
    what = (
        f"{fraction:.1%} of the feature occurrences in {data} ({unknown} of {total}) "
        f"are unknown to the model {model_dir}, more than --max-unknown {max_unknown:g}"
    )
    if not vocabulary_is_complete(model_dir):
        log.warning(
            "%s; the model's vocabulary holds only the features it uses, so this is not checked",
            what,
        )
        return fraction
    if allow_unknown:
        log.warning("%s; scoring anyway (--allow-unknown)", what)
        return fraction
    how = (
        f"--format {fmt} (and --option) read this input as the training data was read"
        if fmt
        else "this dataset was prepared with the model's vocabulary"
    )
    raise InputError(
        f"{what}: a format or vocabulary mismatch? Check that {how}; "
        "--allow-unknown scores it anyway"
    )


def evaluate_model(
    spark,
    model,
    dataset_dir: str,
    chunks: bool | None = None,
    in_process_max_events: int = 0,
    plan: ExecutionPlan | None = None,
) -> dict:
    """Accuracy, per-label P/R/F1 and (IOB tags, or ``chunks``) CoNLL chunk
    P/R/F1 of a model on a prepared dataset; candidate sets: accuracy.
    Scored in this process or on Spark as ``plan`` decided its "evaluate"
    stage, else (no plan, or not decided) by its size: at most
    ``in_process_max_events`` events in this process (``data.in_process_max_events``)."""
    import numpy as np

    from .backends.dataset_scoring import predictions, predictions_table
    from .data.schema import DatasetInfo
    from .evaluate import score_tagging

    multiclass = model.space.shape == "multiclass"
    columns = (
        ["group", "event_id", "label", "predicted"] if multiclass else ["predicted", "correct"]
    )
    plan = plan if plan is not None else ExecutionPlan(Limits(in_process_max_events))
    if "evaluate" not in plan.stages:  # a plan of its own: evaluate alone
        plan.scores_in_process("evaluate", DatasetInfo.load(dataset_dir).n_events)
        plan.log()
    if plan.stages["evaluate"].engine == IN_PROCESS:
        t = predictions_table(model, dataset_dir).select(columns)
    else:
        frame, bc = predictions(spark, model, dataset_dir)
        try:
            t = frame.select(*columns).toArrow()
        finally:
            bc.destroy()
    if not multiclass:
        hits = [
            c[p] for p, c in zip(t.column("predicted").to_pylist(), t.column("correct").to_pylist())
        ]
        return {"events": len(hits), "accuracy": float(np.mean(hits)) if hits else float("nan")}
    return score_tagging(
        t.column("group").to_numpy(),
        t.column("event_id").to_numpy(),
        t.column("label").to_pylist(),
        t.column("predicted").to_pylist(),
        model.labels,
        chunks,
    )


def predict(
    spark,
    model,
    model_dir: str,
    data: str,
    output: str,
    fmt: str | None = None,
    *,
    settings: ScoringOptions | None = None,
    cfg: Config | None = None,
    **keywords,
) -> None:
    """Score ``data`` (a prepared dataset, or text or a table in ``fmt``) and
    write the predictions as Parquet to ``output`` (by the executors, into a
    temporary sibling published when complete), under the output's lock.

    How the input is read (reader options, table columns, the unknown-feature
    check, ``overwrite``, the in-process sizes) is one ``ScoringOptions``,
    ``settings``, by default built from ``cfg``'s [data] section
    (``ScoringOptions.from_config``); ``keywords`` (its fields, e.g.
    ``overwrite=True``, ``columns=...``) are set over it. ``cfg``'s [output]
    section gives the scratch directory and lock age.
    A table's ``columns.key`` (or the key a prepared dataset was made with)
    is a column of the predictions, one row per table row (per group for
    candidate sets), so they join back to the table. Input of at most
    ``in_process_max_events`` events without a key column is prepared and
    scored in this process (one Parquet file; the same rows)."""
    from .backends.dataset_scoring import (
        check_key_column,
        key_column,
        predictions,
        predictions_table,
    )
    from .data.schema import DatasetInfo

    cfg = cfg or Config()
    s = (settings or ScoringOptions.from_config(cfg.data)).replace(**keywords)
    if s.columns is not None and s.columns.key:
        check_key_column(s.columns.key, model.space.shape)
    out = storage.qualify(output)
    parent, name = storage.split(out)
    with storage.output_lock(out, cfg.output.lock_stale_s, "predict"):
        storage.sweep(parent, {name})
        storage.refuse_existing(out, s.overwrite)
        storage.check_writable(parent)
        with storage.staged(out) as tmp, scratch_for(spark, cfg, out) as work:
            prepared = prepared_for_model(spark, model_dir, data, fmt, work, s)
            info = DatasetInfo.load(prepared)
            plan = ExecutionPlan.from_config(cfg)
            plan.limits = Limits(s.in_process_max_events, s.in_process_bytes_per_event)
            keyed = key_column(info) is not None
            # a remote output under Connect: written by Spark (one Parquet directory)
            small = plan.scores_in_process("predict", info.n_events, keyed) and storage.renames(out)
            plan.log()
            if small:
                table = predictions_table(model, prepared)
                storage.write_parquet(storage.join(tmp, "part-00000.parquet"), table)
                storage.write_bytes(storage.join(tmp, "_SUCCESS"), b"")
            else:
                frame, bc = predictions(spark, model, prepared)
                try:
                    frame.write.mode("overwrite").parquet(tmp)  # tmp: this run's
                finally:
                    bc.destroy()


def table_columns(d: DataConfig) -> TableColumns:
    """The table columns the [data] section names (``data.label_col``, ...)."""
    return TableColumns(
        label=d.label_col,
        features=d.features_col,
        values=d.values_col or None,
        weight=d.weight_col or None,
        group=d.group_col or None,
        correct=d.correct_col,
    )


def make_datasets(
    spark, cfg: Config, out: str, plan: ExecutionPlan | None = None
) -> dict[str, str]:
    """Prepared train/heldout/test directories for a run: taken from the
    config, or prepared from its inputs (text, a table, or the synthetic
    generator); ``plan`` is told how they were prepared."""
    from .data.options import PrepareOptions
    from .data.tables import prepare_input

    d = cfg.data
    if d.train:
        return {"train": d.train, "heldout": d.heldout, "test": d.test}
    inputs: dict[str, str | list[str]] = {
        "train": d.train_inputs,
        "heldout": d.heldout_inputs,
        "test": d.test_inputs,
    }
    fmt = d.format
    if fmt == "synthetic":
        from .data import synthetic

        spec = synthetic.SyntheticSpec.from_config(d.synthetic)
        inputs = dict(synthetic.write_splits(spec, storage.join(out, "data", "text")))
        fmt = "maxent"
    if not inputs["train"]:
        raise InputError("no training data: set data.train (prepared) or data.train_inputs")
    dirs = {}
    settings = PrepareOptions.from_config(d, cfg.output, overwrite=True, plan=plan)
    if d.heldout_fraction and not inputs["heldout"]:
        dirs = split_datasets(spark, cfg, inputs["train"], fmt, out, settings)
    for split in ("train", "heldout", "test"):
        if split in dirs:
            continue
        if not inputs.get(split):
            dirs[split] = ""
            continue
        dirs[split] = storage.join(out, "data", split)
        is_train = split == "train"
        given = inputs[split]
        paths = [given] if isinstance(given, str) else list(given)
        data = (
            settings
            if is_train
            else settings.replace(  # following the training data
                cutoff=0, merge_duplicates=False, vocabulary=dirs["train"], binary=None
            )
        )
        prepare_input(
            spark, paths, dirs[split], fmt, columns=table_columns(d), options=dict(d.options),
            settings=data,
        )  # fmt: skip
    return dirs


def split_datasets(
    spark, cfg: Config, train_inputs, fmt: str, out: str, settings=None
) -> dict[str, str]:
    """The training inputs prepared as ``<out>/data/train`` less a held-out
    part ``<out>/data/heldout`` (``data.heldout_fraction``, data/split.py),
    with ``settings`` (default: the config's)."""
    from .data.options import PrepareOptions
    from .data.split import prepare_split

    d = cfg.data
    dirs = {split: storage.join(out, "data", split) for split in ("train", "heldout")}
    prepare_split(
        spark,
        [train_inputs] if isinstance(train_inputs, str) else list(train_inputs),
        dirs["train"],
        dirs["heldout"],
        fmt,
        fraction=d.heldout_fraction,
        seed=d.split_seed,
        options=dict(d.options),
        settings=settings or PrepareOptions.from_config(d, cfg.output, overwrite=True),
    )
    return dirs


def pipeline(
    spark, cfg: Config, out: str, resume: bool = False, phases: dict | None = None
) -> PipelineReport:
    """Prepare (when the config names inputs), train, save and evaluate on
    the test set in one Spark session; returns the report written to
    ``<out>/report.json``, with each phase's seconds in ``phases_s`` (and
    the caller's ``phases``, e.g. the Spark start)."""
    started = time.perf_counter()
    took = dict(phases or {})
    with run_output(cfg, out, "pipeline") as out:
        plan = ExecutionPlan.from_config(cfg)
        dirs = make_datasets(spark, cfg, out, plan)
        took["prepare_s"] = time.perf_counter() - started
        plan = plan_for(cfg, dirs["train"], dirs["heldout"], dirs["test"], plan)
        model, report = fit(spark, cfg, dirs["train"], out, dirs["heldout"], resume, plan)
        took["train_s"] = time.perf_counter() - started - took["prepare_s"]
        test = None
        if dirs["test"]:
            t0 = time.perf_counter()
            test = evaluate_model(spark, model, dirs["test"], plan=plan)
            took["evaluate_s"] = time.perf_counter() - t0
        full = PipelineReport(
            cfg.to_dict(),
            plan,
            dirs,
            report,
            test,
            {k: round(v, 3) for k, v in took.items()},
            round(time.perf_counter() - started, 3),
        )
        write_json(storage.join(out, PIPELINE_REPORT), full.to_json())
    return full
