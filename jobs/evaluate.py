"""spark-submit entry point: see sparkmaxent.cli.evaluate_main (--help for options)."""
import sys

from sparkmaxent.cli import evaluate_main


def main(argv=None) -> int:
    return evaluate_main(argv)


if __name__ == "__main__":
    sys.exit(main())
