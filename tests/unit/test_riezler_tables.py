"""The held-out choice rule of benchmarks/riezler_tables.py."""
from __future__ import annotations

import pytest

from benchmarks.riezler_tables import CHOSEN_KEYS, choose, setting_label


def test_choose_takes_the_best_score():
    scores = [({"l2": 1e-5}, 0.90), ({"l2": 3e-6}, 0.93), ({"l2": 1e-6}, 0.92)]
    assert choose(scores, CHOSEN_KEYS["l2"]) == {"l2": 3e-6}


def test_choose_breaks_ties_towards_stronger_regularization():
    scores = [({"cutoff": 2}, 0.91), ({"cutoff": 7}, 0.91), ({"cutoff": 5}, 0.90)]
    assert choose(scores, CHOSEN_KEYS["l0"]) == {"cutoff": 7}


def test_choose_l2_ifs_ties_go_to_the_larger_threshold_first():
    scores = [({"grad_threshold": 1e-4, "l2": 1e-5}, 0.9),
              ({"grad_threshold": 1e-3, "l2": 1e-6}, 0.9),
              ({"grad_threshold": 1e-3, "l2": 3e-6}, 0.9),
              ({"grad_threshold": 3e-4, "l2": 1e-5}, 0.8)]
    assert choose(scores, CHOSEN_KEYS["l2-ifs"]) == {"grad_threshold": 1e-3, "l2": 3e-6}


def test_choose_needs_a_setting():
    with pytest.raises(ValueError, match="at least one"):
        choose([], ("l2",))


def test_setting_label_is_sorted_and_stable():
    assert setting_label({"n_best": 10, "l1": 1e-4}) == "l1=0.0001 n_best=10"
    assert setting_label({}) == "-"
