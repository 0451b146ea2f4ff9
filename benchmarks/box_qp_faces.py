"""The Newton round's model solve on captured CoNLL-2000 rounds: the current
``box_qp_cd`` (``solvers/box_cd.py``) against a baseline copy of the module
that held it (``solvers/newton.py`` before the split; e.g. the
Cholesky face step of an earlier commit), on the same models.

Two steps:

    # 1. a grafting run (benchmarks.grafting_vs_mllib's arguments after --)
    #    with every model of at least --min-n weights saved to --work
    python -m benchmarks.box_qp_faces capture --work /var/tmp/qp -- \\
        --n-best 1000 --gammas 1e-5 --skip-mllib --work /var/tmp/gvm --reuse
    # 2. both solvers on each saved model, taking turns, one BLAS thread
    git show 9b7733e:sparkmaxent/solvers/newton.py > /var/tmp/qp/cholesky_newton.py
    flock /var/tmp/sparkmaxent-bench.lock timeout 900 python -m benchmarks.box_qp_faces \\
        compare --baseline /var/tmp/qp/cholesky_newton.py /var/tmp/qp/qp0*.npz

Rows (``compare``): model, weights n, solver, sweeps, seconds, the model's
value q(d) = g.d + d^T H d / 2, its projected gradient and the tolerance
asked for; the load average is recorded with each row.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import numpy as np

from benchmarks.common import RESULTS, print_table, write_result


def capture(work: str, min_n: int, argv: list[str]) -> int:
    """Run benchmarks.grafting_vs_mllib with ``box_qp_cd`` wrapped to save
    each model of at least ``min_n`` weights (H is n x n doubles: 330 MB at
    6,400 weights). The wrapper replaces the name the Newton loop calls
    (``newton.box_qp_cd``, imported from ``box_cd.py``)."""
    import sparkmaxent.solvers.newton as newton
    from benchmarks import grafting_vs_mllib

    solve, count = newton.box_qp_cd, [0]

    def saving(H, g, dlo, dhi, tol, max_sweeps, face_every=10):
        if len(g) >= min_n:
            name = os.path.join(work, f"qp{count[0]:03d}_n{len(g)}.npz")
            np.savez(name, H=H, g=g, dlo=dlo, dhi=dhi, tol=tol, max_sweeps=max_sweeps)
        count[0] += 1
        return solve(H, g, dlo, dhi, tol, max_sweeps, face_every)

    newton.box_qp_cd = saving
    return grafting_vs_mllib.main(argv)


def baseline_module(path: str):
    """The solver module at ``path``, imported under its own name."""
    spec = importlib.util.spec_from_file_location("sparkmaxent.solvers.newton_baseline", path)
    assert spec is not None and spec.loader is not None, f"cannot import {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def compare(baseline: str, models: list[str]) -> list[dict]:
    """Both solvers on each model in turn (baseline first), one BLAS thread."""
    from sparkmaxent.blas import blas_threads
    from sparkmaxent.solvers import box_cd

    solvers = {"baseline": baseline_module(baseline).box_qp_cd, "current": box_cd.box_qp_cd}
    rows = []
    for path in models:
        z = np.load(path)
        H, g, lo, hi = z["H"], z["g"], z["dlo"], z["dhi"]
        tol, max_sweeps = float(z["tol"]), int(z["max_sweeps"])
        for name, solve in solvers.items():
            with blas_threads(1):
                t0 = time.perf_counter()
                d, sweeps = solve(H, g, lo, hi, tol, max_sweeps)
                seconds = time.perf_counter() - t0
            pg = box_cd.projected_gradient(g + H @ d, d, lo, hi)
            rows.append(
                {
                    "model": os.path.basename(path),
                    "n": len(g),
                    "solver": name,
                    "sweeps": sweeps,
                    "seconds": round(seconds, 3),
                    "q": float(g @ d + d @ (H @ d) / 2),
                    "projected_gradient": float(np.abs(pg).max(initial=0.0)),
                    "tol": tol,
                    "load_average": round(os.getloadavg()[0], 2),
                }
            )
            print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    cap = sub.add_parser("capture")
    cap.add_argument("--work", required=True, help="directory of the saved models")
    cap.add_argument("--min-n", type=int, default=2500)
    cap.add_argument("rest", nargs=argparse.REMAINDER, help="-- grafting_vs_mllib arguments")
    cmp = sub.add_parser("compare")
    cmp.add_argument("--baseline", required=True, help="a copy of solvers/newton.py")
    cmp.add_argument("--output", default=os.path.join(RESULTS, "box_qp_faces.json"))
    cmp.add_argument("models", nargs="+")
    args = parser.parse_args(argv)
    if args.step == "capture":
        rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
        return capture(args.work, args.min_n, rest)
    rows = compare(args.baseline, args.models)
    totals = {
        name: round(sum(r["seconds"] for r in rows if r["solver"] == name), 1)
        for name in ("baseline", "current")
    }
    write_result(args.output, rows)
    print_table(rows, ["model", "n", "solver", "sweeps", "seconds", "q", "load_average"])
    print("totals", totals)
    return 0


if __name__ == "__main__":
    sys.exit(main())
