"""Shared by the benchmarks: where the corpora are, machine facts, timing,
and the result file format (``RESULT_KEYS``: one current page per benchmark,
read by ``benchmarks.report`` to generate docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import json
import logging
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SHARED_DATA = os.path.abspath(os.path.join(ROOT, "..", "shared", "data"))
RESULTS = os.path.join(ROOT, "benchmarks", "results")


def shared_corpus(*parts: str, data_dir: str = SHARED_DATA) -> str:
    """Path of a file of ../shared/data; exits with a clear message if absent."""
    path = os.path.join(data_dir, *parts)
    if not os.path.exists(path):
        sys.exit(
            f"corpus not found: {path} (benchmarks read ../shared/data; "
            "pass --data to point elsewhere)"
        )
    return path


def machine() -> dict:
    """Cores, memory, Python and platform of the machine a run used."""
    mem_kb = 0
    try:
        with open("/proc/meminfo") as f:
            mem_kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
    except (OSError, StopIteration, ValueError):
        pass
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 2**20, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages now (timings on a loaded machine
    are inflated; passes and bytes are not)."""
    if not hasattr(os, "getloadavg"):
        return None
    return [round(x, 2) for x in os.getloadavg()]


@functools.cache
def commit() -> str:
    """The checkout's commit (short hash, ``+dirty`` with uncommitted changes
    to tracked files), or ``unknown`` outside a git checkout: read once, when
    the benchmark starts (below), so that a checkout moved during a long run
    (a rebase) does not put another commit on its rows."""
    try:
        head = subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


commit()  # read at import: the run's commit is the one it started from


def target(goal: str, value, met: bool) -> dict:
    """One entry of a result's ``targets``: the goal in words, the measured
    value (a number or a short phrase with its figures) and whether it is met."""
    return {"goal": goal, "value": value, "met": bool(met)}


def status_kb(key: str) -> int:
    """A field of /proc/self/status in KiB (``VmRSS``, ``VmHWM``)."""
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(key + ":")).split()[1])


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (``[1]`` the
    parent pid, ``[11:15]`` utime, stime and those of ended children in
    clock ticks); None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):  # ended meanwhile
        return None


def descendants(pid: int) -> list[int]:
    """Processes below ``pid`` (a Spark JVM's Python workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        fields = proc_stat(int(entry)) if entry.isdigit() else None
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set (VmHWM) to its current RSS;
    False where the kernel does not allow it."""
    try:  # "5" resets VmHWM to the current RSS (Linux >= 4.0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def command_line() -> str:
    """The command that ran the benchmark: ``python -m benchmarks.X ...``."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    head = ["python", "-m", spec.name] if spec is not None else [os.path.relpath(sys.argv[0], ROOT)]
    return " ".join(shlex.quote(a) for a in head + sys.argv[1:])


def scratch_paths(command: str) -> str:
    """``command`` with each path under the temporary directory written as
    ``$WORK/<its name>``: a page names no scratch path of the machine that
    ran it (docs/benchmarks.md: scratch paths in commands read ``$WORK``)."""
    scratch = re.escape(tempfile.gettempdir().rstrip("/") + "/")
    return re.sub(scratch + r"(?:[^\s'\"]*/)?([^\s/'\"]+)", r"$WORK/\1", command)


RESULT_KEYS = ("benchmark", "command", "commit", "date", "machine", "load", "rows", "targets")


def write_result(
    path: str, rows: list[dict], targets: dict | None = None, *, benchmark: str | None = None
) -> dict:
    """Write the benchmark's current page, ``benchmarks/results/<benchmark>.json``:
    its latest run only (``RESULT_KEYS``: the command, the commit, date,
    machine and load average, the rows and the targets, each
    ``{"goal", "value", "met"}``, see ``target``), replacing what was there
    (earlier runs live in git's history). ``benchmark`` defaults to the
    calling module's name (``benchmarks.scale`` -> ``scale``, also when it
    runs as ``python -m benchmarks.scale``)."""
    if benchmark is None:
        caller = sys._getframe(1).f_globals
        name, spec = caller.get("__name__", ""), caller.get("__spec__")
        if name == "__main__" and spec is not None:
            name = spec.name
        benchmark = name.rpartition(".")[2]
    for name, entry in (targets or {}).items():
        if set(entry) != {"goal", "value", "met"}:
            raise ValueError(
                f"target {name!r} needs exactly goal, value and met, got {sorted(entry)}"
            )
    rows = [
        {**r, "measured_by": scratch_paths(r["measured_by"])}
        if isinstance(r, dict) and isinstance(r.get("measured_by"), str)
        else r
        for r in rows
    ]
    result = {
        "benchmark": benchmark,
        "command": scratch_paths(command_line()),
        "commit": commit(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load": load_average(),
        "rows": rows,
        "targets": targets or {},
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1, default=lambda o: o.item() if hasattr(o, "item") else str(o))
        f.write("\n")
    os.replace(tmp, path)
    return result


def timed_interleaved(fns: dict, repeats: int) -> dict[str, list[float]]:
    """Wall times of each function, taking turns, so that load from other
    processes on the machine falls on all of them alike."""
    for fn in fns.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {key: [] for key in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - t0)
    return times


def print_table(rows: list[dict], keys: list[str]) -> None:
    """Rows side by side on stdout (benchmarks print their figures)."""

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.8g}"
        return str(v)

    cells = [[fmt(r.get(k, "")) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    print("  ".join(k.ljust(w) for k, w in zip(keys, widths)))
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths)))


def prepare_splits(
    spark, inputs: dict[str, list[str]], dirs: dict[str, str], fmt: str, train_only=None, **common
) -> None:
    """Prepare ``inputs["train"]`` into ``dirs["train"]`` (with ``train_only``
    arguments too, e.g. a count cutoff), then every other split against its
    vocabulary, events kept as they are (``merge_duplicates`` False): the
    held-out and test events carry the training data's feature ids."""
    from sparkmaxent.data.prepare import prepare

    prepare(
        spark, inputs["train"], dirs["train"], fmt, overwrite=True, **(train_only or {}), **common
    )
    for name, paths in inputs.items():
        if name != "train":
            prepare(spark, paths, dirs[name], fmt, merge_duplicates=False,
                    vocabulary=dirs["train"], overwrite=True, **common)  # fmt: skip


def work_arguments(parser: argparse.ArgumentParser, work: str, output_name: str) -> None:
    """--work (scratch directory), --reuse (its prepared data) and --output."""
    parser.add_argument("--work", default=work, help="scratch directory: prepared data, runs")
    parser.add_argument("--reuse", action="store_true", help="reuse the prepared data in --work")
    parser.add_argument("--output", default=os.path.join(RESULTS, output_name))


def merge_arguments(parser: argparse.ArgumentParser) -> None:
    """--merge PAGE...: measure nothing, merge these pages' rows into --output
    (``merge_pages``): runs side by side each write a page of their own and
    one step puts their rows on the shared page without overwriting rows
    another run measured."""
    parser.add_argument(
        "--merge",
        nargs="+",
        default=[],
        metavar="PAGE",
        help="measure nothing: merge the rows of these pages (runs with their own --output, "
        "e.g. corpora run side by side) into --output, keeping its other rows",
    )


def page_rows(path: str) -> list[dict]:
    """The rows of the page at ``path`` ([] without one)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f).get("rows", [])


def replace_rows(earlier: list[dict], rows: list[dict], key) -> list[dict]:
    """``earlier``'s rows that ``rows`` do not measure again (the same
    ``key(row)``), then ``rows``: a page holds one row per measurement, of
    its latest run."""
    measured = {key(r) for r in rows}
    return [r for r in earlier if key(r) not in measured] + rows


def placeless(row: dict) -> dict:
    """A merged row whose command names its work directory and output page
    by role (WORK, PAGE), not by where they were on the machine that ran it."""
    command = re.sub(r"--work \S+", "--work WORK", row.get("command", ""))
    return {**row, "command": re.sub(r"--output \S+", "--output PAGE", command)}


def merge_pages(output: str, pages: list[str], merge, targets, benchmark: str) -> dict:
    """Write the page ``output`` of ``benchmark`` from its rows and those of
    ``pages`` (each made ``placeless``), combined by ``merge(earlier, rows)``,
    with ``targets(rows)`` recomputed over the result: what ``--merge`` does.
    ``benchmark`` is named, as the caller of ``write_result`` here is not
    the benchmark's module."""
    rows = merge(page_rows(output), [placeless(r) for p in pages for r in page_rows(p)])
    return write_result(output, rows, targets(rows), benchmark=benchmark)


def start(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line; timestamped INFO logging (runs are long);
    Spark bound to loopback unless the caller says otherwise."""
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return args
