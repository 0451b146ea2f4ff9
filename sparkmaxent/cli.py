"""Command-line entry points behind jobs/*.py (thin spark-submit wrappers).

Every ``*_main(argv) -> int`` returns 0 on success, 2 on bad input or
configuration (one clear message on stderr, no traceback) and 1 on any other
failure.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Callable

import numpy as np

from .jsonio import json_default, write_json

log = logging.getLogger("sparkmaxent")

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr)
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def run(main: Callable[[argparse.Namespace], int], parser: argparse.ArgumentParser,
        argv: list[str] | None) -> int:
    """Parse arguments and run, mapping errors to exit codes."""
    from .data.readers import InputError

    args = parser.parse_args(argv)
    setup_logging(getattr(args, "verbose", False))
    try:
        return main(args)
    except (InputError, ValueError, FileNotFoundError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception:
        log.exception("job failed")
        return EXIT_FAILED


def config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML configuration file (conf/*.toml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE",
                        help="override one configuration value, e.g. --set train.l2=1e-5")
    parser.add_argument("--verbose", action="store_true", help="debug logging")


def load_job_config(args: argparse.Namespace):
    from .config import load_config

    return load_config(args.config, args.overrides)


def session_for(cfg):
    from .backends.session import spark_session

    return spark_session(cfg.spark.master or None, cfg.spark.app_name, cfg.spark.conf)


# ---- training ------------------------------------------------------------

def train_model(spark, cfg, train_dir: str, heldout_dir: str = "", output_dir: str | None = None,
                resume: bool = False):
    """Train ``cfg.train.method`` on a prepared dataset; returns (model, report).

    Selection methods checkpoint every round into ``<output_dir>/checkpoint``
    and write their plots to ``<output_dir>/plots``; ``resume`` continues
    from that checkpoint."""
    from .backends.factory import make_backend
    from .data.schema import DatasetInfo
    from .model import MaxentModel, feature_names_for
    from .train import train

    info = DatasetInfo.load(train_dir)
    partitions = cfg.data.partitions or None
    bias = cfg.train.bias and info.shape == "multiclass"
    backend = make_backend(cfg.train.backend, train_dir, spark=spark, bias=bias, partitions=partitions)
    heldout = (make_backend(cfg.train.backend, heldout_dir, spark=spark, bias=bias,
                            partitions=partitions) if heldout_dir else None)
    try:
        result = train(backend, cfg.train, heldout, output_dir=output_dir, resume=resume)
    finally:
        backend.close()
        if heldout is not None:
            heldout.close()
    predicates = backend.space.split(result.weights.ids)[0]
    model = MaxentModel(backend.space, result.weights, list(info.labels),
                        feature_names_for(train_dir, predicates), result.scaling,
                        cfg.to_dict(), {k: v for k, v in result.report.items()
                                        if k not in ("trace", "rounds")})
    return model, result.report


def resume_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resume", action="store_true",
                        help="selection methods: continue the run checkpointed in the output "
                        "directory (same train.* settings; max_rounds, max_seconds and backend "
                        "may differ)")


def train_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="train", description="Train a conditional maxent model on a prepared dataset.")
    config_arguments(parser)
    parser.add_argument("--train", help="prepared training dataset (overrides data.train)")
    parser.add_argument("--heldout", help="prepared held-out dataset (overrides data.heldout)")
    parser.add_argument("--output", help="output directory (overrides output.dir)")
    resume_argument(parser)

    def main(args) -> int:
        cfg = load_job_config(args)
        train_dir = args.train or cfg.data.train
        if not train_dir:
            raise ValueError("no training data: give --train or data.train in the config")
        out = args.output or cfg.output.dir
        spark = session_for(cfg)
        model, report = train_model(spark, cfg, train_dir, args.heldout or cfg.data.heldout,
                                    output_dir=out, resume=args.resume)
        model.save(os.path.join(out, "model"), overwrite=cfg.output.overwrite)
        write_json(os.path.join(out, "train_report.json"), report)
        print(f"model: {os.path.join(out, 'model')}\nreport: {os.path.join(out, 'train_report.json')}")
        return EXIT_OK

    return run(main, parser, argv)


# ---- prediction and evaluation ----------------------------------------------

def prepared_for_model(spark, model_dir: str, data: str, fmt: str | None, workdir: str,
                       options: dict | None = None) -> str:
    """A prepared dataset indexed with the model's dictionary: ``data`` itself
    if it is one, else ``data`` (text in ``fmt``) prepared into ``workdir``."""
    from .data.prepare import prepare
    from .model import VOCABULARY_DIR

    if os.path.exists(os.path.join(data, "dataset.json")):
        return data
    if not fmt:
        raise ValueError(f"{data} is not a prepared dataset; give --format to read it as text")
    out = os.path.join(workdir, "prepared")
    prepare(spark, [data], out, fmt, options=options or {}, merge_duplicates=False,
            vocabulary=os.path.join(model_dir, VOCABULARY_DIR), overwrite=True)
    return out


def evaluate_predictions(frame, labels: list[str], chunks: bool) -> dict:
    """``evaluate.score_tagging`` of a prediction DataFrame (backends.predict schema)."""
    from .evaluate import score_tagging

    t = frame.select("group", "event_id", "label", "predicted").toArrow()
    return score_tagging(t.column("group").to_numpy(), t.column("event_id").to_numpy(),
                         t.column("label").to_pylist(), t.column("predicted").to_pylist(),
                         labels, chunks)


def evaluate_model(spark, model, dataset_dir: str, chunks: bool | None = None) -> dict:
    from .backends.predict import predictions

    frame, bc = predictions(spark, model, dataset_dir)
    try:
        if model.space.shape != "multiclass":
            t = frame.select("predicted", "correct").toArrow()
            hits = [c[p] for p, c in zip(t.column("predicted").to_pylist(), t.column("correct").to_pylist())]
            return {"events": len(hits), "accuracy": float(np.mean(hits)) if hits else float("nan")}
        if chunks is None:  # IOB chunk tags: score chunks as the CoNLL shared task does
            chunks = any(label[:2] in ("B-", "I-") for label in model.labels)
        return evaluate_predictions(frame, model.labels, chunks)
    finally:
        bc.destroy()


def predict_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="predict", description="Score a dataset with a saved model; writes Parquet "
        "(event_id, group, label, predicted, probability, probabilities).")
    config_arguments(parser)
    parser.add_argument("--model", required=True, help="saved model directory")
    parser.add_argument("--input", required=True, help="prepared dataset or text file/directory")
    parser.add_argument("--format", help="reader of a text --input (e.g. maxent, conll)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="reader option, e.g. mode=basenp")
    parser.add_argument("--output", required=True, help="Parquet output directory")
    parser.add_argument("--overwrite", action="store_true")

    def main(args) -> int:
        from .backends.io import atomic_output
        from .backends.predict import predictions
        from .model import MaxentModel

        cfg = load_job_config(args)
        spark = session_for(cfg)
        model = MaxentModel.load(args.model)
        with atomic_output(spark, args.output, overwrite=args.overwrite) as tmp:
            data = prepared_for_model(spark, args.model, args.input, args.format,
                                      tmp + "-work", parse_options(args.option))
            frame, bc = predictions(spark, model, data)
            try:
                frame.write.parquet(tmp)
            finally:
                bc.destroy()
                _remove_local(tmp + "-work")
        print(f"predictions: {args.output}")
        return EXIT_OK

    return run(main, parser, argv)


def parse_options(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"expected a reader option like mode=basenp, got {item!r}")
        out[key] = value
    return out


def _remove_local(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def evaluate_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="evaluate", description="Accuracy, per-label P/R/F1 and CoNLL chunk P/R/F1 of a model.")
    config_arguments(parser)
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True, help="prepared dataset or text file/directory")
    parser.add_argument("--format")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--chunks", choices=["auto", "yes", "no"], default="auto",
                        help="score chunks with the CoNLL-2000 rules (auto: when labels are IOB tags)")
    parser.add_argument("--report", help="write the report JSON here")

    def main(args) -> int:
        import tempfile

        from .model import MaxentModel

        cfg = load_job_config(args)
        spark = session_for(cfg)
        model = MaxentModel.load(args.model)
        with tempfile.TemporaryDirectory(prefix="sparkmaxent-eval-") as work:
            data = prepared_for_model(spark, args.model, args.input, args.format, work,
                                      parse_options(args.option))
            chunks = {"auto": None, "yes": True, "no": False}[args.chunks]
            report = evaluate_model(spark, model, data, chunks)
        summary = {k: v for k, v in report.items() if k != "per_label"}
        print(json.dumps(summary, indent=2, default=json_default))
        if args.report:
            write_json(args.report, report)
        return EXIT_OK

    return run(main, parser, argv)


# ---- the main job: prepare + train + evaluate -------------------------------

def make_datasets(spark, cfg, out: str) -> dict[str, str]:
    """Prepared train/heldout/test directories for a run: taken from the
    config, or prepared from its inputs (or the synthetic generator)."""
    from .data.prepare import prepare

    d = cfg.data
    if d.train:
        return {"train": d.train, "heldout": d.heldout, "test": d.test}
    inputs = {"train": d.train_inputs, "heldout": d.heldout_inputs, "test": d.test_inputs}
    fmt = d.format
    if fmt == "synthetic":
        from .data import synthetic

        spec = synthetic.SyntheticSpec(**d.synthetic)
        inputs = synthetic.write_splits(spec, os.path.join(out, "data", "text"))
        fmt = "maxent"
    if not inputs["train"]:
        raise ValueError("no training data: set data.train (prepared) or data.train_inputs")
    dirs = {}
    for split in ("train", "heldout", "test"):
        if not inputs.get(split):
            dirs[split] = ""
            continue
        dirs[split] = os.path.join(out, "data", split)
        is_train = split == "train"
        prepare(spark, list(inputs[split]) if not isinstance(inputs[split], str) else [inputs[split]],
                dirs[split], fmt, options=dict(d.options),
                cutoff=d.prepare_cutoff if is_train else 0, merge_duplicates=is_train,
                vocabulary=None if is_train else dirs["train"],
                partitions=d.partitions or None, overwrite=True)
    return dirs


def pipeline_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pipeline", description="Prepare, train and evaluate in one Spark session "
        "(default: the built-in synthetic data).")
    config_arguments(parser)
    parser.add_argument("--output", help="output directory (overrides output.dir)")
    resume_argument(parser)

    def main(args) -> int:
        cfg = load_job_config(args)
        out = args.output or cfg.output.dir
        started = time.perf_counter()
        spark = session_for(cfg)
        dirs = make_datasets(spark, cfg, out)
        model, report = train_model(spark, cfg, dirs["train"], dirs["heldout"], output_dir=out,
                                    resume=args.resume)
        model_dir = os.path.join(out, "model")
        model.save(model_dir, overwrite=cfg.output.overwrite)
        full = {"config": cfg.to_dict(), "datasets": dirs, "train": report}
        if dirs["test"]:
            full["test"] = evaluate_model(spark, model, dirs["test"])
        full["wall_s"] = round(time.perf_counter() - started, 3)
        report_path = os.path.join(out, "report.json")
        write_json(report_path, full)
        test = full.get("test", {})
        print(f"trained {cfg.train.method}: {report['nonzero_weights']} non-zero weights, "
              f"objective {report.get('objective', float('nan')):.6g}, {report['passes']} passes"
              + (f", test accuracy {test['accuracy']:.4f}" if test else ""))
        print(f"model:  {model_dir}\nreport: {report_path}")
        return EXIT_OK

    return run(main, parser, argv)
