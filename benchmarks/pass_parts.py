"""Where the thresholded gradient test's pass goes, in-process: the parts of
grafting's test (kernels/thresholded.py) on the CoNLL-2000 blocks of
``benchmarks/pass_overhead.py``, at its weights (issue 22).

Per data block (an executor's work in a Spark pass): the kernel (the dense
test's sums), the thresholding, the pickling of the result. On the driver:
unpickling both results, their merge and the resolution. Also the fetch
pass's kernel (``ExactSumsTask`` at ``--fetch-features`` features) beside
the dense kernel it replaced. Each part is timed in CPU seconds of this
process (``time.process_time``; min of ``--repeats``), which other
processes' load inflates far less than wall time; the parts, not Spark's
own overhead, are what a code change moves.

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
    from sparkmaxent.kernels.thresholded import _test_sums, resolve, threshold_partial
    from sparkmaxent.problem import Penalty

    cfg = train_config(method="grafting", l1=l1, n_best=1000)
    bound = Penalty(l1=l1).test_bound(cfg.grafting.kkt_tol)
    tau = cfg.grafting.partial_cut * bound
    K, active = space.n_labels, weights.active_ids()
    # a block's cap (train.grafting.partial_keep) where the code has one
    factor = getattr(cfg.grafting, "partial_keep", 0)
    capped = {"keep": factor * 1000} if factor else {}
    out: dict = {"l1": l1, "tau": tau, "blocks": [], **capped}
    received = []
    for block in blocks:
        kernel_s, lg = cpu_min(lambda b=block: _test_sums(b, space, weights, None), repeats)
        cut_s, part = cpu_min(
            lambda lg=lg: threshold_partial(lg, active, tau, K, **capped), repeats
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
    resolve_s, decided = cpu_min(lambda: resolve(merged, weights, 0.0, bound, 1000, False), repeats)
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
    ap.add_argument("--test-l1", type=float, nargs="+", default=[1e-5, 1e-4])
    ap.add_argument("--fetch-features", type=int, default=4000)
    ap.add_argument("--label", default="run", help="key of this run in --output")
    work_arguments(ap, "/tmp/sparkmaxent-pass-overhead", "pass_parts.json")
    args = start(ap, argv)
    train_dir = os.path.join(args.work, "train")
    if not os.path.exists(os.path.join(train_dir, "dataset.json")):
        ap.error(f"no prepared data in {train_dir}: run benchmarks.pass_overhead first")
    info = DatasetInfo.load(train_dir)
    blocks = read_blocks(train_dir, None, n_blocks=args.blocks)
    backend = LocalBackend(blocks, info.space(True))
    weights = starting_weights(backend, args.active).sparse()
    load_before = os.getloadavg()[0]
    tests = [parts(blocks, backend.space, weights, l1, args.repeats) for l1 in args.test_l1]
    fetch = fetch_parts(blocks, backend.space, weights, args.fetch_features, args.repeats)
    for t in tests:
        print(
            f"gamma1 {t['l1']:g}: executor {t['executor_s'] * 1e3:.1f} ms, "
            f"driver {t['driver_s'] * 1e3:.1f} ms (merge {t['merge_s'] * 1e3:.1f}, "
            f"resolve {t['resolve_s'] * 1e3:.1f})"
        )
    print(
        f"fetch kernel {fetch['fetch_kernel_s'] * 1e3:.1f} ms, "
        f"dense kernel {fetch['dense_kernel_s'] * 1e3:.1f} ms"
    )
    write_result(
        args.output,
        [*tests, fetch],
        under=args.label,
        code=os.path.dirname(os.path.dirname(sys.modules["sparkmaxent"].__file__)),
        load_before=load_before,
        load_after=os.getloadavg()[0],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
