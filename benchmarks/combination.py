"""Combination features by l1 grafting (Okanohara & Tsujii 2009) against
l1 and l2 over the atoms and l2 over every enumerated conjunction.

Tasks (``--tasks``):

* ``pp``: PP attachment (../shared/data/ppattach): ``training`` to train,
  ``devset`` for every choice (gamma1, gamma2), ``test`` to report. Atoms
  are the four head words as slot-tagged predicates (``v=``, ``n1=``,
  ``p=``, ``n2=``), lowercased; with ``--bitstrings L1,L2,..`` also the
  prefixes (``--bit-end suffix``: the last bits) of those lengths of each
  word's class bit string. The 32-bit codes hold the class tree's first
  split in the last bit (the prepositions share the last four bits 1010,
  "bought" and "sold" the last eleven; most codes begin with many zeros),
  so the classes are suffixes; all-zero codes (no class) give no atom
  (``vb4=0100``). The text is rewritten in the ``maxent`` format under
  ``--work`` and prepared there.
* ``conll``: CoNLL-2000 chunking with only the 10 unigram templates
  (w-2..w+2, t-2..t+2) as atoms, first 90% of the training sentences to
  train, the last 10% for choices (chunk F1), test.txt to report.

Rows: l2 and l1 over the atoms (l1-Orig), l1-Comb at degree 2 and 3, l2
over every conjunction up to degree 3 enumerated (l2-Comb3). Each gamma is
chosen on the held-out part; ``conjunctions_examined`` is the largest
number of conjunctions whose exact gradient one round computed,
``conjunctions_existing`` the number that fire in some training event
(enumerated once for the count). Everything runs in-process (LocalBackend,
``--blocks`` blocks), so executors are the driver: ``driver_peak_mb`` is
the tracemalloc peak of the run above the loaded data (numpy arrays
included), ``search_peak_mb`` that of the conjunction search alone
(l2-Comb3: ``enumeration_peak_mb``, listing every conjunction),
``rss_before_mb`` / ``rss_peak_mb`` the whole process (``run``), and
``executor_peak_mb`` is null.

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.combination --tasks pp

writes benchmarks/results/combination.json (rows of tasks not run are
kept) and combination.png. ``--merge PAGE ...`` measures nothing: it
merges the rows of runs written with their own ``--output`` into
``--output`` (a row replaces the one of the same ``row_identity``).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import tracemalloc

from benchmarks.combination_tasks import prepare_conll, prepare_pp
from benchmarks.common import (
    SHARED_DATA,
    command_line,
    merge_arguments,
    merge_pages,
    page_rows,
    print_table,
    replace_rows,
    start,
    target,
    work_arguments,
    write_result,
)
from sparkmaxent.selection.stops import StopReason

log = logging.getLogger("combination")
#: why a fit with a certificate stopped: no candidate passes the gradient test
CERTIFIED = StopReason.NO_CANDIDATE_PASSES.value

ROW_KEYS = [
    "task",
    "method",
    "degree",
    "metric",
    "test_score",
    "dev_score",
    "gamma",
    "active_features",
    "conjunctions_examined",
    "conjunctions_existing",
    "passes",
    "wall_s",
    "driver_peak_mb",
    "executor_peak_mb",
]
PP_REFERENCE = {
    "maxent_hand_built_features": 0.816,
    "collins_brooks_backed_off": 0.845,
}


def row_identity(row: dict) -> tuple:
    """What makes two rows the same measurement: a new row replaces an old
    one when all of these agree (the page holds one row per measurement,
    of its latest run)."""
    keys = ("task", "method", "degree", "atoms", "sentences", "weighting")
    return tuple(row.get(k) or None for k in keys)


def merge_rows(old: list[dict], new: list[dict]) -> list[dict]:
    """``old`` with the rows ``new`` measures again replaced, then ``new``."""
    return replace_rows(old, new, row_identity)


def targets(rows: list[dict]) -> dict:
    """Issue 18's targets, from the rows present. A model is chosen by its
    devset score among the certified fits when there are any (a capped fit
    is not the optimum at its gamma1), the later row on ties."""

    def chosen(**match) -> dict | None:
        found = [
            (i, r)
            for i, r in enumerate(rows)
            if all(r.get(k) == v for k, v in match.items()) and r.get("dev_score") is not None
        ]
        done = [(i, r) for i, r in found if r.get("stop_reason") == CERTIFIED]
        pool = done or found
        return max(pool, key=lambda ir: (ir[1]["dev_score"], ir[0]))[1] if pool else None

    out = {}
    pp_atoms = [r["atoms"] for r in rows if r["task"] == "pp" and r["method"] == "l1-Comb"]
    if pp_atoms:  # the atoms of the latest PP run
        comb = chosen(task="pp", method="l1-Comb", atoms=pp_atoms[-1])
        orig = chosen(task="pp", method="l1-Orig", atoms=pp_atoms[-1])
        if comb and orig:
            a, b = comb["test_score"], orig["test_score"]
            goal = "PP attachment: l1-Comb test accuracy >= 84.0% and >= l1-Orig + 2 points"
            value = f"{a:.2%} (gamma1 {comb['gamma']:g}) against l1-Orig {b:.2%} ({pp_atoms[-1]})"
            out["pp"] = target(goal, value, a >= 0.84 and a >= b + 0.02)
    conll = [r for r in rows if r["task"] == "conll"]
    full = [
        r
        for r in conll
        if r["degree"] == 3 and not r.get("sentences") and r["method"] == "l1-Comb"
        and r.get("conjunctions_existing")
    ]  # fmt: skip
    if full:
        worst = max(full, key=lambda r: r["conjunctions_examined"] / r["conjunctions_existing"])
        seen, there = worst["conjunctions_examined"], worst["conjunctions_existing"]
        goal = "CoNLL-2000 (all sentences): conjunctions examined <= 1% of those at degree 3"
        value = f"{seen:,} of {there:,} ({seen / there:.2%})"
        out["conll_examined"] = target(goal, value, seen <= 0.01 * there)
    l2 = [r for r in conll if r["method"] == "l2" and r["atoms"] == "17 templates"]
    if l2:
        ref = max(l2, key=lambda r: r["dev_score"])
        n = ref.get("sentences")
        comb = chosen(task="conll", method="l1-Comb", sentences=n)
        if comb:
            weights = comb["active_features"]
            ok = comb["test_score"] >= 0.9286 and weights <= ref["active_features"] / 10
            goal = "CoNLL-2000: l1-Comb >= 92.86 chunk F1 with <= 1/10 of the 17-template l2's "
            value = (
                f"{100 * comb['test_score']:.2f} with {weights:,} weights against the 17-template "
                f"l2's {100 * ref['test_score']:.2f} with {ref['active_features']:,} "
                f"({n or 'all'} sentences)"
            )
            out["conll_f1"] = target(goal + "weights", value, ok)
    brown: dict = {}
    for r in rows:
        if r["task"] == "brown":
            brown.setdefault(r.get("weighting"), {})[r["method"]] = r["test_score"]
    parts = [(w, m) for w, m in brown.items() if {"l1-Comb", "l1-Orig", "LinearSVC"} <= set(m)]
    if parts:
        goal = "Brown: l1-Comb mean F2 above l1-Orig and the linear SVM"
        value = "; ".join(
            f"{w}: {m['l1-Comb']:.4f} against {m['l1-Orig']:.4f} and {m['LinearSVC']:.4f}"
            for w, m in parts
        )
        met = any(m["l1-Comb"] > max(m["l1-Orig"], m["LinearSVC"]) for _, m in parts)
        out["brown"] = target(goal, value, met)
    return out


class Task:
    """One task's backends and scorers (accuracy; chunk F1 on CoNLL)."""

    def __init__(self, name: str, dirs: dict[str, str], blocks: int):
        from sparkmaxent.backends.factory import make_backend

        self.name, self.dirs = name, dirs
        self.metric = "chunk_f1" if name == "conll" else "accuracy"
        self.train = make_backend("local", dirs["train"], bias=True, partitions=blocks)
        self.dev = make_backend("local", dirs["dev"], bias=True, partitions=1)
        self.test = make_backend("local", dirs["test"], bias=True, partitions=1)

    def score(self, backend, result) -> float:
        from sparkmaxent.evaluate import evaluate_dataset
        from sparkmaxent.selection.base import evaluate_backend

        if self.metric == "accuracy":
            return evaluate_backend(backend, result.weights, None, result.conjunctions).accuracy
        split = "dev" if backend is self.dev else "test"
        scores = evaluate_dataset(
            self.dirs[split],
            result.weights,
            result.space(self.train.space),
            chunks=True,
            conjunctions=result.conjunctions,
        )
        return scores["chunks"]["f1"]

    def existing(self, degree: int) -> int:
        from sparkmaxent.kernels.combination_search import EnumerateTask

        keys = self.train.run(EnumerateTask(self.train.space.n_predicates, degree)).keys
        return int(len(keys))


class SearchPeak:
    """The largest allocation of one call of the conjunction search
    (``methods.combination.search``) above what was allocated when it was
    called, by tracemalloc (which must be running): what the search itself
    needs, without the solver's state."""

    def __init__(self):
        import sparkmaxent.methods.combination as comb

        self.module, self.original, self.peak = comb, comb.search, 0

    def __enter__(self) -> SearchPeak:
        def measured(*args, **kwargs):
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            try:
                return self.original(*args, **kwargs)
            finally:
                self.peak = max(self.peak, tracemalloc.get_traced_memory()[1] - before)

        self.module.search = measured
        return self

    def __exit__(self, *exc) -> None:
        self.module.search = self.original


def run(
    task: Task | None, backend, cfg, warm_start=None, warm_conjunctions=None
) -> tuple[object, dict]:
    """Train once, measuring wall time, passes and memory: ``driver_peak_mb``
    the tracemalloc peak of the run (allocations after the data was loaded,
    numpy included), ``search_peak_mb`` that of the conjunction search
    alone (``SearchPeak``), ``rss_before_mb`` / ``rss_peak_mb`` the whole
    process's resident set before and at its peak during the run (Python,
    numpy, loaded data included; the peak is reset before the run)."""
    from benchmarks.common import reset_peak_rss, status_kb
    from sparkmaxent.train import train

    rss_before = status_kb("VmRSS")
    hwm = reset_peak_rss()
    tracemalloc.start()
    p0, t0 = backend.passes, time.perf_counter()
    with SearchPeak() as searched:
        result = train(backend, cfg, warm_start=warm_start, warm_conjunctions=warm_conjunctions)
    wall = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    rounds = result.report.get("rounds", [])
    examined = [r.get("conjunctions_examined") or 0 for r in rounds]
    return result, {
        "active_features": result.weights.nnz,
        "passes": backend.passes - p0,
        "wall_s": round(wall, 2),
        "driver_peak_mb": round(peak, 1),
        "search_peak_mb": round(searched.peak / 2**20, 1),
        "rss_before_mb": round(rss_before / 1024, 1),
        "rss_peak_mb": round(status_kb("VmHWM") / 1024, 1) if hwm else None,
        "executor_peak_mb": None,
        "conjunctions_examined": max(examined, default=0),
        "stopped": result.report.stop.message if result.report.stop else None,
        "stop_reason": result.report.stop.reason.value if result.report.stop else None,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def choose(
    task: Task, method: str, degree: int, grid: list[float], make_cfg, backend=None, every=None
):
    """Train at every gamma of ``grid``, keep the best on the held-out part
    (``every``: the conjunctions ``backend`` forms, for scoring)."""
    best = None
    for gamma in grid:
        result, row = run(task, backend or task.train, make_cfg(gamma))
        if every is not None:
            result.conjunctions = every
        dev = task.score(task.dev, result)
        log.info(
            "%s %s degree %d gamma %g: dev %.4f %s", task.name, method, degree, gamma, dev, row
        )
        if best is None or dev > best[0]:
            best = (dev, gamma, result, row)
    assert best is not None
    dev, gamma, result, row = best
    return {
        "task": task.name,
        "method": method,
        "degree": degree,
        "metric": task.metric,
        "test_score": task.score(task.test, result),
        "dev_score": dev,
        "gamma": gamma,
        "grid": list(grid),
        "command": command_line(),
        **row,
    }


# long: the grid loop with its two warm-start chains
def l1_rows(
    task: Task,
    degrees: list[int],
    grid: list[float],
    cap: dict,
    save,
    orig: bool = True,
    patience: int = 1,
) -> list[dict]:
    """l1-Orig and l1-Comb (each of ``degrees``) along ``grid``, largest
    gamma1 first: l1-Orig warm-started from the previous gamma1; l1-Comb
    from l1-Comb of its degree at the previous gamma1 (weights and
    conjunctions), at the first gamma1 from l1-Orig there (its passes and
    seconds then include that fit). ``orig=False``: l1-Orig only where
    l1-Comb starts from it. Each method keeps its best gamma1 on the
    held-out part; the grid stops (after two gamma1) once ``patience``
    gamma1 in a row improved no method. ``save(rows)`` after every gamma1 with the best
    rows so far."""
    from sparkmaxent.config import train_config

    def cfg(gamma, degree):
        return train_config(method="grafting", l1=gamma, combination_degree=degree, **cap)

    best: dict[int, tuple] = {}
    points: dict[int, list[dict]] = {}  # degree -> every gamma1's held-out score
    rows: list[dict] = []
    tried: list[float] = []
    previous = None
    stale = 0  # gamma1 in a row where no method improved
    chain: dict[int, object] = {}  # degree -> l1-Comb at the previous gamma1
    for gamma in grid:
        tried.append(gamma)
        fits = []
        if orig or len(chain) < len(degrees):
            o, orow = run(task, task.train, cfg(gamma, 1), previous)
            previous = o.weights
            fits.append((1, o, orow))
        for degree in degrees:
            before = chain.get(degree)
            if before is None:
                result, row = run(task, task.train, cfg(gamma, degree), o.weights)
                row["warm_start"] = f"l1-Orig at gamma1 {gamma:g} (passes, seconds included)"
                row["passes"] += orow["passes"]
                row["wall_s"] = round(row["wall_s"] + orow["wall_s"], 2)
                for key in ("driver_peak_mb", "rss_peak_mb"):
                    row[key] = max(row[key] or 0, orow[key] or 0)
            else:
                warm = (before.weights, before.conjunctions)  # type: ignore[attr-defined]
                result, row = run(task, task.train, cfg(gamma, degree), *warm)
                row["warm_start"] = f"l1-Comb degree {degree} at gamma1 {tried[-2]:g}"
            chain[degree] = result
            fits.append((degree, result, row))
        improved = False
        for degree, result, row in fits:
            dev = task.score(task.dev, result)
            log.info("%s degree %d gamma1 %g: held-out %.4f %s", task.name, degree, gamma, dev, row)
            point = {"gamma": gamma, "dev_score": dev}
            for key in ("active_features", "passes", "wall_s", "stopped"):
                point[key] = row[key]
            points.setdefault(degree, []).append(point)
            if degree not in best or dev > best[degree][0]:
                improved = True
                row["test_score"] = task.score(task.test, result)
                best[degree] = (dev, gamma, result, row)
        rows = l1_table(task, best, list(tried), points)
        save(rows)
        stale = 0 if improved else stale + 1
        if len(tried) >= 2 and stale >= patience:
            break
    return rows


def l1_table(task: Task, best: dict, tried: list[float], points: dict) -> list[dict]:
    """One row per method: its held-out choice, with every point run."""
    return [
        {
            "task": task.name,
            "method": "l1-Orig" if degree == 1 else "l1-Comb",
            "degree": degree,
            "metric": task.metric,
            "dev_score": dev,
            "gamma": gamma,
            "grid": tried,
            "points": points.get(degree, []),
            "command": command_line(),
            **{"warm_start": "previous gamma1", **row},
        }
        for degree, (dev, gamma, result, row) in sorted(best.items(), key=lambda kv: -kv[0])
    ]


def run_task(task: Task, args, save) -> list[dict]:
    """Every row of one task, in the order l1-Comb, l1-Orig, l2-Comb3, l2;
    ``save(rows)`` after each row (a long run keeps what it measured)."""
    import numpy as np

    from sparkmaxent.backends.expanded import ExpandedBackend
    from sparkmaxent.config import train_config
    from sparkmaxent.kernels.combination_search import EnumerateTask
    from sparkmaxent.kernels.conjunctions import Conjunctions
    from sparkmaxent.model_conjunctions import atoms_of_keys

    cap = dict(max_seconds=args.max_seconds, n_best=args.n_best, gtol=1e-7)
    rows = []
    existing = {d: task.existing(d) for d in (2, 3)} if args.existing else {}
    log.info("%s: conjunctions existing: %s", task.name, existing)
    conll = task.name == "conll"
    if conll:
        cap["max_seconds"] = args.conll_max_seconds
    l1_grid = args.conll_l1_grid if conll else args.l1_grid
    wanted = set(args.only)
    # CoNLL runs degree 3 only when asked for (--only l1-Comb:3)
    degrees = [
        d
        for d in ((2,) if conll and not wanted else (2, 3))
        if not wanted or f"l1-Comb:{d}" in wanted
    ]
    if not wanted or degrees or "l1-Orig:1" in wanted:

        def keep(found: list[dict]) -> None:
            rows[:] = [
                {**row, "conjunctions_existing": existing.get(row["degree"], 0)}
                for row in found
                if not wanted or f"{row['method']}:{row['degree']}" in wanted
            ]
            save(rows)

        orig = not wanted or "l1-Orig:1" in wanted
        l1_rows(task, degrees, l1_grid, cap, keep, orig, args.patience)
        print_table(rows, ROW_KEYS)
    if conll and rows:
        rows[0]["note"] = (
            f"capped at {args.conll_max_seconds:g} s per run (train.selection.max_seconds); "
            f"l2-Comb3 not run: {existing.get(3)} conjunctions x 22 labels"
        )
    if args.l2_comb3 and not conll and (not wanted or "l2-Comb3:3" in wanted):
        n = task.train.space.n_predicates
        tracemalloc.start()
        keys = task.train.run(EnumerateTask(n, 3)).keys
        rows_atoms = np.concatenate(
            [atoms_of_keys(keys[keys < n * n], 2, n), atoms_of_keys(keys[keys >= n * n], 3, n)]
        )
        every = Conjunctions.empty(n).extend(rows_atoms)
        enum_peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        expanded = ExpandedBackend(task.train, every)
        row = choose(
            task,
            "l2-Comb3",
            3,
            args.l2_grid,
            lambda g: train_config(method="l2", l2=g),
            expanded,
            every,
        )
        row["driver_peak_mb"] = max(row["driver_peak_mb"], round(enum_peak, 1))
        # what listing the candidates needs: l1-Comb's search_peak_mb counterpart
        row["enumeration_peak_mb"] = round(enum_peak, 1)
        row["conjunctions_existing"] = existing[3]
        row["conjunctions_examined"] = existing[3]
        rows.append(row)
        save(rows)
    if "l2:1" in wanted or not (wanted or conll):  # CoNLL: only when asked for
        rows.append(choose(task, "l2", 1, args.l2_grid, lambda g: train_config(method="l2", l2=g)))
        save(rows)
    print_table(rows, ROW_KEYS)
    return rows


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # rows not run (l2-Comb3 on CoNLL: its count only)
    rows = [r for r in rows if r.get("test_score") is not None]
    tasks = sorted({r["task"] for r in rows})
    # a panel's width grows with its bars
    widths = [max(6.0, 0.5 * sum(r["task"] == t for r in rows)) for t in tasks]
    fig, axes = plt.subplots(
        1, len(tasks), figsize=(sum(widths), 5.5), squeeze=False, width_ratios=widths
    )
    for ax, t in zip(axes[0], tasks):
        mine = [r for r in rows if r["task"] == t]
        labels = [
            f"{r['method']}"
            + (f" d{r['degree']}" if r["degree"] > 1 else "")
            + (" +suffixes" if "suffix" in r.get("atoms", "") else "")
            + (" +prefixes" if "bitstrings" in r.get("atoms", "") else "")
            + (" 17 tpl" if r.get("atoms") == "17 templates" else "")
            + (" balanced" if r.get("weighting") == "balanced" else "")
            + (f" N={r['sentences']}" if r.get("sentences") else "")
            + (f" g={r['gamma']:.3g}" if r.get("gamma") else "")
            for r in mine
        ]
        # bars by position: two rows may share a label (other atoms, sentences)
        ax.bar(range(len(mine)), [r["test_score"] for r in mine])
        ax.set_xticks(range(len(mine)), labels)
        low = min(r["test_score"] for r in mine)
        ax.set_ylim(max(0.0, low - 0.05), 1.0)
        ax.set_title(f"{t}: test {mine[0]['metric']}")
        for i, r in enumerate(mine):
            ax.text(
                i,
                r["test_score"],
                f"{r['test_score']:.4f}\n{r['active_features']:,.0f} w",
                ha="center",
                fontsize=7,
            )
        ax.tick_params(axis="x", rotation=45, labelsize=7)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["pp"], choices=["pp", "conll", "brown"])
    parser.add_argument(
        "--only",
        nargs="*",
        default=[],
        help="run only these rows (METHOD:DEGREE, e.g. l1-Comb:3 l2:1); keep the others' results",
    )
    parser.add_argument("--conll-l1-grid", type=float, nargs="+", default=[1e-4])
    parser.add_argument("--conll-max-seconds", type=float, default=900.0)
    parser.add_argument(
        "--conll-sentences", type=int, default=0, help="train on the first N sentences (0: all)"
    )
    parser.add_argument(
        "--conll-templates",
        choices=["unigrams", "chunk"],
        default="unigrams",
        help="CoNLL atoms: the 10 unigram templates, or the 17 hand-written ones (rows l2:1 "
        "and l1-Orig:1 over them: the issue's reference models)",
    )
    parser.add_argument("--no-existing", dest="existing", action="store_false")
    parser.add_argument("--data", default=SHARED_DATA)
    parser.add_argument("--bitstrings", default="", help="bit-string prefix lengths, e.g. 4,8,12")
    parser.add_argument(
        "--bit-end",
        choices=["prefix", "suffix"],
        default="prefix",
        help="--bitstrings take the first bits (prefix) or the last (suffix)",
    )
    parser.add_argument("--l1-grid", type=float, nargs="+", default=[3e-4, 1e-4, 3e-5])
    parser.add_argument(
        "--patience",
        type=int,
        default=1,
        help="l1 grids stop after this many gamma1 in a row that improve no method",
    )
    parser.add_argument("--l2-grid", type=float, nargs="+", default=[1e-3, 1e-4, 1e-5])
    parser.add_argument("--n-best", type=int, default=50)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--no-l2-comb3", dest="l2_comb3", action="store_false")
    parser.add_argument("--brown-grid", type=float, nargs="+", default=[1e-2, 3e-3, 1e-3])
    parser.add_argument("--brown-genres", default="", help="Brown genre letters (default: all 15)")
    parser.add_argument(
        "--brown-balanced",
        action="store_true",
        help="Brown: weight the classes (positives by negatives / positives; SVM balanced)",
    )
    work_arguments(parser, "/tmp/sparkmaxent-combination", "combination.json")
    merge_arguments(parser)
    args = start(parser, argv)
    if args.merge:
        merge_pages(args.output, args.merge, merge_rows, targets, "combination")
        return
    lengths = [int(x) for x in args.bitstrings.split(",") if x]
    rows = page_rows(args.output)  # the other tasks' rows stay on the page
    for name in args.tasks:
        if name == "brown":
            from benchmarks.combination_brown import run_brown

            rows = merge_rows(
                rows, run_brown(args, lambda b, cfg: run(None, b, cfg), command_line())
            )
            write_result(args.output, rows, targets(rows))
            continue
        if name == "pp":
            dirs = prepare_pp(
                os.path.join(args.work, name), args.data, lengths, args.reuse, args.bit_end
            )
        else:
            dirs = prepare_conll(
                os.path.join(args.work, name),
                args.data,
                args.reuse,
                args.conll_sentences,
                args.conll_templates,
            )
        done = list(rows)
        atoms = "words" if name == "pp" else "10 unigrams"
        if name == "conll" and args.conll_templates == "chunk":
            atoms = "17 templates"
        if name == "pp" and lengths:
            atoms += f"+bit {args.bit_end}es {args.bitstrings}"

        sub: dict[str, object] = {"sentences": args.conll_sentences} if name == "conll" else {}
        written: list[dict] = []

        def save(new: list[dict], done=done, atoms=atoms, sub=sub, written=written) -> None:
            new = [{"atoms": atoms, **sub, **r} for r in new]
            written[:] = merge_rows(done, new)
            write_result(args.output, written, targets(written))

        run_task(Task(name, dirs, args.blocks), args, save)
        rows = written or done
    plot(rows, os.path.splitext(args.output)[0] + ".png")
    print_table(rows, ROW_KEYS)


if __name__ == "__main__":
    main()
