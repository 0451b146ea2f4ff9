"""spark-submit entry point: see sparkmaxent.cli.pipeline_main (--help for options)."""
import sys

from sparkmaxent.cli import pipeline_main


def main(argv=None) -> int:
    return pipeline_main(argv)


if __name__ == "__main__":
    sys.exit(main())
