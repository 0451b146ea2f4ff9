"""BLAS threads of the Newton solve: 1 against the default, under load.

Two measurements, each taking turns between the thread counts
(``timed_interleaved``) so that the load of other processes falls on both:

* ``cholesky``: the dense work of one Newton iteration on the driver
  (``solvers/newton.py``): a Cholesky factor and solve of an n x n SPD
  matrix, for n up to ``train.selection.newton_max_active``;
* ``fit``: a whole in-process grafting fit (PP attachment, the four head
  words, gamma1 ``--l1``) with ``train.selection.blas_threads`` set to each
  count (0: BLAS's default).

Seconds are the point: run under the bench lock,

    flock /var/tmp/sparkmaxent-bench.lock timeout 900 python -m benchmarks.blas_threads \\
        --pp /var/tmp/comb/nobits/pp/train

(``--pp``: a prepared PP dataset, e.g. from ``benchmarks.combination``).
The load average before and after is recorded with the rows.
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np

from benchmarks.common import print_table, start, timed_interleaved, work_arguments, write_result


def cholesky_rows(sizes: list[int], counts: list[int], repeats: int) -> list[dict]:
    import scipy.linalg

    from sparkmaxent.blas import blas_threads

    rows = []
    for n in sizes:
        rng = np.random.default_rng(n)
        B = rng.standard_normal((n, n))
        A = B @ B.T / n + np.eye(n)
        b = rng.standard_normal(n)

        def solve(t, A=A, b=b):
            def once():
                with blas_threads(t):
                    f = scipy.linalg.cho_factor(A, check_finite=False)
                    scipy.linalg.cho_solve(f, b, check_finite=False)

            return once

        load = os.getloadavg()[0]
        times = timed_interleaved({t: solve(t) for t in counts}, repeats)
        for t in counts:
            rows.append(
                {
                    "measure": "cholesky",
                    "n": n,
                    "blas_threads": t,
                    "median_s": round(statistics.median(times[t]), 4),
                    "times_s": [round(x, 4) for x in times[t]],
                    "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
                }
            )
    return rows


def fit_rows(dataset: str, l1: float, counts: list[int], repeats: int) -> list[dict]:
    from sparkmaxent.backends.factory import make_backend
    from sparkmaxent.config import train_config
    from sparkmaxent.train import train

    backend = make_backend("local", dataset, bias=True, partitions=2)
    out: dict[int, dict] = {}

    def fit(t):
        def once():
            cfg = train_config(method="grafting", l1=l1, n_best=200, gtol=1e-7, blas_threads=t)
            p0 = backend.passes
            result = train(backend, cfg)
            out[t] = {"passes": backend.passes - p0, "objective": result.report.objective}

        return once

    load = os.getloadavg()[0]
    times = timed_interleaved({t: fit(t) for t in counts}, repeats)
    return [
        {
            "measure": "fit",
            "dataset": os.path.basename(os.path.dirname(dataset.rstrip("/"))),
            "l1": l1,
            "blas_threads": t,
            "median_s": round(statistics.median(times[t]), 2),
            "times_s": [round(x, 2) for x in times[t]],
            **out[t],
            "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
        }
        for t in counts
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 6000])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pp", default="", help="a prepared PP training set (empty: no fit)")
    parser.add_argument("--l1", type=float, default=1e-4)
    parser.add_argument("--fit-repeats", type=int, default=2)
    work_arguments(parser, "/var/tmp/sparkmaxent-blas", "blas_threads.json")
    args = start(parser, argv)
    rows = cholesky_rows(args.sizes, args.threads, args.repeats)
    print_table(rows, ["measure", "n", "blas_threads", "median_s", "load_average"])
    if args.pp:
        rows += fit_rows(args.pp, args.l1, args.threads, args.fit_repeats)
    write_result(args.output, rows)  # blas_threads 0: BLAS's default thread count
    print_table(rows, ["measure", "n", "l1", "blas_threads", "median_s", "passes", "load_average"])


if __name__ == "__main__":
    main()
