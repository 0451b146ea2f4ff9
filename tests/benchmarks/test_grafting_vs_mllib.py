"""benchmarks/grafting_vs_mllib.py: MLlib's fit stopped from outside at a
time cap (``capped``), the targets when MLlib's row was cancelled there or
grafting ended uncertified, and ``--merge`` keeping the run each row of the
page came from."""

from __future__ import annotations

import json
import time

from benchmarks import grafting_vs_mllib as gvm


def slow_jobs(spark, seconds: float, done: list) -> str:
    """Spark jobs one after another for about ``seconds`` (each ~0.2 s)."""
    sc = spark.sparkContext
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sc.parallelize([0], 1).map(lambda x: time.sleep(0.2) or x).collect()
        done.append(1)
    return "finished"


def test_capped_cancels_jobs_past_the_cap_and_leaves_a_quick_call_alone(spark):
    done: list = []
    t0 = time.perf_counter()
    assert gvm.capped(spark, lambda: slow_jobs(spark, 120.0, done), 1.0) == (None, True)
    assert time.perf_counter() - t0 < 60  # cancelled, not run to its 120 s
    assert gvm.capped(spark, lambda: "quick", 30.0) == ("quick", False)
    assert gvm.capped(spark, lambda: slow_jobs(spark, 0.0, []), 0) == ("finished", False)
    # the cap's tag is gone: a later job runs to its end
    assert spark.sparkContext.parallelize(range(4), 2).count() == 4


def mllib_row(gamma, wall, objective=0.2, **extra):
    return {"system": "mllib", "gamma": gamma, "n": None, "objective": objective,
            "passes": 700, "wall_s": wall, **extra}  # fmt: skip


def grafting_row(gamma, wall, trace, certified=True):
    stop = gvm.CERTIFIED if certified else "max_seconds"
    return {"system": "sparkmaxent grafting", "gamma": gamma, "n": 1000, "solver": "auto",
            "objective": trace[-1]["objective"], "passes": trace[-1]["passes"], "wall_s": wall,
            "kkt_passed": certified, "stop_reason": stop, "trace": trace}  # fmt: skip


def point(objective, passes, elapsed):
    return {"round": passes, "active": 10, "objective": objective, "passes": passes,
            "elapsed_s": elapsed}  # fmt: skip


def test_a_capped_mllib_row_bounds_the_certified_ratio_and_has_no_objective_to_reach():
    capped = mllib_row(1e-6, 3610.0, objective=None, stopped="time cap", max_seconds=3600.0)
    quick = grafting_row(1e-6, 700.0, [point(0.3, 5, 100.0), point(0.1, 40, 700.0)])
    t = gvm.targets([capped, quick])
    assert not t["wall_1e-06"]["met"] and "cap" in t["wall_1e-06"]["value"]
    assert not t["passes_1e-06"]["met"]
    # MLlib's time is at least its cap: 700 / 3610 <= 1/5 is met whatever it would have taken
    assert t["certified_1e-06"]["met"]
    assert t["certified_1e-06"]["value"].startswith("0.194 (700.0 s against MLlib cancelled")
    slow = grafting_row(1e-6, 1500.0, [point(0.3, 5, 100.0), point(0.1, 40, 1500.0)])
    t = gvm.targets([capped, {**slow, "kkt_passed": False, "stop_reason": "max_seconds"}])
    assert not t["certified_1e-06"]["met"]
    assert "not before 0.416 (1500.0 s against MLlib cancelled" in t["certified_1e-06"]["value"]


def test_targets_of_a_finished_mllib_row_measure_the_first_round_at_its_objective():
    mllib = mllib_row(1e-6, 1000.0, objective=0.2, stopped="tol")
    ours = grafting_row(1e-6, 250.0, [point(0.3, 5, 50.0), point(0.2000005, 20, 90.0),
                                      point(0.19, 60, 250.0)])  # fmt: skip
    t = gvm.targets([mllib, ours])
    assert t["wall_1e-06"]["met"] and t["wall_1e-06"]["value"].startswith("0.090 (90.0 s")
    assert t["passes_1e-06"]["met"]  # 20 of 700
    assert not t["certified_1e-06"]["met"]  # 250 / 1000 > 1/5
    assert "certified_0.0001" not in gvm.targets([{**mllib, "gamma": 1e-4}])


def page(path, command, commit, rows):
    path.write_text(json.dumps({"command": command, "commit": commit, "date": "d",
                                "load": [1.0, 1.0, 1.0], "rows": rows}))  # fmt: skip
    return str(path)


def test_merge_adds_a_gamma_keeps_each_rows_run_and_recomputes_the_targets(tmp_path):
    earlier = [mllib_row(1e-5, 800.0, objective=0.17),
               grafting_row(1e-5, 290.0, [point(0.18, 30, 100.0), point(0.169, 69, 290.0)]),
               mllib_row(1e-4, 100.0, objective=0.3)]  # fmt: skip
    output = page(tmp_path / "page.json", "python -m benchmarks.grafting_vs_mllib --output "
                  "benchmarks/results/grafting_vs_mllib.json", "aaaa111", earlier)  # fmt: skip
    new = [mllib_row(1e-6, 3605.0, objective=None, stopped="time cap"),
           grafting_row(1e-6, 600.0, [point(0.1, 50, 600.0)]),
           mllib_row(1e-4, 90.0, objective=0.3)]  # fmt: skip
    run = page(tmp_path / "run.json", f"python -m benchmarks.grafting_vs_mllib --work /w/gvm "
               f"--output {tmp_path}/run.json", "bbbb222", new)  # fmt: skip
    assert gvm.main(["--merge", run, "--output", output]) == 0
    written = json.loads((tmp_path / "page.json").read_text())
    assert written["benchmark"] == "grafting_vs_mllib"
    keys = [gvm.row_key(r) for r in written["rows"]]
    assert keys == [gvm.row_key(r) for r in earlier[:2] + new]  # 1e-4's MLlib row replaced
    by_key = dict(zip(keys, written["rows"]))
    assert by_key[gvm.row_key(earlier[0])]["commit"] == "aaaa111"
    assert by_key[gvm.row_key(new[2])]["wall_s"] == 90.0
    assert by_key[gvm.row_key(new[0])]["commit"] == "bbbb222"
    assert by_key[gvm.row_key(new[0])]["command"] == (
        "python -m benchmarks.grafting_vs_mllib --work WORK --output PAGE"
    )
    assert written["targets"] == json.loads(json.dumps(gvm.targets(written["rows"])))
    assert {"certified_1e-05", "certified_1e-06", "wall_0.0001"} <= set(written["targets"])
    assert written["targets"]["certified_1e-06"]["met"]  # 600 s against at least 3605 s
