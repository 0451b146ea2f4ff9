"""The l2 mixes of a grafting path go on toward l2 (``train.choice.mix_max``)
while the densest mix still gains beyond its standard error, and stop by
the same rule that stops the listed mixes (``denser_mix_gains``)."""

from __future__ import annotations

import dataclasses
import logging
import math

import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.sections import PathVariant
from sparkmaxent.config import ConfigError, train_config
from sparkmaxent.train import train

from .helpers import PassClock, planted_documents


@pytest.fixture(scope="module")
def documents():
    """Planted documents where l2 wins, 120 training and 120 held-out."""
    return planted_documents()


def mixes(documents, **keys) -> list[PathVariant]:
    """The ``path.elastic`` rows of a grafting path from l2 mixes [0, 0.5]."""
    tr, he, space = documents
    config = train_config(
        method="grafting", path=True, points=4, refit=False, folds=1, l2_mixes=[0.0, 0.5], **keys
    )
    res = train(LocalBackend([tr], space), config, LocalBackend([he], space))
    assert res.report.path.elastic_not_run == []
    return res.report.path.elastic


def mix(row: PathVariant) -> float:
    return row.what["l2_mix"]


def gains(rows: list[PathVariant], i: int) -> bool:
    """Whether mix ``i`` beat every sparser mix by more than its standard error."""
    best = max(r.point.score for r in rows[:i])
    return rows[i].point.score - best > rows[i].point.se


def test_the_mixes_extend_toward_l2_while_the_densest_gains_and_stop_when_it_does_not(
    documents,
):
    rows = mixes(documents, mix_max=0.9999)
    assert [mix(r) for r in rows] == pytest.approx([0.0, 0.5, 0.95, 0.995])
    assert gains(rows, 1) and gains(rows, 2)  # each extension followed a gain
    assert not gains(rows, 3)  # 0.9995 is below the cap: the rule stopped it
    # the sparsest mix within one standard error of the best: a mix past the list
    best = max((r.point for r in rows), key=lambda p: p.score)
    chosen = next(r for r in rows if r.point.chosen)
    assert mix(chosen) == pytest.approx(0.95)
    assert chosen.point.score >= best.score - best.se
    # the cap ends the extension (the same paths up to it); below the list's densest: none
    capped = mixes(documents, mix_max=0.95)
    assert [mix(r) for r in capped] == pytest.approx([0.0, 0.5, 0.95])
    for row, full in zip(capped, rows, strict=False):
        assert (row.point.gamma, row.point.features) == (full.point.gamma, full.point.features)
    assert [mix(r) for r in mixes(documents, mix_max=0.0)] == [0.0, 0.5]
    # the default cap (0.999) lets the mixes reach 0.995 here, as the data want
    assert [mix(r) for r in mixes(documents)] == pytest.approx([0.0, 0.5, 0.95, 0.995])


#: the most passes one Hessian-free iteration takes (direction, trial points, ray)
ITERATION_PASSES = 3


def test_a_mix_past_the_list_runs_on_a_pass_budget_and_ends_with_its_best_point(documents):
    """Near l2 a mix's path holds many more weights (on Brown genres the 0.99
    mix's ran for over an hour): a mix past ``l2_mixes`` gets ``cut_passes``
    times the passes of every path before it, and ends with its best point
    when they are spent."""
    rows = mixes(documents, mix_max=0.9999, cut_passes=0.3)
    assert [r.passes_cap for r in rows[:2]] == [None, None]  # the listed mixes: no cap
    assert len(rows) > 2
    for i, row in enumerate(rows[2:], start=2):
        assert row.passes_cap == math.ceil(0.3 * sum(r.path_passes for r in rows[:i]))
        # the budget stops a round's solver between iterations: at most one
        # iteration's passes (direction, trial points, ray) past it
        assert row.path_passes <= row.passes_cap + ITERATION_PASSES
        assert row.point.cut is False  # its chosen point is a finished one
    assert rows[2].path_passes >= rows[2].passes_cap  # the budget ended this path
    # without a cut (cut_passes = 0) no path is capped
    assert all(r.passes_cap is None for r in mixes(documents, mix_max=0.96, cut_passes=0))


def test_mix_max_is_a_mix():
    with pytest.raises(ConfigError, match="mix_max"):
        train_config(mix_max=1.0)


class MixEnds(logging.Handler):
    """The run's clock when each mix's path ends (its 'chose' line)."""

    def __init__(self, clock):
        super().__init__(logging.INFO)
        self.clock, self.ends = clock, []

    def emit(self, record):
        if str(record.msg).startswith("elastic net %s: chose"):
            self.ends.append(self.clock())


@pytest.mark.parametrize("seconds", [60.0, 120.0])
def test_each_mix_path_runs_within_its_share_of_the_time_budget(documents, seconds):
    """With ``max_seconds`` each mix's path gets an equal share of the time
    left among the paths still to come: the first paths do not take the
    time of the denser ones (unbounded, the pure-l1 path alone takes about
    a third of the three paths' time and more than a third of 60 s)."""
    tr, he, space = documents
    train_part, heldout = LocalBackend([tr], space), LocalBackend([he], space)
    clock = PassClock(train_part, heldout)  # 1 s a pass: no wall-clock flakiness
    ends = MixEnds(clock)
    log = logging.getLogger("sparkmaxent.choice.mixes")
    log.addHandler(ends)
    log.setLevel(logging.INFO)
    config = train_config(method="grafting", path=True, points=4, refit=False, folds=1,
                          l2_mixes=[0.0, 0.5, 0.9], mix_max=0.9, mix_stop=False,
                          max_seconds=seconds)  # fmt: skip
    try:
        res = train(train_part, config, heldout, clock=clock)
    finally:
        log.removeHandler(ends)
    rows = res.report.path.elastic
    assert [mix(r) for r in rows] == pytest.approx([0.0, 0.5, 0.9])  # every mix ran
    assert len(ends.ends) == 3 and ends.ends[-1] <= seconds  # the run kept its budget
    starts = [1.0] + ends.ends[:-1]  # the bias-only model's pass came first
    assert seconds - starts[-1] >= seconds / 3  # the densest mix had a third at least
    for i, (row, t0, t1) in enumerate(zip(rows, starts, ends.ends, strict=True)):
        share = (seconds - t0) / (3 - i)  # what was left, over the paths to come
        assert t1 - t0 <= share  # a path ends within its share
        assert row.seconds_share == pytest.approx(share)
        assert row.point.cut is False and row.points >= 1
    # the extensions mix_max allows share one more part, whatever their number
    config = dataclasses.replace(config, choice=dataclasses.replace(config.choice, mix_max=0.999))
    parts = LocalBackend([tr], space), LocalBackend([he], space)
    ext = train(parts[0], config, parts[1], clock=PassClock(*parts))
    first = ext.report.path.elastic[0]
    assert first.seconds_share == pytest.approx((seconds - 1.0) / 4)  # 3 listed + 1
    # unbounded: each path runs to its own stop, no share recorded
    free = mixes(documents, mix_max=0.0)
    assert all(r.seconds_share is None for r in free)
