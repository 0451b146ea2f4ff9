"""train.choice.folds = 0 (automatic): a small path chooses by k folds of
the training and held-out events together, a large one on the held-out
part; explicit settings win (docs/methods/model-choice.md)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.union import UnionBackend
from sparkmaxent.choice.folds import automatic_folds
from sparkmaxent.config import train_config
from sparkmaxent.data import synthetic
from sparkmaxent.kernels import MULTICLASS, Space
from sparkmaxent.train import train


@pytest.fixture(scope="module")
def grouped():
    """Planted data cut into training and held-out parts, one group per
    event (held-out groups numbered after the training ones)."""
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=1200,
            n_predicates=60,
            n_labels=3,
            n_support=6,
            n_copies=0,
            n_conjunctions=0,
            seed=3,
        )
    )
    tr, he = (part.block() for part in synthetic.split(data, [0.75, 0.25], seed=0))
    tr = dataclasses.replace(tr, group=np.arange(tr.n_events))
    he = dataclasses.replace(he, group=tr.n_events + np.arange(he.n_events))
    return tr, he, Space(MULTICLASS, 60, 3, bias=True)


L2 = dict(method="l2", path=True, l2_grid=[1e-2, 1e-3, 1e-4], patience=0)


def test_a_small_path_chooses_by_folds_of_training_and_held_out_events(grouped):
    tr, he, space = grouped
    n = tr.n_events + he.n_events
    res = train(LocalBackend([tr], space), train_config(**L2), LocalBackend([he], space))
    folds = res.report["folds"]
    assert folds["automatic"] and folds["events"] == n and folds["k"] == 5
    assert "path" not in res.report and "heldout_accuracy" not in res.report
    # the same choice as explicit folds over both parts joined
    both = UnionBackend(LocalBackend([tr], space), LocalBackend([he], space))
    given = train(both, train_config(folds=5, **L2)).report["folds"]
    np.testing.assert_allclose(given["fold_scores"], folds["fold_scores"], rtol=1e-9)
    assert res.report["l2"] == L2["l2_grid"][given["chosen"]]


def test_without_held_out_data_a_small_path_still_chooses(grouped):
    tr, _, space = grouped
    res = train(LocalBackend([tr], space), train_config(auto_folds=3, **L2))
    assert res.report["folds"]["k"] == 3 and res.report["folds"]["events"] == tr.n_events


@pytest.mark.parametrize(
    "keys,k",
    [
        ({}, 5),  # small: folds
        ({"kfold_max_events": 100}, 0),  # above the threshold: held-out
        ({"kfold_max_events": 0}, 0),  # never
        ({"folds": 1}, 0),  # explicit held-out wins
        ({"folds": 3}, 0),  # explicit folds: not automatic (train runs them as given)
        ({"method": "grafting"}, 0),  # grafting: its own threshold, off by default
        ({"method": "grafting", "kfold_max_events_grafting": 2000}, 5),  # with its l2 mixes
        ({"method": "grafting", "kfold_max_events_grafting": 100}, 0),  # above it
        ({"method": "grafting", "kfold_max_events_grafting": 2000, "l2_mixes": [0]}, 5),
        ({"method": "grafting", "kfold_max_events_grafting": 2000, "kfold_max_events": 0}, 5),
        # combination features: against the atoms' path on the held-out part
        ({"method": "grafting", "kfold_max_events_grafting": 2000, "combination_degree": 2}, 0),
        ({"kfold_max_events_grafting": 2000, "kfold_max_events": 0}, 0),  # l2: its own
        ({"method": "sgc", "path": False}, 0),  # stage methods keep their held-out stage
        ({"path": False}, 0),  # nothing to choose
    ],
)
def test_the_automatic_rule(grouped, keys, k):
    tr, he, space = grouped
    config = train_config(**{**L2, **keys})
    got, _ = automatic_folds(LocalBackend([tr], space), LocalBackend([he], space), config)
    assert got == k


def test_explicit_held_out_choice_and_ungrouped_data_keep_the_held_out_path(grouped):
    tr, he, space = grouped
    held = train(LocalBackend([tr], space), train_config(folds=1, **L2), LocalBackend([he], space))
    assert "path" in held.report and "folds" not in held.report
    ungrouped = dataclasses.replace(tr, group=None)
    config = train_config(**L2)
    assert automatic_folds(LocalBackend([ungrouped], space), None, config)[0] == 0
