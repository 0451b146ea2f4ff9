"""spark-submit entry point: see sparkmaxent.cli.predict_main (--help for options)."""
import sys

from sparkmaxent.cli import predict_main


def main(argv=None) -> int:
    return predict_main(argv)


if __name__ == "__main__":
    sys.exit(main())
