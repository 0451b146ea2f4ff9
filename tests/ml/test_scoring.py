"""The scorer's compact path (used predicates only, dense weights) against
scoring with the whole model: the same predictions, probabilities and raw
scores, for repeated names, real values, unknown names and empty rows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkmaxent.kernels import Scaling


def _fields(out: pa.StructArray) -> dict[str, np.ndarray]:
    return {
        "prediction": out.field("prediction").to_numpy(),
        "probability": pc.list_flatten(out.field("probability")).to_numpy(),
        "raw": pc.list_flatten(out.field("raw")).to_numpy(),
    }


def _rows(scorer, n: int = 200, seed: int = 0):
    rng = np.random.default_rng(seed)
    known = scorer.names.to_pylist()
    names, values = [], []
    for i in range(n):
        k = int(rng.integers(0, 6))
        row = [
            known[rng.integers(len(known))] if rng.random() < 0.7 else f"new{i}" for _ in range(k)
        ]
        row += row[:1]  # a repeated name: summed
        names.append(row)
        values.append([float(v) for v in rng.normal(size=len(row))])
    names.append(None)  # no features
    values.append(None)
    return pa.array(names, pa.list_(pa.string())), pa.array(values, pa.list_(pa.float64()))


def test_compact_scorer_scores_as_the_whole_model(model):
    scorer = model.scorer()
    assert scorer.compact is not None and scorer.compact[0].n_predicates == len(scorer.ids)
    names, values = _rows(scorer)
    whole = dataclasses.replace(scorer, compact=None)
    for v in (values, None):
        got, want = _fields(scorer.multiclass(names, v)), _fields(whole.multiclass(names, v))
        np.testing.assert_array_equal(got["prediction"], want["prediction"])
        for key in ("probability", "raw"):
            np.testing.assert_allclose(got[key], want[key], rtol=1e-12, atol=1e-12)
    assert len(set(got["prediction"])) > 1  # the rows are not all scored alike


def test_compact_scorer_with_scaling(model):
    """Standardized models: the centering term over all predicates equals
    the one over the used predicates (the others have no weight)."""
    m = model.maxentModel
    rng = np.random.default_rng(1)
    P = m.space.n_predicates
    scaled = dataclasses.replace(m, scaling=Scaling(rng.normal(size=P), rng.uniform(0.5, 2, P)))
    scorer = type(model.scorer()).of(scaled, np.arange(len(m.labels)), len(m.labels))
    names, values = _rows(scorer, seed=2)
    got = _fields(scorer.multiclass(names, values))
    want = _fields(dataclasses.replace(scorer, compact=None).multiclass(names, values))
    np.testing.assert_array_equal(got["prediction"], want["prediction"])
    np.testing.assert_allclose(got["raw"], want["raw"], rtol=1e-12, atol=1e-12)
