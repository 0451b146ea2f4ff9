"""The held-out stop rule (choice/stop_rule.py): paired standard errors,
patience against the noise, and the best / one-SE choice."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sparkmaxent.choice.stop_rule import Measure, StopRule, choose, difference_se
from sparkmaxent.selection.stops import StopReason


def test_measure_of_units_is_the_weighted_mean_with_its_standard_error():
    m = Measure.of_units([1.0, 2.0, 3.0, 4.0])
    assert m.score == pytest.approx(2.5)
    assert m.se == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)
    # a weight of 2 is two copies of the unit; NaN units are left out
    w = Measure.of_units([1.0, 3.0, np.nan], [2.0, 1.0, 5.0])
    assert w.score == pytest.approx(5 / 3)
    assert math.isfinite(w.se)


def test_paired_difference_is_much_tighter_than_either_score():
    rng = np.random.default_rng(0)
    base = rng.normal(-0.4, 0.5, size=400)  # per-event log-likelihoods: noisy
    a = Measure.of_units(base)
    b = Measure.of_units(base - 0.01 + rng.normal(0, 0.005, size=400))  # a close model
    paired = difference_se(a, b)
    assert paired < 0.1 * math.sqrt(a.se**2 + b.se**2)
    assert paired == pytest.approx(np.std(a.units - b.units, ddof=1) / 20, rel=1e-9)
    # without units of both: the unpaired bound
    bare = Measure(b.score, b.se)
    assert difference_se(a, bare) == pytest.approx(math.sqrt(a.se**2 + b.se**2))


def test_one_noisy_worse_point_does_not_stop_a_run_of_clearly_worse_points_does():
    rng = np.random.default_rng(1)
    events = rng.normal(0, 1.0, size=300)
    rule = StopRule(patience=2, margin=1.0)
    rule.add(1.0, Measure.of_units(events - 0.5), size=2)
    rule.add(0.5, Measure.of_units(events), size=4)  # the best
    assert rule.go_on() and rule.best() == 1
    # worse by noise: independent noise of sd 1 per event, mean 0.02 lower
    noisy = Measure.of_units(events - 0.02 + rng.normal(0, 1.0, size=300))
    rule.add(0.25, noisy, size=8)
    assert rule.behind() == 1 and rule.go_on()
    # a second point, far below: patience 2 reached and beyond the margin
    rule.add(0.125, Measure.of_units(events - 0.3), size=16)
    assert not rule.go_on()
    why = rule.why()
    assert why is not None and why.reason is StopReason.HELDOUT_RULE and why.detail["behind"] == 2
    assert "2 points without a better held-out score" in why.message
    assert rule.choice() == 1


def test_patience_alone_does_not_stop_within_the_noise():
    rng = np.random.default_rng(2)
    events = rng.normal(0, 1.0, size=200)
    rule = StopRule(patience=2, margin=1.0)
    rule.add(0, Measure.of_units(events))
    for k in range(1, 6):  # five points a hair below the best, each within its noise
        noise = rng.normal(0, 0.1, size=200)
        rule.add(k, Measure.of_units(events - 1e-3 + noise - noise.mean()))
        assert rule.go_on(), k
        assert 0 < rule.gaps[-1] < 0.5
    capped = StopRule(patience=2, margin=1.0, max_behind=3)
    for k, m in enumerate([Measure(0.5, 0.1)] + [Measure(0.49, 0.1)] * 3):
        capped.add(k, m)
    assert not capped.go_on() and "max 3" in capped.why().message


def test_margin_zero_stops_at_any_worse_point_after_patience_and_ties_never_stop():
    rule = StopRule(patience=1, margin=0.0)
    for k in range(4):  # a plateau: accuracy moving in steps of 1/n
        rule.add(k, Measure(0.74, 0.02))
        assert rule.go_on()
    assert rule.best() == 0
    rule.add(4, Measure(0.7399, 0.02))
    assert not rule.go_on()
    never = StopRule(patience=0, margin=0.0)
    never.add(0, Measure(1.0, 0.0))
    never.add(1, Measure(0.0, 0.0))
    assert never.go_on()


def test_ineligible_points_count_for_the_stop_but_are_never_chosen():
    rule = StopRule(patience=2, margin=0.0)
    rule.add(0, Measure(0.9, 0.01), eligible=False)  # e.g. a cut point
    assert rule.best() is None and rule.go_on()
    rule.add(1, Measure(0.5, 0.01))
    rule.add(2, Measure(0.95, 0.01), eligible=False)
    assert rule.best() == 1 and rule.behind() == 1 and rule.go_on()
    rule.add(3, Measure(0.4, 0.01))
    assert not rule.go_on() and rule.choice() == 1


def test_one_se_choice_takes_the_sparsest_point_within_one_se_of_the_best():
    rule = StopRule(patience=0, one_se=True)
    for k, (score, se, size) in enumerate(
        [(0.70, 0.01, 1), (0.78, 0.03, 5), (0.80, 0.02, 9), (0.80, 0.02, 20), (0.79, 0.02, 40)]
    ):
        rule.add(k, Measure(score, se), size=size)
    assert rule.best() == 2
    assert rule.choice() == 1  # 0.78 >= 0.80 - 0.02, with 5 features
    assert choose(rule.scores, rule.ses, rule.sizes, False) == 2
    with pytest.raises(ValueError):
        StopRule().choice()
