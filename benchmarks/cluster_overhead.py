"""The cost of a real cluster: one grafting run in local mode and on a
standalone cluster whose worker cannot see the driver's disk (issue 17).

CoNLL-2000's training set is prepared once (the conll reader's 17
templates, cutoff 2, 2 partitions, as in benchmarks/grafting_vs_mllib.py)
into a store directory under /var/tmp; then the same ``train`` job
(grafting, gamma1 1e-4, n_best 1000, Spark backend) runs through
scripts/submit.sh twice, with ``file://`` URIs into the store:

- ``local``: ``--master local[2]``;
- ``cluster``: a master and one worker with 2 cores on 127.0.0.1, the
  worker in its own mount namespace with a private /tmp and driver
  directory (tests/e2e/cluster.py ``isolated_cluster``), one executor.

Rows: mode, wall_s (the training, from the run's report), job_wall_s (the
whole spark-submit, JVM start included), passes, objective, rounds,
nonzero_weights, converged. Target: the cluster's wall_s within 1.5x of
local's (``ratio``). Needs root (``unshare --mount``)::

    python -m benchmarks.cluster_overhead
    python -m benchmarks.cluster_overhead --data ../shared/data --reuse

Writes benchmarks/results/cluster_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from benchmarks.common import (
    ROOT,
    SHARED_DATA,
    print_table,
    shared_corpus,
    start,
    target,
    work_arguments,
    write_result,
)

SUBMIT = os.path.join(ROOT, "scripts", "submit.sh")
GAMMA, N_BEST = 1e-4, 1000
TRAIN = [
    "--set",
    "train.method=grafting",
    "--set",
    f"train.grafting.l1={GAMMA}",
    "--set",
    f"train.grafting.n_best={N_BEST}",
    "--set",
    "train.backend=spark",
    "--set",
    "train.selection.plots=false",
    "--set",
    "data.partitions=2",
]


def submit(master: str, args: list[str], cwd: str, spark: list[str], timeout: float) -> float:
    """scripts/submit.sh on ``master`` from ``cwd``; its wall time. Exits
    with the job's output on failure."""
    env = dict(os.environ)
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        PYTHON=os.path.join(os.path.realpath(sys.prefix), "bin", "python"),
        BUILD_DIR=os.path.join(cwd, "build"),
    )
    t0 = time.perf_counter()
    r = subprocess.run(
        [SUBMIT, "--master", master, *spark, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    if r.returncode != 0:
        sys.exit(f"{args[0]} on {master} failed (exit {r.returncode}):\n{r.stdout[-6000:]}")
    return time.perf_counter() - t0


def row(mode: str, run_dir: str, job_wall_s: float) -> dict:
    with open(os.path.join(run_dir, "train_report.json")) as f:
        rep = json.load(f)
    return {
        "mode": mode,
        "wall_s": rep["wall_s"],
        "job_wall_s": round(job_wall_s, 1),
        "passes": rep["passes"],
        "objective": rep["objective"],
        "rounds": rep["rounds_run"],
        "nonzero_weights": rep["nonzero_weights"],
        "converged": rep["converged"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=SHARED_DATA, help="directory holding conll2000/")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--executor-memory", default="4g")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per job")
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=0,
        help="stop both runs after this many grafting rounds (0: until certified), "
        "for a machine too busy for the whole run",
    )
    work_arguments(parser, "/var/tmp/sparkmaxent-cluster-overhead", "cluster_overhead.json")
    args = start(parser, argv)
    from tests.e2e.cluster import isolated_cluster

    corpus = shared_corpus("conll2000", "train.txt", data_dir=args.data)
    spark = [
        "--driver-memory",
        args.driver_memory,
        "--conf",
        f"spark.executor.memory={args.executor_memory}",
    ]
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    prepared = "file://" + os.path.join(work, "train")
    if not (args.reuse and os.path.exists(os.path.join(work, "train", "dataset.json"))):
        prep = ["prepare", "--input", corpus, "--format", "conll", "--cutoff", "2"]
        prep += ["--partitions", "2", "--overwrite", "--output", prepared]
        submit("local[2]", prep, work, spark, args.timeout)
    rows = []
    for mode in ("local", "cluster"):
        run_dir = os.path.join(work, f"run-{mode}")
        train = ["train", "--train", prepared, "--output", "file://" + run_dir, *TRAIN]
        train += ["--set", f"train.selection.max_rounds={args.max_rounds}"]
        if mode == "local":
            wall = submit("local[2]", train, work, spark, args.timeout)
        else:
            memory = f"{int(args.executor_memory.rstrip('g')) + 1}g"
            with isolated_cluster(cores=2, memory=memory, timeout=180) as iso:
                wall = submit(iso.master_url, train, iso.driver_dir, spark, args.timeout)
        rows.append(row(mode, run_dir, wall))
        print(rows[-1], flush=True)
    ratio = rows[1]["wall_s"] / rows[0]["wall_s"]
    goal = "grafting on a standalone cluster (no shared disk) within 1.5x of local mode"
    same = rows[0]["passes"] == rows[1]["passes"]
    value = f"{ratio:.3f}x, {'same' if same else 'different'} passes"
    write_result(args.output, rows, {"ratio": target(goal, value, ratio <= 1.5)})
    print_table(rows, ["mode", "wall_s", "job_wall_s", "passes", "objective", "rounds"])
    print(f"cluster / local wall time: {ratio:.3f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
