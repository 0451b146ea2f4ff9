"""Conjunctions as derived predicates: forming them inside events, their
keys, names, and a model that carries them through save, load and scoring."""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pytest
import scipy.sparse as sp

from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.errors import InputError
from sparkmaxent.kernels import MULTICLASS, Space, Weights
from sparkmaxent.kernels.conjunctions import conjunction_keys
from sparkmaxent.model import METADATA_FILE, VOCABULARY_DIR, MaxentModel
from sparkmaxent.model_conjunctions import Conjunctions, atoms_of_keys, conjunction_names

from .helpers import random_candidates, random_multiclass


def all_tuples(n_atoms: int, degree: int) -> list[tuple[int, ...]]:
    return [t for d in range(2, degree + 1) for t in itertools.combinations(range(n_atoms), d)]


def brute_values(X: np.ndarray, tuples) -> np.ndarray:
    """Conjunction values event by event, as the definition says."""
    out = np.zeros((X.shape[0], len(tuples)))
    for i, row in enumerate(X):
        for j, t in enumerate(tuples):
            if all(row[a] != 0 for a in t):
                out[i, j] = np.prod([row[a] for a in t])
    return out


@pytest.mark.parametrize("degree", [2, 3])
def test_values_equal_the_definition(degree):
    rng = np.random.default_rng(degree)
    block = random_multiclass(rng, m=30, P=7, density=0.5)
    tuples = all_tuples(7, degree)
    rng.shuffle(tuples)
    conj = Conjunctions.from_tuples(7, tuples)
    got = conj.values(block.X).toarray()
    np.testing.assert_array_equal(got, brute_values(block.X.toarray(), conj.tuples()))
    wide = conj.expand(block)
    assert wide.X.shape == (30, 7 + len(tuples))
    np.testing.assert_array_equal(wide.X[:, :7].toarray(), block.X.toarray())


@pytest.mark.parametrize("n_conj, degree", [(3, 3), (60, 3), (20, 2)])
def test_both_ways_of_forming_agree(n_conj, degree):
    """values() picks the cheaper of counting atoms per conjunction and
    looking every event's own pairs and triples up (pairs only when the
    set has no triple); both are exact."""
    rng = np.random.default_rng(n_conj)
    block = random_multiclass(rng, m=40, P=9, density=0.5)
    block.X.data = np.abs(block.X.data)
    tuples = all_tuples(9, degree)
    picked = [tuples[i] for i in rng.choice(len(tuples), n_conj, replace=False)]
    conj = Conjunctions.from_tuples(9, picked)
    X = block.X.tocsr()
    X.sort_indices()
    want = brute_values(X.toarray(), conj.tuples())
    np.testing.assert_allclose(conj.values(X).toarray(), want, rtol=1e-15)
    np.testing.assert_allclose(conj._values_by_lookup(X).toarray(), want, rtol=1e-15)


def test_candidate_blocks_form_conjunctions_per_candidate():
    rng = np.random.default_rng(5)
    block = random_candidates(rng, D=6, density=0.6)
    conj = Conjunctions.from_tuples(6, all_tuples(6, 3))
    wide = conj.expand(block)
    np.testing.assert_array_equal(
        wide.F[:, 6:].toarray(), brute_values(block.F.toarray(), conj.tuples())
    )
    np.testing.assert_array_equal(wide.event_ptr, block.event_ptr)


def test_explicit_zeros_do_not_fire():
    X = sp.csr_matrix((np.array([0.0, 1.0]), np.array([0, 1]), np.array([0, 2])), shape=(1, 2))
    assert Conjunctions.from_tuples(2, [(0, 1)]).values(X).nnz == 0


def test_keys_lookup_extend():
    n = 9
    tuples = all_tuples(n, 3)
    conj = Conjunctions.from_tuples(n, tuples)
    keys = conj.keys()
    assert len(np.unique(keys)) == len(tuples)  # pairs and triples never collide
    np.testing.assert_array_equal(conj.lookup(keys), n + np.arange(len(tuples)))
    for d in (2, 3):
        rows = conj.degree == d
        np.testing.assert_array_equal(atoms_of_keys(keys[rows], d, n), conj.atoms[rows])
    assert conj.lookup(np.array([-5, 10**9])).tolist() == [-1, -1]
    small = Conjunctions.from_tuples(n, [(1, 4), (0, 2, 3)])
    grown = small.extend(np.array([[0, 2, 3], [5, 6, -1], [5, 6, -1], [1, 2, -1]]))
    assert grown.tuples() == [(1, 4), (0, 2, 3), (5, 6), (1, 2)]
    np.testing.assert_array_equal(conjunction_keys(grown.atoms[:2], n), small.keys())


def test_bad_tuples_refused():
    with pytest.raises(ValueError, match="distinct"):
        Conjunctions.from_tuples(5, [(1, 1)])
    with pytest.raises(ValueError, match="outside"):
        Conjunctions.from_tuples(5, [(1, 5)])
    with pytest.raises(ValueError, match="twice"):
        Conjunctions.from_tuples(5, [(1, 2), (2, 1)])


def test_names_are_readable():
    conj = Conjunctions.from_tuples(4, [(2, 0), (1, 2, 3)])
    names = conjunction_names(conj, ["v=join", "p=as", "n1=board", "n2=director"])
    assert names == {4: "v=join & n1=board", 5: "p=as & n1=board & n2=director"}


def model_with_conjunctions(n_atoms=6, K=3):
    conj = Conjunctions.from_tuples(n_atoms, [(0, 1), (2, 3, 4), (1, 5)])
    space = Space(MULTICLASS, conj.n_predicates, K, bias=True)
    ids = np.array([0 * K + 1, 6 * K + 0, 7 * K + 2, 8 * K + 1], dtype=np.int64)
    weights = Weights(ids, np.array([0.5, -1.5, 2.0, 0.75]), np.array([0.1, 0.0, -0.1]))
    atoms = {i: f"a{i}" for i in range(n_atoms)}
    names = {0: "a0", **{a: atoms[a] for a in (1, 2, 3, 4, 5)}}
    names.update(conjunction_names(conj, atoms))
    return MaxentModel(space, weights, ["x", "y", "z"], names, conjunctions=conj)


def test_model_with_conjunctions_survives_save_load_and_scores_alike(tmp_path):
    model = model_with_conjunctions()
    rng = np.random.default_rng(3)
    block = random_multiclass(rng, m=50, P=6, K=3, density=0.6)
    block = type(block)(abs(block.X).minimum(1.0).tocsr(), block.y, block.c, 3)
    path = str(tmp_path / "m")
    model.save(path)
    back = MaxentModel.load(path)
    assert back.conjunctions is not None and back.conjunctions.tuples() == [
        (0, 1),
        (2, 3, 4),
        (1, 5),
    ]
    assert back.n_atoms == 6 and back.space.n_predicates == 9
    assert dict(back.selected_features())["a2 & a3 & a4"] == "z"
    # scoring forms the conjunctions: the same as a plain model on widened events
    wide = model.conjunctions.expand(block)
    plain = MaxentModel(model.space, model.weights, model.labels, model.feature_names)
    pred, P = back.predict(block)
    pred0, P0 = plain.predict(wide)
    np.testing.assert_array_equal(pred, pred0)
    np.testing.assert_allclose(P, P0, rtol=1e-12)
    assert back.evaluate_block(block).loss == pytest.approx(
        plain.evaluate_block(wide).loss, rel=1e-12
    )
    # the conjunctions change the scores (the test can fail)
    atoms_only = MaxentModel(
        Space(MULTICLASS, 6, 3, bias=True),
        Weights(np.array([1]), np.array([0.5]), model.weights.bias),
        model.labels,
        {0: "a0"},
    )
    assert not np.allclose(atoms_only.predict(block)[1], P)
    # the vocabulary holds the atoms only, including those only conjunctions use
    vocab = DatasetInfo.load(os.path.join(path, VOCABULARY_DIR))
    assert vocab.n_features == 6


def test_damaged_conjunctions_refused(tmp_path):
    path = str(tmp_path / "m")
    model_with_conjunctions().save(path)
    meta_file = os.path.join(path, METADATA_FILE)
    meta = json.load(open(meta_file))
    meta["conjunctions"]["atoms"][1] = [2, 9]
    json.dump(meta, open(meta_file, "w"))
    with pytest.raises(InputError, match=r"metadata.json: conjunctions: .*outside"):
        MaxentModel.load(path)
    meta["conjunctions"]["atoms"] = [[0, 1], [2, 3, 4]]
    json.dump(meta, open(meta_file, "w"))
    with pytest.raises(InputError, match="n_atoms 6 plus 2 conjunctions"):
        MaxentModel.load(path)


def test_lattice_nodes_of_more_than_three_atoms():
    conj = Conjunctions.from_tuples(6, [(0, 1), (1, 2, 3, 5)], max_degree=0)
    X = sp.csr_matrix(np.array([[1.0, 1, 1, 1, 0, 1], [1, 1, 1, 0, 0, 1]]))
    np.testing.assert_array_equal(conj.values(X).toarray(), [[1, 1], [1, 0]])
    assert conj.tuples() == [(0, 1), (1, 2, 3, 5)]
    with pytest.raises(ValueError, match="2-3 distinct"):
        Conjunctions.from_tuples(6, [(1, 2, 3, 5)])
    with pytest.raises(ValueError, match="at most 3"):
        conj.keys()
