"""spark-submit entry point of `sparkmaxent evaluate` (options: --help; docs/cli.md)."""

import sys

from sparkmaxent.cli import job_main

main = job_main("evaluate")

if __name__ == "__main__":
    sys.exit(main())
