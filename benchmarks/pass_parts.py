"""Where the thresholded gradient test's pass goes, in-process: the parts of
grafting's test (kernels/thresholded.py) on the CoNLL-2000 blocks of
``benchmarks/pass_overhead.py``, at its weights (issue 22).

Per data block (an executor's work in a Spark pass): the kernel (the dense
test's sums), the thresholding, the pickling of the result. On the driver:
unpickling both results, their merge and the resolution. Also the fetch
pass's kernel (``ExactSumsTask`` at ``--fetch-features`` features) beside
the dense kernel it replaced; with ``--active-pass``, the active-set pass's
kernel per block on a freshly unpickled block, as a worker receives it;
with ``--cache-rounds``, the column cache's misses per pass kind when one
worker runs every kind of pass over every block.
Each part is timed in CPU seconds of this process (``time.process_time``;
min of ``--repeats``), which other processes' load inflates far less than
wall time; the parts, not Spark's own overhead, are what a code change moves.

The script uses only functions whose signatures are unchanged since the
thresholded test was added, so the same file times older code too (run it
with that code's checkout first on ``PYTHONPATH``).

    python -m benchmarks.pass_parts --work /var/tmp/sparkmaxent-pass-overhead
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time

import numpy as np

from benchmarks.common import SHARED_DATA, start, work_arguments, write_result


def cpu_min(fn, repeats: int, setup=None) -> tuple[float, object]:
    """Least CPU seconds of ``repeats`` calls of ``fn`` (each after an
    untimed ``setup()``, if given) and its last result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        if setup is not None:
            setup()
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def parts(blocks, space, weights, l1: float, repeats: int) -> dict:
    """The parts of the thresholded test at gamma1 ``l1`` (n best 1000)."""
    from sparkmaxent.config import train_config
    from sparkmaxent.kernels.thresholded import _test_sums, threshold_partial
    from sparkmaxent.methods.partials import resolve
    from sparkmaxent.problem import Penalty

    cfg = train_config(method="grafting", l1=l1, n_best=1000)
    gamma1_tested = Penalty(gamma1=l1).gamma1_tested(cfg.gtol, cfg.grafting.kkt_tol)
    gamma1_cut = cfg.grafting.partial_cut * gamma1_tested
    K, active = space.n_labels, weights.active_ids()
    # a block's cap (train.grafting.partial_keep) where the code has one
    factor = getattr(cfg.grafting, "partial_keep", 0)
    capped = {"keep": factor * 1000} if factor else {}
    out: dict = {"l1": l1, "tau": gamma1_cut, "blocks": [], **capped}
    received = []
    for block in blocks:
        kernel_s, lg = cpu_min(lambda b=block: _test_sums(b, space, weights, None), repeats)
        cut_s, part = cpu_min(
            lambda lg=lg: threshold_partial(lg, active, gamma1_cut, K, **capped), repeats
        )
        dumps_s, data = cpu_min(lambda p=part: pickle.dumps(p, protocol=5), repeats)
        loads_s, back = cpu_min(lambda d=data: pickle.loads(d), repeats)
        received.append(back)
        out["blocks"].append(
            {
                "kernel_s": kernel_s,
                "threshold_s": cut_s,
                "dumps_s": dumps_s,
                "loads_s": loads_s,
                "bytes": len(data),
                "shipped": len(part.ids),
            }
        )
    merge_s, merged = cpu_min(lambda: received[0].merge(received[1]), repeats)
    resolve_s, decided = cpu_min(
        lambda: resolve(merged, weights, 0.0, gamma1_tested, 1000, False), repeats
    )
    out["merge_s"], out["resolve_s"] = merge_s, resolve_s
    out["decided"] = not isinstance(decided, np.ndarray)
    worst = max(out["blocks"], key=lambda b: b["kernel_s"] + b["threshold_s"])
    out["executor_s"] = worst["kernel_s"] + worst["threshold_s"] + worst["dumps_s"]
    out["driver_s"] = sum(b["loads_s"] for b in out["blocks"]) + merge_s + resolve_s
    return out


def fetch_parts(blocks, space, weights, n: int, repeats: int) -> dict:
    """CPU seconds of the fetch pass's kernel at the ``n`` inactive features
    of largest |g_j| (their columns gathered afresh, as in a run; the
    weights' columns kept from the test pass), and of the dense kernel, per
    block (the slower)."""
    from sparkmaxent.kernels.colcache import COLUMNS
    from sparkmaxent.kernels.thresholded import ExactSumsTask, _test_sums

    g = sum(_test_sums(b, space, weights, None).grad for b in blocks)
    score = np.abs(g)
    score[weights.active_ids()] = -1.0
    ids = np.sort(np.argsort(-score, kind="stable")[:n]).astype(np.int64)
    task = ExactSumsTask(space, weights, None, ids)
    fetch = dense = 0.0
    for b in blocks:

        def test_pass(b=b):
            COLUMNS.clear()
            _test_sums(b, space, weights, None)

        fetch = max(fetch, cpu_min(lambda b=b: task(b), repeats, test_pass)[0])
        dense = max(dense, cpu_min(lambda b=b: _test_sums(b, space, weights, None), repeats)[0])
    return {"features": n, "fetch_kernel_s": fetch, "dense_kernel_s": dense}


def active_parts(blocks, space, weights, repeats: int) -> dict:
    """CPU seconds of the active-set pass's parts (``LossGradTask`` over the
    weights' own features, an inner optimizer's pass), per block as a Spark
    worker runs it: on a freshly unpickled block (the column cache compares
    it with the block it holds, then serves its columns), BLAS on one thread
    (as PySpark runs executors); the result pickled; on the driver, both
    results unpickled and merged."""
    from sparkmaxent.blas import blas_threads
    from sparkmaxent.kernels import LossGradTask

    task = LossGradTask(space, weights, None, weights.ids)
    out: dict = {"active": len(weights.ids), "blocks": []}
    received = []
    with blas_threads(1):
        for block in blocks:
            data = pickle.dumps(block, protocol=pickle.HIGHEST_PROTOCOL)
            task(pickle.loads(data))  # the columns built once, as in a round's first pass
            copies = iter([pickle.loads(data) for _ in range(repeats)])
            kernel_s, lg = cpu_min(lambda c=copies: task(next(c)), repeats)
            dumps_s, result = cpu_min(lambda lg=lg: pickle.dumps(lg, protocol=5), repeats)
            received.append(pickle.loads(result))
            out["blocks"].append({"kernel_s": kernel_s, "dumps_s": dumps_s, "bytes": len(result)})
        out["merge_s"] = cpu_min(lambda: received[0].merge(received[1]), repeats)[0]
    out["executor_s"] = max(b["kernel_s"] + b["dumps_s"] for b in out["blocks"])
    return out


def cache_misses(blocks, backend, weights, fetch_features: int, rounds: int) -> dict:
    """Column-cache misses per pass kind when one Python worker runs the
    passes of ``pass_overhead`` (curvature included) over every block,
    each block freshly unpickled and the blocks in a random order every
    pass, as Spark hands a reused worker whichever task comes next; the
    first round (the cache filling) is not counted."""
    from benchmarks.pass_overhead import fetched_ids, tasks
    from sparkmaxent.blas import blas_threads
    from sparkmaxent.kernels.colcache import COLUMNS

    fetch = fetched_ids(backend, weights, fetch_features)
    passes = tasks(backend, weights, 1_000_000, [1e-5], fetch)
    kinds = ["active", "gradient_test", "fetch_pass", "curvature"]
    data = [pickle.dumps(b, protocol=pickle.HIGHEST_PROTOCOL) for b in blocks]
    rng = np.random.default_rng(0)
    misses = {k: 0 for k in kinds}
    COLUMNS.clear()
    with blas_threads(1):
        for r in range(rounds):
            for kind in kinds:
                for i in rng.permutation(len(blocks)):
                    before = COLUMNS.misses
                    passes[kind](pickle.loads(data[i]))
                    misses[kind] += (COLUMNS.misses - before) if r else 0
    counted = (rounds - 1) * len(blocks)
    out = {"passes_per_kind": counted, "misses": misses, "entries": len(COLUMNS)}
    out["cache_mb"] = COLUMNS.nbytes / 2**20
    COLUMNS.clear()
    return out


def main(argv: list[str] | None = None) -> int:
    from benchmarks.pass_overhead import starting_weights
    from sparkmaxent.backends.local import LocalBackend
    from sparkmaxent.data.load import read_blocks
    from sparkmaxent.data.schema import DatasetInfo

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=SHARED_DATA, help="the shared corpora folder")
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--active", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument(
        "--test-l1", type=float, nargs="*", default=[1e-5, 1e-4], help="none: no test parts"
    )
    ap.add_argument("--fetch-features", type=int, default=4000, help="0: no fetch parts")
    ap.add_argument("--active-pass", action="store_true", help="the active-set pass's parts too")
    ap.add_argument(
        "--cache-rounds", type=int, default=0, help="rounds of the column-cache probe (0: none)"
    )
    work_arguments(ap, "/tmp/sparkmaxent-pass-overhead", "pass_parts.json")
    args = start(ap, argv)
    train_dir = os.path.join(args.work, "train")
    if not os.path.exists(os.path.join(train_dir, "dataset.json")):
        ap.error(f"no prepared data in {train_dir}: run benchmarks.pass_overhead first")
    info = DatasetInfo.load(train_dir)
    blocks = read_blocks(train_dir, None, n_blocks=args.blocks)
    backend = LocalBackend(blocks, info.space(True))
    weights = starting_weights(backend, args.active).sparse()
    tests = [parts(blocks, backend.space, weights, l1, args.repeats) for l1 in args.test_l1]
    if args.active_pass:
        active = active_parts(blocks, backend.space, weights, args.repeats)
        tests.append(active)
        per_block = ", ".join(f"{b['kernel_s'] * 1e3:.1f}" for b in active["blocks"])
        print(
            f"active pass: kernel per block {per_block} ms, merge {active['merge_s'] * 1e3:.2f} ms"
        )
    if args.cache_rounds:
        probe = cache_misses(blocks, backend, weights, 4000, args.cache_rounds)
        tests.append(probe)
        print(f"column cache: misses per kind {probe['misses']} of {probe['passes_per_kind']}")
    if args.fetch_features:
        tests.append(fetch_parts(blocks, backend.space, weights, args.fetch_features, args.repeats))
    for t in tests:
        if "l1" not in t:
            continue
        print(
            f"gamma1 {t['l1']:g}: executor {t['executor_s'] * 1e3:.1f} ms, "
            f"driver {t['driver_s'] * 1e3:.1f} ms (merge {t['merge_s'] * 1e3:.1f}, "
            f"resolve {t['resolve_s'] * 1e3:.1f})"
        )
    for fetch in (t for t in tests if "fetch_kernel_s" in t):
        print(
            f"fetch kernel {fetch['fetch_kernel_s'] * 1e3:.1f} ms, "
            f"dense kernel {fetch['dense_kernel_s'] * 1e3:.1f} ms"
        )
    write_result(args.output, tests)
    return 0


if __name__ == "__main__":
    sys.exit(main())
