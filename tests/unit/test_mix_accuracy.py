"""Held-out accuracy as a second signal across l2 mixes
(``train.choice.mix_accuracy_gain``, ``choice.mixes.denser_by_accuracy``):
a denser mix the one-standard-error rule passed over is kept when its
held-out accuracy gain is beyond the tolerance plus the paired noise, and
not when accuracy is flat or the gain is within the noise."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sparkmaxent.choice.mixes import denser_by_accuracy, sparsest_within_noise
from sparkmaxent.choice.sections import PathPoint, PathVariant
from sparkmaxent.choice.stop_rule import Measure, accuracy_gain
from sparkmaxent.config import ConfigError, train_config

TOLERANCE = 0.005


def point(measure: Measure, features: int) -> PathPoint:
    """A mix's chosen point of ``features`` weights scored ``measure``."""
    held = {"heldout_score": measure.score, "heldout_se": measure.se}
    return PathPoint("l1", 0.1, features, 0.5, 3, True, None, False, None, held)


def planted(n: int, p_sparse: float, fixed: int, broken: int, shift: float, seed: int):
    """Per-event held-out log-likelihoods and hits of a sparse mix and a
    denser one over ``n`` events: the sparse mix classifies a fraction
    ``p_sparse`` right; the denser one fixes ``fixed`` of its errors and
    breaks ``broken`` of its hits; its log-likelihood is the sparse one's
    plus ``shift`` and noise (the mixes' log-likelihoods close, as on
    long documents, where one score's error is wide)."""
    rng = np.random.default_rng(seed)
    hits = (rng.random(n) < p_sparse).astype(float)
    dense = hits.copy()
    dense[rng.choice(np.flatnonzero(hits == 0), fixed, replace=False)] = 1.0
    dense[rng.choice(np.flatnonzero(hits == 1), broken, replace=False)] = 0.0
    loglik = rng.normal(-1.4, 1.2, n)
    sparse = Measure.of_units(loglik, hits=hits)
    denser = Measure.of_units(loglik + shift + rng.normal(0, 0.3, n), hits=dense)
    return sparse, denser


def choice(sparse: Measure, denser: Measure, tolerance: float = TOLERANCE):
    points = [point(sparse, 9_800), point(denser, 54_700)]
    measures = [sparse, denser]
    first, _ = sparsest_within_noise(points, measures)
    return first, denser_by_accuracy(first, points, measures, tolerance)


def test_the_paired_accuracy_gain_and_its_error_are_a_paired_t_tests():
    sparse, denser = planted(83, 0.46, 9, 3, 0.0, seed=1)
    gain, se = accuracy_gain(denser, sparse)
    assert gain == pytest.approx(6 / 83)
    t = stats.ttest_rel(denser.hits, sparse.hits).statistic
    assert gain / se == pytest.approx(t)
    # weights 0 leave an event out of both
    w = np.ones(83)
    w[:10] = 0
    a = Measure.of_units(denser.units, w, denser.hits)
    b = Measure.of_units(sparse.units, w, sparse.hits)
    assert accuracy_gain(a, b)[0] == pytest.approx(np.mean(denser.hits[10:] - sparse.hits[10:]))
    # no hits (k folds) or different events: nothing to compare
    assert accuracy_gain(Measure(0.1, 0.01), sparse) is None
    assert accuracy_gain(Measure.of_units(np.zeros(5), hits=np.zeros(5)), sparse) is None


def test_a_denser_mix_that_classifies_many_more_held_out_events_right_is_kept():
    """Long documents: 83 held-out events, a denser mix within one score's
    error on log-likelihood (the one-SE rule keeps the sparse one) that
    fixes 11 of the sparse mix's errors and breaks 2 of its hits."""
    sparse, denser = planted(83, 0.46, 11, 2, -0.05, seed=2)
    first, (kept, gains) = choice(sparse, denser)
    assert first == 0  # the log-likelihoods alone: the sparse mix
    gain, se = gains[1]
    assert gain - se > TOLERANCE
    assert kept == 1
    assert gains[0] is None  # the log-likelihood's choice itself
    # off (1): the one-SE rule's choice
    assert choice(sparse, denser, tolerance=1.0)[1][0] == 0


def test_a_flat_accuracy_keeps_the_sparse_mix_even_when_its_gain_is_beyond_the_noise():
    """Short events: 4,160 held-out events on which a denser mix fixes 19
    more than it breaks (+0.46 point, beyond the paired standard error) at a
    higher log-likelihood within one score's error: the gain is below the
    tolerance a sparse model may give up, so the sparse mix stays."""
    sparse, denser = planted(4160, 0.82, 60, 41, 0.0, seed=3)
    first, (kept, gains) = choice(sparse, denser)
    gain, se = gains[1]
    assert gain == pytest.approx(19 / 4160)
    assert gain > se  # real, but
    assert gain - se < TOLERANCE  # not worth the denser model
    assert first == 0 and kept == 0
    # with no tolerance the gain beyond its error would win
    assert choice(sparse, denser, tolerance=0.0)[1][0] == 1


def test_a_gain_within_the_paired_noise_or_a_mix_clearly_worse_on_loglik_is_not_kept():
    # a few documents more, within the noise of 83 events
    sparse, denser = planted(83, 0.46, 5, 3, 0.0, seed=4)
    gain, se = accuracy_gain(denser, sparse)
    assert 0 < gain < se + TOLERANCE
    assert choice(sparse, denser)[1][0] == 0
    # a large accuracy gain, but the log-likelihood beyond one score's error below
    sparse, denser = planted(83, 0.46, 11, 2, -0.6, seed=2)
    assert denser.score < sparse.score - sparse.se
    assert choice(sparse, denser)[1][0] == 0


def test_of_the_denser_mixes_that_gain_the_sparsest_is_kept():
    sparse, denser = planted(83, 0.46, 11, 2, -0.05, seed=2)
    densest = Measure.of_units(denser.units + 0.01, hits=np.maximum(denser.hits, sparse.hits))
    points = [point(sparse, 100), point(densest, 900), point(denser, 500)]
    measures = [sparse, densest, denser]
    assert denser_by_accuracy(0, points, measures, TOLERANCE)[0] == 2


def test_the_elastic_rows_report_the_accuracy_gain():
    row = PathVariant({"l2_mix": 0.99}, 8, point(Measure(-1.5, 0.1), 5), accuracy_gain=(0.06, 0.04))
    doc = row.to_json()
    assert doc["accuracy_gain"] == 0.06 and doc["accuracy_gain_se"] == 0.04
    plain = PathVariant({"l2_mix": 0.0}, 8, point(Measure(-1.5, 0.1), 5))
    assert "accuracy_gain" not in plain.to_json()


def test_mix_accuracy_gain_is_a_fraction():
    assert train_config(mix_accuracy_gain=1.0).choice.mix_accuracy_gain == 1.0
    with pytest.raises(ConfigError, match="mix_accuracy_gain"):
        train_config(mix_accuracy_gain=-0.1)


def test_a_path_choice_reports_each_mixs_paired_accuracy_gain_from_its_held_out_pass():
    """End to end on planted documents (every word a little more frequent
    under one of two labels): each mix's reported accuracy gain is its
    held-out accuracy minus that of the log-likelihood's choice, computed
    from the per-event hits the held-out pass kept."""
    from sparkmaxent.backends import LocalBackend
    from sparkmaxent.train import train

    from .helpers import planted_documents

    tr, he, space = planted_documents()
    keys = dict(method="grafting", path=True, points=4, refit=False, folds=1, mix_max=0.9)
    config = train_config(l2_mixes=[0.0, 0.5, 0.9], **keys)
    rows = train(LocalBackend([tr], space), config, LocalBackend([he], space)).report.path.elastic
    chosen = next(r for r in rows if r.point.chosen)
    assert chosen.accuracy_gain is None
    accuracy = chosen.point.heldout["heldout_accuracy"]
    for row in rows:
        if row is not chosen:
            gain, se = row.accuracy_gain
            assert gain == pytest.approx(row.point.heldout["heldout_accuracy"] - accuracy)
            assert 0 < se < 0.1
