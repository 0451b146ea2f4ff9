"""The feature collocation lattice (Mikheev 1998): Figure 1's redistribution,
the closure property, frequencies against brute force, the partial order
index, the node limit, candidate gains against a recount."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sparkmaxent.errors import ConfigError, InputError
from sparkmaxent.kernels import MULTICLASS, Space
from sparkmaxent.kernels.blocks import multiclass_block
from sparkmaxent.kernels.lattice_nodes import (
    ConfigCounts,
    ConfigCountTask,
    candidate_gains,
    is_subset,
    score_batch,
)
from sparkmaxent.methods.lattice.build import build_lattice, descendant_index, row_hash
from sparkmaxent.methods.lattice.select import (
    CandidateScorer,
    HeldoutConfigs,
    Optimized,
    select,
    train_loglik,
)


def masks_of(sets, n_atoms):
    out = np.zeros((len(sets), max(1, -(-n_atoms // 64))), dtype=np.uint64)
    for i, s in enumerate(sets):
        for b in s:
            out[i, b // 64] |= np.uint64(1) << np.uint64(b % 64)
    return out


A, B, C = 0, 1, 2
FIG1 = {(A,): 3, (B,): 5, (C,): 7, (A, B): 11, (A, C): 13, (B, C): 17, (A, B, C): 19}


def figure1_lattice():
    sets = list(FIG1)
    counts = np.array([[FIG1[s], 2 * FIG1[s] + 1] for s in sets], dtype=float)
    lat = build_lattice(ConfigCounts(masks_of(sets, 3), counts), np.arange(3), 100)
    return lat, {s: lat.find(s) for s in sets}


def xi(*sets):
    return sum(np.array([FIG1[s], 2 * FIG1[s] + 1], dtype=float) for s in sets)


def test_figure_1_redistribution_and_decided_nodes():
    lat, node = figure1_lattice()
    arr = lat.arrays(threshold=1.0)
    opt = Optimized.empty(lat.n_nodes, 2)
    # a) A into the empty lattice takes every configuration where A is seen
    opt.add(arr, node[(A,)])
    assert sorted(opt.nodes()) == [node[(A,)]]
    np.testing.assert_array_equal(opt.groups[node[(A,)]], xi((A,), (A, B), (A, C), (A, B, C)))
    decided = {s for s, i in node.items() if opt.decided()[i]}
    assert decided == {(A,), (A, B), (A, C), (A, B, C)}
    # b) B adds B and the collocation AB; A keeps A and AC, B keeps B and BC
    opt.add(arr, node[(B,)])
    assert sorted(opt.nodes()) == sorted([node[(A,)], node[(B,)], node[(A, B)]])
    np.testing.assert_array_equal(opt.groups[node[(A,)]], xi((A,), (A, C)))
    np.testing.assert_array_equal(opt.groups[node[(B,)]], xi((B,), (B, C)))
    np.testing.assert_array_equal(opt.groups[node[(A, B)]], xi((A, B), (A, B, C)))
    undecided = {s for s, i in node.items() if not opt.decided()[i]}
    assert undecided == {(C,)}
    p = opt.proba(np.array([node[s] for s in FIG1]))
    row = {s: p[i] for i, s in enumerate(FIG1)}
    np.testing.assert_array_equal(row[(A, C)], row[(A,)])
    np.testing.assert_array_equal(row[(B, C)], row[(B,)])
    np.testing.assert_array_equal(row[(A, B, C)], row[(A, B)])
    np.testing.assert_array_equal(row[(C,)], [0.5, 0.5])
    np.testing.assert_allclose(row[(A,)], xi((A,), (A, C)) / xi((A,), (A, C)).sum())
    # c) C saturates: the optimized lattice is the empirical one
    opt.add(arr, node[(C,)])
    assert sorted(opt.nodes()) == sorted(node.values())
    for s, i in node.items():
        np.testing.assert_array_equal(opt.groups[i], xi(s))


def random_configs(seed, n_events=300, n_atoms=10, density=0.3, n_labels=2):
    rng = np.random.default_rng(seed)
    sets = [tuple(np.flatnonzero(rng.random(n_atoms) < density)) for _ in range(n_events)]
    labels = rng.integers(0, n_labels, n_events)
    weights = rng.integers(1, 4, n_events).astype(float)
    return sets, labels, weights


def counted(sets, labels, weights, n_atoms, n_labels=2):
    keep = [i for i, s in enumerate(sets) if s]
    onehot = np.zeros((len(keep), n_labels))
    onehot[np.arange(len(keep)), labels[keep]] = weights[keep]
    return ConfigCounts(masks_of([sets[i] for i in keep], n_atoms), onehot)


@pytest.mark.parametrize(
    "seed, n_atoms, density, n_events",
    # masks of 3 and 5 words: a weak row hash made nodes twice there; the
    # last two: configurations of 17-64 atoms and of more than 64 (the
    # closure's codes of a configuration's atoms take one word, or more)
    [
        (0, 10, 0.3, 300),
        (1, 10, 0.3, 300),
        (2, 70, 0.06, 300),
        (6, 130, 0.05, 300),
        (3, 300, 0.02, 300),
        (12, 40, 0.6, 10),
        (11, 100, 0.75, 8),
    ],
)
def test_closure_and_frequencies_against_brute_force(seed, n_atoms, density, n_events):
    sets, labels, weights = random_configs(
        seed, n_events=n_events, n_atoms=n_atoms, density=density
    )
    lat = build_lattice(counted(sets, labels, weights, n_atoms), np.arange(n_atoms), 10_000)
    nodes = [frozenset(lat.node_atoms(i)) for i in range(lat.n_nodes)]
    assert len(set(nodes)) == len(nodes), "every node once"
    # closed under pairwise intersection (non-empty), and nothing else: every
    # node is an observed configuration or an intersection of observed ones
    observed = {frozenset(s) for s in sets if s}
    node_set = set(nodes)
    for a, b in itertools.combinations(nodes, 2):
        if a & b:
            assert a & b in node_set
    for n in nodes:
        assert n == frozenset.intersection(*[o for o in observed if n <= o])
    # configuration frequencies and feature frequencies per label
    feat = lat.feature_counts()
    for i, n in enumerate(nodes):
        conf = np.zeros(2)
        fc = np.zeros(2)
        for s, y, w in zip(sets, labels, weights):
            if frozenset(s) == n:
                conf[y] += w
            if n <= frozenset(s):
                fc[y] += w
        np.testing.assert_allclose(lat.counts[i], conf)
        np.testing.assert_allclose(feat[i], fc)


def test_row_hash_tells_one_word_masks_apart():
    rng = np.random.default_rng(7)
    masks = np.unique(rng.integers(0, 2**64, size=(5000, 1), dtype=np.uint64), axis=0)
    assert len(np.unique(row_hash(masks))) == len(masks)


def test_row_hash_tells_sparse_high_bit_masks_apart():
    """Masks of a few high bits (what a lattice over many atoms has) must
    not collide: a plain multiply maps them to a few powers of two."""
    rows = []
    for w in range(5):
        for b in range(48, 64):
            for c in range(b + 1, 64):
                m = np.zeros(5, dtype=np.uint64)
                m[w] = np.uint64((1 << b) | (1 << c))
                rows.append(m)
    masks = np.array(rows)
    assert len(np.unique(row_hash(masks))) == len(masks)


def test_partial_order_index():
    lat, node = figure1_lattice()
    a, ab, abc = node[(A,)], node[(A, B)], node[(A, B, C)]
    assert set(lat.descendants(a)) == {ab, node[(A, C)], abc}
    assert set(lat.children(a)) == {ab, node[(A, C)]}
    assert set(lat.parents(abc)) == {ab, node[(A, C)], node[(B, C)]}
    assert set(lat.ancestors(abc)) == {node[s] for s in FIG1 if s != (A, B, C)}
    assert lat.find((B, C)) == node[(B, C)] and lat.find((0, 7)) == -1


def test_node_limit_names_what_to_do():
    sets, labels, weights = random_configs(3, n_atoms=12, density=0.5)
    with pytest.raises(ConfigError, match=r"reached \d+ nodes.*max_atoms"):
        build_lattice(counted(sets, labels, weights, 12), np.arange(12), 50)


def test_candidate_gain_equals_the_recounted_likelihood():
    sets, labels, weights = random_configs(4, n_atoms=8)
    lat = build_lattice(counted(sets, labels, weights, 8), np.arange(8), 10_000)
    arr = lat.arrays(threshold=2.0)
    opt = Optimized.empty(lat.n_nodes, 2)
    rng = np.random.default_rng(0)
    for a in rng.permutation(lat.n_nodes)[:6]:
        before = train_loglik(arr, opt)
        for c in rng.permutation(lat.n_nodes)[:15]:
            trial = opt.copy()
            trial.add(arr, int(c))
            gain = candidate_gains(arr, opt.decider, opt.groups, np.array([c]))[0]
            assert gain == pytest.approx(train_loglik(arr, trial) - before, abs=1e-8)
            # the most specific optimized node below each node decides it
            for i in range(lat.n_nodes):
                below = [
                    j for j in trial.nodes() if set(lat.node_atoms(j)) <= set(lat.node_atoms(i))
                ]
                want = max(below, key=lambda j: len(lat.node_atoms(j)), default=-1)
                assert trial.decider[i] == want
        opt.add(arr, int(a))


def test_heldout_configurations_take_the_most_specific_optimized_node():
    lat, node = figure1_lattice()
    arr = lat.arrays(threshold=1.0)
    opt = Optimized.empty(lat.n_nodes, 2)
    held = HeldoutConfigs.of(masks_of([(A, B, C), (C,), (A, C)], 3), np.ones((3, 2)))
    held.update(arr, opt.add(arr, node[(A,)]))
    held.update(arr, opt.add(arr, node[(B,)]))
    assert held.decider.tolist() == [node[(A, B)], -1, node[(A,)]]


def test_configuration_count_refuses_non_binary_atoms():
    block = multiclass_block([0, 2], [0, 1], [1.0, 0.5], [0], [1.0], 2, 2)
    with pytest.raises(InputError, match="predicate 1 .*binary"):
        ConfigCountTask(np.array([0, 1]), 1)(block)
    counts = ConfigCountTask(np.array([0, -1]), 1)(block)
    assert counts.masks.tolist() == [[1]] and counts.counts.tolist() == [[1.0, 0.0]]
    assert Space(MULTICLASS, 2, 2).n_features == 4


def test_selection_rescoring_only_stale_candidates_picks_the_full_argmax():
    sets, labels, weights = random_configs(5, n_events=400, n_atoms=9)
    lat = build_lattice(counted(sets, labels, weights, 9), np.arange(9), 10_000)
    arr = lat.arrays(threshold=1.0)
    held_sets, held_labels, held_weights = random_configs(6, n_events=200, n_atoms=9)
    held = counted(held_sets, held_labels, held_weights, 9)
    result = select(arr, CandidateScorer(arr), HeldoutConfigs.of(held.masks, held.counts), 1000)
    steps = result.trace[1:]
    assert len(steps) >= 5
    opt = Optimized.empty(lat.n_nodes, 2)
    for row in steps:
        cands = np.flatnonzero(opt.decider != np.arange(lat.n_nodes))
        full = candidate_gains(arr, opt.decider, opt.groups, cands)
        assert row["node"] == cands[int(np.argmax(full))]
        assert row["gain"] == pytest.approx(full.max(), abs=1e-9)
        assert row["rescored"] < lat.n_nodes
        opt.add(arr, row["node"])


@pytest.mark.parametrize("seed, n_atoms, density", [(8, 10, 0.3), (9, 130, 0.05)])
def test_descendant_index_equals_every_pairwise_subset_test(seed, n_atoms, density):
    sets, labels, weights = random_configs(seed, n_atoms=n_atoms, density=density)
    lat = build_lattice(counted(sets, labels, weights, n_atoms), np.arange(n_atoms), 10_000)
    want = is_subset(lat.masks[:, None, :], lat.masks[None, :, :])
    np.testing.assert_array_equal(lat.desc.toarray(), want)
    # small blocks give the same index
    small = descendant_index(lat.masks, budget=7)
    np.testing.assert_array_equal(small.indptr, lat.desc.indptr)
    np.testing.assert_array_equal(small.indices, lat.desc.indices)


def test_gains_of_candidates_scored_together_equal_one_at_a_time():
    """Scoring many candidates at once (and in chunks of pairs) gives each
    candidate the gain it has alone: the joins of one candidate never mix
    with another's."""
    sets, labels, weights = random_configs(10, n_events=400, n_atoms=9)
    lat = build_lattice(counted(sets, labels, weights, 9), np.arange(9), 10_000)
    arr = lat.arrays(threshold=2.0)
    opt = Optimized.empty(lat.n_nodes, 2)
    for a in np.random.default_rng(1).permutation(lat.n_nodes)[:5]:
        opt.add(arr, int(a))
    cands = np.flatnonzero(opt.decider != np.arange(lat.n_nodes))
    alone = np.array(
        [candidate_gains(arr, opt.decider, opt.groups, np.array([c]))[0] for c in cands]
    )
    np.testing.assert_allclose(
        candidate_gains(arr, opt.decider, opt.groups, cands), alone, rtol=1e-12
    )
    chunked = score_batch(arr, opt.decider, opt.groups, cands, chunk_pairs=5)
    np.testing.assert_allclose(chunked, alone, rtol=1e-12)
    assert (alone > 0).any()
