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
from .data.options import ScoringOptions
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
from .plan import ExecutionPlan
from .report import RunReport
from .streams import restore_stderr, setup_logging

log = logging.getLogger("sparkmaxent")


SUBCOMMANDS = ("prepare", "train", "predict", "evaluate", "pipeline")
#: the parser default holding {flag's dest: the configuration key it overrides}
CONFIG_KEYS = "config_keys"


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


# ---- flags that override configuration keys ----------------------------------


def _config_flag(p, flag: str, key: str, **kwargs) -> None:
    """Add ``flag`` as an override of the configuration key ``key`` (dotted):
    unset, the configuration's value holds (:func:`resolve_config`)."""
    help_text = kwargs.pop("help")
    action = p.add_argument(flag, default=None, help=f"{help_text} (overrides {key})", **kwargs)
    keys = p.get_default(CONFIG_KEYS) or {}
    p.set_defaults(**{CONFIG_KEYS: {**keys, action.dest: key}})


def resolve_config(args, cfg):
    """``cfg`` with every configuration flag given on the command line
    applied over it (flag over ``--set`` over ``--config``), each value
    checked by the schema: the one place flags meet the configuration."""
    from .config.load import with_values

    for dest, key in (getattr(args, CONFIG_KEYS, None) or {}).items():
        value = getattr(args, dest)
        if value is None:
            continue
        value = parse_options(value) if key == "data.options" else value
        try:
            cfg = with_values(cfg, {key: value})
        except ConfigError as e:
            raise ConfigError(f"--{dest.replace('_', '-')}: {e}") from None
    return cfg


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
    _config_flag(
        p,
        "--cutoff",
        "data.prepare_cutoff",
        type=int,
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
    _config_flag(
        p,
        "--partitions",
        "data.partitions",
        type=int,
        help="number of event files; 0: Spark's default parallelism",
    )
    p.add_argument(
        "--quarantine",
        action="store_true",
        help="set malformed records aside in OUTPUT/_quarantine instead of failing",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    _option_arg(p)
    _table_args(p)
    _binary_arg(p)
    _config_flag(
        p,
        "--master",
        "spark.master",
        help="Spark master (unset in the config too: whatever spark-submit or pyspark sets)",
    )
    _heldout_fraction_arg(p)
    p.add_argument(
        "--heldout-output",
        help="with a held-out fraction: the held-out dataset to create (default: OUTPUT-heldout)",
    )
    _config_flag(p, "--split-seed", "data.split_seed", type=int, help="seed of the held-out split")


def _option_arg(p: argparse.ArgumentParser) -> None:
    _config_flag(
        p,
        "--option",
        "data.options",
        action="append",
        metavar="KEY=VALUE",
        help="reader option, e.g. mode=basenp (repeatable); spark.read's for a table",
    )


def _table_args(p: argparse.ArgumentParser, key: bool = False) -> None:
    """The columns of a table input (overrides of the data.*_col keys)."""
    g = p.add_argument_group("table input (a --format that is not a text format)")
    for flag, help_text in (
        ("--label-col", "label column"),
        ("--features-col", "features: array<string>, map<string,double> or Vector"),
        ("--values-col", "array<double> values of an array<string> features column"),
        ("--weight-col", "numeric event weight"),
        ("--group-col", "candidate sets, one row per candidate: the group (event) id"),
        ("--correct-col", "candidate sets: correct flag, boolean or numeric > 0"),
    ):
        config_key = "data." + flag[2:].replace("-", "_")
        _config_flag(g, flag, config_key, metavar="COL", help=help_text)
    if key:
        g.add_argument(
            "--key-col",
            metavar="COL",
            help="a column the predictions keep (one row per input row; per group for "
            "candidate sets), to join them back to the table",
        )


def _columns(args, cfg):
    """The table columns of the resolved config (and a --key-col)."""
    key = getattr(args, "key_col", None)
    return dataclasses.replace(api.table_columns(cfg.data), key=key)


def _binary_arg(p: argparse.ArgumentParser) -> None:
    _config_flag(
        p,
        "--binary",
        "data.binary",
        action=argparse.BooleanOptionalAction,
        help="binary predicates: a feature present in an event counts 1.0 however often it "
        "occurs (map/Vector values: 1.0 where non-zero); --no-binary sums repeats "
        "(data prepared with a --vocabulary follows its setting)",
    )


def _heldout_fraction_arg(p: argparse.ArgumentParser) -> None:
    _config_flag(
        p,
        "--heldout-fraction",
        "data.heldout_fraction",
        type=_fraction,
        help="carve this stratified fraction of the training input out as held-out data, "
        "prepared with the rest's dictionary",
    )


def _splits(args, cfg) -> bool:
    """Whether prepare carves a held-out part (data.heldout_fraction): of
    training data only; refused when --heldout-fraction is given for other
    data, ignored (logged) when it comes from the configuration."""
    if not cfg.data.heldout_fraction:
        return False
    if args.vocabulary is None and args.merge:
        return True
    if args.heldout_fraction is not None:
        raise InputError(
            "--heldout-fraction splits training data: it does not go with "
            "--vocabulary or --no-merge"
        )
    log.info("data.heldout_fraction not applied: --vocabulary/--no-merge data is not split")
    return False


def _prepare(args, cfg) -> int:
    from .data.options import PrepareOptions
    from .data.prepare import info_summary
    from .data.split import prepare_split
    from .data.tables import prepare_input

    spark = api.session(cfg, args.command)
    d = cfg.data
    plan = ExecutionPlan.from_config(cfg)
    settings = PrepareOptions.from_config(
        d,
        cfg.output,
        plan=plan,
        merge_duplicates=args.merge,
        vocabulary=args.vocabulary,
        quarantine=args.quarantine,
        overwrite=args.overwrite,
    )
    options = dict(d.options)
    if _splits(args, cfg):
        heldout = args.heldout_output or args.output.rstrip("/") + "-heldout"
        infos = prepare_split(
            spark, args.input, args.output, heldout, args.format, fraction=d.heldout_fraction,
            seed=d.split_seed, options=options, settings=settings,
        )  # fmt: skip
        outputs = list(zip((args.output, heldout), infos))
    else:
        info = prepare_input(
            spark, args.input, args.output, args.format, columns=_columns(args, cfg),
            options=options, settings=settings,
        )  # fmt: skip
        outputs = [(args.output, info)]
    plan.log()
    for path, info in outputs:
        log.info("dataset %s: %s", path, json.dumps(info_summary(info)))
    return EXIT_OK


def _resume_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--resume",
        action="store_true",
        help="selection methods: continue the run checkpointed in the output "
        "directory (same train settings; max_rounds, max_seconds, plots and backend "
        "may differ)",
    )
    _config_flag(
        p,
        "--allow-unconverged",
        "output.allow_unconverged",
        action="store_true",
        help="exit 0, not 4, when the run stops without meeting its own criterion "
        "(optimizer not converged, KKT certificate failed); "
        "the model is saved either way",
    )


def _require_converged(args, cfg, report: RunReport, model_dir: str) -> None:
    """UnconvergedError (exit 4) when the saved run stopped short of its own
    criterion (train.unconverged), unless that is allowed."""
    reasons = report.unconverged
    if reasons and not cfg.output.allow_unconverged:
        raise UnconvergedError(
            f"{cfg.train.method} stopped without meeting its own criterion: "
            f"{'; '.join(reasons)}. The model is saved in {model_dir} for inspection; "
            "--allow-unconverged (or output.allow_unconverged = true) accepts it"
        )


def _train_args(p: argparse.ArgumentParser) -> None:
    _config_flag(p, "--train", "data.train", help="prepared training dataset")
    _config_flag(p, "--heldout", "data.heldout", help="prepared held-out dataset")
    _output_dir_arg(p)
    _resume_arg(p)


def _output_dir_arg(p: argparse.ArgumentParser) -> None:
    _config_flag(p, "--output", "output.dir", help="output directory")


def _train(args, cfg) -> int:
    train_dir = cfg.data.train
    if not train_dir:
        raise InputError("no training data: give --train or data.train in the config")
    out = cfg.output.dir
    _, report = api.fit(
        api.session(cfg, args.command), cfg, train_dir, out, cfg.data.heldout, args.resume
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
    _option_arg(p)
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


def _scoring(args, cfg) -> ScoringOptions:
    """How predict and evaluate read their --input: the [data] section's
    reader options and in-process sizes, the command line's over them."""
    return ScoringOptions.from_config(
        cfg.data,
        columns=_columns(args, cfg),
        max_unknown=args.max_unknown,
        allow_unknown=args.allow_unknown,
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
    settings = _scoring(args, cfg).replace(overwrite=args.overwrite)
    api.predict(
        spark, model, args.model, args.input, args.output, args.format, settings=settings, cfg=cfg
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
            spark, args.model, args.input, args.format, work, _scoring(args, cfg)
        )
        chunks = {"auto": None, "yes": True, "no": False}[args.chunks]
        plan = ExecutionPlan.from_config(cfg)
        report = {
            **api.evaluate_model(spark, model, data, chunks, plan=plan),
            "plan": plan.to_dict(),
        }
    summary = {k: v for k, v in report.items() if k != "per_label"}
    print(json.dumps(summary, indent=2, default=json_default))
    if args.report:
        write_json(args.report, report)
    return EXIT_OK


def _pipeline_args(p: argparse.ArgumentParser) -> None:
    _output_dir_arg(p)
    _heldout_fraction_arg(p)
    _binary_arg(p)
    _resume_arg(p)


def _pipeline(args, cfg) -> int:
    out = cfg.output.dir
    t0 = time.perf_counter()
    spark = api.session(cfg, args.command)
    started = {"spark_start_s": time.perf_counter() - t0}
    full = api.pipeline(spark, cfg, out, args.resume, phases=started)
    report, test = full.train, full.test
    objective = float("nan") if report.objective is None else report.objective
    print(
        f"trained {cfg.train.method}: {report.nonzero_weights} non-zero weights, "
        f"objective {objective:.6g}, {report.passes} passes"
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
        _config_flag(
            p,
            "--remote",
            "spark.remote",
            metavar="sc://HOST:PORT",
            help="run on a Spark Connect server (unset in the config too: $SPARK_REMOTE if set)",
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
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    try:
        return COMMANDS[args.command][2](args, resolve_config(args, cfg))
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
