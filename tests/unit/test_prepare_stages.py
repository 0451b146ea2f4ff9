"""The prepare stages' pure functions (data/dictionary.py, data/indexing.py)
that both engines run: counts add up over parts of the events, the cutoff
and numbering, indexing with unknown features and labels, and merging that
does not depend on the order rows arrive in."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sparkmaxent.data.dictionary import count_features, number_features
from sparkmaxent.data.indexing import index_table, merge_table, unknown_occurrences
from sparkmaxent.data.schema import FEATURES_SCHEMA
from sparkmaxent.data.stages import lookup_runs

EVENTS = pa.table(
    {
        "event_id": pa.array([0, 1, 2, 3, 4], pa.int64()),
        "group": pa.array([0, 1, 2, 3, 4], pa.int64()),
        "weight": [1.0, 0.5, 2.0, 0.25, 0.125],
        "label": ["A", "B", "A", "Z", "A"],
        "features": [["x", "y", "x"], ["z"], ["y", "x"], ["w", "x"], ["x", "y", "x"]],
        "values": [[1.0, 2.0, 3.0], [1.0], [2.0, 4.0], [1.0, 1.0], [1.0, 2.0, 3.0]],
    }
)


def test_counts_of_parts_add_up_to_the_counts_of_the_whole():
    whole = number_features(count_features(EVENTS), cutoff=0)
    parts = pa.concat_tables([count_features(EVENTS.slice(0, 2)), count_features(EVENTS.slice(2))])
    assert number_features(parts, cutoff=0).equals(whole)
    assert whole.schema == FEATURES_SCHEMA
    # x once per event however often it repeats: 1 + 2 + 0.25 + 0.125
    assert whole.to_pylist() == [
        {"feature": "w", "id": 0, "count": 0.25},
        {"feature": "x", "id": 1, "count": 3.375},
        {"feature": "y", "id": 2, "count": 3.125},
        {"feature": "z", "id": 3, "count": 0.5},
    ]
    kept = number_features(parts, cutoff=1)
    assert kept.column("feature").to_pylist() == ["x", "y"]
    assert kept.column("id").to_pylist() == [0, 1]


def test_indexing_sums_repeats_drops_unknown_features_and_numbers_unseen_labels():
    dictionary = number_features(count_features(EVENTS.slice(0, 3)), cutoff=0)  # x y z
    out = index_table(EVENTS, dictionary, "multiclass", ["A", "B"], ["Z"])
    assert out.column("indices").to_pylist() == [[0, 1], [2], [0, 1], [0], [0, 1]]
    assert out.column("values").to_pylist() == [[4.0, 2.0], [1.0], [4.0, 2.0], [1.0], [4.0, 2.0]]
    assert out.column("label").to_pylist() == [0, 1, 0, -1, 0]
    binary = index_table(EVENTS, dictionary, "multiclass", ["A", "B"], ["Z"], binary=True)
    assert {v for row in binary.column("values").to_pylist() for v in row} == {1.0}
    assert unknown_occurrences(EVENTS, dictionary) == (1, 11)  # w
    # per batch, as the Spark engine indexes: the same rows
    batches = [
        index_table(b, dictionary, "multiclass", ["A", "B"], ["Z"])
        for b in EVENTS.to_batches(max_chunksize=2)
    ]
    assert pa.concat_tables(batches).equals(out)


def test_merging_does_not_depend_on_the_order_of_rows():
    dictionary = number_features(count_features(EVENTS), cutoff=0)
    events = index_table(EVENTS, dictionary, "multiclass", ["A", "B", "Z"], [])
    merged = merge_table(events, "multiclass")
    assert merged.column("event_id").to_pylist() == [0, 1, 3]
    assert merged.column("weight").to_pylist() == [3.125, 0.5, 0.25]  # events 0, 2 and 4
    rng = np.random.default_rng(0)
    for _ in range(5):
        shuffled = events.take(pa.array(rng.permutation(events.num_rows)))
        assert merge_table(shuffled, "multiclass").equals(merged)


def test_candidate_events_index_and_merge_per_candidate():
    events = pa.table(
        {
            "event_id": pa.array([0, 1], pa.int64()),
            "group": pa.array([0, 1], pa.int64()),
            "weight": [1.0, 3.0],
            "correct": [[True, False], [True, False]],
            "features": [["a", "b", "a"], ["b", "a", "a"]],
            "values": [[1.0, 1.0, 2.0], [1.0, 1.0, 2.0]],
            "cand": pa.array([[0, 1, 0], [1, 0, 0]], pa.list_(pa.int32())),
        }
    )
    dictionary = number_features(count_features(events), cutoff=0)
    out = index_table(events, dictionary, "candidates", [], [])
    assert out.column("cand_nnz").to_pylist() == [[1, 1], [1, 1]]
    assert out.column("indices").to_pylist() == [[0, 1], [0, 1]]
    assert out.column("values").to_pylist() == [[3.0, 1.0], [3.0, 1.0]]
    merged = merge_table(out, "candidates")
    assert merged.num_rows == 1 and merged.column("weight").to_pylist() == [4.0]


def test_merging_groups_as_comparing_whole_rows_in_python_would():
    """merge_table's byte-string keys against a plain reference: rows equal
    as Python values (-0.0 == 0.0; lists of other lengths never equal)."""
    rng = np.random.default_rng(3)
    n = 400
    n_cands = rng.integers(1, 3, n)
    nnz = [rng.integers(0, 3, c).tolist() for c in n_cands]
    indices = [rng.integers(0, 2, sum(z)).tolist() for z in nnz]
    events = pa.table(
        {
            "weight": rng.random(n),
            "correct": [(rng.random(c) < 0.5).tolist() for c in n_cands],
            "cand_nnz": pa.array(nnz, pa.list_(pa.int32())),
            "indices": pa.array(indices, pa.list_(pa.int32())),
            "values": [rng.choice([1.0, 0.0, -0.0], len(i)).tolist() for i in indices],
            "event_id": pa.array(rng.permutation(n), pa.int64()),
            "group": pa.array(rng.integers(0, 9, n), pa.int64()),
        }
    )
    for table in (events, events.slice(7)):  # a slice: list offsets not at 0
        expected: dict[tuple, list] = {}
        for row in table.sort_by("event_id").to_pylist():
            key = tuple(tuple(row[c]) for c in ("correct", "cand_nnz", "indices", "values"))
            expected.setdefault(key, []).append(row)
        merged = merge_table(table, "candidates").to_pylist()
        assert [r["event_id"] for r in merged] == [g[0]["event_id"] for g in expected.values()]
        assert [r["group"] for r in merged] == [
            min(e["group"] for e in g) for g in expected.values()
        ]
        weights = [sum(e["weight"] for e in g) for g in expected.values()]
        assert np.allclose([r["weight"] for r in merged], weights)
    assert len(expected) < table.num_rows  # some rows did merge


def test_lookup_runs_gather_batches_until_a_dictionarys_worth_of_occurrences():
    """The Spark engine looks features up per run of batches (one hash set
    of the dictionary a run): the runs hold the batches' rows in order, each
    but the last at least as many occurrences as the dictionary has rows."""
    dictionary = number_features(count_features(EVENTS), cutoff=0)  # 4 features
    batches = EVENTS.to_batches(max_chunksize=1)  # 3, 1, 2, 2, 3 occurrences
    runs = list(lookup_runs(iter(batches), dictionary.num_rows))
    assert [r.num_rows for r in runs] == [2, 2, 1]
    assert pa.concat_tables(runs).equals(pa.Table.from_batches(batches))
    indexed = [index_table(r, dictionary, "multiclass", ["A", "B"], ["Z"]) for r in runs]
    whole = index_table(EVENTS, dictionary, "multiclass", ["A", "B"], ["Z"])
    assert pa.concat_tables(indexed).equals(whole)
    assert [r.num_rows for r in lookup_runs(iter(batches), 1)] == [1] * 5
    assert list(lookup_runs(iter([]), 4)) == []
