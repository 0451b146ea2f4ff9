"""The round_cost page (``benchmarks/results/round_cost.json``) from rows of
runs of ``benchmarks/round_cost.py``: the rows merged (each keeping the
command and commit that measured it, a row measured again kept once), the
log-log slopes of a round's cost in its active weights, and the targets.

A slope is taken over rows solved to one tolerance only: a round solved
to a looser tolerance needs fewer iterations, so rows of mixed tolerances
would give a slope of the tolerances as much as of the active set. A round
its time budget ended (``--max-seconds``) is listed with what it reached,
in no slope.
"""

from __future__ import annotations

import json

import numpy as np

from benchmarks.common import print_table, replace_rows, target, write_result

#: the slope the issue asks for (round cost in active weights, 1k to 64k)
SLOPE_GOAL = 1.2
#: the slopes are taken over the rows of at least this many active weights
SLOPE_FROM = 1000
#: ... and the target is met only over a range reaching this many, on every backend
SLOPE_TO = 64000
BACKENDS = ("local", "spark")
PROBE = "product-pass"  # the solver of ``product_probe``'s rows
#: a product pass served its operator from the cache: at most this share of an afresh one
PROBE_GOAL = 0.5

#: newton-cg with its step uncorrected by secant pairs (``solvers/secant.py``)
PLAIN = "newton-cg-plain"
#: newton-cg with the fixed forcing term of before (``SolverOptions.forcing_max``
#: = ``inner_ratio``: every direction pass to a tenth of the violation)
FIXED = "newton-cg-fixed"
#: newton-cg whose late iterations run CG across passes (``SolverOptions.global_cg``)
GLOBAL = "newton-cg-global"
#: newton-cg whose partitions' CG runs on through the box before its step is
#: projected (``SolverOptions.cg_through``; ``kernels.direction.box_qp_pcg``)
THROUGH = "newton-cg-through"
#: newton-cg whose partitions solve their model face by face as TRON does
#: (``SolverOptions.cg_face``; ``kernels.box_face.box_qp_face``)
FACE = "newton-cg-face"
#: newton-cg whose partitions' CG stops at the first bound its step crosses
#: (``SolverOptions.cg_face`` False; newton-cg's default before the automatic
#: choice by the round's size, ``SolverOptions.face_from``)
STOP = "newton-cg-stop"
#: newton-cg whose secant pairs are kept across faces (``SolverOptions.secant_across``)
ACROSS = "newton-cg-across"
#: newton-cg with a setting of its own
VARIANTS = (PLAIN, FIXED, GLOBAL, THROUGH, FACE, STOP, ACROSS)
#: the solvers a round is solved by (``measure``)
SOLVERS = ("newton", "newton-cg", *VARIANTS)


def slope(rows: list[dict], key: str) -> float | None:
    """Least-squares slope of log ``key`` against log active weights over
    the rows of at least ``SLOPE_FROM`` weights."""
    rows = [r for r in rows if r["active"] >= SLOPE_FROM and r.get(key) is not None]
    if len(rows) < 2:
        return None
    x = np.log([r["active"] for r in rows])
    y = np.log([max(r[key], 1e-9) for r in rows])
    return round(float(np.polyfit(x, y, 1)[0]), 3)


def rows_from(paths: list[str]) -> list[dict]:
    """The rows of earlier results, each naming the command and commit that
    measured it; ``PATH:SOLVER`` keeps only that solver's rows of a page (the
    others' code changed since). A row measured again (the same backend,
    solver, active weights and tolerance) is kept once, the later path's
    (``replace_rows``), so merging a page with a run that re-measured some
    of its rows (or with itself) counts each once."""
    kept: list[dict] = []
    for spec in paths:
        path, sep, solver = spec.rpartition(":")
        if not sep or solver not in SOLVERS:
            path, solver = spec, ""
        with open(path) as f:
            page = json.load(f)
        rows = [r for r in page["rows"] if not solver or r["solver"] == solver]
        for row in rows:
            row.setdefault("measured_by", page["command"])
            row.setdefault("measured_commit", page["commit"])
            row.setdefault("backend", "local")  # pages before the Spark rows: in-process only
        kept = replace_rows(kept, rows, _row_key)
    return kept


def _row_key(row: dict) -> tuple:
    """What a row measured: the backend, solver, active weights and tolerance."""
    return row["backend"], row["solver"], row["active"], row.get("tol")


def report(output: str, rows: list[dict]) -> None:
    """The slopes as targets, the table, and the result page of ``rows``."""
    print_table(
        rows,
        ["backend", "solver", "active", "wall_s", "cpu_s", "passes", "hessian_products"]
        + ["bytes_per_pass_mean", "direction_bytes_per_pass", "objective", "converged", "tol"]
        + ["load"],
    )
    slopes, reach, notes = {}, {}, []
    for backend in BACKENDS:
        of = [r for r in rows if _of(r, backend)]
        value, reach[backend], more = _backend_slope(backend, of)
        notes += more
        if value is not None:
            slopes[backend] = value
    sizes = sorted({r["active"] for r in rows if r["solver"] == "newton-cg"})
    targets = {
        "round_cpu_slope": target(
            f"log-log slope of a newton-cg round's CPU seconds (the process's CPU time; Spark: "
            f"driver plus Python workers) in active weights, rounds solved to one tolerance, "
            f"each backend, {SLOPE_FROM} to {SLOPE_TO}: <= {SLOPE_GOAL}",
            "; ".join(
                notes if slopes else [f"no slope: newton-cg rows at {sizes} weights only", *notes]
            ),
            set(slopes) == set(BACKENDS)
            and all(v <= SLOPE_GOAL for v in slopes.values())
            and all(reach[b] >= SLOPE_TO for b in BACKENDS),
        ),
        **_probe_target(rows),
    }
    print({k: v["value"] for k, v in targets.items()})
    write_result(output, rows, targets, benchmark="round_cost")


def _backend_slope(backend: str, of: list[dict]) -> tuple[float | None, int, list[str]]:
    """A backend's newton-cg slope for the target, the largest size it
    spans, and the notes: the variants' rows, then newton-cg's slope over
    the rows of each tolerance (the target's first: the tolerance whose
    rows reach the largest size, then the most rows); rows of a tolerance
    no other row shares are listed, with no slope."""
    notes = []
    for solver in VARIANTS:
        rs = [r for r in of if r["solver"] == solver and r["active"] >= SLOPE_FROM]
        if rs:
            notes.append(f"{backend} {solver} {_listed(rs)}, slope {slope(rs, 'cpu_s')}")
    by_tol: dict = {}
    for r in of:
        if r["solver"] != "newton-cg" or r["active"] < SLOPE_FROM:
            continue
        if r.get("converged", True):
            by_tol.setdefault(r.get("tol"), []).append(r)
        else:  # a round ended by its time budget: what it reached, in no slope
            notes.append(
                f"{backend} newton-cg at {r['active']} not converged (no slope): violation "
                f"{r['violation']:.3g} against {r.get('tol')} after {r['cpu_s']} CPU s, "
                f"{r['wall_s']} s wall, {r.get('iterations')} iterations, {r['passes']} passes, "
                f"{r.get('hessian_products')} products"
            )
    groups = sorted(
        by_tol.values(),
        key=lambda g: (len(g) >= 2, max(r["active"] for r in g), len(g)),
        reverse=True,
    )
    exact = [r for r in of if r["solver"] == "newton"]
    big = sorted({r["active"] for r in exact if r["active"] >= SLOPE_FROM})
    for cg in groups:
        solved = (
            f"solved to {cg[0].get('tol')} ({sorted({r.get('tol_mode', 'round') for r in cg})})"
        )
        if len(cg) < 2:
            notes.append(f"{backend} newton-cg {_listed(cg)}, {solved}: no slope at that tolerance")
            continue
        per_pass = [{**r, "cpu_per_pass": r["cpu_s"] / r["passes"]} for r in cg]
        notes.append(
            f"{backend} {slope(cg, 'cpu_s')} over {min(r['active'] for r in cg)} to "
            f"{max(r['active'] for r in cg)} (wall {slope(cg, 'wall_s')}, CPU per pass "
            f"{slope(per_pass, 'cpu_per_pass')}, direction-pass bytes "
            f"{slope(cg, 'direction_bytes_per_pass')}; exact Newton in the same run "
            f"{slope(exact, 'cpu_s')} over {big}; rounds {solved})"
        )
    if not groups or len(groups[0]) < 2:
        return None, 0, notes
    return slope(groups[0], "cpu_s"), max(r["active"] for r in groups[0]), notes


def _listed(rs: list[dict]) -> str:
    """The rows' sizes, CPU seconds, passes and products, by size (a page
    merged from several runs holds them in the order they were measured)."""
    rs = sorted(rs, key=lambda r: (r["active"], str(r.get("tol"))))
    return (
        f"at {[r['active'] for r in rs]}: CPU s {[r['cpu_s'] for r in rs]}, passes "
        f"{[r['passes'] for r in rs]}, products {[r.get('hessian_products') for r in rs]}"
    )


def _of(row: dict, backend: str) -> bool:
    return row.get("backend", "local") == backend


def _probe_target(rows: list[dict]) -> dict:
    """The product-pass probe's target, when the page has its rows: the
    mean CPU of every pass after the first at a point (served from the
    cache, or with a block's operator rebuilt on another Python worker:
    what a round pays) as a share of the afresh pass's, each backend and
    size; the served passes' own share is said beside it."""
    probes = [r for r in rows if r["solver"] == PROBE]
    if not probes:
        return {}
    value = "; ".join(_probe_value(r) for r in probes)
    return {
        "product_pass_cpu": target(
            f"CPU of a Hessian-vector product pass (CG across passes) at a point after the first "
            f"(every following pass, its operator served from the cache or rebuilt) against one "
            f"computing it afresh, each backend: share <= {PROBE_GOAL}, the same bits",
            value,
            {r["backend"] for r in probes} == set(BACKENDS)
            and all(_within_goal(r) for r in probes),
        )
    }


def _follow_share(r: dict) -> float | None:
    """Every following pass's mean CPU over the afresh pass's (a row without
    the count of rebuilt passes timed every following pass as cached)."""
    if "cpu_per_pass_follow_s" not in r:
        return r["cached_share"]
    return round(r["cpu_per_pass_follow_s"] / r["cpu_per_pass_afresh_s"], 3)


def _within_goal(r: dict) -> bool:
    share = _follow_share(r)
    return share is not None and share <= PROBE_GOAL and r["same_bits"]


def _probe_value(r: dict) -> str:
    """One probe row in the target's value."""
    follow = r.get("probe_follow", 1)
    head = f"{r['backend']} at {r['active']}: "
    if "probe_follow_rebuilt" not in r:
        return head + (
            f"{r['cpu_per_pass_cached_s']} s cached against {r['cpu_per_pass_afresh_s']} s "
            f"afresh, share {r['cached_share']} over {r['probe_passes']} points ({follow} cached "
            f"passes each, every following pass counted), same bits {r['same_bits']}"
        )
    return head + (
        f"{r['cpu_per_pass_follow_s']} s a following pass against {r['cpu_per_pass_afresh_s']} s "
        f"afresh, share {_follow_share(r)} over {r['probe_passes']} points ({follow} following "
        f"passes each), same bits {r['same_bits']}; {r['probe_follow_rebuilt']} of "
        f"{r['probe_passes'] * follow} had a block's operator rebuilt on another worker (the "
        f"served ones alone {r['cpu_per_pass_cached_s']} s, share {r['cached_share']})"
        + (
            f"; {r['probe_follow_shared']} served a block's operator from the store the "
            f"executor's workers share"
            if "probe_follow_shared" in r
            else ""
        )
        + (
            f" ({r['cpu_per_pass_shared_s']} s a pass)"
            if r.get("cpu_per_pass_shared_s") is not None
            else ""
        )
    )
