"""spark-submit entry point: see sparkmaxent.cli.train_main (--help for options)."""
import sys

from sparkmaxent.cli import train_main


def main(argv=None) -> int:
    return train_main(argv)


if __name__ == "__main__":
    sys.exit(main())
