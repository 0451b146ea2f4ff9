"""Size of the ``scripts/submit.sh --python-env archive`` archive (issue 39):
each virtualenv given packed whole (as before), as submit.sh ships it
(``scripts/pack_env.py``: without pyspark and py4j, pandas, the installers
and the files nothing imports) and as it ships it for ``--deploy-mode
cluster`` (pandas kept), in bytes compressed and unpacked. The
target: the shipped archive of a virtualenv holding only what sparkmaxent
needs (``pip install '.[cluster]'``) fits an executor's
256 MB /tmp, where Spark fetches it, compressed and unpacked.

Usage::

    .venv/bin/python -m benchmarks.env_archive --venv runtime=/path/to/venv \\
        --venv test=.venv
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from benchmarks.common import RESULTS, target, write_result
from scripts import pack_env

LIMIT_BYTES = 256 * 1024 * 1024  # the executors' /tmp of tests/e2e/test_nscluster_archive.py


def measure(name: str, prefix: str, scratch: str) -> list[dict]:
    """Three rows for the virtualenv ``prefix``: packed whole (every
    distribution, every file), as shipped, and as shipped for
    ``--deploy-mode cluster`` (pandas kept: the driver runs from it)."""
    rows = []
    everything = [*pack_env.SPARK_PROVIDED, *pack_env.NOT_IMPORTED]
    modes = (("whole", everything), ("shipped", []), ("cluster-deploy", ["pandas"]))
    for mode, keep in modes:
        out = os.path.join(scratch, f"{name}-{mode}.tar.gz")
        t0 = time.perf_counter()
        done = pack_env.pack(os.path.abspath(prefix), out, keep, all_files=mode == "whole")
        rows.append(
            {
                "venv": name,
                "archive": mode,
                "left_out": ", ".join(done["left_out"]) or "nothing",
                "archive_mb": round(done["archive_bytes"] / 2**20, 1),
                "archive_bytes": done["archive_bytes"],
                "unpacked_mb": round(done["unpacked_bytes"] / 2**20, 1),
                "files": done["files"],
                "unused_files_mb": round(done["unused_bytes"] / 2**20, 1),
                "pack_s": round(time.perf_counter() - t0, 1),
            }
        )
        os.remove(out)
    return rows


def targets(rows: list[dict]) -> dict:
    shipped = [r for r in rows if r["venv"] == "runtime" and r["archive"] == "shipped"]
    if not shipped:
        return {}
    row = shipped[0]
    deploy = [r for r in rows if r["venv"] == "runtime" and r["archive"] == "cluster-deploy"]
    extra = (
        {
            "cluster_deploy_unpacked": target(
                "the --deploy-mode cluster archive (pandas kept) of that venv unpacks to under "
                "256 MB",
                f"{deploy[0]['unpacked_mb']} MB",
                deploy[0]["unpacked_mb"] * 2**20 <= LIMIT_BYTES,
            )
        }
        if deploy
        else {}
    )
    return extra | {
        "runtime_archive": target(
            "the shipped archive of a pip install '.[cluster]' venv is under 256 MB "
            "(what an executor downloads)",
            f"{row['archive_mb']} MB",
            row["archive_bytes"] <= LIMIT_BYTES,
        ),
        "runtime_unpacked": target(
            "the shipped archive of a pip install '.[cluster]' venv unpacks to under "
            "256 MB (when unpacked in the same /tmp)",
            f"{row['unpacked_mb']} MB",
            row["unpacked_mb"] * 2**20 <= LIMIT_BYTES,
        ),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--venv",
        action="append",
        required=True,
        metavar="NAME=PATH",
        help="a virtualenv to pack (repeatable); NAME 'runtime' for one with only "
        "pip install '.[cluster]', which the target reads",
    )
    ap.add_argument("--out", default=os.path.join(RESULTS, "env_archive.json"))
    args = ap.parse_args(argv)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="env-archive-") as scratch:
        for spec in args.venv:
            name, _, path = spec.partition("=")
            rows += measure(name, path, scratch)
    for row in rows:
        print(row)
    write_result(args.out, rows, targets(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
