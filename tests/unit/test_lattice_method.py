"""The lattice method end to end on in-process blocks: what it learns from
data whose label depends on a conjunction, the generalization rule, and
the model surviving save, load, predict and evaluate."""

from __future__ import annotations

import os

import numpy as np
import pytest

from sparkmaxent.backends.local import LocalBackend
from sparkmaxent.config import ConfigError, train_config
from sparkmaxent.kernels import MULTICLASS, Space
from sparkmaxent.kernels.blocks import multiclass_block, split_block
from sparkmaxent.model import MaxentModel
from sparkmaxent.train import train

N_ATOMS = 6


def conjunction_data(seed: int, m: int):
    """Label 1 when atoms 0 and 1 both fire, or atom 2 fires alone among
    0-2; 8% of labels flipped."""
    rng = np.random.default_rng(seed)
    on = rng.random((m, N_ATOMS)) < 0.4
    y = (on[:, 0] & on[:, 1]) | (on[:, 2] & ~on[:, 0] & ~on[:, 1])
    y = np.where(rng.random(m) < 0.08, ~y, y).astype(np.int64)
    rows, cols = np.nonzero(on)
    indptr = np.concatenate([[0], np.cumsum(on.sum(axis=1))])
    return multiclass_block(indptr, cols, np.ones(len(cols)), y, np.ones(m), N_ATOMS, 2)


def backend(block, parts=3):
    return LocalBackend(split_block(block, parts), Space(MULTICLASS, N_ATOMS, 2, bias=True))


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    cfg = train_config(
        method="lattice", backend="local", gtol=1e-5, patience=5, generalize_patience=2
    )
    train_block, held_block = conjunction_data(0, 1500), conjunction_data(1, 800)
    out = str(tmp_path_factory.mktemp("lattice-run"))
    result = train(backend(train_block), cfg, backend(held_block), output_dir=out)
    return result, train_block, held_block


def test_the_lattice_model_learns_the_conjunction(fitted):
    result, _, held = fitted
    report = result.report
    assert result.conjunctions is not None
    assert any({0, 1} <= set(t) for t in result.conjunctions.tuples())
    lat, sel, gen = report["lattice"], report["selection"], report["generalization"]
    assert lat["nodes"] >= lat["reference_nodes"] > 0
    assert 0 < sel["optimized_nodes"] <= lat["nodes"]
    assert 0 < gen["constraints_after"] <= gen["constraints_before"]
    assert [os.path.basename(p) for p in report["plots"]] == ["lattice.png"]
    assert os.path.getsize(report["plots"][0]) > 0
    # near the Bayes rate (8% noise); an atoms-only l2 model cannot get there
    assert report["heldout_accuracy"] > 0.88
    plain = train(backend(conjunction_data(0, 1500)), train_config(method="l2", backend="local"))
    model = MaxentModel(Space(MULTICLASS, N_ATOMS, 2, bias=True), plain.weights, ["0", "1"], {})
    assert model.evaluate_block(held).accuracy < report["heldout_accuracy"] - 0.03


def test_generalization_never_unconstrains_a_node_with_a_constrained_node_above(fitted):
    gen = fitted[0].report["generalization"]
    constrained = {tuple(t) for t in gen["initial_constraints"]}
    rounds_with_removals = 0
    for row in gen["trace"][1:]:
        for t in map(tuple, row["removed"]):
            assert t in constrained
            above = [c for c in constrained if set(t) < set(c)]
            assert not above, f"{t} removed under constrained {above}"
        constrained -= set(map(tuple, row["removed"]))
        rounds_with_removals += bool(row["removed"])
        assert row["constraints"] == len(constrained)
    assert rounds_with_removals >= 2


def test_lattice_model_survives_save_load_predict_evaluate(fitted, tmp_path):
    result, _, held = fitted
    space = result.space(Space(MULTICLASS, N_ATOMS, 2, bias=True))
    names = {i: f"a{i}" for i in range(N_ATOMS)}
    from sparkmaxent.model_conjunctions import conjunction_names

    names.update(conjunction_names(result.conjunctions, names))
    model = MaxentModel(space, result.weights, ["0", "1"], names, conjunctions=result.conjunctions)
    model.save(str(tmp_path / "m"))
    back = MaxentModel.load(str(tmp_path / "m"))
    assert back.conjunctions.tuples() == result.conjunctions.tuples()
    pred, P = back.predict(held)
    pred0, P0 = model.predict(held)
    np.testing.assert_array_equal(pred, pred0)
    np.testing.assert_allclose(P, P0, rtol=1e-12)
    assert back.evaluate_block(held).accuracy == pytest.approx(result.report.heldout.accuracy)


def test_without_heldout_data_both_phases_stop_by_the_training_aic():
    """No held-out data: selection keeps the step of the best -AIC/2N and
    generalization the round of the best AIC/2N (mean training loss +
    non-zero weights / N); the model still learns the conjunction."""
    cfg = train_config(
        method="lattice", backend="local", gtol=1e-5, patience=5, generalize_patience=2
    )
    block = conjunction_data(0, 1500)
    result = train(backend(block), cfg)
    report = result.report
    assert report["stop_criterion"] == "training AIC"
    sel, gen = report["selection"], report["generalization"]
    crit = [row["heldout_ll"] for row in sel["trace"]]
    assert sel["best_step"] == int(np.argmax(crit))
    train_ll = [row["train_ll"] for row in sel["trace"][1:]]
    assert all(c < t for c, t in zip(crit[1:], train_ll))  # the penalty is charged
    losses = [row["heldout_loss"] for row in gen["trace"]]
    assert gen["best_round"] == int(np.argmin(losses))
    assert any({0, 1} <= set(t) for t in result.conjunctions.tuples())
    space = result.space(Space(MULTICLASS, N_ATOMS, 2, bias=True))
    model = MaxentModel(space, result.weights, ["0", "1"], {}, conjunctions=result.conjunctions)
    assert model.evaluate_block(conjunction_data(1, 800)).accuracy > 0.88


def test_lattice_needs_no_standardization():
    with pytest.raises(ConfigError, match="standardize"):
        train_config(method="lattice", standardize=True)


def test_cached_widened_blocks_give_the_passes_of_widening_in_each_pass():
    from sparkmaxent.backends.expanded import ExpandedBackend
    from sparkmaxent.kernels import Weights
    from sparkmaxent.kernels.conjunctions import Conjunctions
    from sparkmaxent.selection.base import evaluate_backend

    base = backend(conjunction_data(2, 600))
    conj = Conjunctions.from_tuples(N_ATOMS, [(0, 1), (2, 3, 4)], max_degree=0)
    plain, cached = ExpandedBackend(base, conj), ExpandedBackend(base, conj, cache=True)
    assert plain.widened is None and cached.widened is not None
    k = 2
    ids = np.array([0 * k + 1, N_ATOMS * k + 1, (N_ATOMS + 1) * k])
    w = Weights(ids, np.array([0.5, 2.0, -1.0]), np.array([0.1, -0.1]))
    before = base.passes
    a, b = evaluate_backend(plain, w, None), evaluate_backend(cached, w, None)
    assert base.passes == before + 2  # the cached pass counts on the base too
    assert a.loss == pytest.approx(b.loss, rel=1e-12) and a.correct == b.correct
    atoms_only = evaluate_backend(base, Weights(ids[:1], w.values[:1], w.bias), None)
    assert a.loss != pytest.approx(atoms_only.loss)  # the conjunctions' weights count
    cached.close()
    assert cached.widened is None
