"""Shared by the benchmarks: where the corpora are, machine facts, timing,
and the result file format (command, date, machine, rows, extras)."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import os
import platform
import shlex
import sys
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
    mem_kb = 0
    try:
        with open("/proc/meminfo") as f:
            mem_kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
    except (OSError, StopIteration, ValueError):
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 2**20, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_end": [round(x, 2) for x in load] if load else None,
    }


def status_kb(key: str) -> int:
    """A field of /proc/self/status in KiB (``VmRSS``, ``VmHWM``)."""
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(key + ":")).split()[1])


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


def write_result(
    path: str, rows: list[dict], under: str | None = None, keep: bool = False, **extra
) -> dict:
    """Write ``{command, date, machine, rows, **extra}`` as JSON and return it;
    with ``under``, as that key of the JSON object already at ``path`` (its
    other keys kept: a new run beside earlier ones in one result file); with
    ``keep``, over the object at ``path``, whose keys this result does not
    set are kept (side measurements stored beside the rows)."""
    result = {
        "command": command_line(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "rows": rows,
        **extra,
    }
    doc = result
    if under is not None or keep:
        doc = {}
        if os.path.exists(path):
            with open(path) as f:
                doc = json.load(f)
        if under is not None:
            doc[under] = result
        else:
            doc.update(result)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2, default=lambda o: o.item() if hasattr(o, "item") else str(o))
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


def start(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line; timestamped INFO logging (runs are long);
    Spark bound to loopback unless the caller says otherwise."""
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return args
