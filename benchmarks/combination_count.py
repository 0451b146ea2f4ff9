"""The size of l2-Comb3 on CoNLL-2000 (issue 18): how many conjunctions
of up to 3 of the 10 unigram atoms exist in the training events, counted
without a model over them, and the memory an l2 fit over all of them
(the enumerating baseline) would need.

Two counts over the training events ``benchmarks.combination`` prepared
(``--work``, e.g. ``--work /var/tmp/comb/conllw``):

* ``occurrences``: sum over events of C(n_i, 2) + C(n_i, 3), n_i the
  event's atoms (per-event combinatorics: nothing is formed). It is what
  the widened events of an enumeration hold, and bounds the distinct count.
* ``distinct`` (pairs, and pairs + triples): each block's conjunctions
  formed (``EnumerateTask``), reduced to their distinct keys and merged
  into a running sorted set one block at a time, so at most one block's
  conjunctions and the distinct keys are held (``--blocks`` bounds the
  first; the tracemalloc peak is reported).

The memory l2-Comb3 would need, from the distinct count: (atoms +
conjunctions) x labels weights, and per weight L-BFGS-B's arrays (scipy's
``wa`` of (2m + 5) doubles, ``iwa`` of 3 int32, ``nbd``, two bounds, x
and g), with m = ``train.memory``; plus the widened events (an index and a
value per occurrence). That is a lower bound: the objective's gradient
sums and the model are left out.

    python -m benchmarks.combination_count --work /var/tmp/comb/conllw

adds the row (task conll, method l2-Comb3, not run) to
benchmarks/results/combination.json, keeping the other rows.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import tracemalloc

import numpy as np

from benchmarks.combination import targets
from benchmarks.common import RESULTS, command_line, print_table, start, write_result

#: bytes per weight of scipy's L-BFGS-B besides the history: wa's 5 n
#: doubles, iwa (3 n) and nbd (n) int32, the two bounds, x and g
LBFGSB_FIXED_BYTES = 5 * 8 + 4 * 4 + 2 * 8 + 2 * 8
#: bytes per occurrence of a conjunction in the widened events (int32 index, float64 value)
OCCURRENCE_BYTES = 4 + 8


def count(train_dir: str, blocks: int) -> dict:
    """Occurrences and distinct conjunctions of degree 2 and 3 in the
    training events, one block at a time (module docstring)."""
    from sparkmaxent.backends.factory import make_backend
    from sparkmaxent.kernels.combination_search import EnumerateTask
    from sparkmaxent.kernels.topk import union_positions

    backend = make_backend("local", train_dir, bias=True, partitions=blocks)
    space = backend.space
    n = space.n_predicates
    occurrences = {2: 0, 3: 0}
    events = 0
    distinct = np.zeros(0, dtype=np.int64)
    t0 = time.perf_counter()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for block in backend.blocks:  # LocalBackend: the blocks are in this process
        X = block.X[:, :n].tocsr()
        X.eliminate_zeros()
        atoms = np.diff(X.indptr).astype(np.int64)
        events += len(atoms)
        occurrences[2] += int((atoms * (atoms - 1) // 2).sum())
        occurrences[3] += int((atoms * (atoms - 1) * (atoms - 2) // 6).sum())
        distinct = union_positions(distinct, EnumerateTask(n, 3)(block).keys)[0]
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    pairs = int(np.count_nonzero(distinct < n * n))
    return {
        "events": events,
        "atoms": n,
        "labels": space.n_labels,
        "blocks": blocks,
        "occurrences": {"2": occurrences[2], "3": occurrences[3]},
        "distinct": {"2": pairs, "3": int(len(distinct)) - pairs, "2+3": int(len(distinct))},
        "count_peak_mb": round(peak / 2**20, 1),
        "count_s": round(time.perf_counter() - t0, 1),
    }


def needed(found: dict, memory: int) -> dict:
    """The memory an l2 fit over every atom and conjunction would need
    (lower bound, module docstring), in GiB."""
    weights = (found["atoms"] + found["distinct"]["2+3"]) * found["labels"]
    lbfgsb = weights * (2 * memory * 8 + LBFGSB_FIXED_BYTES)
    widened = (found["occurrences"]["2"] + found["occurrences"]["3"]) * OCCURRENCE_BYTES
    return {
        "weights": weights,
        "lbfgs_memory": memory,
        "lbfgsb_gib": round(lbfgsb / 2**30, 1),
        "widened_events_gib": round(widened / 2**30, 2),
        "one_weight_vector_gib": round(weights * 8 / 2**30, 2),
        "total_at_least_gib": round((lbfgsb + widened) / 2**30, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="benchmarks.combination's --work (CoNLL)")
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--memory", type=int, default=10, help="L-BFGS history (train.memory)")
    parser.add_argument("--machine-gib", type=float, default=24.0)
    parser.add_argument("--output", default=os.path.join(RESULTS, "combination.json"))
    args = start(parser, argv)
    found = count(os.path.join(args.work, "conll", "train"), args.blocks)
    need = needed(found, args.memory)
    fits = need["total_at_least_gib"] <= args.machine_gib
    row = {
        "task": "conll",
        "method": "l2-Comb3",
        "degree": 3,
        "atoms": "10 unigrams",
        "sentences": 0,
        "metric": "chunk_f1",
        "test_score": None,
        "active_features": need["weights"],
        "conjunctions_existing": found["distinct"]["2+3"],
        "conjunctions_examined": found["distinct"]["2+3"],
        "count": found,
        "memory_needed": need,
        "fits_machine": fits,
        "note": "not run: "
        + ("fits" if fits else "does not fit")
        + f" in {args.machine_gib:g} GiB (memory_needed is a lower bound)",
        "command": command_line(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "session": 4,
    }
    rows = []
    if os.path.exists(args.output):
        with open(args.output) as f:
            old = json.load(f)
        rows = old["rows"]
    write_result(args.output, rows + [row], targets(rows + [row]), benchmark="combination")
    print_table([{**found, **need, "fits": fits}], [*found, *need, "fits"])


if __name__ == "__main__":
    main()
