"""The --merge step shared by the benchmarks whose runs go side by side
(benchmarks/common.py ``merge_arguments``, ``merge_pages``): it measures
nothing, puts the rows of other pages on --output in place of the rows of
the same measurement, keeps the page's other rows, names rows' scratch
paths by role, recomputes the targets and names the page after the
benchmark (not after common.py, which writes it)."""

from __future__ import annotations

import functools
import importlib
import json
from pathlib import Path

import pytest

from benchmarks.common import page_rows, placeless, replace_rows

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_replace_rows_keeps_other_rows_and_puts_the_new_ones_last():
    earlier = [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}, {"k": 3, "v": "c"}]
    rows = [{"k": 2, "v": "B"}, {"k": 4, "v": "D"}]
    merged = replace_rows(earlier, rows, key=lambda r: r["k"])
    assert merged == [{"k": 1, "v": "a"}, {"k": 3, "v": "c"}, *rows]
    assert replace_rows([], rows, key=lambda r: r["k"]) == rows


def test_placeless_names_work_and_output_by_role(tmp_path):
    row = {"command": "python -m benchmarks.x --work /w/x --reuse --output /w/x.json --seed 1"}
    assert placeless(row)["command"] == (
        "python -m benchmarks.x --work WORK --reuse --output PAGE --seed 1"
    )
    assert page_rows(str(tmp_path / "none.json")) == []


def stage_targets(module):
    return functools.partial(module.targets, seconds=240.0)


#: benchmark -> (what makes two rows one measurement, the page's targets)
MERGING = {
    "model_choice": (lambda m: m.row_key, lambda m: m.targets),
    "stage_methods": (lambda m: importlib.import_module("benchmarks.model_choice").row_key,
                      stage_targets),
    "combination": (lambda m: m.row_identity, lambda m: m.targets),
    "scale": (lambda m: m.row_key, lambda m: m.targets),
    "grafting_vs_mllib": (lambda m: m.row_key, lambda m: m.targets),
    "ml_api": (lambda m: m.row_key, lambda m: m.targets),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(MERGING))
def test_merge_replaces_the_measured_rows_and_keeps_the_others(name, tmp_path):
    module = importlib.import_module(f"benchmarks.{name}")
    key, targets = (f(module) for f in MERGING[name])
    rows = json.loads((RESULTS / f"{name}.json").read_text())["rows"]
    assert len({key(r) for r in rows}) == len(rows) >= 2, "one row per measurement"
    # the shared page holds a stale copy of the first two rows; two runs
    # side by side each measured one of them again
    stale = [{**r, "stale": True} for r in rows[:2]] + rows[2:]
    output = tmp_path / f"{name}.json"
    output.write_text(json.dumps({"rows": stale}))
    pages = []
    for i, row in enumerate(rows[:2]):
        page = tmp_path / f"run{i}.json"
        command = f"python -m benchmarks.{name} --work /scratch/{i} --output {page}"
        page.write_text(json.dumps({"rows": [{**row, "command": command}]}))
        pages.append(str(page))
    assert module.main(["--merge", *pages, "--output", str(output)]) in (0, None)
    written = json.loads(output.read_text())
    assert written["benchmark"] == name
    merged = {key(r): r for r in written["rows"]}
    assert len(written["rows"]) == len(rows) and set(merged) == {key(r) for r in rows}
    assert not any(r.get("stale") for r in written["rows"])
    for row in rows[:2]:
        assert merged[key(row)]["command"] == (
            f"python -m benchmarks.{name} --work WORK --output PAGE"
        )
    assert all(merged[key(r)] == r for r in rows[2:])
    assert written["targets"] == json.loads(json.dumps(targets(written["rows"])))
