"""benchmarks/connect.py: the scoring rows (``--score``) and their target,
from a child's figures (no session)."""

from __future__ import annotations

from benchmarks import connect


def _figures(default_s: float, mllib_s: float) -> dict:
    return {
        "gradient_pass_s": 1.0,
        "active_pass_s": 0.5,
        "fit_s": 10.0,
        "fit_passes": 10,
        "objective": 1.5,
        "features": 50,
        "cache_s": 3.0,
        "score_default_s": default_s,
        "score_sql_s": 4.0,
        "score_mllib_s": mllib_s,
        "score_rows": 1000,
        "score_first_transform_s": 0.7,
        "load_before": 1.0,
        "load_after": 2.0,
    }


def test_score_rows_give_throughput_per_system_and_task():
    rows = connect.rows_of({"connect-frame": [_figures(2.0, 3.0), _figures(1.0, 3.0)]})
    by = {r["task"]: r for r in rows}
    default = by["transform given Vectors (default)"]
    assert default["wall_s"] == 1.5 and default["rows_per_s"] == round(1000 / 1.5, 1)
    assert default["first_transform_s"] == 0.7
    assert by["SQL transform given Vectors"]["rows_per_s"] == 250.0
    assert by["MLlib LogisticRegressionModel.transform"]["rows"] == 1000
    assert by["grafting fit"]["per_pass_s"] == 1.0  # the pass rows are unchanged


def test_the_connect_scoring_target_is_the_default_against_mllib_there():
    met = connect.score_targets(connect.rows_of({"connect-frame": [_figures(2.0, 3.0)]}))
    assert met["connect_transform_vectors"]["met"] is True
    assert met["connect_transform_vectors"]["value"] == "1.50x"
    slow = connect.score_targets(connect.rows_of({"connect-frame": [_figures(4.0, 3.0)]}))
    assert slow["connect_transform_vectors"]["met"] is False
    # classic rows alone: no Connect target
    assert connect.score_targets(connect.rows_of({"classic-rdd": [_figures(1.0, 3.0)]})) == {}


def test_score_only_rows_merge_into_a_page_keeping_the_pass_rows():
    page = connect.rows_of({"connect-frame": [_figures(2.0, 3.0)]})
    only = {k: v for k, v in _figures(1.0, 3.0).items() if k.startswith(("score", "load"))}
    rows = connect.rows_of({"connect-frame": [only]})
    assert [r["task"] for r in rows] == list(connect.SCORE_TASKS.values())
    merged = connect.merged_rows(page, rows)
    assert len(merged) == len(page)  # the score rows replaced, the pass rows kept
    by = {r["task"]: r for r in merged}
    assert by["transform given Vectors (default)"]["wall_s"] == 1.0
    assert by["grafting fit"]["per_pass_s"] == 1.0
    assert connect.page_targets(merged)["connect_transform_vectors"]["value"] == "3.00x"
