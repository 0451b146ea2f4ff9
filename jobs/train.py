"""spark-submit entry point of `sparkmaxent train` (options: --help; docs/cli.md)."""

import sys

from sparkmaxent.cli import job_main

main = job_main("train")

if __name__ == "__main__":
    sys.exit(main())
