"""The application API: prepare, train, predict and evaluate as plain
functions over a Spark session and a Config. The command line
(sparkmaxent/cli.py), the benchmarks and notebooks call these."""

from __future__ import annotations

import logging
import os
import time

from .config import Config
from .errors import InputError
from .jsonio import write_json

log = logging.getLogger(__name__)

MODEL_DIR = "model"
TRAIN_REPORT = "train_report.json"
PIPELINE_REPORT = "report.json"
#: predict/evaluate refuse data with a larger fraction of unknown feature occurrences
MAX_UNKNOWN = 0.5


def session(cfg: Config, job: str = ""):
    """The running Spark session, or a new one from the [spark] section,
    named ``<spark.app_name>-<job>``."""
    from .backends.session import spark_session

    name = f"{cfg.spark.app_name}-{job}" if job else cfg.spark.app_name
    return spark_session(cfg.spark.master or None, name, cfg.spark.conf)


def train_model(
    spark,
    cfg: Config,
    train_dir: str,
    heldout_dir: str = "",
    output_dir: str | None = None,
    resume: bool = False,
):
    """Train ``cfg.train.method`` on a prepared dataset; returns (model, report).

    Selection methods checkpoint every round into ``<output_dir>/checkpoint``
    and write their plots to ``<output_dir>/plots``; ``resume`` continues
    from that checkpoint."""
    import numpy as np

    from .backends.factory import make_backend
    from .conjunctions import atoms_used, conjunction_names
    from .data.schema import DatasetInfo
    from .model import MaxentModel, feature_names_for
    from .train import train

    info = DatasetInfo.load(train_dir)
    partitions = cfg.data.partitions or None
    bias = cfg.train.bias and info.shape == "multiclass"
    watchdog = {
        "no_executor_timeout_s": cfg.spark.no_executor_timeout_s,
        "pass_timeout_s": cfg.spark.pass_timeout_s,
    }
    backend = make_backend(
        cfg.train.backend,
        train_dir,
        spark=spark,
        bias=bias,
        partitions=partitions,
        watchdog=watchdog,
    )
    heldout = (
        make_backend(
            cfg.train.backend,
            heldout_dir,
            spark=spark,
            bias=bias,
            partitions=partitions,
            watchdog=watchdog,
        )
        if heldout_dir
        else None
    )
    try:
        result = train(backend, cfg.train, heldout, output_dir=output_dir, resume=resume)
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
    model = MaxentModel(
        space,
        result.weights,
        list(info.labels),
        names,
        result.scaling,
        cfg.to_dict(),
        {k: v for k, v in result.report.items() if k not in ("trace", "rounds")},
        dictionary=train_dir,
        conjunctions=conj,
    )
    return model, result.report


def fit(
    spark, cfg: Config, train_dir: str, output_dir: str, heldout_dir: str = "", resume: bool = False
):
    """Train and save: ``<output_dir>/model`` and ``<output_dir>/train_report.json``.
    Returns (model, report)."""
    model, report = train_model(spark, cfg, train_dir, heldout_dir, output_dir, resume)
    model.save(os.path.join(output_dir, MODEL_DIR), overwrite=cfg.output.overwrite)
    write_json(os.path.join(output_dir, TRAIN_REPORT), report)
    return model, report


def prepared_for_model(
    spark,
    model_dir: str,
    data: str,
    fmt: str | None,
    workdir: str,
    options: dict | None = None,
    max_unknown: float = MAX_UNKNOWN,
    allow_unknown: bool = False,
) -> str:
    """A prepared dataset indexed with the model's dictionary: ``data`` itself
    if it is one, else ``data`` (text in ``fmt``) prepared into ``workdir``;
    checked by :func:`check_unknown`."""
    from .data.prepare import prepare
    from .model import VOCABULARY_DIR

    if os.path.exists(os.path.join(data, "dataset.json")):
        out = data
    elif not fmt:
        raise InputError(f"{data} is not a prepared dataset; give --format to read it as text")
    else:
        out = os.path.join(workdir, "prepared")
        prepare(
            spark,
            [data],
            out,
            fmt,
            options=options or {},
            merge_duplicates=False,
            vocabulary=os.path.join(model_dir, VOCABULARY_DIR),
            overwrite=True,
        )
    check_unknown(model_dir, out, data, fmt, max_unknown, allow_unknown)
    return out


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


def evaluate_model(spark, model, dataset_dir: str, chunks: bool | None = None) -> dict:
    """Accuracy, per-label P/R/F1 and (IOB tags, or ``chunks``) CoNLL chunk
    P/R/F1 of a model on a prepared dataset; candidate sets: accuracy."""
    import numpy as np

    from .backends.predict import predictions
    from .evaluate import score_tagging

    frame, bc = predictions(spark, model, dataset_dir)
    try:
        if model.space.shape != "multiclass":
            t = frame.select("predicted", "correct").toArrow()
            hits = [
                c[p]
                for p, c in zip(t.column("predicted").to_pylist(), t.column("correct").to_pylist())
            ]
            return {"events": len(hits), "accuracy": float(np.mean(hits)) if hits else float("nan")}
        t = frame.select("group", "event_id", "label", "predicted").toArrow()
        return score_tagging(
            t.column("group").to_numpy(),
            t.column("event_id").to_numpy(),
            t.column("label").to_pylist(),
            t.column("predicted").to_pylist(),
            model.labels,
            chunks,
        )
    finally:
        bc.destroy()


def predict(
    spark,
    model,
    model_dir: str,
    data: str,
    output: str,
    fmt: str | None = None,
    options: dict | None = None,
    overwrite: bool = False,
    max_unknown: float = MAX_UNKNOWN,
    allow_unknown: bool = False,
) -> None:
    """Score ``data`` (a prepared dataset or text in ``fmt``) and write the
    predictions as Parquet to ``output``, all or nothing; ``max_unknown``
    and ``allow_unknown`` as in :func:`check_unknown`."""
    import shutil

    from .backends.io import atomic_output
    from .backends.predict import predictions

    with atomic_output(spark, output, overwrite=overwrite) as tmp:
        try:
            data = prepared_for_model(
                spark, model_dir, data, fmt, tmp + "-work", options, max_unknown, allow_unknown
            )
            frame, bc = predictions(spark, model, data)
            try:
                frame.write.parquet(tmp)
            finally:
                bc.destroy()
        finally:
            shutil.rmtree(tmp + "-work", ignore_errors=True)


def make_datasets(spark, cfg: Config, out: str) -> dict[str, str]:
    """Prepared train/heldout/test directories for a run: taken from the
    config, or prepared from its inputs (or the synthetic generator)."""
    from .data.prepare import prepare

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

        spec = synthetic.SyntheticSpec(**d.synthetic)
        inputs = dict(synthetic.write_splits(spec, os.path.join(out, "data", "text")))
        fmt = "maxent"
    if not inputs["train"]:
        raise InputError("no training data: set data.train (prepared) or data.train_inputs")
    dirs = {}
    for split in ("train", "heldout", "test"):
        if not inputs.get(split):
            dirs[split] = ""
            continue
        dirs[split] = os.path.join(out, "data", split)
        is_train = split == "train"
        given = inputs[split]
        paths = [given] if isinstance(given, str) else list(given)
        prepare(
            spark,
            paths,
            dirs[split],
            fmt,
            options=dict(d.options),
            cutoff=d.prepare_cutoff if is_train else 0,
            merge_duplicates=is_train,
            vocabulary=None if is_train else dirs["train"],
            partitions=d.partitions or None,
            overwrite=True,
        )
    return dirs


def pipeline(spark, cfg: Config, out: str, resume: bool = False) -> dict:
    """Prepare (when the config names inputs), train, save and evaluate on
    the test set in one Spark session; returns the report written to
    ``<out>/report.json``."""
    started = time.perf_counter()
    dirs = make_datasets(spark, cfg, out)
    model, report = fit(spark, cfg, dirs["train"], out, dirs["heldout"], resume)
    full = {"config": cfg.to_dict(), "datasets": dirs, "train": report}
    if dirs["test"]:
        full["test"] = evaluate_model(spark, model, dirs["test"])
    full["wall_s"] = round(time.perf_counter() - started, 3)
    write_json(os.path.join(out, PIPELINE_REPORT), full)
    return full
