"""Both prepare engines (data/stages.py: Spark per batch, in-process on
whole tables) on a sample of a real corpus: the same dictionary ids,
indexed events and dataset.json for a held-out split with a count cutoff
and binary predicates, as the planted inputs of test_local_prepare.py."""

from __future__ import annotations

import os

import pytest

from sparkmaxent.data import prepare as prep
from sparkmaxent.data.split import prepare_split

from .test_local_prepare import IN_PROCESS, SPARK_ONLY, _dataset, _spy

N_SENTENCES = 300


@pytest.fixture(scope="module")
def conll_sample(shared_data, tmp_path_factory):
    """The first ``N_SENTENCES`` sentences of CoNLL-2000's training file."""
    with open(os.path.join(shared_data, "conll2000", "train.txt"), encoding="utf-8") as f:
        sentences = f.read().split("\n\n")[:N_SENTENCES]
    path = tmp_path_factory.mktemp("conll") / "sample.txt"
    path.write_text("\n\n".join(sentences) + "\n")
    return str(path)


@pytest.mark.slow
def test_both_engines_split_and_prepare_conll_alike(spark, tmp_path, conll_sample, monkeypatch):
    calls: list = []
    monkeypatch.setattr(prep, "build_local", _spy(prep.build_local, calls))
    got = {}
    for limit in (SPARK_ONLY, IN_PROCESS):
        train, held = str(tmp_path / f"train-{limit}"), str(tmp_path / f"held-{limit}")
        prepare_split(
            spark,
            [conll_sample],
            train,
            held,
            "conll",
            fraction=0.2,
            seed=7,
            cutoff=2,
            binary=True,
            partitions=3,
            in_process_max_events=limit,
        )
        got[limit] = (_dataset(train, "multiclass"), _dataset(held, "multiclass"))
        vocabulary = got[limit][1][2]["source"].pop("vocabulary")  # each engine's training part
        assert vocabulary.rstrip("/").endswith(f"train-{limit}")
    assert calls == ["build_local", "build_local"]  # the in-process run: train and held-out
    for part in (0, 1):
        (ev_s, f_s, info_s), (ev_l, f_l, info_l) = got[SPARK_ONLY][part], got[IN_PROCESS][part]
        assert ev_l.num_rows > 0 and f_l.num_rows > 0
        assert f_l.to_pylist() == f_s.to_pylist()  # dictionary: features, ids, counts
        assert ev_l.to_pylist() == ev_s.to_pylist()  # indexed (and merged) events
        assert info_l == info_s
    (_, features, train_info), (_, _, held_info) = got[IN_PROCESS]
    assert min(features.column("count").to_pylist()) >= 2  # the cutoff
    assert train_info["source"]["binary"] and held_info["source"]["binary"]
    assert held_info["unknown_features"] > 0  # predicates only the held-out part has
    n_tokens = train_info["total_weight"] + held_info["total_weight"]
    assert 0.1 < held_info["total_weight"] / n_tokens < 0.3
