"""Grafting's round optimizer: Newton with Hessian-block passes against
L-BFGS-B, in-process (LocalBackend), on synthetic data and CoNLL-2000.

Passes are the figure that carries over to Spark (each costs 0.1-0.5 s there:
docs/benchmarks.md, "Figures from the code"); wall seconds here are in-process.

    python -m benchmarks.grafting_solvers synthetic 1e-3 10 newton,lbfgs-b
    python -m benchmarks.grafting_solvers basenp 1e-4 100 newton,lbfgs-b --data /tmp/prepared

``basenp`` / ``conll`` read ``<data>/<name>-train`` prepared with
``sparkmaxent.data.prepare.prepare(spark, [train.txt], out, "conll", cutoff=2)``
(``options={"mode": "basenp"}`` for Base-NP). Writes one row per solver to
benchmarks/results/grafting_solvers.json, in place of the rows of the same
data, l1 and n_best (the other datasets' rows are kept: one dataset a run).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import warnings

from benchmarks.common import RESULTS, load_average, write_result


def dataset(name: str, data_dir: str):
    from sparkmaxent.data import synthetic
    from sparkmaxent.data.load import read_blocks
    from sparkmaxent.data.schema import DatasetInfo
    from sparkmaxent.kernels import Space

    if name == "synthetic":
        d = synthetic.generate(
            synthetic.SyntheticSpec(n_events=20000, n_predicates=2000, n_labels=5, seed=1)
        )
        return [d.block()], Space("multiclass", d.n_predicates, d.n_labels, bias=True)
    path = os.path.join(data_dir, f"{name}-train")
    info = DatasetInfo.load(path)
    return read_blocks(path, info, n_blocks=2), info.space(True)


def main(argv: list[str] | None = None) -> int:
    from sparkmaxent.backends import LocalBackend
    from sparkmaxent.config import train_config
    from sparkmaxent.train import train

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", choices=["synthetic", "basenp", "conll"])
    parser.add_argument("l1", type=float)
    parser.add_argument("n_best", type=int)
    parser.add_argument("solvers", help="comma-separated: newton,lbfgs-b")
    parser.add_argument("--data", default="/tmp/grafting-work", dest="data_dir")
    parser.add_argument("--output", default=os.path.join(RESULTS, "grafting_solvers.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    blocks, space = dataset(args.data, args.data_dir)
    rows = []
    if os.path.exists(args.output):
        with open(args.output) as f:
            rows = [
                r
                for r in json.load(f)["rows"]
                if (r["data"], r["l1"], r["n_best"]) != (args.data, args.l1, args.n_best)
            ]
    for solver in args.solvers.split(","):
        backend = LocalBackend(blocks, space)
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = train(
                backend,
                train_config(method="grafting", l1=args.l1, n_best=args.n_best, solver=solver),
            )
        rep = res.report
        row = {
            "data": args.data,
            "l1": args.l1,
            "n_best": args.n_best,
            "solver": solver,
            "passes": rep["passes"],
            "rounds": rep["rounds_run"],
            "evaluations": rep["evaluations"],
            "objective": rep["objective"],
            "nonzero": rep["nonzero_weights"],
            "kkt_passed": rep["kkt"]["passed"],
            "max_zero_grad": rep["kkt"]["max_zero_gradient"],
            "wall_s": round(time.perf_counter() - t0, 1),
            "warnings": len(caught),
            "candidates": space.n_features,
            "load_average": load_average(),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
        write_result(args.output, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
