"""benchmarks/scale.py: the slope fit and the plan of runs."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.scale import plan, slopes


def row(axis, system, size, wall, status="finished"):
    return {"axis": axis, "system": system, axis: size, "wall_s": wall, "status": status}


def test_slopes_are_the_log_log_exponent_over_finished_rows():
    rows = [row("events", "grafting", n, 3.0 * n**1.5) for n in (2e5, 8e5, 3.2e6)]
    rows += [row("events", "mllib", 2e5, 10.0), row("events", "mllib", 8e5, 600.0, "capped")]
    rows += [row("candidates", "grafting", c, 50.0) for c in (2e6, 2e7)]
    out = slopes(rows)
    assert out["events"]["grafting"] == pytest.approx(1.5, abs=1e-3)
    assert out["events"]["mllib"] is None  # one finished row: no slope
    assert out["candidates"]["grafting"] == pytest.approx(0.0, abs=1e-3)
    assert out["partitions"] == {"grafting": None, "mllib": None}


def test_plan_holds_the_other_axes_at_their_base():
    args = argparse.Namespace(
        axes=["events", "partitions"],
        events=[200_000, 800_000],
        candidates=[2_000_000],
        partitions=[2, 4],
        base_events=200_000,
        base_candidates=2_000_000,
        base_partitions=2,
        partition_events=800_000,
    )
    assert plan(args) == [
        ("events", 200_000, 2_000_000, 2),
        ("events", 800_000, 2_000_000, 2),
        ("partitions", 800_000, 2_000_000, 2),
        ("partitions", 800_000, 2_000_000, 4),
    ]


def test_merge_into_replaces_rows_of_the_same_size_and_keeps_the_others(tmp_path):
    import json

    from benchmarks.scale import merged_rows

    def full(axis, system, events, wall):
        return {
            **row(axis, system, events, wall),
            "events": events,
            "candidates": 2,
            "partitions": 2,
        }

    path = tmp_path / "scale.json"
    assert merged_rows(str(path), [full("events", "grafting", 1, 5.0)]) == [
        full("events", "grafting", 1, 5.0)
    ]
    old = [full("events", "grafting", 1, 5.0), full("events", "mllib", 1, 9.0)]
    path.write_text(json.dumps({"rows": old}))
    new = [full("events", "grafting", 1, 4.0), full("events", "grafting", 4, 20.0)]
    assert merged_rows(str(path), new) == [old[1], *new]
