"""``sparkmaxent evaluate`` of a small text file (500 lines of the PP
attachment test set, or of CoNLL-2000's) against a bare Spark session's
start-up and stop, as whole processes (issue 36: evaluate of a 500-line
file within 1.5x of Spark's start-up time).

Setup (not timed): a model trained on the first ``--train-lines`` lines of
the corpus's training file. Then, taking turns so that load from other
processes falls on all alike, each repeat runs

- ``spark``: ``python -c`` that starts a SparkSession (the same master)
  and stops it: the floor every command pays;
- ``evaluate``: ``python -m sparkmaxent evaluate --model M --input
  <500 lines> --format F`` with the default ``data.in_process_max_events``
  (the file is prepared and scored in the driver's process;
  ``--allow-unknown``: a model of a few thousand lines does not know most
  of the test file's features, which changes nothing in the work timed);
- ``evaluate-spark``: the same with ``data.in_process_max_events = 0``
  (prepare and scoring as Spark jobs: the behaviour before).

Each run records the 1-minute load average. The target is the median
evaluate time over the median Spark start-up time of the same run.

Usage::

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.evaluate_small --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.common import RESULTS, print_table, shared_corpus, start, target, write_result

#: corpus -> (training file, test file, format, reader options)
CORPORA = {
    "pp": (("ppattach", "training"), ("ppattach", "test"), "ppattach", []),
    "conll": (("conll2000", "train.txt"), ("conll2000", "test.txt"), "conll", []),
}
MASTER = "local[2]"
TARGET_RATIO = 1.5
BARE_SPARK = (
    "from pyspark.sql import SparkSession\n"
    f"s = SparkSession.builder.master({MASTER!r}).appName('bare').getOrCreate()\n"
    "s.stop()\n"
)


def head_lines(src: str, dst: str, n: int) -> None:
    """The first ``n`` lines of ``src`` (ended at a blank line for CoNLL, so
    no sentence is cut) written to ``dst``."""
    out = []
    with open(src) as f:
        for line in f:
            out.append(line)
            if len(out) >= n and not line.strip():
                break
            if len(out) >= n and "conll" not in src:
                break
    with open(dst, "w") as f:
        f.writelines(out)


def config_file(work: str, limit: int | None) -> str:
    path = os.path.join(work, f"config-{limit}.toml")
    with open(path, "w") as f:
        f.write(f'[spark]\nmaster = "{MASTER}"\n')
        if limit is not None:
            f.write(f"\n[data]\nin_process_max_events = {limit}\n")
    return path


def run(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def setup(work: str, corpus: str, train_lines: int, test_lines: int) -> dict:
    """The model and the small test file of ``corpus`` under ``work``."""
    train_parts, test_parts, fmt, options = CORPORA[corpus]
    d = os.path.join(work, corpus)
    os.makedirs(d, exist_ok=True)
    paths = {"train": os.path.join(d, "train.txt"), "test": os.path.join(d, "test.txt")}
    head_lines(shared_corpus(*train_parts), paths["train"], train_lines)
    head_lines(shared_corpus(*test_parts), paths["test"], test_lines)
    cfg = config_file(d, None)
    py = [sys.executable, "-m", "sparkmaxent"]
    run([*py, "prepare", "--config", cfg, "--input", paths["train"], "--format", fmt,
         "--output", os.path.join(d, "prepared"), "--overwrite", *options])  # fmt: skip
    run([*py, "train", "--config", cfg, "--train", os.path.join(d, "prepared"),
         "--output", os.path.join(d, "run"), "--allow-unconverged",
         "--set", "train.method=l2", "--set", "output.overwrite=true"])  # fmt: skip
    with open(paths["test"]) as f:
        lines = sum(1 for _ in f)
    return {"dir": d, "fmt": fmt, "test": paths["test"], "lines": lines, "options": options}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="/tmp/sparkmaxent-evaluate-small")
    parser.add_argument("--corpora", nargs="+", default=["pp"], choices=list(CORPORA))
    parser.add_argument("--train-lines", type=int, default=2000)
    parser.add_argument("--test-lines", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", default=os.path.join(RESULTS, "evaluate_small.json"))
    args = start(parser, argv)
    os.makedirs(args.work, exist_ok=True)
    sets = {c: setup(args.work, c, args.train_lines, args.test_lines) for c in args.corpora}
    configs = {
        "evaluate": config_file(args.work, None),
        "evaluate-spark": config_file(args.work, 0),
    }
    commands = {"spark": lambda s: [sys.executable, "-c", BARE_SPARK]}
    for name, cfg in configs.items():
        commands[name] = lambda s, cfg=cfg: [
            sys.executable, "-m", "sparkmaxent", "evaluate", "--config", cfg,
            "--model", os.path.join(s["dir"], "run", "model"), "--input", s["test"],
            "--format", s["fmt"], "--allow-unknown", *s["options"],
        ]  # fmt: skip
    rows = []
    for r in range(args.repeats):
        for corpus, s in sets.items():
            for name, command in commands.items():
                wall = run(command(s))
                row = {
                    "corpus": corpus,
                    "lines": s["lines"],
                    "run": name,
                    "repeat": r,
                    "wall_s": round(wall, 2),
                    "load_average_1min": round(os.getloadavg()[0], 2),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    medians = {
        (c, name): statistics.median(
            x["wall_s"] for x in rows if (x["corpus"], x["run"]) == (c, name)
        )
        for c in sets
        for name in commands
    }
    summary = [
        {
            "corpus": c,
            "run": "median",
            "spark_start_s": medians[(c, "spark")],
            "evaluate_s": medians[(c, "evaluate")],
            "evaluate_spark_s": medians[(c, "evaluate-spark")],
            "ratio": round(medians[(c, "evaluate")] / medians[(c, "spark")], 3),
            "ratio_spark_path": round(medians[(c, "evaluate-spark")] / medians[(c, "spark")], 3),
        }
        for c in sets
    ]
    print_table(summary, list(summary[0]))
    targets = {
        f"evaluate_{s['corpus']}_{sets[s['corpus']]['lines']}_lines_over_spark_start": target(
            f"evaluate of a {sets[s['corpus']]['lines']}-line file <= {TARGET_RATIO}x a bare "
            "Spark session's start-up and stop (medians, same run)",
            s["ratio"],
            s["ratio"] <= TARGET_RATIO,
        )
        for s in summary
    }
    write_result(args.output, rows + summary, targets)


if __name__ == "__main__":
    main()
