"""benchmarks/model_choice.py: scikit-learn's folds are the events of ours;
stage rows keep their held-out curve with the chosen stage; a path's point
costs are read from the log, held-out and k-fold paths, mix by mix."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from benchmarks.model_choice import PointCosts, event_folds, stage_points
from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.folds import fold_backends
from sparkmaxent.config import train_config
from sparkmaxent.kernels import MULTICLASS, Weights
from sparkmaxent.kernels.predict import EventScoresTask
from sparkmaxent.selection.base import TrainingContext
from sparkmaxent.train import train

from ..unit.helpers import random_block


def test_event_folds_hold_the_events_of_each_fold_backend():
    rng = np.random.default_rng(3)
    block, space = random_block(rng, MULTICLASS)
    group = np.sort(rng.integers(0, block.n_events // 2, block.n_events))  # units of 1-4 events
    block = dataclasses.replace(block, group=group, event_id=np.arange(block.n_events))
    ctx = TrainingContext(
        LocalBackend([block], space), train_config(method="l2", folds=3, fold_seed=7)
    )
    fold = event_folds(block, 3, 7)
    assert set(np.unique(fold)) == {0, 1, 2}
    task = EventScoresTask(space, Weights.zeros(space), None)
    for f, (part, validation) in enumerate(fold_backends(ctx)):
        assert np.array_equal(np.sort(validation.run(task).event_id), np.flatnonzero(fold == f))
        assert np.array_equal(np.sort(part.run(task).event_id), np.flatnonzero(fold != f))


def test_stage_points_spread_over_the_run_and_keep_the_chosen_stage():
    rounds = [
        {"round": i + 1, "active": i + 1, "heldout_score": -1.0 / (i + 1), "chosen": i == 36}
        for i in range(1000)
    ]
    points = stage_points(rounds, count=10)
    stages = [p["round"] for p in points]
    assert stages[0] == 1 and stages[-1] == 1000 and 37 in stages
    assert len(points) == 11 and stages == sorted(set(stages))
    assert points[stages.index(37)]["heldout_score"] == -1.0 / 37
    short = stage_points(rounds[:5], count=10)
    assert [p["round"] for p in short] == [1, 2, 3, 4, 5]
    assert stage_points([]) == []


def test_a_run_of_some_corpora_replaces_their_rows_and_keeps_the_others():
    from benchmarks.model_choice import merged_rows

    earlier = [
        {"corpus": "pp", "method": "grafting", "test_score": 83.0},
        {"corpus": "conll", "conll_sentences": 2000, "method": "grafting", "test_score": 90.0},
        {"corpus": "conll", "conll_sentences": 0, "method": "grafting", "test_score": 93.0},
        {"corpus": "brown", "method": "sklearn-l2", "test_score": 58.0},
    ]
    rows = [
        {"corpus": "conll", "conll_sentences": 2000, "method": "grafting", "test_score": 91.0},
        {"corpus": "pp", "method": "sklearn-l2", "test_score": 83.5},
    ]
    page = merged_rows(earlier, rows)
    assert [(r["corpus"], r.get("conll_sentences"), r["test_score"]) for r in page] == [
        ("pp", None, 83.0),
        ("pp", None, 83.5),
        ("conll", 0, 93.0),
        ("conll", 2000, 91.0),
        ("brown", None, 58.0),
    ]


def test_an_l1_comb_row_that_kept_the_atoms_says_so():
    from benchmarks.model_choice import atom_paths

    orig = {"corpus": "pp", "method": "l1-Orig", "test_score": 83.1, "features": 3236}
    comb = {**orig, "method": "l1-Comb", "versus_atoms": {"kept": "atoms"}}
    by = {("pp", None, r["method"]): r for r in (orig, comb)}
    text, met = atom_paths(by, "pp", None)
    assert "the atoms' path kept" in text and "not every point certified" not in text
    assert met  # the same model as l1-Orig's
    by[("pp", None, "l1-Comb")] = {**comb, "versus_atoms": {"kept": "combination"}}
    text, met = atom_paths(by, "pp", None)
    assert "not every point certified" in text and not met  # no combination facts


def test_point_costs_follow_held_out_and_k_fold_paths_mix_by_mix(caplog):
    caplog.set_level(logging.INFO, logger="sparkmaxent.choice")
    block, space = random_block(np.random.default_rng(3), MULTICLASS)
    block = dataclasses.replace(block, group=np.arange(block.n_events))
    keys = dict(method="grafting", path=True, l1_grid=[0.05, 0.02], l2_mixes=[0, 0.5])
    keys.update(mix_stop=False, patience=0, mix_max=0.5)  # the listed mixes only
    choice = logging.getLogger("sparkmaxent.choice")
    for folds in (1, 3):
        costs = PointCosts()
        choice.addHandler(costs)
        try:
            held = LocalBackend([block], space) if folds == 1 else None
            train(LocalBackend([block], space), train_config(folds=folds, **keys), held)
        finally:
            choice.removeHandler(costs)
        assert [p["mix"] for p in costs.points] == [0, 0, 1, 1]  # two points of each mix
        assert [p["l1"] for p in costs.points] == [0.05, 0.02] * 2
        assert all(p["passes"] > 0 for p in costs.points)
        if folds > 1:
            assert all(len(p["fold_scores"]) == 3 and "mean_score" in p for p in costs.points)


def test_a_long_variant_suffix_is_cut_to_a_file_name_with_a_hash_of_the_whole():
    from benchmarks.model_choice import MAX_SUFFIX, variant_suffix

    assert variant_suffix([]) == ""
    assert variant_suffix([("max_seconds", 2400)]) == "_max_seconds-2400"
    grid = [0.039101541718177105 / 2**i for i in range(9)]
    long = variant_suffix([("l2_mixes", [0.99]), ("l1_grid", grid)])
    assert len(long) == MAX_SUFFIX and long.startswith("_l2_mixes-0.99_l1_grid-0.0391")
    assert long != variant_suffix([("l2_mixes", [0.99]), ("l1_grid", grid[:-1])])
