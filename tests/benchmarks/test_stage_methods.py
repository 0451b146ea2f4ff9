"""benchmarks/stage_methods.py's targets: the automatic settings' rows
against sklearn-l2 on each corpus; rows of a ``--set`` variant are shown
on the page but are not targets."""

from __future__ import annotations

from benchmarks.stage_methods import targets


def row(corpus: str, method: str, score: float, features: int = 10, wall: float = 5.0) -> dict:
    return {"corpus": corpus, "method": method, "test_score": score, "features": features,
            "wall_s": wall}  # fmt: skip


def test_targets_read_the_automatic_settings_and_leave_variants_out():
    rows = [
        row("pp", "sklearn-l2", 83.5),
        row("pp", "bayes-factor", 82.0),
        row("pp", "bayes-factor per_round=400", 83.0, wall=500.0),  # a variant past the cap
        row("brown", "sklearn-l2", 58.0),
        row("brown", "bayes-factor", 57.5),
    ]
    out = targets(rows, 240.0)
    gap = out["bayes-factor: test score - sklearn-l2, every corpus"]
    assert gap["value"] == {"pp": -1.5, "brown": -0.5} and not gap["met"]
    assert not any("per_round" in name for name in out)
    ended = out["every run ends with a model within max_seconds 240"]
    assert set(ended["value"]) == {"pp bayes-factor", "brown bayes-factor"} and ended["met"]
    rows[1]["test_score"] = 82.6
    assert targets(rows, 240.0)["bayes-factor: test score - sklearn-l2, every corpus"]["met"]
