"""Time to a first model: ``sparkmaxent pipeline`` on a generated 5,000-line
``label f f:v`` file (and a 1,250-line test file), as a whole process, from
the command to the printed test accuracy, Spark start included.

Each run is a fresh ``python -m sparkmaxent pipeline`` (its own JVM and
Python workers, as a user's first command would be); the phases (Spark
start, prepare, train, evaluate) come from the run's ``report.json``. Runs
take turns between the settings so that load from other processes falls on
all alike; the machine's load average is recorded with each run.

Usage::

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.time_to_first_model --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.common import RESULTS, print_table, start, target, write_result
from sparkmaxent.data import synthetic

#: settings compared: in-process handling of small data on, and off (every
#: phase on Spark, the behaviour before data.in_process_max_events)
SETTINGS = {"in-process": 100_000, "spark-only": 0}


def write_inputs(work: str, lines: int) -> dict[str, str]:
    """The generated train/test text files (planted model, 5 labels, 2,000
    predicates, seed 7): ``lines`` training lines and a quarter as many test lines."""
    spec = synthetic.SyntheticSpec(
        n_events=lines + lines // 4, n_predicates=2000, n_labels=5, seed=7
    )
    train, test = synthetic.train_test_split(synthetic.generate(spec), 0.2, seed=0)
    paths = {"train": os.path.join(work, "train.txt"), "test": os.path.join(work, "test.txt")}
    synthetic.write_maxent_text(train, paths["train"])
    synthetic.write_maxent_text(test, paths["test"])
    return paths


def config_file(work: str, paths: dict, limit: int, method: str) -> str:
    path = os.path.join(work, f"config-{limit}.toml")
    with open(path, "w") as f:
        f.write(
            f'[spark]\nmaster = "local[2]"\n\n[data]\nformat = "maxent"\n'
            f'train_inputs = ["{paths["train"]}"]\ntest_inputs = ["{paths["test"]}"]\n'
            f"in_process_max_events = {limit}\n\n"
            f'[train]\nmethod = "{method}"\n\n[train.selection]\nplots = false\n'
        )
    return path


def one_run(config: str, out: str) -> dict:
    """One whole-process pipeline run: its wall time and its phases."""
    cmd = [sys.executable, "-m", "sparkmaxent", "pipeline", "--config", config, "--output", out]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    return {
        "wall_s": round(wall, 2),
        **report["phases_s"],
        "test_accuracy": report["test"]["accuracy"],
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="/tmp/sparkmaxent-ttfm")
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--method", default="l2")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--output", default=os.path.join(RESULTS, "time_to_first_model.json"))
    args = start(parser, argv)
    os.makedirs(args.work, exist_ok=True)
    paths = write_inputs(args.work, args.lines)
    configs = {s: config_file(args.work, paths, SETTINGS[s], args.method) for s in args.settings}
    rows = []
    for r in range(args.repeats):
        for name, cfg in configs.items():
            row = {"setting": name, "repeat": r, "lines": args.lines, "method": args.method}
            row.update(one_run(cfg, os.path.join(args.work, f"out-{name}")))
            rows.append(row)
            print(json.dumps(row), flush=True)
            write_result(args.output, rows)  # the runs so far
    summary = {
        name: {
            key: statistics.median(x[key] for x in rows if x["setting"] == name)
            for key in ("wall_s", "spark_start_s", "prepare_s", "train_s", "evaluate_s")
        }
        for name in configs
    }
    print_table(
        [{"setting": k, **v} for k, v in summary.items()],
        ["setting", "wall_s", "spark_start_s", "prepare_s", "train_s", "evaluate_s"],
    )
    goal = "pipeline on a 5,000-line file <= 15 s wall (median), Spark start included"
    targets = {
        f"wall_{name}": target(goal + f" ({name})", f"{m['wall_s']} s", m["wall_s"] <= 15)
        for name, m in summary.items()
        if name == "in-process"
    }
    write_result(args.output, rows, targets)  # whole process; phases from report.json


if __name__ == "__main__":
    main()
