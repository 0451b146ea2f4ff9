"""Conjunctions on Spark: predict and evaluate form a model's conjunctions
inside the events on the executors."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.api import evaluate_model
from sparkmaxent.backends.predict import predictions
from sparkmaxent.conjunctions import Conjunctions, conjunction_names
from sparkmaxent.kernels import MULTICLASS, Space, Weights
from sparkmaxent.model import MaxentModel

from .helpers import written_multiclass


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    return written_multiclass(str(tmp_path_factory.mktemp("conj-mc")), 12, active_per_event=5)


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
