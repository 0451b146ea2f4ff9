"""benchmarks/ml_api.py's auto stage bookkeeping: a corpus's targets with a
finished and with a bounded (stopped) CrossValidator, and a run of some
corpora keeping the other corpora's rows on the page."""

from __future__ import annotations

import json

from benchmarks.ml_api import auto_targets, kept_rows, targets


def _rows(cv_extra: dict) -> list[dict]:
    auto = {"system": "sparkmaxent l1='auto' (Brown)", "task": "t", "stage": "auto",
            "wall_s": 40.0, "accuracy": 0.50, "corpus": "brown"}  # fmt: skip
    cv = {"system": "sparkmaxent CrossValidator (Brown)", "task": "t", "stage": "auto",
          "wall_s": 100.0, "accuracy": 0.51, "corpus": "brown", **cv_extra}  # fmt: skip
    return [auto, cv]


def test_finished_cross_validator_gives_the_gap_and_the_time_ratio():
    out = targets(_rows({}))
    assert out["auto_accuracy_brown"]["value"] == "+1.00 points below"
    assert out["auto_accuracy_brown"]["met"] is False  # 1 point > 0.5
    assert out["auto_time_brown"] == {
        "goal": "Brown: l1='auto' wall time < the CrossValidator's",
        "value": "0.40x",
        "met": True,
    }
    assert "auto_accuracy_pp" not in out


def test_a_stopped_cross_validator_has_no_accuracy_and_a_lower_bound_time():
    auto, cv = _rows({"capped": True, "cap_s": 90.0, "fits_started": 9, "fits_total": 37})
    cv["accuracy"] = None
    out = auto_targets("brown", "Brown", auto, cv)
    acc, time = out["auto_accuracy_brown"], out["auto_time_brown"]
    assert acc["met"] is False and "not measured" in acc["value"]
    assert "90 s bound (9 of 37 fits started)" in acc["value"]
    assert time["met"] is True and time["value"].startswith("<= 0.40x")


def test_a_run_of_one_corpus_keeps_the_other_corpus_and_stages(tmp_path):
    page = tmp_path / "ml_api.json"
    old_pp = {"system": "sparkmaxent l1='auto' (PP)", "task": "t", "stage": "auto"}  # no corpus
    brown = {"system": "sparkmaxent CrossValidator (Brown)", "task": "t", "stage": "auto",
             "corpus": "brown"}  # fmt: skip
    score = {"system": "mllib transform (Vector given)", "task": "score test", "stage": "score"}
    page.write_text(json.dumps({"rows": [old_pp, brown, score]}))
    assert kept_rows(str(page), ["auto"], ["brown"]) == [old_pp, score]
    assert kept_rows(str(page), ["auto"], ["pp", "brown"]) == [score]
    assert kept_rows(str(page), ["score"], ["pp", "brown"]) == [old_pp, brown]
