"""MaxEntRanker / MaxEntRankingModel over ranking tables: the same model as
``sparkmaxent prepare --format tadm`` + ``sparkmaxent train``, transform's
columns, persistence."""

from __future__ import annotations

import random

import numpy as np
import pytest
from chispa import assert_df_equality

from sparkmaxent import cli
from sparkmaxent.ml import MaxEntRanker, MaxEntRankingModel
from sparkmaxent.model import MaxentModel


def candidate_sets(n: int = 60, seed: int = 5) -> list[list[tuple[list[tuple[int, float]], bool]]]:
    """Events of 2-4 candidates; feature 1 marks the correct one 85% of the time."""
    rng = random.Random(seed)
    events = []
    for _ in range(n):
        k = rng.randint(2, 4)
        right = rng.randrange(k)
        cands = []
        for j in range(k):
            feats = {rng.randrange(2, 12): 1.0, rng.randrange(2, 12): 0.5}
            if (j == right) == (rng.random() < 0.85):
                feats[1] = 1.0
            cands.append((sorted(feats.items()), j == right))
        events.append(cands)
    return events


def map_table(spark):
    rows = [
        (g, j, {str(f): v for f, v in feats}, ok)
        for g, cands in enumerate(candidate_sets())
        for j, (feats, ok) in enumerate(cands)
    ]
    return spark.createDataFrame(rows, "sent long, cand int, feats map<string,double>, ok boolean")


@pytest.fixture(scope="module")
def ranker_model(spark) -> MaxEntRankingModel:
    est = MaxEntRanker(
        groupCol="sent", featuresCol="feats", correctCol="ok", method="grafting", l1=0.005
    )
    return est.fit(map_table(spark))


def test_ranker_fits_the_cli_model(spark, tmp_path, ranker_model):
    lines = []
    for cands in candidate_sets():
        lines.append(str(len(cands)))
        for feats, ok in cands:
            pairs = " ".join(f"{f} {v}" for f, v in feats)
            lines.append(f"{int(ok)} {len(feats)} {pairs}")
    text = tmp_path / "train.tadm"
    text.write_text("\n".join(lines) + "\n")
    prepared, out = str(tmp_path / "prepared"), str(tmp_path / "run")
    assert (
        cli.main(["prepare", "--input", str(text), "--format", "tadm", "--output", prepared]) == 0
    )
    sets = ["train.method=grafting", "train.grafting.l1=0.005"]
    argv = ["train", "--train", prepared, "--output", out]
    assert cli.main([*argv, *(x for s in sets for x in ("--set", s))]) == 0
    want = MaxentModel.load(f"{out}/model")
    got = ranker_model.maxentModel
    assert got.space.shape == want.space.shape == "candidates"

    def by_name(m: MaxentModel) -> dict:
        return dict(zip(m.selected_features(), m.weights.values[m.weights.values != 0]))

    g, w = by_name(got), by_name(want)
    assert set(g) == set(w) and len(w) > 0
    np.testing.assert_allclose([g[k] for k in w], list(w.values()), rtol=1e-9, atol=1e-12)
    assert ranker_model.certificate is not None and ranker_model.certificate["passed"]


def test_ranking_transform_scores_groups_and_keeps_columns(spark, ranker_model):
    model = ranker_model
    table = map_table(spark)
    out = model.transform(table)
    assert out.columns == [*table.columns, "score", "probability", "prediction"]
    assert_df_equality(
        out.select(*table.columns).orderBy("sent", "cand"), table.orderBy("sent", "cand")
    )
    rows = out.collect()
    weights = dict(
        zip(
            (f for f, _ in model.maxentModel.selected_features()),
            model.maxentModel.weights.values[model.maxentModel.weights.values != 0],
        )
    )
    by_group: dict = {}
    for r in rows:
        expected = sum(weights.get(f, 0.0) * v for f, v in r.feats.items())
        assert r.score == pytest.approx(expected, abs=1e-12)
        by_group.setdefault(r.sent, []).append(r)
    hits = 0
    for group in by_group.values():
        assert sum(r.probability for r in group) == pytest.approx(1.0)
        best = max(r.score for r in group)
        assert all(r.prediction == (r.score == best) for r in group)
        hits += any(r.prediction and r.ok for r in group)
    assert hits / len(by_group) > 0.7


def test_ranking_model_round_trip(spark, tmp_path, ranker_model):
    path = str(tmp_path / "ranker")
    ranker_model.write().overwrite().save(path)
    back = MaxEntRankingModel.load(path)
    assert back.getOrDefault("groupCol") == "sent" and back.report == ranker_model.report
    df = map_table(spark)
    cols = ["sent", "cand", "score", "probability", "prediction"]
    assert_df_equality(
        back.transform(df).select(*cols).orderBy("sent", "cand"),
        ranker_model.transform(df).select(*cols).orderBy("sent", "cand"),
    )
