"""One grafting round's cost against its active-set size (issue 37): the
exact Newton solver (``newton``: the Hessian block per pass) and the
Hessian-free one (``newton-cg``: each partition's Newton step by projected
CG, n-vectors per pass, corrected by secant pairs; with ``--plain`` also
``newton-cg-plain``, the step uncorrected; with ``--through``
``newton-cg-through``, the partitions' CG run on through the box before
its step is projected; with ``--face`` ``newton-cg-face``, the partitions'
model solved face by face as TRON does (``kernels/box_face.py``; newton-cg's
default from ``SolverOptions.face_from`` weights); with ``--stop``
``newton-cg-stop``, the partitions' CG stopped at the first bound at every
size (the default below); with ``--global-cg N`` ``newton-cg-global``, the
late iterations by CG across passes, at most N product passes an
iteration, ``solvers/global_cg.py``; with ``--across`` ``newton-cg-across``,
the secant pairs kept across faces, ``solvers/secant.py``) on the same rounds,
in one run, on CoNLL-2000 chunking, in-process (LocalBackend, ``--blocks``
blocks, one BLAS thread) and on Spark local[2] (SparkBackend, ``--blocks``
partitions); with ``--probe N`` the product pass's CPU with and without the
operator cache (``product_probe``).

The round at size N is the first round of a grafting run at ``--gamma``
with n_best = N: the N candidates of largest |dC/dw_j| at zero weights
enter, and the round is solved from there as grafting solves it
(``Grafting.grow``), once per solver (``newton`` only up to ``--exact-max``
weights: its Hessian block is (n + K)^2 doubles per partition). The
round's tolerance (``--tol``): ``round``, grafting's own for a first round
(``round_tol_ratio`` times the test's excess: loose, a large round may end
after one iteration), or ``final``, the run's final tolerance at every size
(what a path's finishing rounds and its rounds deep in the path solve to:
the fixed-tolerance measure of the slope), or a number, that tolerance at
every size. A row: the round's wall seconds; its CPU seconds (in-process:
the process's, without the pickling that measures the bytes; Spark: the
driver's plus the Python workers' for the tasks and the pickling of their
results, which Spark does anyway); its passes; the Hessian-vector products
the partitions ran (newton-cg; each about a gradient pass's work on its
partition); the bytes every partition's result pickles to (what a pass
ships to the driver) and the task's pickle (what it ships to every
executor), per pass and per kind of pass (``by_pass``: ``direction``,
``gradient`` over the active set, ``full-gradient`` (the next gradient
test), ``curvature`` (the Hessian block), ``ray``, ``trial-points``,
``product`` (one Hessian-vector product of CG across passes)); the
objective reached and whether the round converged. The slopes
(``round_cost_page.py``) are least-squares slopes of log seconds (and log
bytes) against log active weights over the rows of at least ``SLOPE_FROM``
weights solved to one tolerance.

    python -m benchmarks.round_cost --work <work> --reuse --backends local spark \
        --sizes 500 1000 2000 4000 8000 16000 64000
    python -m benchmarks.round_cost --rows-from a.json b.json   # the page from earlier runs
    python -m benchmarks.round_cost --rows-from a.json:newton b.json   # a.json's newton rows only
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pickle
import sys
import time

import numpy as np

from benchmarks.common import start, work_arguments
from benchmarks.round_cost_page import (
    ACROSS,
    BACKENDS,
    FACE,
    FIXED,
    GLOBAL,
    PLAIN,
    PROBE,
    SOLVERS,
    STOP,
    THROUGH,
    VARIANTS,
    report,
    rows_from,
)


class StopPath(Exception):
    """Raised once the path has reached the largest size asked for."""


def pass_kind(task) -> str:
    """What a pass is, from its task: ``direction``, ``gradient`` (over the
    active set), ``full-gradient`` (every candidate: the next gradient test),
    ``curvature`` (the Hessian block; ``curvature+full`` with the full
    gradient), ``ray``, ``trial-points`` (a line search's trial steps with
    their gradients), or the task's class name; ``full`` becomes
    ``partial`` where the test's thresholded partials ride in its place."""
    name = type(task).__name__
    if name == "WithPartialTask":  # the full gradient as the thresholded test's partials
        return pass_kind(task.inner).replace("full", "partial")
    if name == "LocalDirectionTask":
        return "direction"
    if name == "HessianProductTask":
        return "product"
    if name == "CurvatureTask":
        return "curvature+full" if task.full_gradient else "curvature"
    if name == "LossGradTask":
        return "full-gradient" if task.grad_ids is None else "gradient"
    if name == "RayTask":
        return "ray"
    if name == "PointsTask":
        return "trial-points"
    return name


class Meter:
    """What a backend's passes shipped: per pass its kind, the bytes of its
    partitions' pickled results (to the driver) and of its pickled task (to
    every executor); the Hessian-vector products, the Python workers' CPU
    seconds (Spark) and the time the in-process meter spent pickling."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.passes: list[dict] = []
        self.products = 0
        self.worker_cpu = self.pickle_wall = self.pickle_cpu = 0.0
        # operator-cache lookups (product passes): served by the worker's own
        # entry, built afresh, served from the executor's shared store
        self.operator_hits = self.operator_misses = self.operator_shared = 0

    def record(self, task, shipped: list[int], sent: int, merged) -> None:
        self.passes.append({"kind": pass_kind(task), "to_driver": sum(shipped), "task": sent})
        self.products += getattr(merged, "products", 0)

    def summary(self) -> dict:
        """Bytes per pass over the round, and per kind of pass (a round that
        starts from its gradient test's evaluation may end, by its time
        budget, before any pass)."""
        to_driver = [p["to_driver"] for p in self.passes]
        kinds: dict[str, list[dict]] = {}
        for p in self.passes:
            kinds.setdefault(p["kind"], []).append(p)
        return {  # None without a pass (a round its time budget ended before its first)
            "bytes_per_pass_mean": int(np.mean(to_driver)) if to_driver else None,
            "bytes_per_pass_max": int(np.max(to_driver)) if to_driver else None,
            "direction_bytes_per_pass": _mean_bytes(kinds.get("direction")),
            "by_pass": {
                kind: {
                    "passes": len(ps),
                    "to_driver_mean": _mean_bytes(ps),
                    "to_driver_max": int(max(p["to_driver"] for p in ps)),
                    "task_mean": _mean_bytes(ps, "task"),
                }
                for kind, ps in sorted(kinds.items())
            },
        }


def _mean_bytes(passes: list[dict] | None, key: str = "to_driver") -> int | None:
    return None if not passes else int(np.mean([p[key] for p in passes]))


def metered_local(blocks, space):
    """A LocalBackend whose passes also pickle every block's result and the
    task, as a Spark pass ships them, recording the bytes and the time that
    took (``Meter``)."""
    from pyspark import cloudpickle

    from sparkmaxent.backends import LocalBackend
    from sparkmaxent.backends.base import merge_all
    from sparkmaxent.kernels.pointcache import OPERATORS

    class MeteredLocal(LocalBackend):
        meter = Meter()

        def run(self, task):
            self.passes += 1
            hits, misses, shared = OPERATORS.hits, OPERATORS.misses, OPERATORS.shared
            results = [task(b) for b in self.blocks]
            self.meter.operator_hits += OPERATORS.hits - hits
            self.meter.operator_misses += OPERATORS.misses - misses
            self.meter.operator_shared += OPERATORS.shared - shared
            t0, c0 = time.perf_counter(), time.process_time()
            shipped = [len(pickle.dumps(r, protocol=5)) for r in results]
            sent = len(cloudpickle.dumps(task, protocol=5))
            self.meter.pickle_wall += time.perf_counter() - t0
            self.meter.pickle_cpu += time.process_time() - c0
            merged = merge_all(results)
            self.meter.record(task, shipped, sent, merged)
            return merged

    return MeteredLocal(blocks, space)


def _shipped(task, block) -> tuple[bytes, float, int, int, int]:
    """On an executor: the block's result pickled (what its partition ships
    to the driver), the CPU seconds the task and the pickling took, and the
    lookups of the Python worker's operator cache the task made that it
    served from its own entries, built afresh, and served from the
    executor's shared store (a block's task may run on another worker than
    the one that built its operator at this point)."""
    from sparkmaxent.kernels.pointcache import OPERATORS

    hits, misses, shared = OPERATORS.hits, OPERATORS.misses, OPERATORS.shared
    c0 = time.process_time()
    data = pickle.dumps(task(block), protocol=5)
    cpu = time.process_time() - c0
    return data, cpu, OPERATORS.hits - hits, OPERATORS.misses - misses, OPERATORS.shared - shared


def _clear_columns(_block) -> None:
    """On an executor: empty its column cache (kernels/colcache.py)."""
    from sparkmaxent.kernels.colcache import COLUMNS

    COLUMNS.clear()


def metered_spark(spark, train_dir: str, partitions: int):
    """A SparkBackend whose passes bring every partition's pickled result
    back as bytes (one job, as ``run`` does: collect in place of the
    2-partition tree reduce) and merge them on the driver, recording their
    sizes, the broadcast task's and the workers' CPU seconds (``Meter``)."""
    from sparkmaxent.backends.base import merge_all
    from sparkmaxent.backends.spark import SparkBackend, on_executor

    class MeteredSpark(SparkBackend):
        meter = Meter()

        def run(self, task):
            with self._pass(task) as bc:
                sent = os.path.getsize(bc._path)  # the pickled task the executors fetch
                # as ``run`` runs a task on an executor (``on_executor``)
                shipped = lambda block: _shipped(bc.value, block)  # noqa: E731
                out = self.rdd.map(lambda block: on_executor(shipped, block)).collect()
            merged = merge_all([pickle.loads(data) for data, *_ in out])
            self.meter.worker_cpu += sum(cpu for _, cpu, *_ in out)
            self.meter.operator_hits += sum(hits for _, _, hits, _, _ in out)
            self.meter.operator_misses += sum(misses for *_, misses, _ in out)
            self.meter.operator_shared += sum(shared for *_, shared in out)
            self.meter.record(task, [len(data) for data, *_ in out], sent, merged)
            return merged

    return MeteredSpark(spark, train_dir, bias=True, partitions=partitions, name="round-cost")


def first_round(backend, gamma: float, size: int) -> tuple:
    """Grafting's first round with n_best = ``size``, before it is solved:
    (method, weights, test, tol, active weights)."""
    from sparkmaxent.config import train_config
    from sparkmaxent.methods import grafting
    from sparkmaxent.train import train

    found: list = []
    original = grafting.Grafting.grow

    def recording(self, weights, test, finish=False):
        n = len(np.union1d(weights.active_ids(), test.new))
        found.append((self, weights, test, self.round_tol(test), n))
        raise StopPath

    cfg = train_config(method="grafting", l1=gamma, n_best=size, solver="newton-cg", plots=False)
    grafting.Grafting.grow = recording
    try:
        train(backend, cfg)
    except StopPath:
        pass
    finally:
        grafting.Grafting.grow = original
    return found[0]


def solve_round(
    backend,
    recorded,
    solver: str,
    tol_mode: str = "round",
    global_cg: int = 0,
    max_seconds: float = 0.0,
) -> dict:
    """The recorded round solved again from its start by ``solver``, to the
    round's own tolerance or (``tol_mode`` ``final``) the run's final one;
    ``global_cg``: the product passes an iteration of ``newton-cg-global``;
    ``max_seconds`` (0: none): the round's time budget (the solver ends it
    at its last iterate, ``minimize_box_newton``'s ``time_left``), so a
    round too long for the session still gives a row: what it reached."""
    from sparkmaxent.kernels.colcache import COLUMNS
    from sparkmaxent.methods import grafting
    from sparkmaxent.selection.deadline import Deadline

    method, weights, test, tol, n = recorded
    options, ctx = method.options, method.ctx
    if max_seconds > 0:
        method.ctx = dataclasses.replace(ctx, deadline=Deadline(max_seconds))
    if solver == PLAIN:  # newton-cg without its secant correction: the step before it
        method.options = dataclasses.replace(options, secant_memory=0)
    if solver == FIXED:  # newton-cg's partitions to a tenth of the violation, as before
        method.options = dataclasses.replace(options, forcing_max=options.inner_ratio)
    if solver == GLOBAL:  # the late iterations by CG across passes
        method.options = dataclasses.replace(options, global_cg=global_cg)
    if solver == THROUGH:  # the partitions' CG run through the box before projecting
        method.options = dataclasses.replace(options, cg_through=True)
    if solver == FACE:  # the partitions' model solved face by face (TRON)
        method.options = dataclasses.replace(options, cg_face=True)
    if solver == STOP:  # the partitions' CG stopped at the first bound, at every size
        method.options = dataclasses.replace(options, cg_face=False)
    if solver == ACROSS:  # the secant pairs kept across faces
        method.options = dataclasses.replace(options, secant_across=True)
    if tol_mode == "final":
        tol = method.options.tol
    elif tol_mode != "round":
        tol = float(tol_mode)
    COLUMNS.clear()  # no solver starts with another's gathered columns (in-process)
    meter = backend.meter
    meter.reset()
    passes0 = backend.passes
    chosen = grafting.choose_solver
    grafting.choose_solver = lambda *_: "newton-cg" if solver in VARIANTS else solver
    method.round_tol = lambda _test: tol  # this instance's rounds: the tolerance asked for
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        out = method.grow(weights, test)
    finally:
        grafting.choose_solver, method.options, method.ctx = chosen, options, ctx
        del method.round_tol
    assert out.solve is not None, "a grafting round records its solver"
    wall = time.perf_counter() - t0 - meter.pickle_wall
    driver_cpu = time.process_time() - c0 - meter.pickle_cpu
    return {
        "solver": solver,
        "active": n,
        "wall_s": round(wall, 3),
        "cpu_s": round(driver_cpu + meter.worker_cpu, 3),
        "worker_cpu_s": round(meter.worker_cpu, 3),
        "passes": backend.passes - passes0,
        "hessian_products": meter.products,
        **meter.summary(),
        "objective": out.objective,
        "violation": out.solve.violation,
        "tol": tol,
        "tol_mode": tol_mode,
        "converged": bool(out.solve.converged),  # None: ended by the time budget
        "iterations": out.solve.iterations,
        **(
            {"max_seconds": max_seconds, "timed_out": out.solve.converged is None}
            if max_seconds
            else {}
        ),
    }


def _clear_operators(_block) -> None:
    """On an executor: empty its operator cache (kernels/pointcache.py) and
    the store its Python workers share (backends/opstore.py)."""
    from sparkmaxent.backends.spark import share_operators
    from sparkmaxent.kernels.pointcache import OPERATORS

    share_operators()
    OPERATORS.clear()
    if OPERATORS.store is not None:
        OPERATORS.store.clear()


def product_probe(backend, recorded, passes: int, follow: int = 3) -> dict:
    """CPU seconds of a product pass (``Objective.hessian_product``) at the
    round's start, in one run: ``passes`` times, the operator cache emptied,
    then one pass (as before the cache: probabilities and diagonal afresh)
    and ``follow`` more at the same point, as CG across passes runs them;
    and whether all give the same bits.

    A following pass is *served* when no block's operator was built afresh
    (``Meter``'s operator lookups): each came from the cache of the Python
    worker that ran its task, or on Spark from the store the executor's
    workers share, when Spark handed the task another worker than the one
    that built the operator there (``probe_follow_shared`` counts those
    passes, ``cpu_per_pass_shared_s`` their mean; a worker that holds no
    entry of the block takes its digest first, as once a run in a round).
    A pass that built a block's operator again is counted apart
    (``probe_follow_rebuilt``); the cached figure is the served passes'
    mean and ``cpu_per_pass_follow_s`` the mean over all following passes.
    Emptying the caches before each point empties the shared stores too."""
    from sparkmaxent.kernels.pointcache import OPERATORS
    from sparkmaxent.problem.objective import Objective

    method, weights, test, _, n = recorded
    ids = np.union1d(weights.active_ids(), test.new)
    theta = Objective(backend, ids).theta(weights)  # the round's start: new weights at 0
    obj, v = method.round_objective(ids), np.random.default_rng(0).normal(size=len(theta))
    afresh, served, rebuilt, afresh_hits, shared, same = [], [], [], 0, [], True
    for _ in range(passes):
        if hasattr(backend, "rdd"):  # the executors' caches
            backend.rdd.foreach(_clear_operators)
        OPERATORS.clear()
        out = []
        for k in range(1 + follow):
            backend.meter.reset()
            c0 = time.process_time()
            out.append(obj.hessian_product(theta, v))
            meter = backend.meter
            cpu = time.process_time() - c0 - meter.pickle_cpu + meter.worker_cpu
            if k == 0:
                afresh.append(cpu)
                afresh_hits += meter.operator_hits + meter.operator_shared
            else:
                (rebuilt if meter.operator_misses else served).append(cpu)
                if meter.operator_shared and not meter.operator_misses:
                    shared.append(cpu)
        same &= all(np.array_equal(a, b) for o in out for a, b in zip(out[0], o))
    fresh = float(np.mean(afresh))
    cached = float(np.mean(served)) if served else None
    return {
        "solver": PROBE,
        "active": n,
        "probe_passes": passes,
        "probe_follow": follow,
        "cpu_per_pass_afresh_s": round(fresh, 4),
        "cpu_per_pass_cached_s": None if cached is None else round(cached, 4),
        "cached_share": None if cached is None else round(cached / fresh, 3),
        "cpu_per_pass_follow_s": round(float(np.mean(served + rebuilt)), 4),
        "probe_follow_rebuilt": len(rebuilt),
        "probe_follow_shared": len(shared),
        "cpu_per_pass_shared_s": round(float(np.mean(shared)), 4) if shared else None,
        "probe_afresh_hits": afresh_hits,
        "same_bits": bool(same),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    work_arguments(parser, "/tmp/round-cost-work", "round_cost.json")
    parser.add_argument("--gamma", type=float, default=1e-6)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000, 16000])
    parser.add_argument("--exact-max", type=int, default=4000)
    parser.add_argument(
        "--tol",
        default="final",
        help="each round's tolerance: round (grafting's own first-round one), final (the "
        "run's final tolerance at every size) or a number (that tolerance at every size)",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help=f"also solve each round by {PLAIN} (newton-cg without its secant correction)",
    )
    parser.add_argument(
        "--fixed",
        action="store_true",
        help=f"also solve each round by {FIXED} (newton-cg with the fixed forcing term of "
        "before: every direction pass to a tenth of the violation)",
    )
    parser.add_argument(
        "--through",
        action="store_true",
        help=f"also solve each round by {THROUGH} (newton-cg whose partitions' CG runs on "
        "through the box before its step is projected)",
    )
    parser.add_argument(
        "--face",
        action="store_true",
        help=f"also solve each round by {FACE} (newton-cg whose partitions solve their model "
        "face by face: Cauchy step, CG on its face through the bounds, projected search)",
    )
    parser.add_argument(
        "--stop",
        action="store_true",
        help=f"also solve each round by {STOP} (newton-cg whose partitions' CG stops at the "
        "first bound its step crosses, at every size: its default below face_from weights)",
    )
    parser.add_argument(
        "--across",
        action="store_true",
        help=f"also solve each round by {ACROSS} (newton-cg whose secant pairs are kept "
        "across faces, each over the coordinates free at both ends of its step)",
    )
    parser.add_argument(
        "--global-cg",
        type=int,
        default=0,
        metavar="N",
        help=f"also solve each round by {GLOBAL} (newton-cg whose late iterations run CG "
        "across passes, at most N product passes an iteration); 0: not",
    )
    parser.add_argument(
        "--solvers",
        nargs="+",
        choices=SOLVERS,
        default=list(SOLVERS),
        help="solve each round by these only (of those the other flags ask for)",
    )
    parser.add_argument(
        "--probe",
        type=int,
        default=0,
        metavar="N",
        help=f"also time product passes at each round's start, N times one with the blocks' "
        f"operators computed afresh and 3 more at the same point ({PROBE} rows); 0: not",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=0.0,
        help="each round's time budget: the solver ends a round still running after it at "
        "its last iterate, and the row says what it reached (converged false); 0: none",
    )
    parser.add_argument("--blocks", type=int, default=2, help="blocks (local), partitions (spark)")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument(
        "--rows-from",
        nargs="+",
        help="write the page from the rows of earlier runs of this benchmark "
        "(their JSON results) instead of measuring; PATH:SOLVER keeps that solver's rows only",
    )
    args = start(parser, argv)
    if args.rows_from:
        report(args.output, rows_from(args.rows_from))
        return 0
    from benchmarks.grafting_vs_mllib import prepared
    from sparkmaxent.backends.session import spark_session

    ready = args.reuse and os.path.exists(os.path.join(args.work, "train", "dataset.json"))
    spark = None  # in-process alone on prepared data: no JVM
    if "spark" in args.backends or not ready:
        spark = spark_session("local[2]", "round-cost", {"spark.driver.memory": "4g"})
    try:
        train_dir, _ = prepared(spark, args.work, args.reuse)
        measure(args, spark, train_dir)
    finally:
        if spark is not None:
            spark.stop()
    return 0


def measure(args, spark, train_dir: str) -> None:
    """Every size's first round on every backend, solved by every solver;
    the page rewritten after each row (a long run leaves what it measured)."""
    from sparkmaxent.blas import blas_threads
    from sparkmaxent.data.load import read_blocks
    from sparkmaxent.data.schema import DatasetInfo

    info = DatasetInfo.load(train_dir)
    backends = {}
    if "local" in args.backends:
        blocks = read_blocks(train_dir, info, n_blocks=args.blocks)
        backends["local"] = metered_local(blocks, info.space(bias=True))
    if "spark" in args.backends:
        backends["spark"] = metered_spark(spark, train_dir, args.blocks)
    rows: list[dict] = []
    setting = {"gamma1": args.gamma, "blocks": args.blocks, "labels": len(info.labels)}
    with blas_threads(1):
        for size in sorted(args.sizes):
            for name, backend in backends.items():
                recorded = first_round(backend, args.gamma, size)
                if args.probe:
                    probe = product_probe(backend, recorded, args.probe)
                    _add_row(args, rows, {"backend": name, "size": size, **probe}, setting)
                for solver in SOLVERS:
                    if solver == "newton" and recorded[4] > args.exact_max:
                        continue
                    if solver == PLAIN and not args.plain or solver == FIXED and not args.fixed:
                        continue
                    if solver == THROUGH and not args.through or solver == FACE and not args.face:
                        continue
                    if solver == STOP and not args.stop:
                        continue
                    if solver == ACROSS and not args.across:
                        continue
                    if solver == GLOBAL and not args.global_cg or solver not in args.solvers:
                        continue
                    if name == "spark":  # the workers' column caches, as COLUMNS.clear() in-process
                        backend.rdd.foreach(_clear_columns)
                    row = {
                        "backend": name,
                        "size": size,
                        **solve_round(
                            backend, recorded, solver, args.tol, args.global_cg, args.max_seconds
                        ),
                    }
                    _add_row(args, rows, row, setting)
    if "spark" in backends:
        backends["spark"].close()


def _add_row(args, rows: list[dict], row: dict, setting: dict) -> None:
    """``row`` with the run's setting, load and command added to ``rows``,
    printed, and the page rewritten."""
    from benchmarks.common import command_line

    row.update(setting, load=round(os.getloadavg()[0], 2))
    row["measured_by"] = command_line()
    rows.append(row)
    print({k: v for k, v in row.items() if k != "by_pass"}, flush=True)
    report(args.output, rows)


if __name__ == "__main__":
    sys.exit(main())
