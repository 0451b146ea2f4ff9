"""spark-submit entry point of `sparkmaxent pipeline` (options: --help; docs/cli.md)."""

import sys

from sparkmaxent.cli import job_main

main = job_main("pipeline")

if __name__ == "__main__":
    sys.exit(main())
