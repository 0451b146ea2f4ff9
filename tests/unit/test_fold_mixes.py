"""k-fold choice of a grafting path with its l2 mixes (choice/folds.py,
choice/mixes.py): every mix's fold path against cold fits on really split
folds, the choice among mixes by the one-standard-error rule over the
folds' mean, and the refit on all the data."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.stop_rule import choose
from sparkmaxent.config import train_config
from sparkmaxent.data import synthetic
from sparkmaxent.kernels import MULTICLASS, Space
from sparkmaxent.train import train

from .helpers import brute_force_folds

GRID, MIXES, K, SEED = [2e-2, 8e-3, 3e-3], [0.0, 0.5, 0.9], 3, 4


@pytest.fixture(scope="module")
def block():
    """Planted multiclass events, one group each: few events for many
    predicates, where the l2 part of a mix matters."""
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=600,
            n_predicates=200,
            n_labels=3,
            active_per_event=20,
            n_support=30,
            n_copies=2,
            n_conjunctions=0,
            min_support_count=10,
            seed=21,
        )
    )
    b = data.block()
    return dataclasses.replace(b, group=np.arange(b.n_events)), Space(MULTICLASS, 200, 3, bias=True)


def test_fold_mixes_match_cold_fits_and_choose_the_sparsest_mix_within_the_noise(block):
    data, space = block
    keys = dict(method="grafting", path=True, l1_grid=GRID, l2_mixes=MIXES, gtol=1e-9)
    keys.update(patience=0, mix_stop=False, folds=K, fold_seed=SEED)
    res = train(LocalBackend([data], space), train_config(**keys))
    folds = res.report["folds"]
    rows = folds["elastic"]
    assert [r["l2_mix"] for r in rows] == MIXES and folds["elastic_not_run"] == []
    chosen_rows, tables = [], {}
    for row, mix in zip(rows, MIXES, strict=True):
        tables[mix] = brute_force_folds(data, space, GRID, K, SEED, mix)
        mean = tables[mix].mean(axis=0)
        se = tables[mix].std(axis=0, ddof=1) / np.sqrt(K)
        j = int(np.argmax(mean))
        # each mix's fold path: the cold fits' scores, its best mean chosen
        assert row["l1"] == GRID[j] and row["points"] == len(GRID)
        assert row["heldout_score"] == pytest.approx(mean[j], rel=1e-4)
        assert row["heldout_se"] == pytest.approx(se[j], rel=1e-4)
        chosen_rows.append((mean[j], se[j], row["features"]))
    scores, ses, sizes = (list(c) for c in zip(*chosen_rows, strict=True))
    i = choose(scores, ses, sizes, one_se=True)  # the sparsest within one SE of the best
    assert [r["chosen"] for r in rows] == [j == i for j in range(len(MIXES))]
    mix = MIXES[i]
    assert folds.get("l2_mix") == mix
    np.testing.assert_allclose(folds["fold_scores"], tables[mix], rtol=1e-4)
    # refitted on all the events at the chosen gamma1 and mix, to the cold fit's optimum
    gamma = folds["grid"][folds["chosen"]]
    full = train(
        LocalBackend([data], space),
        train_config(method="grafting", l1=gamma, elastic_l2=gamma * mix / (1 - mix), gtol=1e-9),
    )
    assert res.report["l1"] == gamma
    assert res.report.objective == pytest.approx(full.report.objective, rel=1e-7)


def test_fold_mixes_stop_at_the_first_mix_that_does_not_gain(block):
    data, space = block
    keys = dict(method="grafting", path=True, l1_grid=GRID, l2_mixes=MIXES, gtol=1e-9)
    keys.update(patience=0, folds=K, fold_seed=SEED)
    folds = train(LocalBackend([data], space), train_config(**keys)).report["folds"]
    rows = folds["elastic"]
    run = [r["l2_mix"] for r in rows]
    assert run + [w["l2_mix"] for w in folds["elastic_not_run"]] == MIXES
    # here the 0.5 mix's best mean fold score is below pure l1's: no denser mix is tried
    assert run == [0.0, 0.5] and rows[1]["heldout_score"] < rows[0]["heldout_score"]
    assert rows[0]["chosen"] and folds["l2_mix"] == 0.0
