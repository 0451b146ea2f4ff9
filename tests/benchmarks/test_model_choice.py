"""benchmarks/model_choice.py: scikit-learn's folds are the events of ours;
stage rows keep their held-out curve with the chosen stage; a path's point
costs are read from the log, held-out and k-fold paths, mix by mix."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from benchmarks.model_choice import PointCosts, event_folds, stage_points
from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.folds import fold_backends
from sparkmaxent.config import train_config
from sparkmaxent.kernels import MULTICLASS, Weights
from sparkmaxent.kernels.predict import EventScoresTask
from sparkmaxent.selection.base import TrainingContext
from sparkmaxent.train import train

from ..unit.helpers import random_block


def test_event_folds_hold_the_events_of_each_fold_backend():
    rng = np.random.default_rng(3)
    block, space = random_block(rng, MULTICLASS)
    group = np.sort(rng.integers(0, block.n_events // 2, block.n_events))  # units of 1-4 events
    block = dataclasses.replace(block, group=group, event_id=np.arange(block.n_events))
    ctx = TrainingContext(
        LocalBackend([block], space), train_config(method="l2", folds=3, fold_seed=7)
    )
    fold = event_folds(block, 3, 7)
    assert set(np.unique(fold)) == {0, 1, 2}
    task = EventScoresTask(space, Weights.zeros(space), None)
    for f, (part, validation) in enumerate(fold_backends(ctx)):
        assert np.array_equal(np.sort(validation.run(task).event_id), np.flatnonzero(fold == f))
        assert np.array_equal(np.sort(part.run(task).event_id), np.flatnonzero(fold != f))


def test_stage_points_spread_over_the_run_and_keep_the_chosen_stage():
    rounds = [
        {"round": i + 1, "active": i + 1, "heldout_score": -1.0 / (i + 1), "chosen": i == 36}
        for i in range(1000)
    ]
    points = stage_points(rounds, count=10)
    stages = [p["round"] for p in points]
    assert stages[0] == 1 and stages[-1] == 1000 and 37 in stages
    assert len(points) == 11 and stages == sorted(set(stages))
    assert points[stages.index(37)]["heldout_score"] == -1.0 / 37
    short = stage_points(rounds[:5], count=10)
    assert [p["round"] for p in short] == [1, 2, 3, 4, 5]
    assert stage_points([]) == []


def test_a_run_of_some_corpora_replaces_their_rows_and_keeps_the_others():
    from benchmarks.model_choice import merged_rows

    earlier = [
        {"corpus": "pp", "method": "grafting", "test_score": 83.0},
        {"corpus": "conll", "conll_sentences": 2000, "method": "grafting", "test_score": 90.0},
        {"corpus": "conll", "conll_sentences": 0, "method": "grafting", "test_score": 93.0},
        {"corpus": "brown", "method": "sklearn-l2", "test_score": 58.0},
    ]
    rows = [
        {"corpus": "conll", "conll_sentences": 2000, "method": "grafting", "test_score": 91.0},
        {"corpus": "pp", "method": "sklearn-l2", "test_score": 83.5},
    ]
    page = merged_rows(earlier, rows)
    assert [(r["corpus"], r.get("conll_sentences"), r["test_score"]) for r in page] == [
        ("pp", None, 83.0),
        ("pp", None, 83.5),
        ("conll", 0, 93.0),
        ("conll", 2000, 91.0),
        ("brown", None, 58.0),
    ]


def test_an_l1_comb_row_that_kept_the_atoms_says_so():
    from benchmarks.model_choice import atom_paths

    orig = {"corpus": "pp", "method": "l1-Orig", "test_score": 83.1, "features": 3236}
    comb = {**orig, "method": "l1-Comb", "versus_atoms": {"kept": "atoms"}}
    by = {("pp", None, r["method"]): r for r in (orig, comb)}
    text, met = atom_paths(by, "pp", None)
    assert "the atoms' path kept" in text and "not every point certified" not in text
    assert met  # the same model as l1-Orig's
    by[("pp", None, "l1-Comb")] = {**comb, "versus_atoms": {"kept": "combination"}}
    text, met = atom_paths(by, "pp", None)
    assert "not every point certified" in text and not met  # no combination facts


def test_point_costs_follow_held_out_and_k_fold_paths_mix_by_mix(caplog):
    caplog.set_level(logging.INFO, logger="sparkmaxent.choice")
    block, space = random_block(np.random.default_rng(3), MULTICLASS)
    block = dataclasses.replace(block, group=np.arange(block.n_events))
    keys = dict(method="grafting", path=True, l1_grid=[0.05, 0.02], l2_mixes=[0, 0.5])
    keys.update(mix_stop=False, patience=0, mix_max=0.5)  # the listed mixes only
    choice = logging.getLogger("sparkmaxent.choice")
    for folds in (1, 3):
        costs = PointCosts()
        choice.addHandler(costs)
        try:
            held = LocalBackend([block], space) if folds == 1 else None
            train(LocalBackend([block], space), train_config(folds=folds, **keys), held)
        finally:
            choice.removeHandler(costs)
        assert [p["mix"] for p in costs.points] == [0, 0, 1, 1]  # two points of each mix
        assert [p["l1"] for p in costs.points] == [0.05, 0.02] * 2
        assert all(p["passes"] > 0 for p in costs.points)
        if folds > 1:
            assert all(len(p["fold_scores"]) == 3 and "mean_score" in p for p in costs.points)


def test_a_long_variant_suffix_is_cut_to_a_file_name_with_a_hash_of_the_whole():
    from benchmarks.model_choice import MAX_SUFFIX, variant_suffix

    assert variant_suffix([]) == ""
    assert variant_suffix([("max_seconds", 2400)]) == "_max_seconds-2400"
    grid = [0.039101541718177105 / 2**i for i in range(9)]
    long = variant_suffix([("l2_mixes", [0.99]), ("l1_grid", grid)])
    assert len(long) == MAX_SUFFIX and long.startswith("_l2_mixes-0.99_l1_grid-0.0391")
    assert long != variant_suffix([("l2_mixes", [0.99]), ("l1_grid", grid[:-1])])


def _path(method, wall, **more):
    return {"corpus": "brown", "method": method, "test_score": 58.0, "wall_s": wall, **more}


def test_path_vs_l2_pairs_rows_of_one_backend_and_choice_mode_only():
    from benchmarks.model_choice import path_vs_l2, targets

    rows = [
        _path("grafting", 250.0),  # the defaults: held-out
        _path("l2", 3800.0, folds=5, folds_automatic=True),  # l2's automatic 5 folds
        _path("grafting one_se=True", 10.0),  # a variant: never paired
    ]
    by = {name: (v, met) for name, v, met in path_vs_l2(rows)}
    assert by["brown in-process, held-out"] == ("no pair", False)  # 250 s against 5 folds: none
    assert "brown in-process, 5 folds" not in by  # no grafting row with 5 folds
    rows.append(_path("l2 folds=1", 80.0, commit="abc", load_average=[2.0, 3.4, 1.2]))
    by = {name: (v, met) for name, v, met in path_vs_l2(rows)}
    value, met = by["brown in-process, held-out"]
    assert "grafting 250.0 s / l2 folds=1 80.0 s = 3.12x" in value and not met
    assert "loads unknown, 1-3" in value
    rows.append(_path("grafting folds=1", 60.0, cpu_s=50.0))  # l2's settings: preferred
    value, met = {n: (v, m) for n, v, m in path_vs_l2(rows)}["brown in-process, held-out"]
    assert "grafting folds=1 60.0 s / l2 folds=1 80.0 s = 0.75x" in value and met
    assert "CPU" not in value  # l2's row has no CPU seconds
    rows[-2]["cpu_s"] = 40.0
    value, _ = {n: (v, m) for n, v, m in path_vs_l2(rows)}["brown in-process, held-out"]
    assert "= 0.75x, CPU 50.0 s / 40.0 s (commits" in value
    spark = [
        _path("grafting folds=1 backend=spark", 300.0, backend="spark"),
        _path("l2 folds=1 backend=spark", 200.0, backend="spark"),
    ]
    by = {name: (v, met) for name, v, met in path_vs_l2(rows + spark)}
    assert by["brown in-process, held-out"][1]  # the Spark rows are not in-process ones
    value, met = by["brown on Spark local[2] (spark), held-out"]
    assert "= 1.50x" in value and not met
    entry = targets(rows + spark)["path_vs_l2"]
    assert not entry["met"] and "conll 2000 in-process, held-out no pair" in entry["value"]


def test_path_vs_l2_bounds_a_ratio_by_a_path_stopped_at_its_cap():
    from benchmarks.model_choice import wall_ratio

    done = {"method": "l2 folds=1", "wall_s": 100.0}
    stopped = {"method": "grafting folds=1", "wall_s": 150.0, "unfinished": True}
    assert "= > 1.50x (grafting stopped)" in wall_ratio(stopped, done)[0]
    assert not wall_ratio(stopped, done)[1]
    text, met = wall_ratio({**stopped, "wall_s": 50.0}, done)
    assert "grafting stopped first" in text and not met  # no ratio either way
    l2_stopped = {**done, "wall_s": 400.0, "unfinished": True}
    text, met = wall_ratio({"method": "grafting", "wall_s": 300.0}, l2_stopped)
    assert "= < 0.75x (l2 stopped)" in text and met


def _split_text_events(spark, tmp_path, n_events: int, n_words: int, per_event: int, seed: int):
    """Training and held-out datasets (a 0.2 split, 2 partitions) of a small
    3-label text corpus: ``n_events`` lines of ``per_event`` draws from
    ``n_words`` shared words and one of four words bound to the label."""
    from sparkmaxent.data.split import prepare_split

    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n_events):
        label = i % 3
        words = {f"w{int(w)}" for w in rng.integers(0, n_words, per_event)}
        lines.append(f"{'abc'[label]} " + " ".join(sorted(words | {f"l{label}_{i % 4}"})))
    text = tmp_path / "events.maxent"
    text.write_text("\n".join(lines) + "\n")
    dirs = {s: str(tmp_path / s) for s in ("train", "heldout")}
    prepare_split(spark, [str(text)], dirs["train"], dirs["heldout"], "maxent", fraction=0.2,
                  seed=0, partitions=2, overwrite=True)  # fmt: skip
    return dirs


@pytest.mark.slow
def test_spark_backend_chooses_as_the_in_process_one(spark, tmp_path, caplog):
    """--backend spark: the same l2 path on the same events, each pass a Spark
    job over two partitions, chooses the same point with the same weights."""
    caplog.set_level(logging.INFO, logger="sparkmaxent.choice")
    from benchmarks.model_choice import SPARK_PARTITIONS, backend, capped_train
    from sparkmaxent.backends.spark import SparkBackend

    dirs = _split_text_events(spark, tmp_path, n_events=240, n_words=12, per_event=5, seed=5)
    on_spark = backend(dirs["train"], "spark", spark)
    assert isinstance(on_spark, SparkBackend) and SPARK_PARTITIONS == 2
    on_spark.close()
    keys = dict(method="l2", path=True, folds=1, l2_grid=[1e-1, 1e-2, 1e-3], patience=0)
    fits = {}
    for kind, session in (("local", None), ("spark", spark)):
        costs = PointCosts()
        fits[kind] = (capped_train({**keys, "backend": kind}, dirs, 0.0, costs, session), costs)
    (local, _), (remote, remote_costs) = fits["local"], fits["spark"]
    assert [p["l2"] for p in remote_costs.points] == [1e-1, 1e-2, 1e-3]
    assert [p["passes"] > 0 for p in remote_costs.points] == [True] * 3
    space = backend(dirs["train"]).space
    # the refit at the chosen gamma2: another choice would give other weights
    theta = [fit.weights.to_dense(space) for fit in (local, remote)]
    assert np.abs(theta[0]).max() > 0.1
    assert np.allclose(theta[0], theta[1], atol=1e-5)


@pytest.mark.slow
@pytest.mark.ci  # CI's slow step runs it
def test_a_spark_path_stopped_by_sigterm_keeps_the_session_usable(spark, tmp_path):
    """SIGTERM during a Spark path (most of its time is inside JVM calls):
    PathCapped, the session's jobs cancelled, and the session still answers
    correctly afterwards (the stopped run's best point is then scored)."""
    import os
    import signal
    import threading

    from benchmarks.model_choice import PathCapped, capped_train

    dirs = _split_text_events(spark, tmp_path, n_events=400, n_words=40, per_event=8, seed=7)
    grid = [float(g) for g in np.geomspace(1.0, 1e-6, 60)]
    keys = dict(method="l2", path=True, folds=1, l2_grid=grid, patience=0, backend="spark")
    timer = threading.Timer(4.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        with pytest.raises(PathCapped, match="SIGTERM"):
            capped_train(keys, dirs, 0.0, PointCosts(), spark)
    finally:
        timer.cancel()
    assert spark.range(7).count() == 7
    jvm = spark.sparkContext._jvm
    assert jvm.java.lang.System.getProperty("java.specification.version") == "17"
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []


def test_point_watch_keeps_each_path_point_of_a_combination_run_as_it_is_scored():
    """Both paths of an l1-Comb run (the atoms' path, then the combination
    path), each point with the certificate's verdict of the report's own
    point, handed on after each; the scored_point the path calls restored."""
    import sparkmaxent.choice.path as path_module
    from benchmarks.model_choice import PointWatch
    from sparkmaxent.data import synthetic
    from sparkmaxent.kernels import Space

    spec = synthetic.SyntheticSpec(
        n_events=1200, n_predicates=60, n_labels=3, n_support=6, n_copies=0,
        n_conjunctions=2, min_support_count=30, seed=11,
    )  # fmt: skip
    tr, he = synthetic.split(synthetic.generate(spec), [0.75, 0.25], seed=0)
    space = Space(MULTICLASS, 60, 3, bias=True)
    grid = [4e-3, 2e-3]
    keys = dict(method="grafting", combination_degree=2, path=True, l1_grid=grid, l2_mixes=[0])
    seen: list[int] = []
    original = path_module.scored_point
    with PointWatch(lambda points: seen.append(len(points))) as watch:
        res = train(
            LocalBackend([tr.block()], space),
            train_config(patience=0, refit=False, n_best=4, gtol=1e-9, **keys),
            LocalBackend([he.block()], space),
        )
    assert path_module.scored_point is original
    assert seen == [1, 2, 3, 4]
    assert [p["fit"] for p in watch.points] == ["atoms"] * 2 + ["combination"] * 2
    assert [p["l1"] for p in watch.points] == grid * 2
    path = res.report.path
    combined = watch.points[2:]
    assert [p["kkt_passed"] for p in combined] == [p.kkt_passed for p in path.points]
    assert [p["heldout_score"] for p in combined] == [p.score for p in path.points]
    assert all(p["kkt_passed"] and p["seconds"] > 0 and p["passes"] > 0 for p in watch.points)
    for fit, part in (("atoms", watch.points[:2]), ("combination", combined)):
        assert watch.best[fit][2] is max(part, key=lambda p: p["heldout_score"])


def test_conll_full_path_is_met_only_by_a_path_its_stop_rule_ended_certified_in_time():
    from benchmarks.model_choice import FULL_COMBINATION, POINT_SECONDS, conll_full_path

    corpus, n = FULL_COMBINATION

    def point(fit, gamma, seconds, certified=True):
        return {"fit": fit, "l1": gamma, "features": 900, "passes": 20, "seconds": seconds,
                "kkt_passed": certified, "heldout_score": -0.2}  # fmt: skip

    points = [point("atoms", 1e-4, 60.0), point("combination", 1e-4, 600.0)]
    base = {"corpus": corpus, "conll_sentences": n, "load_average": [5.0, 4.0, 3.0]}
    comb = {**base, "method": "l1-Comb", "test_score": 93.1, "features": 2000,
            "points_run": points, "wall_s": 700.0, "path_stop": "stop rule: 2 after"}  # fmt: skip
    orig = {**base, "method": "l1-Orig", "test_score": 92.0, "features": 1500}
    other = {**comb, "conll_sentences": 2000}  # another size: not this target's
    assert conll_full_path([orig, other]) is None
    text, met = conll_full_path([comb, orig, other])
    assert met and "test chunk F1 93.10 (2,000 weights)" in text
    assert "l1-Orig 92.00 (1,500 weights)" in text
    assert "1 combination points and 1 atoms points run, 2 of 2 certified" in text
    text, met = conll_full_path([{**comb, "path_stop": "end of the grid"}, orig])
    assert not met and "path ended: end of the grid" in text  # held-out still improving
    slow = {**comb, "points_run": [*points, point("combination", 5e-5, POINT_SECONDS + 1)]}
    text, met = conll_full_path([slow, orig])
    assert not met and "slowest combination point 1,801 s" in text
    text, met = conll_full_path([{**comb, "points_run": [point("atoms", 1e-4, 9.0, None)]}])
    assert not met and "0 of 1 certified" in text
    best = {"combination": {**points[1], "test_score": 92.5}}
    stopped = {**base, "method": "l1-Comb l1_grid=[0.0001]", "unfinished": True,
               "wall_s": 4000.0, "points_run": points, "best_so_far": best}  # fmt: skip
    text, met = conll_full_path([stopped, orig])
    assert not met and text.startswith("l1-Comb l1_grid=[0.0001]: ")
    assert "path stopped after 2 points at 4,000 s" in text
    assert "combination path's best point so far 92.50 at gamma1 0.0001" in text
    text, met = conll_full_path([stopped, comb])  # either row may meet it
    assert met and " | l1-Comb: " in text


@pytest.mark.slow
def test_a_path_stopped_by_sigterm_keeps_its_points_and_the_best_point_so_far(spark, tmp_path):
    """A row per point while the path runs (``in_progress``); SIGTERM after
    the second point: an ``unfinished`` row with both points, the test score
    of the best held-out point so far, and the SIGTERM handler restored."""
    import argparse
    import os
    import signal

    from benchmarks.model_choice import ours
    from sparkmaxent.data.prepare import prepare
    from sparkmaxent.data.split import prepare_split

    rng = np.random.default_rng(7)
    texts = {}
    for split, n in (("events", 240), ("test", 90)):
        lines = []
        for i in range(n):
            label = i % 3
            words = {f"w{int(w)}" for w in rng.integers(0, 12, 5)} | {f"l{label}_{i % 4}"}
            lines.append(f"{'abc'[label]} " + " ".join(sorted(words)))
        texts[split] = tmp_path / f"{split}.maxent"
        texts[split].write_text("\n".join(lines) + "\n")
    dirs = {s: str(tmp_path / s) for s in ("train", "heldout", "test")}
    prepare_split(spark, [str(texts["events"])], dirs["train"], dirs["heldout"], "maxent",
                  fraction=0.2, seed=0, partitions=1, overwrite=True)  # fmt: skip
    prepare(spark, [str(texts["test"])], dirs["test"], "maxent", merge_duplicates=False,
            vocabulary=dirs["train"], partitions=1, overwrite=True)  # fmt: skip
    grid = [0.05, 0.02, 0.01]
    args = argparse.Namespace(set=[("l1_grid", grid)], folds=0, stage_seconds=60.0,
                              path_seconds=0.0, backend="local")  # fmt: skip
    seen: list[dict] = []

    def progress(row: dict) -> None:
        seen.append(row)
        if len(row["points_run"]) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    row = ours("synthetic", "l1-Orig", dirs, args, progress=progress)
    assert signal.getsignal(signal.SIGTERM) == before
    assert [len(r["points_run"]) for r in seen] == [1, 2] and seen[0]["in_progress"]
    assert row["unfinished"] and row["stopped_by"] == "SIGTERM"
    assert [p["l1"] for p in row["points_run"]] == grid[:2]
    best = row["best_so_far"]["atoms"]
    assert best == {**max(row["points_run"], key=lambda p: p["heldout_score"]), **best}
    assert 0 < best["test_score"] <= 100


def test_path_test_refits_every_point_of_every_mix_as_the_chosen_one_is_refitted(spark, tmp_path):
    """--path-test: each point of each l2 mix's path refitted on both parts
    and scored on test; the chosen point's refit is the model train() gave
    (the same warm-started fit), features and test score alike."""
    from benchmarks.model_choice import PointWatch, capped_train, path_test, test_score

    dirs = _split_text_events(spark, tmp_path, n_events=240, n_words=12, per_event=5, seed=5)
    dirs["test"] = dirs["heldout"]  # any prepared events to score
    grid = [2e-2, 5e-3]
    keys = dict(method="grafting", path=True, l1_grid=grid, l2_mixes=[0, 0.5], mix_stop=False,
                patience=0)  # fmt: skip
    with PointWatch(keep_fits=True) as watch:
        res = capped_train(keys, dirs, 0.0, PointCosts())
    rows = path_test("pp", dirs, watch.fits)
    assert [(r["l2_mix"], r["l1"]) for r in rows] == [(m, g) for m in (0.0, 0.5) for g in grid]
    path = res.report["path"]
    mix, gamma = path["l2_mix"], path["points"][path["chosen"]]["l1"]
    (chosen,) = [r for r in rows if (r["l2_mix"], r["l1"]) == (mix, gamma)]
    assert chosen["features"] == res.weights.nnz > 0
    assert chosen["test_score"] == round(100 * test_score("pp", dirs, res)[0], 3)
    assert all(r["subtrain_features"] > 0 and 0 < r["subtrain_test_score"] <= 100 for r in rows)


def test_sparsest_within_reports_the_fallback_only_when_no_sparse_point_gets_there():
    """The fallback applies when no refitted point with <= 10% of the
    anchor's weights is within 0.5 point of it on test; the text names the sparsest
    point that is, and the best of the sparse ones."""
    from benchmarks.model_choice import sparsest_within

    peer = {"test_score": 57.0, "features": 1000}

    def point(features: int, score: float) -> dict:
        return {"l2_mix": 0.5, "l1": 1e-3, "features": features, "test_score": score}

    points = [point(50, 50.0), point(100, 56.0), point(300, 56.6), point(900, 59.0)]
    text, fallback = sparsest_within(points, peer, 0.5, 0.1)
    assert fallback
    assert "sparsest within 0.5 point -0.40 at 300 weights (30.0%" in text
    assert "best with <= 10% -1.00 at 100 weights" in text
    text, fallback = sparsest_within([*points, point(90, 56.8)], peer, 0.5, 0.1)
    assert not fallback and "sparsest within 0.5 point -0.20 at 90 weights" in text
    text, fallback = sparsest_within([point(2000, 50.0)], peer, 0.5, 0.1)
    assert fallback and "none within 0.5 point" in text


def test_sklearn_anchor_chooses_c_for_l2_and_l1_with_the_l1_ratio_keywords():
    """LogisticRegressionCV l2 (lbfgs) and l1 (saga), and the one-vs-rest
    liblinear l1, over the held-out split, with the keywords scikit-learn
    1.10 keeps (no FutureWarning): a C of the grid each, l1's weights
    sparser than l2's."""
    import warnings
    from types import SimpleNamespace

    import scipy.sparse as sp

    from benchmarks.model_choice import sklearn_cv

    rng = np.random.default_rng(4)

    def part(n: int) -> SimpleNamespace:
        X = sp.csr_matrix((rng.random((n, 30)) < 0.3).astype(float))
        y = np.asarray(X[:, :3].toarray().argmax(axis=1))
        return SimpleNamespace(X=X, y=y, c=np.ones(n))

    tr, he = part(150), part(50)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        fits = {
            name: sklearn_cv(penalty, solver, tr, he, 3000)
            for name, penalty, solver in (
                ("l2", "l2", "lbfgs"), ("l1", "l1", "saga"), ("ovr", "l1", "liblinear")
            )
        }  # fmt: skip
    for fit in fits.values():
        assert np.isclose(np.logspace(-4, 4, 10), np.atleast_1d(fit.C_)[0]).any()
    zeros = {name: int((fit.coef_ == 0).sum()) for name, fit in fits.items()}
    assert zeros["l1"] > zeros["l2"] and zeros["ovr"] > zeros["l2"]
