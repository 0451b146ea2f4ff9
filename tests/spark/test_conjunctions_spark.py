"""Conjunctions on Spark: predict and evaluate form a model's conjunctions
inside the events on the executors."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.api import evaluate_model
from sparkmaxent.backends.dataset_scoring import predictions
from sparkmaxent.kernels import MULTICLASS, Space, Weights
from sparkmaxent.methods.round_details import CombinationRound
from sparkmaxent.model import MaxentModel
from sparkmaxent.model_conjunctions import Conjunctions, conjunction_names

from .helpers import written_multiclass


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    return written_multiclass(str(tmp_path_factory.mktemp("conj-mc")), 12, active_per_event=5)


def combination(rounds) -> list[CombinationRound]:
    """The combination rounds' own entries (phase, conjunction search)."""
    return [r.detail_as(CombinationRound) for r in rounds]


def test_predictions_form_the_models_conjunctions(spark, problem, tmp_path):
    K = len(problem.label_names)
    # conjunctions of atoms that fire together in the data
    X = problem.block.X.tocsr()
    pairs = {tuple(X.indices[X.indptr[i] : X.indptr[i] + 2]) for i in range(40)}
    conj = Conjunctions.from_tuples(12, sorted(pairs)[:6] + [(0, 1, 2)])
    space = Space(MULTICLASS, conj.n_predicates, K, bias=True)
    ids = np.arange(12, conj.n_predicates) * K + 1
    weights = Weights(ids, np.linspace(-2, 2, len(ids)), np.zeros(K))
    atoms = {i: f"f{i}" for i in range(12)}
    names = {**atoms, **conjunction_names(conj, atoms)}
    model = MaxentModel(space, weights, problem.label_names, names, conjunctions=conj)
    model.save(str(tmp_path / "m"))
    back = MaxentModel.load(str(tmp_path / "m"))
    frame, bc = predictions(spark, back, problem.directory)
    try:
        t = frame.orderBy("event_id").toArrow()
    finally:
        bc.destroy()
    _, P = model.predict(problem.block)
    got = np.array(t.column("probabilities").to_pylist())
    np.testing.assert_allclose(got, P, rtol=1e-10)
    # the conjunctions matter: without them the probabilities differ
    assert not np.allclose(got, 1.0 / K)
    report = evaluate_model(spark, back, problem.directory, chunks=False)
    pred, _ = model.predict(problem.block)
    expected = float(np.mean(pred == problem.block.y))
    assert report["accuracy"] == pytest.approx(expected)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    from sparkmaxent.data import synthetic
    from sparkmaxent.data.load import write_events
    from sparkmaxent.data.schema import DatasetInfo

    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=2000,
            n_predicates=30,
            n_labels=3,
            active_per_event=6,
            n_support=6,
            n_conjunctions=3,
            min_support_count=60,
            seed=4,
        )
    )
    block = data.block()
    directory = str(tmp_path_factory.mktemp("conj-planted"))
    info = write_events(
        block, directory, DatasetInfo(MULTICLASS, 30, list(data.label_names)), n_files=3
    )
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from sparkmaxent.data.schema import FEATURES_DIR, FEATURES_SCHEMA

    os.makedirs(os.path.join(directory, FEATURES_DIR))
    names = [f"w{i:02d}" for i in range(30)]
    pq.write_table(
        pa.table(
            {"feature": names, "id": np.arange(30, dtype=np.int32), "count": np.ones(30)},
            schema=FEATURES_SCHEMA,
        ),
        os.path.join(directory, FEATURES_DIR, "part-0.parquet"),
    )
    return directory, info, block


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_spark_training_equals_local_and_the_model_scores_on_executors(spark, planted, tmp_path):
    import dataclasses

    from sparkmaxent.api import fit
    from sparkmaxent.backends import LocalBackend
    from sparkmaxent.config import Config, train_config
    from sparkmaxent.train import train

    directory, info, block = planted
    cfg = train_config(method="grafting", l1=4e-3, n_best=10, gtol=1e-9, combination_degree=3)
    local = train(LocalBackend([block], Space(MULTICLASS, 30, 3, bias=True)), cfg)
    on_spark = dataclasses.replace(Config().data, in_process_max_events=0)  # not in-process
    full = Config(train=dataclasses.replace(cfg, backend="spark"), data=on_spark)
    model, report = fit(spark, full, directory, str(tmp_path / "run"))
    # the same optimum; the support may differ only among conjunctions that
    # tie to rounding (a triple whose third atom always fires with the pair)
    assert report.certificate.passed and local.report.certificate.passed
    assert report.objective == pytest.approx(local.report.objective, rel=1e-7)
    first = [r for r in combination(report.rounds) if r.phase == "combination"][0]
    first_local = [r for r in combination(local.report.rounds) if r.phase == "combination"][0]
    assert first.conjunctions_examined == first_local.conjunctions_examined > 0
    # each round's conjunctions formed once, in a cached copy of the blocks (an
    # RDD): one build a round that grew the set, on each backend (which rounds
    # grow it may differ where conjunctions tie to rounding, as the support)
    rounds = sum(r.phase == "combination" for r in combination(report.rounds))
    builds = report["combination"]["conjunction_builds"]
    assert 1 <= builds <= rounds + 1 < report["passes"]
    for run, built in (
        (report, builds),
        (local.report, local.report["combination"]["conjunction_builds"]),
    ):
        grew = sum(bool(r.conjunctions_added) for r in combination(run.rounds))
        assert built == grew, (built, grew)
    assert model.conjunctions is not None and len(model.conjunctions) > 0
    # saved, loaded, and scored with the conjunctions formed on the executors
    back = MaxentModel.load(str(tmp_path / "run" / "model"))
    assert any(" & " in f and f.startswith("w") for f, _ in back.selected_features())
    plain = MaxentModel(
        local.space(Space(MULTICLASS, 30, 3, bias=True)),
        local.weights,
        back.labels,
        {},
        conjunctions=local.conjunctions,
    )
    np.testing.assert_allclose(back.predict(block)[1], plain.predict(block)[1], atol=1e-5)
    pred, _ = back.predict(block)
    result = evaluate_model(spark, back, directory, chunks=False)
    assert result["accuracy"] == pytest.approx(float(np.mean(pred == block.y)), abs=1e-12)
