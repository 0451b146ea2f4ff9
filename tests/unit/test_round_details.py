"""The method-specific entries of a selection trace row (RoundRecord.detail,
methods/round_details.py): typed while the run goes, JSON only in the report
and the checkpoint, and read back as the same records on resume."""

from __future__ import annotations

import dataclasses

import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.config import train_config
from sparkmaxent.methods.round_details import (
    ATOMS_PHASE,
    COMBINATION_PHASE,
    BayesRound,
    CombinationRound,
    IfsStage,
)
from sparkmaxent.selection.base import RoundRecord
from sparkmaxent.train import train

from . import test_choice

problem = test_choice.problem  # the planted problem's fixture

RUNS = {
    "sgc": (dict(method="sgc", stage_features=2, max_rounds=3), IfsStage),
    "bayes-factor": (dict(method="bayes-factor", per_round=2, max_rounds=3), BayesRound),
    "combination": (
        dict(method="grafting", combination_degree=2, n_best=20, l1=1e-2, max_rounds=12),
        CombinationRound,
    ),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_a_rows_entries_are_typed_and_read_back_from_its_json_as_they_were(problem, name):
    keys, kind = RUNS[name]
    tr, _, space = problem
    traces: list[list[RoundRecord]] = []
    res = train(
        LocalBackend([tr], space),
        train_config(**keys),
        on_round=lambda state: traces.append(list(state.trace)),
    )
    rows = traces[-1]
    assert rows and all(isinstance(r.detail, kind) for r in rows)
    assert [r.to_json() for r in rows] == res.report.to_json()["rounds"]  # the JSON rows
    for row in rows:
        back = RoundRecord.from_json(row.to_json(), row.score_name, kind)
        assert back == dataclasses.replace(row, round_passes=0, round_s=0.0)
    if kind is IfsStage:  # stages of two picks: the second under "more", refitted together
        stage = rows[0].detail_as(IfsStage)
        assert len(stage.picks) == 2 and stage.refit_passes and stage.refit_ratio is not None
        assert res.report.to_json()["rounds"][0]["more"][0]["feature"] == stage.more[0].feature
    if kind is BayesRound:
        assert res.report["selected"] == [p.feature for r in rows for p in r.detail.selected]
    if kind is CombinationRound:
        phases = [r.detail_as(CombinationRound).phase for r in rows]
        assert phases[0] == ATOMS_PHASE and COMBINATION_PHASE in phases
        searched = [r.detail.search for r in rows if r.detail.phase == COMBINATION_PHASE]
        assert all(s is not None and s.search_passes >= 1 for s in searched)


def test_a_row_of_another_method_is_refused_by_name():
    row = RoundRecord(3, 1, 1, 0, 1.0, "gain", 0.5)
    with pytest.raises(TypeError, match="round 3: expected IfsStage"):
        row.detail_as(IfsStage)
