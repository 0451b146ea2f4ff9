"""spark-submit entry point of `sparkmaxent predict` (options: --help; docs/cli.md)."""

import sys

from sparkmaxent.cli import job_main

main = job_main("predict")

if __name__ == "__main__":
    sys.exit(main())
