"""spark-submit entry point: prepare text files as a dataset (sparkmaxent.data.prepare).

Examples::

    python jobs/prepare.py --input data/train.txt --format conll --option mode=basenp \\
        --cutoff 2 --output work/train
    spark-submit --master spark://127.0.0.1:7077 jobs/prepare.py --input 'corpus/*.txt' \\
        --format maxent --no-merge --vocabulary work/train --output work/test

Exit codes: 0 done, 2 bad input (one message on stderr, no traceback), 1 any
other failure.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

logger = logging.getLogger("sparkmaxent.jobs.prepare")

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    from sparkmaxent.data.readers import FORMATS

    p = argparse.ArgumentParser(
        prog="prepare", description="Parse text files on Spark, build the feature "
        "dictionary, index and merge events, and write a prepared dataset.")
    p.add_argument("--input", nargs="+", action="extend", required=True, metavar="PATH",
                   help="files, directories or globs (repeatable)")
    p.add_argument("--format", required=True, metavar="NAME",
                   help=f"input format, one of {sorted(FORMATS)}")
    p.add_argument("--output", required=True, help="dataset directory to create")
    p.add_argument("--cutoff", type=int, default=0,
                   help="keep features occurring in >= CUTOFF (weighted) events; 0 keeps all")
    p.add_argument("--no-merge", dest="merge", action="store_false",
                   help="keep identical events apart (test/prediction data)")
    p.add_argument("--vocabulary", help="prepared training dataset whose dictionary and "
                   "labels to reuse (held-out and test data)")
    p.add_argument("--partitions", type=int, help="number of event files "
                   "(default: Spark's default parallelism)")
    p.add_argument("--quarantine", action="store_true",
                   help="set malformed records aside in OUTPUT/_quarantine instead of failing")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="parser option, e.g. mode=basenp (repeatable)")
    p.add_argument("--master", default=None,
                   help="Spark master (default: whatever spark-submit or pyspark sets)")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    return p


def parse_option_pairs(items: list[str]) -> dict:
    """``["mode=basenp"]`` -> ``{"mode": "basenp"}`` (values stay strings;
    ``prepare`` converts them to the type of the format's default)."""
    from sparkmaxent.data.readers import InputError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--option: expected KEY=VALUE (e.g. mode=basenp), got {item!r}")
        out[key.strip()] = value
    return out


def _setup_logging(verbose: bool) -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                            datefmt="%H:%M:%S", stream=sys.stderr)
    logging.getLogger("sparkmaxent").setLevel(logging.DEBUG if verbose else logging.INFO)
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    """Run the prepare job; returns the exit code."""
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)

    from sparkmaxent.data.prepare import info_summary, prepare
    from sparkmaxent.data.readers import InputError

    spark, created = None, False
    try:
        options = parse_option_pairs(args.option)
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:  # reuse a running session (tests, notebooks) as it is
            from sparkmaxent.backends.session import spark_session

            spark = spark_session(args.master, "sparkmaxent-prepare")
            created = True
        info = prepare(spark, args.input, args.output, args.format, options=options,
                       cutoff=args.cutoff, merge_duplicates=args.merge,
                       vocabulary=args.vocabulary, partitions=args.partitions,
                       quarantine=args.quarantine, overwrite=args.overwrite)
        logger.info("dataset %s: %s", args.output, json.dumps(info_summary(info)))
        return EXIT_OK
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception:
        logger.exception("prepare failed")
        return EXIT_FAILED
    finally:
        if created and spark is not None:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
