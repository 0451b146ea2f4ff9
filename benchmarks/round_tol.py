"""Grafting's inexact rounds: ``train.grafting.round_tol_ratio`` and the
rounds' initial trust region (``train.grafting.round_radius``) against
the time to a target objective, in-process (LocalBackend, 2 blocks, one
core), on CoNLL-2000 chunking (n = 1,000).

Each ratio in ``--ratios`` with each radius in ``--radii`` (in that order:
alternate them, 0.1 0.3 0.3 0.1, to spread the machine's drift over both)
runs ``--max-rounds`` rounds (0: to the certificate); a row gives the first
round whose objective is at most ``--target`` + 1e-6 (default: MLlib's l1
objective at that gamma1 from ``grafting_vs_mllib.json``), its
passes and CPU seconds, and where the run ended.

    python -m benchmarks.round_tol --work /var/tmp/rt --ratios 0.1 0.3 0.3 0.1
    python -m benchmarks.round_tol --work /var/tmp/rt --ratios 0.3 --radii inf 1 1 inf
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

from benchmarks.common import RESULTS, print_table, start, work_arguments, write_result

#: where the default target comes from: MLlib's objective, per gamma1
MLLIB_RESULT = os.path.join(RESULTS, "grafting_vs_mllib.json")


def mllib_objective(gamma: float) -> float:
    with open(MLLIB_RESULT) as f:
        rows = json.load(f)["rows"]
    found = [r["objective"] for r in rows if r["system"] == "mllib" and r["gamma"] == gamma]
    if not found:
        sys.exit(f"no MLlib row at gamma1 {gamma:g} in {MLLIB_RESULT}: pass --target")
    return found[0]


def run(
    blocks, space, ratio: float, gamma: float, max_rounds: int, target: float, radius: float
) -> dict:
    """One grafting run at ``ratio`` with rounds starting in a trust region of
    ``radius``: its trace, and the first round at ``target``."""
    from sparkmaxent.backends import LocalBackend
    from sparkmaxent.config import train_config
    from sparkmaxent.kernels.colcache import COLUMNS
    from sparkmaxent.train import train

    COLUMNS.clear()  # no run starts with another's gathered columns
    backend = LocalBackend(blocks, space)
    cfg = train_config(
        method="grafting",
        l1=gamma,
        n_best=1000,
        max_rounds=max_rounds,
        round_tol_ratio=ratio,
        round_radius=radius if math.isfinite(radius) else 0.0,  # 0: unbounded
        plots=False,
    )
    load_start = os.getloadavg()[0]
    trace: list[dict] = []
    t0, c0 = time.perf_counter(), time.process_time()

    def on_round(state) -> None:
        last = state.trace[-1]
        trace.append(
            {
                "round": state.round,
                "objective": last.objective,
                "active": last.active,
                "passes": state.passes,
                "cpu_s": round(time.process_time() - c0, 1),
                "wall_s": round(time.perf_counter() - t0, 1),
            }
        )

    report = train(backend, cfg, on_round=on_round).report
    at = next((r for r in trace if r["objective"] <= target + 1e-6), None)
    return {
        "round_tol_ratio": ratio,
        "radius": radius if math.isfinite(radius) else None,  # None: unbounded
        "gamma1": gamma,
        "target_round": at and at["round"],
        "target_passes": at and at["passes"],
        "target_cpu_s": at and at["cpu_s"],
        "target_wall_s": at and at["wall_s"],
        "rounds": report.fit["rounds_run"],
        "passes": report.passes,
        "cpu_s": round(time.process_time() - c0, 1),
        "objective": report.objective,
        "certified": report.certificate is not None and report.certificate.passed,
        "nonzero": report.nonzero_weights,
        "load_start": round(load_start, 2),
        "load_end": round(os.getloadavg()[0], 2),
        "trace": trace,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    work_arguments(parser, "/tmp/round-tol-work", "round_tol.json")
    parser.add_argument("--ratios", type=float, nargs="+", default=[0.1, 0.3, 0.3, 0.1])
    parser.add_argument(
        "--radii", type=float, nargs="+", default=None, help="default: train.grafting.round_radius"
    )
    parser.add_argument("--gamma", type=float, default=1e-5)
    parser.add_argument("--max-rounds", type=int, default=11)
    parser.add_argument("--target", type=float, default=None, help="default: MLlib's objective")
    args = start(parser, argv)
    from benchmarks.grafting_vs_mllib import prepared
    from sparkmaxent.backends.session import spark_session
    from sparkmaxent.blas import blas_threads
    from sparkmaxent.config.method_sections import GraftingConfig
    from sparkmaxent.data.load import read_blocks
    from sparkmaxent.data.schema import DatasetInfo

    spark = spark_session("local[2]", "round-tol", {"spark.driver.memory": "4g"})
    train_dir, _ = prepared(spark, args.work, args.reuse)
    spark.stop()
    target = args.target if args.target is not None else mllib_objective(args.gamma)
    info = DatasetInfo.load(train_dir)
    blocks, space = read_blocks(train_dir, info, n_blocks=2), info.space(bias=True)
    rows = []
    with blas_threads(1):
        for ratio in args.ratios:
            for radius in args.radii or [GraftingConfig().round_radius]:
                rows.append(run(blocks, space, ratio, args.gamma, args.max_rounds, target, radius))
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "trace"}), flush=True)
    print_table(
        rows,
        ["round_tol_ratio", "radius", "target_round", "target_passes", "target_cpu_s"]
        + ["passes", "cpu_s"],
    )
    write_result(args.output, rows)  # each row's target_* columns: at MLlib's objective
    return 0


if __name__ == "__main__":
    sys.exit(main())
