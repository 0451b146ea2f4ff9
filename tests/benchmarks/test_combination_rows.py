"""benchmarks/combination.py: a run's rows replace only the old rows of
the same measurement (task, method, degree, atoms, size, weighting), and
the results page holds one row per measurement, of its latest run."""

from __future__ import annotations

import json
import os

from benchmarks.combination import merge_rows, row_identity

RESULTS = os.path.join(os.path.dirname(__file__), "../../benchmarks/results/combination.json")


def row(method, degree, atoms="10 unigrams", sentences=1000, score=0.0):
    out = {"task": "conll", "method": method, "degree": degree, "atoms": atoms}
    return {**out, "sentences": sentences, "test_score": score}


def test_a_rerun_replaces_its_own_rows_and_keeps_every_other():
    old = [
        row("l1-Comb", 2, score=0.1),
        row("l1-Comb", 2, sentences=0, score=0.2),  # full data: another measurement
        row("l1-Comb", 2, atoms="17 templates", score=0.3),
        row("l1-Comb", 3, score=0.4),
        row("l1-Orig", 1, score=0.5),
        {**row("l1-Comb", 2, score=0.6), "task": "pp", "atoms": "words"},
    ]
    new = [row("l1-Comb", 2, score=0.9)]
    merged = merge_rows(old, new)
    assert [r["test_score"] for r in merged] == [0.2, 0.3, 0.4, 0.5, 0.6, 0.9]


def test_a_rerun_replaces_the_row_whatever_tag_an_old_row_carries():
    old = [{**row("l1-Comb", 2, score=0.1), "label": "s5"}, row("l1-Comb", 3, score=0.2)]
    merged = merge_rows(old, [row("l1-Comb", 2, score=0.8)])
    assert [r["test_score"] for r in merged] == [0.2, 0.8]
    # sentences 0 and None both mean every training sentence
    assert merge_rows([row("l2", 1, sentences=None)], [row("l2", 1, sentences=0)]) == [
        row("l2", 1, sentences=0)
    ]


def test_the_results_page_has_one_row_per_measurement_and_no_session_tags():
    with open(RESULTS) as f:
        rows = json.load(f)["rows"]
    identities = [row_identity(r) for r in rows]
    assert len(identities) == len(set(identities))
    tagged = [k for r in rows for k in r if k == "label" or k.startswith("session")]
    assert tagged == []


class _Fit:
    def __init__(self, gamma, degree):
        self.weights, self.conjunctions, self.gamma, self.degree = object(), None, gamma, degree


class _Task:
    """Held-out scores by (degree, gamma1); test scores are never read for a choice."""

    name, metric = "pp", "accuracy"

    def __init__(self, dev):
        self.dev, self.test, self.train, self.dev_scores = "dev", "test", "train", dev

    def score(self, backend, result):
        if backend == "test":
            return -1.0
        return self.dev_scores[result.degree][result.gamma]


def _grid_run(monkeypatch, dev, grid, patience):
    import benchmarks.combination as comb

    fitted = []

    def run(task, backend, cfg, warm_start=None, warm_conjunctions=None):
        degree = cfg.grafting.combination_degree
        fitted.append((degree, cfg.grafting.l1, warm_start is not None))
        row = {"passes": 1, "wall_s": 1.0, "driver_peak_mb": 1.0, "rss_peak_mb": 1.0}
        row.update(active_features=1, stopped="certified")
        return _Fit(cfg.grafting.l1, degree), row

    monkeypatch.setattr(comb, "run", run)
    saved = []
    rows = comb.l1_rows(_Task(dev), [2], grid, {}, saved.append, True, patience)
    return rows, fitted


def test_the_l1_grid_goes_on_for_patience_points_without_a_gain(monkeypatch):
    grid = [1e-4, 5e-5, 3e-5, 2e-5, 1e-5, 5e-6]
    # both methods dip at 5e-5, peak at 3e-5 (degree 2) / 2e-5 (degree 1), then fall
    dev = {
        1: dict(zip(grid, [0.80, 0.79, 0.81, 0.82, 0.81, 0.80])),
        2: dict(zip(grid, [0.83, 0.82, 0.84, 0.83, 0.82, 0.81])),
    }
    rows, fitted = _grid_run(monkeypatch, dev, grid, patience=1)
    # patience 1: the dip at 5e-5 ends the grid at the first point's choice
    assert {r["degree"]: r["gamma"] for r in rows} == {1: 1e-4, 2: 1e-4}
    assert sorted({g for _, g, _ in fitted}) == [5e-5, 1e-4]
    rows, fitted = _grid_run(monkeypatch, dev, grid, patience=2)
    # patience 2: past the dip to the interior peaks; stops after 1e-5 and 5e-6 gain nothing
    assert {r["degree"]: r["gamma"] for r in rows} == {1: 2e-5, 2: 3e-5}
    assert sorted({g for _, g, _ in fitted}, reverse=True) == grid
    by_degree = {r["degree"]: r for r in rows}
    assert [p["gamma"] for p in by_degree[2]["points"]] == grid
    # every l1-Comb fit after the first is warm-started (from the previous gamma1's l1-Comb)
    assert all(warm for d, g, warm in fitted if d == 2)
