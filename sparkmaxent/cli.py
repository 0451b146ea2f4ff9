"""The command line: ``sparkmaxent SUBCOMMAND`` (also ``python -m
sparkmaxent`` and ``spark-submit jobs/SUBCOMMAND.py``), one parser, one
logging setup and one table of exit codes for every job."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Callable

from . import api, storage
from .errors import ConfigError, InputError, NumericError, StalledError, UnconvergedError
from .exits import (  # noqa: F401 (the exit codes, re-exported for callers)
    EXIT_BAD_CONFIG,
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NO_SPACE,
    EXIT_NUMERIC,
    EXIT_OK,
    EXIT_STALLED,
    EXIT_UNCONVERGED,
    checkpoint_note,
    write_failure,
)
from .jsonio import json_default, write_json
from .streams import restore_stderr, setup_logging

log = logging.getLogger("sparkmaxent")


SUBCOMMANDS = ("prepare", "train", "predict", "evaluate", "pipeline")


def parse_options(items: list[str]) -> dict:
    """``["mode=basenp"]`` -> ``{"mode": "basenp"}`` (values stay strings;
    the reader converts them to the type of its default)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--option: expected KEY=VALUE (e.g. mode=basenp), got {item!r}")
        out[key.strip()] = value
    return out


# ---- subcommands: arguments, then what they do ------------------------------


def _prepare_args(p: argparse.ArgumentParser) -> None:
    from .data.readers import FORMATS

    p.add_argument(
        "--input",
        nargs="+",
        action="extend",
        required=True,
        metavar="PATH",
        help="files, directories or globs (repeatable); a catalog table's name for --format table",
    )
    p.add_argument(
        "--format",
        required=True,
        metavar="NAME",
        help=f"input format: a text format {sorted(FORMATS)}, a Spark data source "
        "reading a table's files (parquet, orc, json, delta, ...), or table (a catalog table)",
    )
    p.add_argument("--output", required=True, help="dataset directory to create")
    p.add_argument(
        "--cutoff",
        type=int,
        default=0,
        help="keep features occurring in >= CUTOFF (weighted) events; 0 keeps all",
    )
    p.add_argument(
        "--no-merge",
        dest="merge",
        action="store_false",
        help="keep identical events apart (test/prediction data)",
    )
    p.add_argument(
        "--vocabulary",
        help="prepared training dataset whose dictionary and "
        "labels to reuse (held-out and test data)",
    )
    p.add_argument(
        "--partitions",
        type=int,
        help="number of event files (default: Spark's default parallelism)",
    )
    p.add_argument(
        "--quarantine",
        action="store_true",
        help="set malformed records aside in OUTPUT/_quarantine instead of failing",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="reader option, e.g. mode=basenp (repeatable); spark.read's for a table",
    )
    _table_args(p)
    _binary_arg(p)
    p.add_argument(
        "--master",
        help="Spark master (default: spark.master of the config, "
        "else whatever spark-submit or pyspark sets)",
    )
    _heldout_fraction_arg(p)
    p.add_argument(
        "--heldout-output",
        help="with --heldout-fraction: the held-out dataset to create (default: OUTPUT-heldout)",
    )
    p.add_argument(
        "--split-seed", type=int, help="seed of the held-out split (default: data.split_seed)"
    )


def _table_args(p: argparse.ArgumentParser, key: bool = False) -> None:
    """The columns of a table input (default: the data.*_col keys)."""
    g = p.add_argument_group("table input (a --format that is not a text format)")
    g.add_argument("--label-col", metavar="COL", help="label column (data.label_col)")
    g.add_argument(
        "--features-col",
        metavar="COL",
        help="features: array<string>, map<string,double> or Vector (data.features_col)",
    )
    g.add_argument(
        "--values-col",
        metavar="COL",
        help="array<double> values of an array<string> features column (data.values_col)",
    )
    g.add_argument("--weight-col", metavar="COL", help="numeric event weight (data.weight_col)")
    g.add_argument(
        "--group-col",
        metavar="COL",
        help="candidate sets, one row per candidate: the group (event) id (data.group_col)",
    )
    g.add_argument(
        "--correct-col",
        metavar="COL",
        help="candidate sets: correct flag, boolean or numeric > 0 (data.correct_col)",
    )
    if key:
        g.add_argument(
            "--key-col",
            metavar="COL",
            help="a column the predictions keep (one row per input row; per group for "
            "candidate sets), to join them back to the table",
        )


def _columns(args, cfg):
    """The table columns of the command line over those of the config."""
    given = {
        "label": args.label_col,
        "features": args.features_col,
        "values": args.values_col,
        "weight": args.weight_col,
        "group": args.group_col,
        "correct": args.correct_col,
        "key": getattr(args, "key_col", None),
    }
    base = api.table_columns(cfg.data)
    return dataclasses.replace(base, **{k: v for k, v in given.items() if v is not None})


def _binary_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--binary",
        action=argparse.BooleanOptionalAction,
        help="binary predicates: a feature present in an event counts 1.0 however often it "
        "occurs (map/Vector values: 1.0 where non-zero); --no-binary sums repeats "
        "(overrides data.binary; default: the config's, or the --vocabulary's setting)",
    )


def _binary(args, cfg) -> bool | None:
    """``--binary`` / ``--no-binary`` over ``data.binary``; None (follow the
    vocabulary, else counts) when neither sets it."""
    return args.binary if args.binary is not None else (cfg.data.binary or None)


def _heldout_fraction_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--heldout-fraction",
        type=_fraction,
        help="carve this stratified fraction of the training input out as held-out data, "
        "prepared with the rest's dictionary (overrides data.heldout_fraction)",
    )


def _prepare_split(args, cfg, spark, options: dict) -> int:
    """prepare --heldout-fraction: the training and held-out datasets."""
    from .data.prepare import info_summary
    from .data.split import prepare_split

    if args.vocabulary or not args.merge:
        raise InputError(
            "--heldout-fraction splits training data: it does not go with "
            "--vocabulary or --no-merge"
        )
    heldout = args.heldout_output or args.output.rstrip("/") + "-heldout"
    infos = prepare_split(
        spark,
        args.input,
        args.output,
        heldout,
        args.format,
        fraction=args.heldout_fraction,
        seed=cfg.data.split_seed if args.split_seed is None else args.split_seed,
        options=options,
        cutoff=args.cutoff,
        partitions=args.partitions,
        quarantine=args.quarantine,
        overwrite=args.overwrite,
        in_process_max_events=cfg.data.in_process_max_events,
        binary=_binary(args, cfg),
    )
    for path, info in zip((args.output, heldout), infos):
        log.info("dataset %s: %s", path, json.dumps(info_summary(info)))
    return EXIT_OK


def _prepare(args, cfg) -> int:
    from .data.prepare import info_summary
    from .data.tables import prepare_input

    options = parse_options(args.option)
    if args.master:
        cfg = dataclasses.replace(cfg, spark=dataclasses.replace(cfg.spark, master=args.master))
    spark = api.session(cfg, args.command)
    if args.heldout_fraction:
        return _prepare_split(args, cfg, spark, options)
    info = prepare_input(
        spark,
        args.input,
        args.output,
        args.format,
        columns=_columns(args, cfg),
        options=options,
        cutoff=args.cutoff,
        merge_duplicates=args.merge,
        vocabulary=args.vocabulary,
        partitions=args.partitions,
        quarantine=args.quarantine,
        overwrite=args.overwrite,
        lock_stale_s=cfg.output.lock_stale_s,
        in_process_max_events=cfg.data.in_process_max_events,
        binary=_binary(args, cfg),
    )
    log.info("dataset %s: %s", args.output, json.dumps(info_summary(info)))
    return EXIT_OK


def _resume_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--resume",
        action="store_true",
        help="selection methods: continue the run checkpointed in the output "
        "directory (same train settings; max_rounds, max_seconds, plots and backend "
        "may differ)",
    )
    p.add_argument(
        "--allow-unconverged",
        action="store_true",
        help="exit 0, not 4, when the run stops without meeting its own criterion "
        "(optimizer not converged, KKT certificate failed); "
        "the model is saved either way (config: output.allow_unconverged)",
    )


def _require_converged(args, cfg, report: dict, model_dir: str) -> None:
    """UnconvergedError (exit 4) when the saved run stopped short of its own
    criterion (train.unconverged), unless that is allowed."""
    reasons = report.get("unconverged") or []
    if reasons and not (args.allow_unconverged or cfg.output.allow_unconverged):
        raise UnconvergedError(
            f"{cfg.train.method} stopped without meeting its own criterion: "
            f"{'; '.join(reasons)}. The model is saved in {model_dir} for inspection; "
            "--allow-unconverged (or output.allow_unconverged = true) accepts it"
        )


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--train", help="prepared training dataset (overrides data.train)")
    p.add_argument("--heldout", help="prepared held-out dataset (overrides data.heldout)")
    p.add_argument("--output", help="output directory (overrides output.dir)")
    _resume_arg(p)


def _train(args, cfg) -> int:
    train_dir = args.train or cfg.data.train
    if not train_dir:
        raise InputError("no training data: give --train or data.train in the config")
    out = args.output or cfg.output.dir
    _, report = api.fit(
        api.session(cfg, args.command),
        cfg,
        train_dir,
        out,
        args.heldout or cfg.data.heldout,
        args.resume,
    )
    print(
        f"model: {storage.join(out, api.MODEL_DIR)}\nreport: {storage.join(out, api.TRAIN_REPORT)}"
    )
    _require_converged(args, cfg, report, storage.join(out, api.MODEL_DIR))
    return EXIT_OK


def _scoring_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="saved model directory")
    p.add_argument(
        "--input",
        required=True,
        help="prepared dataset, text file/directory, or table (files, or a catalog name)",
    )
    p.add_argument(
        "--format",
        help="reader of a text or table --input (e.g. maxent, conll, parquet, delta, table)",
    )
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="reader option, e.g. mode=basenp; spark.read's for a table",
    )
    p.add_argument(
        "--max-unknown",
        type=_fraction,
        default=api.MAX_UNKNOWN,
        metavar="FRACTION",
        help="fail (exit 2) when more than this fraction of the input's feature "
        "occurrences are unknown to the model, a sign of the wrong --format "
        f"(default {api.MAX_UNKNOWN:g})",
    )
    p.add_argument(
        "--allow-unknown",
        action="store_true",
        help="score anyway, with a warning, above --max-unknown",
    )


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1], got {text!r}")
    return value


def _predict_args(p: argparse.ArgumentParser) -> None:
    _scoring_args(p)
    _table_args(p, key=True)
    p.add_argument("--output", required=True, help="Parquet output directory")
    p.add_argument("--overwrite", action="store_true")


def _predict(args, cfg) -> int:
    from .model import MaxentModel

    spark = api.session(cfg, args.command)
    model = MaxentModel.load(args.model)
    api.predict(
        spark,
        model,
        args.model,
        args.input,
        args.output,
        args.format,
        parse_options(args.option),
        args.overwrite,
        args.max_unknown,
        args.allow_unknown,
        cfg,
        _columns(args, cfg),
    )
    print(f"predictions: {args.output}")
    return EXIT_OK


def _evaluate_args(p: argparse.ArgumentParser) -> None:
    _scoring_args(p)
    _table_args(p)
    p.add_argument(
        "--chunks",
        choices=["auto", "yes", "no"],
        default="auto",
        help="score chunks with the CoNLL-2000 rules (auto: when labels are IOB tags)",
    )
    p.add_argument("--report", help="write the report JSON here")


def _evaluate(args, cfg) -> int:
    from .model import MaxentModel

    spark = api.session(cfg, args.command)
    model = MaxentModel.load(args.model)
    if not args.report:
        return _evaluate_to(args, cfg, spark, model)
    report = storage.qualify(args.report)
    parent, name = storage.split(report)
    storage.check_writable(parent)  # before the work, not after it
    with storage.output_lock(report, cfg.output.lock_stale_s, "evaluate"):
        storage.sweep(parent, {name})  # a killed evaluate's scratch beside its report
        return _evaluate_to(args, cfg, spark, model)


def _evaluate_to(args, cfg, spark, model) -> int:
    """evaluate's work, and its report written (under the report's lock)."""
    scratch = (  # a prepared --input needs none
        contextlib.nullcontext("")
        if api.is_prepared(args.input)
        else api.scratch_for(spark, cfg, args.report)
    )
    with scratch as work:
        data = api.prepared_for_model(
            spark,
            args.model,
            args.input,
            args.format,
            work,
            parse_options(args.option),
            args.max_unknown,
            args.allow_unknown,
            _columns(args, cfg),
            cfg.data.in_process_max_events,
        )
        chunks = {"auto": None, "yes": True, "no": False}[args.chunks]
        report = api.evaluate_model(spark, model, data, chunks, cfg.data.in_process_max_events)
    summary = {k: v for k, v in report.items() if k != "per_label"}
    print(json.dumps(summary, indent=2, default=json_default))
    if args.report:
        write_json(args.report, report)
    return EXIT_OK


def _pipeline_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", help="output directory (overrides output.dir)")
    _heldout_fraction_arg(p)
    _binary_arg(p)
    _resume_arg(p)


def _pipeline(args, cfg) -> int:
    out = args.output or cfg.output.dir
    if args.heldout_fraction is not None:
        data = dataclasses.replace(cfg.data, heldout_fraction=args.heldout_fraction)
        cfg = dataclasses.replace(cfg, data=data)
    if args.binary is not None:
        cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, binary=args.binary))
    t0 = time.perf_counter()
    spark = api.session(cfg, args.command)
    started = {"spark_start_s": time.perf_counter() - t0}
    full = api.pipeline(spark, cfg, out, args.resume, phases=started)
    report, test = full["train"], full.get("test", {})
    print(
        f"trained {cfg.train.method}: {report['nonzero_weights']} non-zero weights, "
        f"objective {report.get('objective', float('nan')):.6g}, {report['passes']} passes"
        + (f", test accuracy {test['accuracy']:.4f}" if test else "")
    )
    print(
        f"model:  {storage.join(out, api.MODEL_DIR)}\n"
        f"report: {storage.join(out, api.PIPELINE_REPORT)}"
    )
    _require_converged(args, cfg, report, storage.join(out, api.MODEL_DIR))
    return EXIT_OK


COMMANDS: dict[str, tuple[str, Callable, Callable]] = {
    "prepare": (
        "Read text files or a table on Spark, build the feature dictionary, index and "
        "merge events, and write a prepared dataset.",
        _prepare_args,
        _prepare,
    ),
    "train": ("Train a conditional maxent model on a prepared dataset.", _train_args, _train),
    "predict": (
        "Score a dataset with a saved model; writes Parquet (event_id, group, label, "
        "predicted, probability, probabilities; and --key-col for a table).",
        _predict_args,
        _predict,
    ),
    "evaluate": (
        "Accuracy, per-label P/R/F1 and CoNLL chunk P/R/F1 of a model.",
        _evaluate_args,
        _evaluate,
    ),
    "pipeline": (
        "Prepare, train and evaluate in one Spark session (default: the built-in synthetic data).",
        _pipeline_args,
        _pipeline,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparkmaxent",
        description="Sparse conditional maximum-entropy models with "
        "feature selection, on Apache Spark. Exit codes: 0 done, 1 internal error, 2 bad "
        "input, 3 bad configuration, 4 stopped without meeting its own criterion (model saved; "
        "--allow-unconverged), 5 non-finite numbers in training (no model saved), 6 a "
        "training pass stalled (no executors, or too long) and was cancelled, 7 no space "
        "left on the device (or quota) where it writes.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")
    for name, (help_text, add_args, _) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        add_args(p)
        p.add_argument("--config", help="TOML configuration file (conf/*.toml)")
        p.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="SECTION.KEY=VALUE",
            help="override one configuration value, e.g. --set train.grafting.l1=1e-5",
        )
        p.add_argument(
            "--remote",
            metavar="sc://HOST:PORT",
            help="run on a Spark Connect server (overrides spark.remote; default: "
            "$SPARK_REMOTE if set)",
        )
        p.add_argument("--verbose", action="store_true", help="debug logging")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns its exit code (the table above)."""
    from .config import load_config

    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    try:
        cfg = load_config(args.config, args.overrides)
        if args.remote:
            cfg = dataclasses.replace(cfg, spark=dataclasses.replace(cfg.spark, remote=args.remote))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    try:
        return COMMANDS[args.command][2](args, cfg)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    except (InputError, FileNotFoundError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except NumericError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_NUMERIC
    except UnconvergedError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_UNCONVERGED
    except StalledError as e:
        out = getattr(args, "output", None) or cfg.output.dir
        print(f"error: {e}{checkpoint_note(args.command, out)}", file=sys.stderr)
        return EXIT_STALLED
    except Exception as e:
        failed = write_failure(e, getattr(args, "output", None) or cfg.output.dir)
        if failed is None:
            log.exception("%s failed", args.command)
            return EXIT_FAILED
        code, message = failed
        log.debug("%s failed", args.command, exc_info=True)
        print(f"error: {message}", file=sys.stderr)
        return code


def job_main(command: str) -> Callable[[list[str] | None], int]:
    """The ``main(argv)`` of ``jobs/<command>.py``: this CLI's subcommand
    (logs and errors on standard error, as under the console script)."""

    def run(argv: list[str] | None = None) -> int:
        if argv is None:
            restore_stderr()
        return main([command, *(sys.argv[1:] if argv is None else argv)])

    return run
