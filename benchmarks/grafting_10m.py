"""Grafting over 10 million candidate features on Spark local[2]: the
block-wise gradient test (kernels/topk.py) against the dense one, with the
driver's peak memory.

    python -m benchmarks.grafting_10m                       # 500k predicates x 20 labels
    python -m benchmarks.grafting_10m --paths block --rounds 2

Generated data (data/synthetic/) is written once as a prepared dataset
under ``--work``; each path then runs in a fresh Python process (its own
driver and JVM), so the peaks are that path's alone:

* ``driver_peak_rss_mb``: the Python driver's peak resident set during the
  grafting run (``VmHWM`` of /proc/self/status, reset through
  /proc/self/clear_refs after the blocks are cached; ru_maxrss if that
  fails), and ``driver_rss_before_mb`` at the reset;
* ``jvm_heap_peak_mb``: the sum of the peak usages of the JVM's heap memory
  pools over the run (reset after caching; an upper bound, pools peak at
  different times) and ``jvm_old_gen_peak_mb``. In local mode the
  executors live in the driver's JVM, so these include executor work
  (shuffle, cached blocks).

Writes benchmarks/results/grafting_10m.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from benchmarks.common import RESULTS, print_table, reset_peak_rss, status_kb, write_result

PATHS = ("block", "dense")


def make_dataset(args) -> dict:
    """Generate and write the dataset unless ``--work`` already holds it."""
    from sparkmaxent.data import synthetic
    from sparkmaxent.data.load import write_events
    from sparkmaxent.data.schema import DatasetInfo

    directory = os.path.join(args.work, f"synthetic-{args.predicates}x{args.labels}-{args.events}")
    meta = os.path.join(directory, "benchmark.json")
    if os.path.exists(meta):
        with open(meta) as f:
            return json.load(f)
    t0 = time.perf_counter()
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=args.events,
            n_predicates=args.predicates,
            n_labels=args.labels,
            active_per_event=args.active,
            zipf_exponent=args.zipf,
            n_support=args.support,
            min_support_count=50,
            seed=args.seed,
        )
    )
    block = data.block()
    write_events(
        block, directory, DatasetInfo("multiclass", args.predicates, data.label_names), n_files=2
    )
    doc = {
        "dataset": directory,
        "events": int(block.n_events),
        "nonzeros": int(block.X.nnz),
        "predicates": args.predicates,
        "labels": args.labels,
        "predicates_seen": int(len(set(block.X.indices.tolist()))),
        "generate_s": round(time.perf_counter() - t0, 1),
    }
    with open(meta, "w") as f:
        json.dump(doc, f)
    return doc


def _heap_pools(spark):
    mf = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    heap = spark.sparkContext._jvm.java.lang.management.MemoryType.HEAP
    return [p for p in mf.getMemoryPoolMXBeans() if p.getType().equals(heap)]


def _time_test_passes(backend) -> list[float]:
    """Wall seconds of every gradient test that ran a pass (either path)."""
    from sparkmaxent.methods.gradient_test import GradientTest

    times: list[float] = []
    test = GradientTest.test

    def timed(self, weights):
        passes, t0 = backend.passes, time.perf_counter()
        out = test(self, weights)
        if backend.passes > passes:
            times.append(time.perf_counter() - t0)
        return out

    GradientTest.test = timed  # type: ignore[method-assign]
    return times


def per_round(trace: list[dict]) -> list[dict]:
    """Each round's own passes and seconds (the trace holds running totals)."""
    rows, passes, elapsed = [], 0, 0.0
    for r in trace:
        rows.append(
            {
                "round": r["round"],
                "added": r["added"],
                "removed": r["removed"],
                "active": r["active"],
                "objective": r["objective"],
                "max_gradient": r["max_gradient"],
                "passes": r["passes"] - passes,
                "wall_s": round(r["elapsed_s"] - elapsed, 2),
            }
        )
        passes, elapsed = r["passes"], r["elapsed_s"]
    return rows


def run_path(args) -> dict:
    """One grafting run on one path, in this (fresh) process."""
    import logging

    from sparkmaxent.backends.session import spark_session
    from sparkmaxent.backends.spark import SparkBackend
    from sparkmaxent.config import train_config
    from sparkmaxent.train import train

    logging.basicConfig(level=logging.WARNING)
    spark = spark_session(
        "local[2]",
        "grafting-10m",
        {"spark.driver.memory": args.driver_memory, "spark.driver.maxResultSize": "4g"},
    )
    with SparkBackend(
        spark, args.dataset, bias=True, partitions=2, name=f"g10m-{args.child}"
    ) as backend:
        pools = _heap_pools(spark)
        spark.sparkContext._jvm.java.lang.System.gc()
        for p in pools:
            p.resetPeakUsage()
        rss_before = status_kb("VmRSS")
        hwm_reset = reset_peak_rss()
        cfg = train_config(
            method="grafting",
            l1=args.l1,
            n_best=args.n_best,
            max_rounds=args.rounds,
            plots=False,
            dense_test_max=0 if args.child == "block" else backend.space.n_features,
            test_block_size=args.block_size,
        )
        test_times = _time_test_passes(backend)
        passes0, t0 = backend.passes, time.perf_counter()
        res = train(backend, cfg)
        wall = time.perf_counter() - t0
        peak_kb = (
            status_kb("VmHWM") if hwm_reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        )
        peaks = {p.getName(): p.getPeakUsage().getUsed() for p in pools}
        rep = res.report
        row = {
            "path": "block-wise" if args.child == "block" else "dense",
            "candidate_features": backend.space.n_features,
            "gradient_test": rep["gradient_test"],
            "rounds": rep["rounds_run"],
            "passes": backend.passes - passes0,
            "wall_s": round(wall, 1),
            "driver_peak_rss_mb": round(peak_kb / 1024, 1),
            "driver_rss_before_mb": round(rss_before / 1024, 1),
            "driver_peak_is_whole_process": not hwm_reset,
            "jvm_heap_peak_mb": round(sum(peaks.values()) / 2**20, 1),
            "jvm_old_gen_peak_mb": round(
                sum(v for k, v in peaks.items() if "Old" in k or "Tenured" in k) / 2**20, 1
            ),
            "objective": rep["objective"],
            "active_features": rep["active_features"],
            "kkt_zero_weights_over_bound": rep["kkt"]["zero_weights_over_bound"],
            "kkt_max_zero_gradient": rep["kkt"]["max_zero_gradient"],
            "per_round": per_round(rep["rounds"]),
            "test_pass_s": [round(t, 2) for t in test_times],
            "selected_ids": res.weights.ids.tolist(),
        }
    spark.stop()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--predicates", type=int, default=500_000)
    parser.add_argument("--labels", type=int, default=20)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument(
        "--active", type=float, default=12.0, help="mean active predicates per event"
    )
    parser.add_argument("--zipf", type=float, default=0.8, help="Zipf exponent of predicate rates")
    parser.add_argument("--support", type=int, default=40, help="planted support size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--l1", type=float, default=1e-4)
    parser.add_argument("--n-best", type=int, default=10, dest="n_best")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--block-size", type=int, default=1_000_000, dest="block_size")
    parser.add_argument("--driver-memory", default="3g", dest="driver_memory")
    parser.add_argument("--paths", default="block,dense", help="comma-separated: block,dense")
    parser.add_argument("--work", default="/tmp/grafting-10m")
    parser.add_argument("--output", default=os.path.join(RESULTS, "grafting_10m.json"))
    parser.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        print(json.dumps(run_path(args)), flush=True)
        return 0

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    data = make_dataset(args)
    print(json.dumps(data), flush=True)
    rows = []
    for path in args.paths.split(","):
        if path not in PATHS:
            parser.error(f"expected --paths among {PATHS}, got {path!r}")
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--child",
            path,
            "--dataset",
            data["dataset"],
        ] + (argv if argv is not None else sys.argv[1:])
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print_table(
            rows[-1:],
            [
                "path",
                "candidate_features",
                "rounds",
                "passes",
                "wall_s",
                "driver_peak_rss_mb",
                "jvm_heap_peak_mb",
                "objective",
            ],
        )
    same = len(rows) == 2 and rows[0]["selected_ids"] == rows[1]["selected_ids"]
    if len(rows) == 2:
        print(f"same selected features on both paths: {same}")
    print(data)
    write_result(args.output, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
