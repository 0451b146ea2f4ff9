"""The lattice on Spark: the configurations counted on the executors give
the lattice a local count gives, candidate scoring on executors picks
what local scoring picks, a lattice model trained from text on Spark
survives save, load, predict and evaluate, and the widened blocks cached
by both Spark backends give the model of widening in every pass."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from sparkmaxent import api
from sparkmaxent.backends.expanded import ExpandedBackend
from sparkmaxent.backends.frame import FrameBackend
from sparkmaxent.backends.local import LocalBackend
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.config import Config, train_config
from sparkmaxent.data.load import read_blocks
from sparkmaxent.data.prepare import prepare
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.kernels import LossGradTask, Weights
from sparkmaxent.methods.lattice.build import build_lattice, choose_atoms, count_configurations
from sparkmaxent.methods.lattice.select import CandidateScorer, Optimized
from sparkmaxent.model import MaxentModel
from sparkmaxent.model_conjunctions import Conjunctions

from .helpers import written_multiclass

#: the fixture's splits are prepared in the driver's process below this size
IN_PROCESS = 10_000


def write_text(path: str, seed: int, m: int) -> None:
    """Maxent-format events: label yes when w=a and t=b fire together, or
    c fires without them; 8% flipped."""
    rng = np.random.default_rng(seed)
    names = ["w=a", "t=b", "c", "d", "e", "f"]
    with open(path, "w") as f:
        for _ in range(m):
            on = rng.random(len(names)) < 0.4
            y = (on[0] and on[1]) or (on[2] and not on[0] and not on[1])
            y = y != (rng.random() < 0.08)
            feats = " ".join(n for n, o in zip(names, on) if o)
            f.write(f"{'yes' if y else 'no'} {feats}\n")


@pytest.fixture(scope="module")
def datasets(spark, tmp_path_factory):
    """The three splits prepared in the driver's process: a Spark prepare of
    these few thousand events runs several small Spark jobs a split, which
    were the fixture's whole cost, and both engines give the same dataset
    (tests/spark/test_local_prepare.py). The lattice passes below still read
    the prepared events on Spark."""
    root = tmp_path_factory.mktemp("lattice")
    dirs = {}
    for split, seed, m in (("train", 0, 1500), ("heldout", 1, 700), ("test", 2, 700)):
        write_text(str(root / f"{split}.txt"), seed, m)
        dirs[split] = str(root / split)
        prepare(
            spark,
            [str(root / f"{split}.txt")],
            dirs[split],
            "maxent",
            merge_duplicates=split == "train",
            vocabulary=None if split == "train" else dirs["train"],
            in_process_max_events=IN_PROCESS,
        )
    dirs["test_text"] = str(root / "test.txt")
    return dirs


def test_spark_build_and_scoring_equal_local(spark, datasets):
    info = DatasetInfo.load(datasets["train"])
    local = LocalBackend(read_blocks(datasets["train"], info, n_blocks=2), info.space(True), info)
    with SparkBackend(spark, datasets["train"], bias=True, partitions=3) as remote:
        atoms = choose_atoms(remote, 0)
        np.testing.assert_array_equal(atoms, choose_atoms(local, 0))
        a = build_lattice(count_configurations(remote, atoms), atoms, 1000)
    b = build_lattice(count_configurations(local, atoms), atoms, 1000)
    np.testing.assert_array_equal(a.masks, b.masks)
    np.testing.assert_allclose(a.counts, b.counts)
    assert (a.desc != b.desc).nnz == 0
    arr = a.arrays(5.0)
    on_spark = CandidateScorer(arr, spark.sparkContext, n_batches=4)
    here = CandidateScorer(arr)
    opt = Optimized.empty(a.n_nodes, 2)
    try:
        for _ in range(4):
            cands = np.flatnonzero(opt.decider != np.arange(a.n_nodes))
            best = on_spark.best(opt, cands)
            assert best == pytest.approx(here.best(opt, cands))
            opt.add(arr, best[1])
    finally:
        on_spark.close()
    assert on_spark.jobs == 4 and on_spark.scored > 0


def test_lattice_model_from_text_on_spark(spark, datasets, tmp_path):
    # few selection steps and generalization rounds: each fit is tens of Spark jobs
    lattice = {"max_steps": 4, "generalize_patience": 1, "unconstrain_fraction": 0.5}
    on_spark = dataclasses.replace(Config().data, in_process_max_events=0)  # not in-process
    cfg = Config(
        train=train_config(method="lattice", backend="spark", gtol=1e-4, **lattice), data=on_spark
    )
    out = str(tmp_path / "run")
    model, report = api.fit(spark, cfg, datasets["train"], out, datasets["heldout"])
    assert report["lattice"]["nodes"] > 0 and model.conjunctions is not None
    back = MaxentModel.load(os.path.join(out, api.MODEL_DIR))
    assert back.conjunctions.tuples() == model.conjunctions.tuples()
    names = [n for n, _ in back.selected_features()]
    assert any("w=a" in n and "t=b" in n for n in names), names
    scored = api.evaluate_model(spark, back, datasets["test"])
    assert scored["accuracy"] > 0.88
    preds = str(tmp_path / "preds")
    api.predict(
        spark, back, os.path.join(out, api.MODEL_DIR), datasets["test_text"], preds, "maxent"
    )
    t = spark.read.parquet(preds).toArrow()
    assert t.num_rows == 700
    hits = np.mean(np.array(t.column("predicted").to_pylist()) == t.column("label").to_pylist())
    assert hits == pytest.approx(scored["accuracy"])


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_cached_widened_blocks_on_spark_give_the_model_of_widening_in_each_pass(
    spark, datasets, monkeypatch
):
    """Generalization on the Spark backend with the widened blocks cached
    as a derived RDD (``SparkBackend.derived``) fits the model of widening
    in every pass, with the same passes, and releases the derived RDDs."""
    lattice = {"max_steps": 4, "generalize_patience": 1, "unconstrain_fraction": 0.5}
    on_spark = dataclasses.replace(Config().data, in_process_max_events=0)
    persistent = spark.sparkContext._jsc.getPersistentRDDs
    before = set(persistent().keys())
    derived, made = SparkBackend.derived, []

    def counted(self, *args):
        made.append(args[-1])
        return derived(self, *args)

    monkeypatch.setattr(SparkBackend, "derived", counted)
    runs = {}
    for cache in (True, False):
        cfg = Config(
            train=train_config(
                method="lattice", backend="spark", gtol=1e-4, cache_widened=cache, **lattice
            ),
            data=on_spark,
        )
        runs[cache] = api.train_model(spark, cfg, datasets["train"], datasets["heldout"])
    assert len(made) == 2, made  # training and held-out blocks, in the cached run only
    (cached, rep_c), (plain, rep_p) = runs[True], runs[False]
    np.testing.assert_array_equal(cached.weights.ids, plain.weights.ids)
    np.testing.assert_array_equal(cached.weights.values, plain.weights.values)
    gen_c, gen_p = rep_c["generalization"], rep_p["generalization"]
    assert [r["passes"] for r in gen_c["trace"]] == [r["passes"] for r in gen_p["trace"]]
    assert gen_c["constraints_before"] > 1 and rep_c["passes"] == rep_p["passes"]
    assert set(persistent().keys()) == before


@pytest.mark.slow  # two lattice trainings on Spark; the cache's exactness is checked below
@pytest.mark.ci
def test_cached_widened_blocks_on_the_frame_backend_give_the_rdd_backends_model(
    spark, datasets, monkeypatch
):
    """The DataFrame backend caches the widened blocks as a derived
    DataFrame (``FrameBackend.derived``): its lattice model is the one of
    widening in every pass and the RDD backend's (cached), with the same
    passes, and the derived DataFrames are released."""
    lattice = {"max_steps": 4, "generalize_patience": 1, "unconstrain_fraction": 0.5}
    on_spark = dataclasses.replace(Config().data, in_process_max_events=0)
    persistent = spark.sparkContext._jsc.getPersistentRDDs
    before = set(persistent().keys())
    derived, made = FrameBackend.derived, []

    def counted(self, *args):
        made.append(args[-1])
        return derived(self, *args)

    monkeypatch.setattr(FrameBackend, "derived", counted)
    runs = {}
    for backend, cache in (("spark-frame", True), ("spark-frame", False), ("spark-rdd", True)):
        cfg = Config(
            train=train_config(
                method="lattice", backend=backend, gtol=1e-4, cache_widened=cache, **lattice
            ),
            data=on_spark,
        )
        runs[backend, cache] = api.train_model(spark, cfg, datasets["train"], datasets["heldout"])
    assert len(made) == 2, made  # training and held-out blocks, in the cached frame run only
    cached, rep_c = runs["spark-frame", True]
    plain, rdd = runs["spark-frame", False][0], runs["spark-rdd", True][0]
    # the same backend: bit for bit; the RDD backend merges its partial sums
    # in another order (treeReduce), so its weights agree to rounding
    np.testing.assert_array_equal(cached.weights.values, plain.weights.values)
    np.testing.assert_allclose(cached.weights.values, rdd.weights.values, rtol=1e-9, atol=1e-12)
    for other, rep_o in (runs["spark-frame", False], runs["spark-rdd", True]):
        np.testing.assert_array_equal(cached.weights.ids, other.weights.ids)
        gen_c, gen_o = rep_c["generalization"], rep_o["generalization"]
        assert [r["passes"] for r in gen_c["trace"]] == [r["passes"] for r in gen_o["trace"]]
        assert rep_c["passes"] == rep_o["passes"]
    assert rep_c["generalization"]["constraints_before"] > 1
    assert set(persistent().keys()) == before


def test_frame_backend_widened_cache_is_exact(spark, tmp_path):
    """Every pass on the cached widened blocks equals widening in the pass,
    bit for bit, for two conjunction sets (two lattices) over one base
    backend and two weight vectors (two active sets) each: a cache never
    serves another set's blocks; each is released on close."""
    problem = written_multiclass(str(tmp_path / "mc"), 12, active_per_event=5)
    X = problem.block.X.tocsr()
    pairs = sorted({tuple(X.indices[X.indptr[i] : X.indptr[i] + 2]) for i in range(60)})
    sets = [
        Conjunctions.from_tuples(12, pairs[:4]),
        Conjunctions.from_tuples(12, pairs[4:7] + [(0, 1, 2)]),
    ]
    rng = np.random.default_rng(3)
    persistent = spark.sparkContext._jsc.getPersistentRDDs
    with FrameBackend(spark, problem.directory, problem.info, bias=True, partitions=2) as fb:
        before = set(persistent().keys())
        for conj in sets:
            cached = ExpandedBackend(fb, conj, cache=True)
            plain = ExpandedBackend(fb, conj, cache=False)
            assert isinstance(cached.widened, FrameBackend) and plain.widened is None
            space = cached.space
            local = conj.expand(problem.block)
            for _ in range(2):
                # weights on atoms and on every conjunction (ids >= 12 * K)
                ids = np.union1d(
                    rng.choice(12 * space.n_labels, 8, replace=False),
                    np.arange(12 * space.n_labels, space.n_features, 2),
                )
                w = Weights(ids, rng.normal(size=len(ids)), rng.normal(size=space.n_labels))
                a = cached.run(LossGradTask(space, w))
                b = plain.run(LossGradTask(space, w))
                assert a.loss == b.loss and a.weight == b.weight
                np.testing.assert_array_equal(a.grad, b.grad)
                want = LossGradTask(space, w)(local)
                assert a.loss == pytest.approx(want.loss, rel=1e-12)
                np.testing.assert_allclose(a.grad, want.grad, rtol=1e-10, atol=1e-12)
            cached.close()
            assert cached.widened is None
        assert set(persistent().keys()) == before
        assert fb.blocks is not None  # the base keeps its own blocks
