"""The held-out choice rule and cache of benchmarks/riezler_tables.py."""

from __future__ import annotations

import pytest

from benchmarks import riezler_tables
from benchmarks.riezler_tables import CHOSEN_KEYS, choose, setting_label


def test_choose_takes_the_best_score():
    scores = [({"l2": 1e-5}, 0.90), ({"l2": 3e-6}, 0.93), ({"l2": 1e-6}, 0.92)]
    assert choose(scores, CHOSEN_KEYS["l2"]) == {"l2": 3e-6}


def test_choose_breaks_ties_towards_stronger_regularization():
    scores = [({"cutoff": 2}, 0.91), ({"cutoff": 7}, 0.91), ({"cutoff": 5}, 0.90)]
    assert choose(scores, CHOSEN_KEYS["l0"]) == {"cutoff": 7}


def test_choose_l2_ifs_ties_go_to_the_larger_threshold_first():
    scores = [
        ({"grad_threshold": 1e-4, "l2": 1e-5}, 0.9),
        ({"grad_threshold": 1e-3, "l2": 1e-6}, 0.9),
        ({"grad_threshold": 1e-3, "l2": 3e-6}, 0.9),
        ({"grad_threshold": 3e-4, "l2": 1e-5}, 0.8),
    ]
    assert choose(scores, CHOSEN_KEYS["l2-ifs"]) == {"grad_threshold": 1e-3, "l2": 3e-6}


def test_choose_needs_a_setting():
    with pytest.raises(ValueError, match="at least one"):
        choose([], ("l2",))


def test_setting_label_is_sorted_and_stable():
    assert setting_label({"n_best": 10, "l1": 1e-4}) == "l1=0.0001 n_best=10"
    assert setting_label({}) == "-"


def test_heldout_cache_reuses_a_capped_fit_only_under_the_same_cap(tmp_path, monkeypatch):
    fits = []

    def fake_fit(backend, method, setting, base, dev_dir, runs_dir, resume):
        fits.append(base["max_seconds"])
        capped = setting["l1"] < 1e-4 and base["max_seconds"] > 0
        return {
            "chunk_f1": 0.9,
            "token_accuracy": 0.95,
            "nonzero_weights": 10,
            "iterations": 5,
            "passes": 7,
            "wall_s": 1.0,
            "converged": not capped,
            "stopped": "max_seconds = 240" if capped else "no candidate passes the test",
        }

    monkeypatch.setattr(riezler_tables, "fit_and_score", fake_fit)
    path = str(tmp_path / "heldout.json")

    def score(l1, cap):
        cache = riezler_tables.HeldoutCache(path, {"mode": "basenp"})  # reread from disk
        return cache.score(None, "grafting", {"l1": l1}, {"max_seconds": cap}, "", "", True)

    assert "capped_at" not in score(1e-4, 240.0)  # ended by itself
    assert score(1e-5, 240.0)["capped_at"] == 240.0  # ended by the cap
    assert len(fits) == 2
    score(1e-4, 0.0)  # uncapped entry: any cap
    score(1e-5, 240.0)  # same cap: reused
    assert len(fits) == 2
    assert "capped_at" not in score(1e-5, 0.0)  # another cap: fitted again
    assert fits == [240.0, 240.0, 0.0]
