"""The planted-model generator: reproducibility, planted structure, files, recovery scores."""

from __future__ import annotations

import time

import numpy as np
import pytest

from sparkmaxent.data.readers import RawEvent, parse_maxent
from sparkmaxent.data.synthetic import (
    PlantedTruth,
    SyntheticSpec,
    conjunction_name,
    generate,
    split,
    support_recovery,
    train_test_split,
    write_maxent_text,
    write_splits,
    zipf_rates,
)
from sparkmaxent.data.synthetic.planted import planted_scores


@pytest.fixture(scope="module")
def data():
    return generate(SyntheticSpec(n_events=20_000, seed=0))


@pytest.fixture(scope="module")
def small():
    return generate(
        SyntheticSpec(
            n_events=300,
            n_predicates=60,
            n_labels=3,
            active_per_event=5,
            n_support=6,
            n_copies=2,
            n_conjunctions=1,
            min_support_count=10,
            seed=3,
        )
    )


def test_same_seed_same_data_other_seed_other_data():
    spec = SyntheticSpec(seed=11)
    a, b = generate(spec), generate(spec)
    for name in ("indptr", "indices", "labels", "weights", "bias", "conjunction_pairs", "copy_ids"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.true_support == b.true_support
    c = generate(SyntheticSpec(seed=12))
    assert c.true_support != a.true_support
    assert not np.array_equal(c.labels, a.labels)


PLANTED = (
    "support_ids",
    "support_labels",
    "support_weights",
    "bias",
    "conjunction_pairs",
    "conjunction_labels",
    "conjunction_weights",
    "copy_ids",
    "original_ids",
    "rates",
)


def test_sizes_sharing_model_events_share_the_planted_model():
    """A scale series over events (benchmarks/scale.py): with model_events
    fixed, only the events drawn change with n_events; without it each size
    plants another support (min_support_count counts that size's events)."""
    sizes = (5000, 20_000, 80_000)
    shared = [generate(SyntheticSpec(n_events=m, model_events=5000, seed=3)) for m in sizes]
    for d in shared[1:]:
        for name in PLANTED:
            np.testing.assert_array_equal(getattr(d, name), getattr(shared[0], name), name)
        assert d.true_support == shared[0].true_support
    assert [d.n_events for d in shared] == list(sizes)
    # without model_events the largest size plants another support, and the
    # shared series' labels follow the shared model, not that one
    own = generate(SyntheticSpec(n_events=80_000, seed=3))
    assert own.true_support != shared[0].true_support
    big = shared[-1]
    rows = np.arange(big.n_events)

    def loglik(d) -> float:
        S = planted_scores(
            big.indptr,
            big.indices,
            big.values,
            (d.support_ids, d.support_labels, d.support_weights),
            d.bias,
            d.conjunction_pairs,
            d.conjunction_labels,
            d.conjunction_weights,
        )
        S -= S.max(axis=1, keepdims=True)
        return float((S[rows, big.labels] - np.log(np.exp(S).sum(axis=1))).mean())

    assert loglik(shared[0]) > loglik(own) + 0.05
    # model_events = n_events is the default (0): the same data
    same = generate(SyntheticSpec(n_events=5000, model_events=5000, seed=3))
    plain = generate(SyntheticSpec(n_events=5000, seed=3))
    for name in ("indptr", "indices", "labels", *PLANTED):
        np.testing.assert_array_equal(getattr(same, name), getattr(plain, name), name)
    with pytest.raises(ValueError, match="model_events >= 0"):
        SyntheticSpec(model_events=-1)


def test_csr_parts_are_well_formed(data):
    m, P = data.n_events, data.n_predicates
    assert data.indptr.dtype == np.int64 and data.indices.dtype == np.int32
    assert data.indptr[0] == 0 and data.indptr[-1] == len(data.indices) == len(data.values)
    assert np.all(np.diff(data.indptr) >= 0)
    assert data.indices.min() >= 0 and data.indices.max() < P
    rows = np.repeat(np.arange(m), np.diff(data.indptr))
    key = rows.astype(np.int64) * P + data.indices
    assert np.all(np.diff(key) > 0)  # strictly increasing within events: no duplicates
    assert np.all(data.values == 1.0)
    assert data.labels.min() >= 0 and data.labels.max() < data.n_labels
    np.testing.assert_array_equal(data.event_ids, np.arange(m))


def test_zipf_rates_sum_to_the_mean_and_are_capped():
    r = zipf_rates(1000, 12.0, 1.0)
    assert r.sum() == pytest.approx(12.0)
    assert r.max() == 1.0 and np.all(np.diff(r) <= 0)
    uncapped = r < 1
    # Zipf law on the uncapped ranks: rate * rank is constant for exponent 1
    ranks = np.arange(1, 1001)[uncapped]
    assert np.ptp(r[uncapped] * ranks) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="mean_active"):
        zipf_rates(10, 11.0, 1.0)


def test_predicates_fire_at_their_rates(data):
    counts = np.bincount(data.indices, minlength=data.n_predicates)
    m = data.n_events
    expected = data.rates * m
    frequent = expected > 500
    assert frequent.sum() > 10
    # binomial counts within 5 standard deviations of their expectation
    sd = np.sqrt(m * data.rates * (1 - data.rates))
    assert np.all(np.abs(counts[frequent] - expected[frequent]) <= 5 * sd[frequent] + 1)
    n_copies = data.spec.n_copies
    mean_active = (len(data.indices) - counts[data.copy_ids].sum()) / m
    assert mean_active == pytest.approx(data.spec.active_per_event, rel=0.02)
    assert n_copies == len(data.copy_ids)


def test_true_support_matches_the_spec(data):
    spec = data.spec
    support = data.true_support
    assert len(support) == spec.n_support == np.count_nonzero(data.weights)
    feats = {f for f, _ in support}
    assert len(feats) == spec.n_support  # one label per informative predicate
    assert all(lab in data.label_names for _, lab in support)
    ids = np.array([int(f[1:]) for f in feats])
    assert np.all(data.rates[ids] * spec.n_events >= spec.min_support_count)
    assert np.all(data.rates[ids] <= spec.max_support_rate)
    assert np.all(np.abs(data.weights[data.weights != 0]) >= 0.5 * spec.weight_scale)
    # copies and conjunction members carry no weight of their own
    assert not np.any(data.weights[data.copy_ids])
    assert not np.any(data.weights[data.conjunction_pairs.ravel()])
    assert len(data.true_conjunctions) == spec.n_conjunctions
    assert len(data.redundant_copies) == spec.n_copies
    assert set(data.redundant_copies.values()) <= feats
    j = data.true_feature_ids()
    np.testing.assert_array_equal(data.weights.ravel().nonzero()[0], j)


def test_informative_predicates_shift_their_label(data):
    y, K = data.labels, data.n_labels
    marginal = np.bincount(y, minlength=K) / len(y)
    ps, ks = np.nonzero(data.weights)
    shifts = []
    for p, k in zip(ps, ks):
        fires = data.fires(p)
        if fires.sum() >= 300:
            shifts.append((np.mean(y[fires] == k) - marginal[k], data.weights[p, k]))
    shifts = np.array(shifts)
    assert len(shifts) >= 8
    # the label moves in the direction of the planted weight, clearly
    assert np.all(np.sign(shifts[:, 0]) == np.sign(shifts[:, 1]))
    assert np.all(np.abs(shifts[:, 0]) > 0.04)
    planted = set(ps) | set(data.copy_ids.tolist()) | set(data.conjunction_pairs.ravel().tolist())
    others = [
        p
        for p in np.argsort(-data.rates)
        if p not in planted and 300 <= data.rates[p] * data.n_events < data.n_events
    ][:40]
    other_shift = [
        np.max(np.abs(np.bincount(y[data.fires(p)], minlength=K) / data.fires(p).sum() - marginal))
        for p in others
    ]
    assert np.mean(np.abs(shifts[:, 0])) > 4 * np.mean(other_shift)


def test_labels_follow_the_planted_softmax(data):
    # calibration: mean planted p(k|x) matches the empirical label frequency
    P = data.planted_proba()
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    freq = np.bincount(data.labels, minlength=data.n_labels) / data.n_events
    se = np.sqrt(freq * (1 - freq) / data.n_events)
    assert np.all(np.abs(P.mean(axis=0) - freq) < 4 * se)
    # and the planted model predicts far better than the majority label
    assert np.mean(P.argmax(axis=1) == data.labels) > freq.max() + 0.08


def test_redundant_copies_fire_exactly_with_their_originals(data):
    assert len(data.copy_ids) == data.spec.n_copies > 0
    for copy, orig in zip(data.copy_ids, data.original_ids):
        fc, fo = data.fires(copy), data.fires(orig)
        assert fo.sum() > 0
        np.testing.assert_array_equal(fc, fo)
    names = data.redundant_copies
    assert names == {f"p{c}": f"p{o}" for c, o in zip(data.copy_ids, data.original_ids)}


def test_conjunction_effect_only_when_both_fire(data):
    y = data.labels
    assert len(data.conjunction_pairs) == data.spec.n_conjunctions > 0
    for (a, b), k, w in zip(
        data.conjunction_pairs, data.conjunction_labels, data.conjunction_weights
    ):
        fa, fb = data.fires(a), data.fires(b)
        freq = {
            name: np.mean(y[mask] == k)
            for name, mask in [
                ("both", fa & fb),
                ("a", fa & ~fb),
                ("b", ~fa & fb),
                ("none", ~fa & ~fb),
            ]
        }
        assert (fa & fb).sum() >= 300
        assert np.sign(freq["both"] - freq["none"]) == np.sign(w)
        assert abs(freq["both"] - freq["none"]) > 0.08
        # a or b alone leaves label k where neither leaves it
        assert abs(freq["a"] - freq["none"]) < 0.035
        assert abs(freq["b"] - freq["none"]) < 0.035


def test_support_recovery_of_the_truth_and_of_a_random_set(data):
    r = support_recovery(data.true_support, data)
    assert r["precision"] == r["recall"] == 1.0
    assert r["n_selected"] == r["n_true"] == r["n_correct"] == data.spec.n_support
    rng = np.random.default_rng(0)
    random_set = {
        (f"p{p}", f"L{k}")
        for p, k in zip(
            rng.integers(0, data.n_predicates, 200), rng.integers(0, data.n_labels, 200)
        )
    }
    r = support_recovery(random_set, data)
    assert r["precision"] < 0.05
    assert r["n_selected"] == len(random_set)


def test_support_recovery_counts_copies_as_false_positives(data):
    truth = data.true_support
    label_of = dict(truth)
    (c0, o0), (c1, o1) = list(data.redundant_copies.items())[:2]
    # c0 picked alongside its original, c1 instead of its original
    selected = (truth - {(o1, label_of[o1])}) | {(c0, label_of[o0]), (c1, label_of[o1])}
    r = support_recovery(selected, data)
    n = data.spec.n_support
    assert r["n_correct"] == n - 1
    assert r["precision"] == pytest.approx((n - 1) / (n + 1))
    assert r["recall"] == pytest.approx((n - 1) / n)
    assert r["n_copies_of_selected"] == 1
    assert r["n_copies_for_missed"] == 1


def test_support_recovery_scores_conjunctions_separately(data):
    (fa, fb), lab = sorted(data.true_conjunctions)[0]
    selected = set(data.true_support) | {(conjunction_name(fb, fa), lab), ("p1&p2", "L0")}
    r = support_recovery(selected, data)
    assert r["precision"] == r["recall"] == 1.0
    assert r["n_conj_correct"] == 1 and r["n_conj_selected"] == 2
    assert r["conj_precision"] == 0.5
    assert r["conj_recall"] == pytest.approx(1 / data.spec.n_conjunctions)
    with pytest.raises(ValueError, match="pairs"):
        support_recovery({"p1"}, data)


def test_raw_events_and_text_round_trip(small, tmp_path):
    events = small.events()
    assert len(events) == small.n_events
    e = events[7]
    a, b = small.indptr[7], small.indptr[8]
    assert isinstance(e, RawEvent)
    assert e.label == f"L{small.labels[7]}"
    assert e.features == [f"p{p}" for p in small.indices[a:b]]
    assert e.values == [1.0] * (b - a) and e.event_id == e.group == 7
    path = tmp_path / "synthetic.maxent"
    assert write_maxent_text(small, path) == small.n_events
    with open(path) as f:
        parsed = list(parse_maxent(str(path), f, {}))
    assert parsed == events


def test_block_holds_the_same_events(small):
    block = small.block()
    assert block.X.shape == (small.n_events, small.n_predicates)
    assert block.n_labels == small.n_labels
    dense = block.X.toarray()
    for p in (small.copy_ids[0], small.original_ids[0]):
        np.testing.assert_array_equal(dense[:, p] != 0, small.fires(p))
    np.testing.assert_array_equal(block.y, small.labels)


def test_split_partitions_the_events(small):
    parts = split(small, [0.6, 0.2, 0.2], seed=5)
    assert [p.n_events for p in parts] == [180, 60, 60]
    ids = np.concatenate([p.event_ids for p in parts])
    assert sorted(ids.tolist()) == list(range(small.n_events))
    test = parts[2]
    for i in (0, 17, 59):
        src = int(test.event_ids[i])
        np.testing.assert_array_equal(
            test.indices[test.indptr[i] : test.indptr[i + 1]],
            small.indices[small.indptr[src] : small.indptr[src + 1]],
        )
        assert test.labels[i] == small.labels[src]
    assert test.true_support == small.true_support
    again = split(small, [0.6, 0.2, 0.2], seed=5)
    np.testing.assert_array_equal(again[0].event_ids, parts[0].event_ids)
    train, held = train_test_split(small, 0.25, seed=1)
    assert (train.n_events, held.n_events) == (225, 75)
    assert not set(train.event_ids.tolist()) & set(held.event_ids.tolist())
    with pytest.raises(ValueError, match="summing to 1"):
        split(small, [0.5, 0.6])


def test_write_splits_and_saved_truth(tmp_path):
    spec = SyntheticSpec(
        n_events=400,
        n_predicates=80,
        n_labels=3,
        active_per_event=5,
        n_support=5,
        n_copies=1,
        n_conjunctions=1,
        min_support_count=10,
        seed=2,
    )
    paths = write_splits(spec, tmp_path / "syn", fractions=(0.5, 0.25, 0.25))
    lines = {}
    for name in ("train", "heldout", "test"):
        with open(paths[name]) as f:
            lines[name] = f.read().splitlines()
    assert [len(lines[n]) for n in ("train", "heldout", "test")] == [200, 100, 100]
    data = generate(spec)
    write_maxent_text(data, tmp_path / "all.maxent")
    with open(tmp_path / "all.maxent") as f:
        everything = f.read().splitlines()
    # the three files are a partition of one generated set
    assert sorted(lines["train"] + lines["heldout"] + lines["test"]) == sorted(everything)
    truth = PlantedTruth.load(paths["truth"])
    assert truth == data.truth()
    assert support_recovery(data.true_support, truth)["recall"] == 1.0
    with open(tmp_path / "bad.json", "w") as f:
        f.write('{"true_support": []}')
    with pytest.raises(ValueError, match="missing"):
        PlantedTruth.load(tmp_path / "bad.json")


def test_bad_specs_say_what_was_expected():
    with pytest.raises(ValueError, match="n_labels >= 2"):
        SyntheticSpec(n_labels=1)
    with pytest.raises(ValueError, match="n_copies <= n_support"):
        SyntheticSpec(n_support=3, n_copies=4)
    with pytest.raises(ValueError, match="active_per_event"):
        SyntheticSpec(n_predicates=10, n_copies=0, n_support=0, active_per_event=11)
    with pytest.raises(ValueError, match="n_support=40"):
        generate(SyntheticSpec(n_events=500))  # too few events for 40 learnable predicates


def test_generation_is_fast():
    spec = SyntheticSpec(n_events=200_000, n_predicates=5000, seed=1)
    t0 = time.perf_counter()
    d = generate(spec)
    elapsed = time.perf_counter() - t0
    print(f"generated 200k events x 5k predicates ({len(d.indices)} active) in {elapsed:.2f}s")
    assert d.n_events == 200_000 and d.n_predicates == 5000
    assert len(d.indices) / d.n_events == pytest.approx(spec.active_per_event, rel=0.05)
    assert elapsed < 30.0


def test_rare_columns_fire_at_their_rates_in_distinct_uniform_rows():
    """Columns expected to fire less than once (m q < 1) are drawn as a
    Binomial count and distinct uniform rows: the count, the rows' spread
    and their order match the Bernoulli law of the other columns."""
    from sparkmaxent.data.synthetic.generator import _bernoulli_columns

    m, n = 50, 40_000
    rates = np.full(n, 0.015)  # m q = 0.75 < 1: every column takes the rare path
    rates[:5] = 0.5  # and a few take the geometric one
    cols, rows = _bernoulli_columns(np.random.default_rng(7), m, rates)
    key = cols * m + rows
    assert np.all(np.diff(key) > 0)  # column-major, rows increasing and distinct
    assert rows.min() >= 0 and rows.max() < m
    counts = np.bincount(cols, minlength=n)
    expected, sd = m * 0.015 * (n - 5), np.sqrt(m * 0.015 * 0.985 * (n - 5))
    assert abs(counts[5:].sum() - expected) < 5 * sd
    # a column with 2+ successes takes each pair of rows alike: counts per
    # row within 5 sd of uniform
    per_row = np.bincount(rows[cols >= 5], minlength=m)
    mean = per_row.sum() / m
    assert np.all(np.abs(per_row - mean) < 5 * np.sqrt(mean))
    assert np.bincount(counts[5:]).tolist()[:3] == pytest.approx(
        [n * (0.985**50), n * 50 * 0.015 * 0.985**49, n * 1225 * 0.015**2 * 0.985**48],
        rel=0.05,
    )


def test_a_billion_candidates_generate_without_a_dense_planted_matrix():
    """2 million predicates x 500 labels (10^9 candidate features; W as a
    dense matrix would be 8 GB): numpy's peak allocation stays O(predicates)."""
    import tracemalloc

    spec = SyntheticSpec(
        n_events=2000,
        n_predicates=2_000_000,
        n_labels=500,
        active_per_event=10,
        n_support=5,
        n_copies=0,
        n_conjunctions=0,
        min_support_count=20,
        seed=2,
    )
    tracemalloc.start()
    try:
        d = generate(spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 400 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    assert len(d.indices) / d.n_events == pytest.approx(10, rel=0.05)
    assert len(d.true_support) == 5 and len(d.true_feature_ids()) == 5
    assert d.planted_scores().shape == (2000, 500)
