"""train.choice.folds = 0 (automatic): a small path chooses by k folds of
the training and held-out events together, a large one on the held-out
part; explicit settings win (docs/methods/model-choice.md)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.backends.union import InProcessUnion, UnionBackend, union_of
from sparkmaxent.choice.folds import automatic_choice, automatic_folds, fold_of_groups
from sparkmaxent.config import train_config
from sparkmaxent.data import synthetic
from sparkmaxent.kernels import MULTICLASS, Space
from sparkmaxent.kernels.blocks import split_block
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
    # the same choice as explicit folds over both parts joined (held-out events
    # shared out among the training blocks: union_of), and the same optimum, to
    # the solver's tolerance, as over the two parts kept apart
    both = union_of(LocalBackend([tr], space), LocalBackend([he], space))
    given = train(both, train_config(folds=5, **L2)).report["folds"]
    np.testing.assert_allclose(given["fold_scores"], folds["fold_scores"], rtol=1e-9)
    assert res.report["l2"] == L2["l2_grid"][given["chosen"]]
    apart = UnionBackend(LocalBackend([tr], space), LocalBackend([he], space))
    kept_apart = train(apart, train_config(folds=5, **L2)).report["folds"]
    np.testing.assert_allclose(kept_apart["fold_scores"], folds["fold_scores"], rtol=1e-5)
    assert kept_apart["chosen"] == given["chosen"]


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


def test_automatic_folds_share_the_held_out_events_among_the_training_blocks(grouped):
    """In process the joined backend is one backend whose every block holds a
    share of the held-out events, each event keeping its group (the folds are
    groups), as a refit's union: a held-out block of its own spoiled the
    Hessian-free round solver's combined Newton step (a fold path stalled)."""
    tr, he, space = grouped
    parts = LocalBackend(split_block(tr, 2), space), LocalBackend([he], space)
    config = train_config(method="grafting", path=True, kfold_max_events_grafting=2000)
    backend, heldout, config, auto = automatic_choice(*parts, config)
    assert heldout is None and config.choice.folds == 5 and auto["automatic"]
    assert isinstance(backend, InProcessUnion) and len(backend.blocks) == 2
    assert all(b.n_events > t.n_events for b, t in zip(backend.blocks, parts[0].blocks))
    groups = np.concatenate([b.group for b in backend.blocks])
    np.testing.assert_array_equal(np.sort(groups), np.arange(tr.n_events + he.n_events))
    _, fold = fold_of_groups(groups, np.concatenate([b.y for b in backend.blocks]), 5, 0)
    assert np.bincount(fold).min() >= (tr.n_events + he.n_events) // 5 - 3


def test_split_block_keeps_event_ids_and_groups(grouped):
    tr, _, _ = grouped
    tr = dataclasses.replace(tr, event_id=100 + np.arange(tr.n_events))
    parts = split_block(tr, 3)
    np.testing.assert_array_equal(np.concatenate([p.group for p in parts]), tr.group)
    np.testing.assert_array_equal(np.concatenate([p.event_id for p in parts]), tr.event_id)
    assert split_block(dataclasses.replace(tr, group=None), 2)[0].group is None
