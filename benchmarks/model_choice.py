"""Model choice with no user grid: every method at its defaults with
held-out choice (docs/methods/model-choice.md) against scikit-learn's
LogisticRegressionCV (l2, and l1 with saga under a time cap) on the same
held-out part.

For each corpus the training data is split at prepare time
(``data.heldout_fraction`` 0.2, seed 0, label-stratified; the held-out
part prepared with the sub-train dictionary), the test data is prepared
with the same dictionary, and then, in-process (``train.backend`` local;
``--backend`` below):

- ``grafting``: the gamma1 path (``train.choice.path``), its row written
  as soon as the choice is scored; then one cold fit at the chosen gamma1
  (``wall_s_single_fit``: the path's cost target is <= 3x that; capped by
  ``--single-fit-cap``, else ``single_fit: unfinished``);
- ``l2``: the gamma2 path (C grid of LogisticRegressionCV), likewise;
- ``l1-Comb``, ``l1-Orig``: the gamma1 path (pure l1, refitted) with
  combination features of degree 2 (Okanohara & Tsujii 2009; the test
  events widened by the model's conjunctions) and over the atoms alone,
  on the same prepared data (``--methods l1-Orig l2 l1-Comb``);
- ``sgc``, ``bayes-factor``: one run keeping its best held-out stage
  (``train.choice.best_stage``), capped at ``--stage-seconds``;
- ``sklearn-l2``: LogisticRegressionCV(Cs=10, cv = the held-out split,
  refit=True, neg_log_loss): C chosen on the same held-out part, then
  refitted on sub-train + held-out (as our paths refit); then one
  LogisticRegression fit at the
  chosen C (``wall_s_single_fit``);
- ``sklearn-l1``: the same with penalty l1, solver saga, in a child process
  killed after ``--l1-cap`` seconds (row ``timed_out``);
  ``sklearn-l1-liblinear``: l1 with liblinear (one-vs-rest for more than
  two labels), which finishes where saga does not.

With ``--path-test`` every point of a grafting run's paths is also
refitted on sub-train + held-out (on the path's backend), as the chosen
one is, and scored on test (the row's ``path_test``): never part of the
choice, only of the report of ``grafting_vs_lrcv``'s fallback, the
sparsest refit within 0.5 point of LogisticRegressionCV where none with
<= 10% of its weights gets there.

With ``--folds k`` the choice is made on k folds of the sub-train part
instead (``train.choice.folds``, seed 0; the held-out part then only
scores the refitted model), and scikit-learn's rows use the same folds
(``kernels/infold.py``'s assignment as a PredefinedSplit, refit on the
whole sub-train part at the chosen C); the rows' methods end in
``folds=k``.

With ``--backend spark`` (or ``spark-rdd``, ``spark-frame``) our methods'
training and held-out events are cached on Spark local[2] in two
partitions (fewer where each would hold fewer than
``data.min_partition_events`` events, as in a user's run: Brown's
training documents and its held-out part in one each) and every pass is
a Spark job, whatever the data's size (as
``data.in_process_max_events = 0``); the rows say ``backend`` and their
method ends in ``backend=KIND``; the test set is scored in-process either
way. Target ``path_vs_l2`` (issue 37): on each many-label corpus, the
grafting path's wall seconds over the l2 path's, on the same data, split,
backend and choice mode. l2 chooses by 5 folds on small data
(``train.choice.kfold_max_events``: Brown's 400 training documents) while
grafting stays on the held-out part (``kfold_max_events_grafting`` 0), so
on Brown the defaults' rows are not a pair: ``--set folds=1`` (the
held-out part, explicitly) makes one (``--corpora brown --methods l2
grafting --set folds=1 --backend spark``).

Choices use held-out log-likelihood (the default criterion); test scores
are accuracy, or CoNLL chunk F1 (conlleval rules) for CoNLL-2000 and
Base-NP. Corpora (``--corpora``):

- ``synthetic``: sparkmaxent.data.synthetic defaults (train / test files);
- ``pp``: PP attachment, ppattach ``training`` / ``test``;
- ``brown``: the 15 Brown genres, document -> genre, binary bag of
  lowercased words; fixed 4:1 split by file name (file number divisible by
  5 -> test);
- ``conll``: CoNLL-2000 chunking, the first ``--conll-sentences`` training
  sentences (default 2,000 of 8,936; 0: all), the whole test file, the 17
  templates, count cutoff 2;
- ``basenp``: the same in Base-NP mode (NP chunks only);
- ``conll-unigrams``: CoNLL-2000 with only the 10 unigram templates
  (w-2..w+2, t-2..t+2) as atoms, count cutoff 2: the atoms of combination
  features (Okanohara & Tsujii 2009). Target ``conll_full_path`` (issue
  37): at all 8,936 sentences (``--corpora conll-unigrams
  --conll-sentences 0 --methods l1-Comb l1-Orig l2``), every point of
  l1-Comb's run (the atoms' path, then the combination path) certified
  within ``POINT_SECONDS``, the path ended by its own stop, test chunk F1
  of its choice against l1-Orig and l2 on the same atoms.

Every path point is recorded as it is scored (``PointWatch``: which path,
gamma, weights, passes, seconds, the certificate's verdict, held-out
score; the row's ``points_run``) and the page is rewritten after each
(a row ``in_progress``), so a long path stopped by ``--path-seconds`` or
SIGTERM keeps its points, with the test score of each path's best
held-out point so far (``best_so_far``).

Usage::

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.model_choice --corpora synthetic pp

writes benchmarks/results/model_choice.json (and model_choice_<corpus>.png,
the grafting path; a run with ``--set`` writes
model_choice_<corpus>_<key>-<value>.png instead, and a CoNLL / Base-NP run
with other than 2,000 sentences model_choice_<corpus>_<N>sent.png, so the
defaults' plot stays), rewritten after every row (and again after a path's
single fit), so a stopped run keeps the rows it measured. The page keeps
the rows of earlier runs that this run does not measure again (another
corpus, sentence count or method; ``merged_rows``), each with its own
``command``, ``commit`` and ``load_average``, so a run of some corpora
updates their rows and leaves the others' current rows in place. Corpora
run side by side write pages of their own (``--output``); ``--merge PAGE
...`` then puts their rows into this page without measuring anything.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import hashlib
import json
import logging
import multiprocessing as mp
import os
import re
import shutil
import time

import numpy as np

from benchmarks.common import (
    RESULTS,
    SHARED_DATA,
    command_line,
    commit,
    load_average,
    merge_arguments,
    merge_pages,
    page_rows,
    print_table,
    replace_rows,
    shared_corpus,
    start,
    target,
    write_result,
)
from sparkmaxent.backends.expanded import ExpandedBackend
from sparkmaxent.backends.factory import make_backend
from sparkmaxent.backends.union import close_union, union_of
from sparkmaxent.choice.folds import fold_of_groups
from sparkmaxent.choice.heldout import criterion_score, heldout_labels, write_path_plot
from sparkmaxent.choice.points import PointFit
from sparkmaxent.config import DataConfig, train_config
from sparkmaxent.data import synthetic
from sparkmaxent.data.load import read_blocks
from sparkmaxent.data.prepare import prepare
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.kernels.blocks import concat_blocks
from sparkmaxent.kernels.predict import EventScores, EventScoresTask
from sparkmaxent.selection.base import FitResult, TrainingContext
from sparkmaxent.selection.stops import StopReason
from sparkmaxent.train import train

log = logging.getLogger("model_choice")

ROW_KEYS = [
    "corpus",
    "method",
    "chosen_setting",
    "test_score",
    "features",
    "fits_or_path_points",
    "wall_s",
    "wall_s_single_fit",
]
CORPORA = ("synthetic", "pp", "brown", "conll", "basenp", "conll-unigrams")
#: the chunked corpora over the 17 hand-written templates (model choice's rows at full size)
TEMPLATED = ("conll", "basenp")
#: corpora scored by chunk F1: also CoNLL-2000 over the 10 unigram atoms (combination features)
CHUNKED = (*TEMPLATED, "conll-unigrams")
#: training sentences of CoNLL-2000 and Base-NP by default (of 8,936; 0: all)
DEFAULT_SENTENCES = 2000
METHODS = ("grafting", "l2", "sgc", "bayes-factor")
#: gamma1 paths compared on the same atoms (Okanohara & Tsujii 2009): combination
#: features of degree 2 and the atoms alone, both pure l1 with the same automatic
#: choice (the combination path has no l2 mixes)
ATOM_PATHS: dict[str, dict] = {
    "l1-Comb": {"method": "grafting", "combination_degree": 2, "l2_mixes": [0]},
    "l1-Orig": {"method": "grafting", "l2_mixes": [0]},
}


# ---- data -----------------------------------------------------------------------


def corpus_inputs(name: str, work: str, data_dir: str, conll_sentences: int) -> tuple:
    """(train inputs, test inputs, format, reader options, cutoff) of a corpus."""
    if name == "synthetic":
        files = synthetic.write_splits(None, os.path.join(work, "text"), (0.7, 0.1, 0.2))
        return [files["train"]], [files["test"]], "maxent", {}, 0
    if name == "pp":
        pp = [shared_corpus("ppattach", f, data_dir=data_dir) for f in ("training", "test")]
        return [pp[0]], [pp[1]], "ppattach", {}, 0
    if name == "brown":
        return (*brown_files(work, data_dir), "maxent", {}, 0)
    opts: dict = {"mode": "basenp"} if name == "basenp" else {}
    if name == "conll-unigrams":  # the 10 unigram templates as atoms (Okanohara & Tsujii 2009)
        opts = {"templates": "unigrams"}
    train_txt = shared_corpus("conll2000", "train.txt", data_dir=data_dir)
    if conll_sentences:
        train_txt = first_sentences(train_txt, os.path.join(work, "train.txt"), conll_sentences)
    return (
        [train_txt],
        [shared_corpus("conll2000", "test.txt", data_dir=data_dir)],
        "conll",
        opts,
        2,
    )


def first_sentences(path: str, out: str, n: int) -> str:
    with open(path) as f:
        sentences = f.read().strip("\n").split("\n\n")[:n]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write("\n\n".join(sentences) + "\n")
    return out


def brown_files(work: str, data_dir: str) -> tuple[list[str], list[str]]:
    """Brown documents as maxent events (genre, binary bag of lowercased
    words), split 4:1 by file name: file number divisible by 5 -> test."""
    paths = sorted(
        glob.glob(os.path.join(shared_corpus("brown", data_dir=data_dir), "c[a-r][0-9][0-9]"))
    )
    out = {"train": [], "test": []}
    for path in paths:
        name = os.path.basename(path)
        with open(path) as f:
            words = {t.rsplit("/", 1)[0].lower() for t in f.read().split() if "/" in t}
        words = {re.sub(r"[\s:]", "_", w) for w in words if w}
        out["test" if int(name[2:]) % 5 == 0 else "train"].append(
            f"{name[1]} " + " ".join(sorted(words))
        )
    files = []
    os.makedirs(os.path.join(work, "text"), exist_ok=True)
    for split in ("train", "test"):
        files.append(os.path.join(work, "text", f"brown_{split}.maxent"))
        with open(files[-1], "w") as f:
            f.write("\n".join(out[split]) + "\n")
    return [files[0]], [files[1]]


def prepared(session, name: str, work: str, args) -> dict[str, str]:
    """train / heldout / test dataset directories of a corpus (``session()``:
    the Spark session, started only when the data are prepared)."""
    from sparkmaxent.data.split import prepare_split

    dirs = {s: os.path.join(work, s) for s in ("train", "heldout", "test")}
    if args.reuse and all(os.path.exists(os.path.join(d, "dataset.json")) for d in dirs.values()):
        return dirs
    spark = session()
    train_in, test_in, fmt, opts, cutoff = corpus_inputs(
        name, work, args.data, args.conll_sentences
    )
    small = DataConfig().in_process_max_events  # small inputs: prepared without Spark jobs
    prepare_split(spark, train_in, dirs["train"], dirs["heldout"], fmt, fraction=0.2, seed=0,
                  options=opts, cutoff=cutoff, partitions=2, overwrite=True,
                  in_process_max_events=small)  # fmt: skip
    prepare(spark, test_in, dirs["test"], fmt, options=opts, merge_duplicates=False,
            vocabulary=dirs["train"], partitions=2, overwrite=True,
            in_process_max_events=small)  # fmt: skip
    return dirs


# ---- sparkmaxent ------------------------------------------------------------------


def backend(directory: str, kind: str = "local", spark=None):
    """The events of a prepared dataset: in-process in one block (``local``),
    or cached on the executors of ``spark`` in ``SPARK_PARTITIONS`` partitions,
    fewer where each would hold fewer than the default
    ``data.min_partition_events`` events, as a user's run with
    ``data.partitions = 0`` on local[2] (``spark``, ``spark-rdd``,
    ``spark-frame``: ``--backend``; every pass a Spark job whatever the size,
    as ``data.in_process_max_events = 0``)."""
    if kind == "local":
        return make_backend("local", directory, bias=True, partitions=1)
    return make_backend(
        kind, directory, spark=spark, bias=True, partitions=SPARK_PARTITIONS,
        min_partition_events=DataConfig().min_partition_events,
    )  # fmt: skip


#: the local[2] session's settings (preparing the data; --backend spark)
SPARK_CONF = {"spark.sql.shuffle.partitions": "4"}
#: partitions of the Spark backends (local[2]: one per core)
SPARK_PARTITIONS = 2
#: the backends ``--backend`` takes (train.backend's choices)
BACKEND_KINDS = ("local", "spark", "spark-rdd", "spark-frame")


class PathCapped(BaseException):
    """A path stopped at ``--path-seconds`` (a BaseException: no solver's
    ``except Exception`` takes it for a failed step)."""


class PointCosts(logging.Handler):
    """Wall seconds (held-out scoring included), passes and non-zero weights
    of every path point (a k-fold path's: summed over the folds, with the
    mean fold figures), read from the path's own line for each point,
    numbered by mix (``mix``: how many mixes' paths ended before it): where
    a path's time goes, also when it is stopped before it ends."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.points: list[dict] = []
        self.mix, self.last = 0, time.perf_counter()
        self.cache_s = 0.0  # reading (on Spark: caching) the events, before the first point

    def emit(self, record: logging.LogRecord) -> None:
        now = time.perf_counter()
        if str(record.msg).startswith("path %s %.4g:"):
            parameter, gamma, features, *_, passes, _ = record.args  # type: ignore[misc]
            seconds = round(now - self.last, 2)
            self.points.append(
                {"mix": self.mix, parameter: gamma, "features": features, "passes": passes,
                 "seconds": seconds}
            )  # fmt: skip
            self.last = now
        elif str(record.msg).startswith("k-fold path %s %.4g:"):  # mean fold figures
            parameter, gamma, features, _, score, accuracy, folds, passes = record.args  # type: ignore[misc]
            seconds = round(now - self.last, 2)
            self.points.append(
                {"mix": self.mix, parameter: gamma, "mean_features": features, "passes": passes,
                 "seconds": seconds, "mean_score": score, "mean_accuracy": accuracy,
                 "fold_scores": folds}
            )  # fmt: skip
            self.last = now
        elif str(record.msg).startswith("elastic net %s: chose"):
            self.mix += 1


class PointWatch:
    """Every path point as it is scored (``choice.path.scored_point``,
    wrapped while the watch is entered): which path it belongs to
    (``fit``: ``combination`` for a combination-features point, else
    ``atoms``), gamma, features, passes, wall seconds (its fit and its
    held-out scoring), the certificate's verdict (``kkt_passed``: the KKT
    test over every candidate, conjunctions included) and its held-out
    score; ``on_point(points)`` after each, so a run stopped mid-path keeps
    what it measured. ``best[fit]`` keeps the fit of the best held-out
    point so far of each path (a cut point is never best), to score when
    the path is stopped before its choice. With ``keep_fits``, ``fits``
    keeps every point (its l2 mix, gamma1, features, whether it was cut)
    with its context, point fit and fit, for ``path_test``."""

    def __init__(self, on_point=None, keep_fits: bool = False) -> None:
        import sparkmaxent.choice.path as path_module

        self.module, self.original = path_module, path_module.scored_point
        self.points: list[dict] = []
        self.best: dict[str, tuple[float, object]] = {}
        self.fits: list[tuple[dict, TrainingContext, PointFit, FitResult]] = []
        self.on_point = on_point
        self.keep_fits = keep_fits

    def __enter__(self) -> PointWatch:
        from sparkmaxent.choice.path import CombinationPoints

        def watched(ctx, fit_point, gamma, *args, **kwargs):
            t0 = time.perf_counter()
            result, row, measure = self.original(ctx, fit_point, gamma, *args, **kwargs)
            fit = "combination" if isinstance(fit_point, CombinationPoints) else "atoms"
            self.add(fit, row, round(time.perf_counter() - t0, 2), result)
            if self.keep_fits:
                self.keep(ctx, fit_point, row, result)
            return result, row, measure

        self.module.scored_point = watched
        return self

    def __exit__(self, *exc) -> None:
        self.module.scored_point = self.original

    def add(self, fit: str, row, seconds: float, result) -> None:
        """Record one scored point (``row``: its ``PathPoint``)."""
        point = {
            "fit": fit, row.parameter: row.gamma, "features": row.features,
            "passes": row.passes, "seconds": seconds, "kkt_passed": row.kkt_passed,
            "heldout_score": row.score, "cut": row.cut,
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }  # fmt: skip
        self.points.append(point)
        if not row.cut and (fit not in self.best or row.score > self.best[fit][0]):
            self.best[fit] = (row.score, result, point)
        if self.on_point is not None:
            self.on_point(self.points)

    def keep(self, ctx: TrainingContext, fit_point: PointFit, row, result: FitResult) -> None:
        """Keep one grafting point for ``path_test``: its l2 mix (from the
        fit's own l1 and l2), gamma1, features and whether it was cut."""
        l1, l2 = result.report.get("l1") or 0.0, result.report.get("l2") or 0.0
        what = {"l2_mix": round(l2 / (l1 + l2), 4) if l1 + l2 else 0.0, "l1": row.gamma,
                "features": row.features, "cut": row.cut}  # fmt: skip
        self.fits.append((what, ctx, fit_point, result))


def in_jvm_call(frame) -> bool:
    """Whether an interrupted frame is inside a py4j or pyspark call: an
    exception raised there leaves the JVM connection out of step (py4j
    turns it into a failed call, and later calls can read wrong answers)."""
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith(("py4j", "pyspark")):
            return True
        frame = frame.f_back
    return False


def capped_train(keys: dict, dirs: dict, cap_s: float, costs: PointCosts, spark=None):
    """train() on the corpus with held-out choice, stopped by PathCapped
    after ``cap_s`` seconds (0: no cap) or by SIGTERM; the path's points
    logged into ``costs``. With ``spark`` the training and held-out events are cached
    on its executors (the backend ``keys["backend"]``; caching is part of
    the run's time, as for a user's) and released afterwards. A stop that
    arrives inside a JVM call is not raised there: the session's jobs are
    cancelled (every second until train() returns) and the failure that
    follows becomes PathCapped, so the session still serves the test score."""
    import signal
    import threading

    stopping: list[str] = []
    returned = threading.Event()

    def cancel_jobs() -> None:
        while not returned.is_set():
            spark.sparkContext.cancelAllJobs()
            returned.wait(1.0)

    def stop(signum, frame):
        why = "--path-seconds" if signum == signal.SIGALRM else "SIGTERM"
        if spark is None or not in_jvm_call(frame):
            raise PathCapped(why)
        if not stopping:
            stopping.append(why)
            threading.Thread(target=cancel_jobs, name="cancel-on-stop", daemon=True).start()

    path_log = logging.getLogger("sparkmaxent.choice")  # path, mixes and folds
    path_log.addHandler(costs)
    if cap_s:
        signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, cap_s)
    before = signal.signal(signal.SIGTERM, stop)  # a run stopped by hand keeps its points
    kind = keys.get("backend", "local") if spark is not None else "local"
    events: list = []
    try:
        t0 = time.perf_counter()
        events = [backend(dirs[s], kind, spark) for s in ("train", "heldout")]
        costs.last = time.perf_counter()  # the first point's seconds: its fit, not the cache
        costs.cache_s = round(costs.last - t0, 2)
        return train(events[0], train_config(**keys), events[1])
    except Exception as failed:
        if stopping:
            raise PathCapped(stopping[0]) from failed
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGTERM, before)
        returned.set()
        path_log.removeHandler(costs)
        for part in events if kind != "local" else []:
            part.close()


def ours(name: str, method: str, dirs: dict, args, keep: dict | None = None, progress=None) -> dict:
    """One sparkmaxent row: the method at its defaults with held-out choice
    (a path stopped at ``--path-seconds`` or by SIGTERM: a row
    ``unfinished`` with the costs of the points it fitted, each path's
    points so far and the test score of each one's best held-out point so
    far); ``keep`` (a dict) receives the test set's per-event results as
    ``test_events`` (``EventScores``); ``progress(row)`` (a path) after
    every point with a row ``in_progress`` holding the points so far."""
    config: dict = {**ATOM_PATHS.get(method, {"method": method}), **dict(args.set)}
    if args.folds:
        config.update(folds=args.folds, fold_seed=FOLD_SEED)
    if config["method"] in ("grafting", "l2"):
        config["path"] = True
    else:
        config["max_seconds"] = float(args.stage_seconds)
    kind = getattr(args, "backend", "local")  # stage_methods' arguments have none
    spark = getattr(args, "spark", None) if kind != "local" else None
    t0, cpu0 = time.perf_counter(), time.process_time()
    costs = PointCosts()
    label = method + "".join(f" {k}={v}" for k, v in args.set) + fold_label(args)

    def so_far(points: list[dict]) -> None:
        if progress is not None:
            wall_so_far = round(time.perf_counter() - t0, 2)
            progress({"corpus": name, "method": label, "in_progress": True, "backend": kind,
                      "wall_s": wall_so_far, "points_run": list(points)})  # fmt: skip

    watch = PointWatch(so_far, keep_fits=method == "grafting" and getattr(args, "path_test", False))
    try:
        cap = args.path_seconds if config.get("path") else 0.0
        with watch:
            res = capped_train(config, dirs, cap, costs, spark)
    except PathCapped as capped:
        row = {"corpus": name, "method": label, "unfinished": True, "stopped_by": str(capped),
               "point_costs": costs.points,
               "wall_s": round(time.perf_counter() - t0, 2), "path_seconds": args.path_seconds,
               "passes": sum(p["passes"] for p in costs.points), "backend": kind}  # fmt: skip
        if watch.points:
            row["points_run"] = watch.points
            row["best_so_far"] = {
                fit: {**point, "test_score": round(100 * test_score(name, dirs, result)[0], 3)}
                for fit, (_, result, point) in watch.best.items()
            }
        return row
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    rep = res.report
    test_value, scores = test_score(name, dirs, res)
    test = {"heldout_score": test_value}
    if keep is not None:
        keep["test_events"] = scores
    row = {
        "corpus": name,
        "method": label,
        "test_score": round(100 * test["heldout_score"], 3),
        "features": int(res.weights.nnz),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 1),  # this process's CPU seconds: the machine may be shared
        "passes": rep["passes"],
        "backend": kind,  # where the passes ran (the test set is scored in-process)
    }
    if costs.points:
        row["point_costs"] = costs.points
    if method in ATOM_PATHS and watch.points:  # each path's points, certified or not
        row["points_run"] = watch.points
    if kind != "local":  # the executors' cache of both parts: in wall_s, before any point
        row["cache_s"] = costs.cache_s
    if "folds" in rep and rep["folds"]["parameter"] != "stages":
        fold_row(row, rep, args)
    elif "path" in rep:
        path = rep["path"]
        setting = path["points"][path["chosen"]][path["parameter"]]
        row.update(chosen_setting=f"{path['parameter']}={setting:.4g}")
        row["single_fit_keys"] = {**dict(args.set), path["parameter"]: setting}
        if "elastic" in path and "l2_mix" in path:  # the l2 mix chosen along with gamma1
            mix = path["l2_mix"]
            row["chosen_setting"] += f", l2_mix={mix:g}"
            row["single_fit_keys"].update(elastic_l2=setting * mix / (1 - mix), l2_mixes=[0])
        elif "elastic" in path:  # elastic net: gamma2 chosen along with gamma1
            row["chosen_setting"] += f", elastic_l2={path['elastic_l2']:.4g}"
            row["single_fit_keys"].update(elastic_l2=path["elastic_l2"], elastic_grid=[])
        if "elastic" in path:
            keys = ("l2_mix", "elastic_l2", "l1", "features", "heldout_score", "heldout_se",
                    "heldout_accuracy", "below_best_se", "accuracy_gain", "accuracy_gain_se",
                    "points", "path_passes", "passes_cap", "stop", "chosen")  # fmt: skip
            row["elastic"] = [{k: e.get(k) for k in keys if k in e} for e in path["elastic"]]
            row["elastic_not_run"] = path.get("elastic_not_run", [])
        row.update(fits_or_path_points=len(path["points"]), candidates=rep["candidate_features"])
        row["heldout_score"] = path["points"][path["chosen"]]["heldout_score"]
        row["path_stop"] = path.get("stop")  # why the chosen path ended (the budget?)
        if "versus_atoms" in path:  # l1-Comb: combination kept only beyond the noise
            versus = path["versus_atoms"]
            row["versus_atoms"] = {
                **{k: versus[k] for k in ("kept", "gain", "difference_se")},
                **{f"{w}_{k}": versus[f"{w}_point"][k] for w in ("combination", "atoms")
                   for k in ("l1", "features", "heldout_score", "heldout_accuracy")},
            }  # fmt: skip
        if "refit" in rep:  # the model is the refit on sub-train + held-out events
            row["refit"] = {k: v for k, v in rep["refit"].items() if k != "chosen_fit"}
            row["chosen_fit_features"] = rep["refit"].get("chosen_fit", {}).get("features")
        row["single_fit"] = "pending"  # the row is written before the single fit runs
        if "combination" in rep:
            row["combination"] = combination_facts(rep)
        if method in ATOM_PATHS:
            keys = ("l1", "features", "heldout_score", "heldout_se", "heldout_accuracy", "passes",
                    "kkt_passed", "chosen")  # fmt: skip
            row["path_points"] = [{k: p.get(k) for k in keys} for p in path["points"]]
        if method == "grafting":
            suffix = variant_suffix(args.set)
            if name in CHUNKED and args.conll_sentences != DEFAULT_SENTENCES:
                suffix += f"_{args.conll_sentences}sent"
            png = os.path.join(RESULTS, f"model_choice_{name}{suffix}.png")
            points = path["points"]
            x, scores = [p["l1"] for p in points], [p["heldout_score"] for p in points]
            features = [p["features"] for p in points]
            write_path_plot(x, scores, features, "gamma1", path["chosen"], "loglik", png)
            row["plot"] = os.path.basename(png)
            keys = ("l1", "features", "heldout_score", "heldout_se", "heldout_accuracy", "passes",
                    "chosen", "cut", "continued_after")  # fmt: skip
            row["path_points"] = [{k: p.get(k) for k in keys} for p in path["points"]]
            if watch.fits:
                row["path_test"] = path_test(name, dirs, watch.fits)
    else:
        choice = rep.get("choice") or {}
        stages = choice.get("stages_run") or 0
        # max_seconds covers the train() call (its report's wall_s), not reading the data
        row.update(wall_s=rep["wall_s"], data_and_train_s=round(wall, 2))
        row.update(
            chosen_setting=f"stage {choice.get('chosen_round')} of {stages}",
            fits_or_path_points=1,
            stopped=rep.get("stopped"),
            stage_cap_s=float(args.stage_seconds),
            heldout_score=choice.get("heldout_score"),
            passes_per_stage=round(rep["passes"] / stages, 2) if stages else None,
        )
        if "refit" in rep:  # the model is the chosen stage refitted on sub-train + held-out
            row["refit"] = {k: v for k, v in rep["refit"].items() if k != "chosen_fit"}
            row["chosen_fit_features"] = rep["refit"].get("chosen_fit", {}).get("features")
        if rep.get("rounds") and "batches" in rep["rounds"][0]:  # ifs / sgc: why a stage costs
            row["stage_costs"] = stage_costs(rep["rounds"])
        row["stage_points"] = stage_points(rep.get("rounds") or [])
    return row


def test_score(name: str, dirs: dict, res) -> tuple[float, object]:
    """(the test score of ``res``'s model: accuracy, or chunk F1 on the
    chunked corpora; the test events' ``EventScores``), the test events
    widened by the model's conjunctions when it has any."""
    criterion = "chunk_f1" if name in CHUNKED else "accuracy"
    test_events = backend(dirs["test"])
    if res.conjunctions is not None and len(res.conjunctions):  # widened as the model's
        test_events = ExpandedBackend(test_events, res.conjunctions)
    scores = test_events.run(EventScoresTask(test_events.space, res.weights, res.scaling))
    test = criterion_score(scores, criterion, heldout_labels(test_events))
    return float(test["heldout_score"]), scores


def path_test(
    name: str, dirs: dict, fits: list[tuple[dict, TrainingContext, PointFit, FitResult]]
) -> list[dict]:
    """Every uncut point of a grafting run's paths (each l2 mix) refitted
    on the training and held-out events as the chosen point is
    (``choice.points.refit_on``: its point fit, warm-started from the
    point), with the refit's features and test score beside the point's
    own (``subtrain_*``). Read only by ``sparsest_within``, to report how
    sparse a model reaches the anchor on test (issue 36's fallback), never
    by the choice (``--path-test``)."""
    rows = []
    for what, ctx, fit_point, result in fits:
        if what["cut"] or ctx.heldout is None:
            continue
        whole = dataclasses.replace(ctx, backend=union_of(ctx.backend, ctx.heldout))
        try:
            refitted = fit_point(whole, what["l1"], result.weights, what["l1"], None, None)
        finally:
            close_union(whole.backend)
        rows.append({
            "l2_mix": what["l2_mix"], "l1": what["l1"], "features": int(refitted.weights.nnz),
            "test_score": round(100 * test_score(name, dirs, refitted)[0], 3),
            "subtrain_features": what["features"],
            "subtrain_test_score": round(100 * test_score(name, dirs, result)[0], 3),
        })  # fmt: skip
    return rows


def sparsest_within(
    points: list[dict], peer: dict, margin: float, share: float
) -> tuple[str, bool]:
    """Of a row's ``path_test`` refits, the sparsest within ``margin``
    points of ``peer``'s test score and the best of those with at most
    ``share`` of its weights, as text, and whether no refit that sparse
    gets within the margin (the target's fallback then applies)."""

    def close(p: dict) -> bool:
        return p["test_score"] >= peer["test_score"] - margin

    reach = [p for p in points if close(p)]
    sparse = [p for p in points if p["features"] <= share * peer["features"]]

    def where(p: dict) -> str:
        gap = p["test_score"] - peer["test_score"]
        return (
            f"{gap:+.2f} at {p['features']:,} weights ({p['features'] / peer['features']:.1%}; "
            f"gamma1 {p['l1']:.3g}, l2 mix {p['l2_mix']:g})"
        )

    sparsest = min(reach, key=lambda p: p["features"]) if reach else None
    parts = [f"the sparsest within {margin:g} point {where(sparsest)}" if sparsest
             else f"none within {margin:g} point"]  # fmt: skip
    if sparse:
        best = max(sparse, key=lambda p: p["test_score"])
        parts.append(f"the best with <= {share:.0%} {where(best)}")
    text = f"; its path's points refitted, on test ({len(points)} points): " + ", ".join(parts)
    return text, not any(close(p) for p in sparse)


def combination_facts(rep: dict) -> dict:
    """What a combination-features model holds: its conjunctions and their
    weights, whether every path point and the model were certified over
    every conjunction up to the degree."""
    comb, points = rep["combination"], rep["path"]["points"]
    return {
        "conjunctions_in_model": comb["conjunctions_in_model"],
        "conjunction_weights": comb["conjunction_weights"],
        "conjunction_builds": comb.get("conjunction_builds"),
        "top_conjunction_features": comb["top_conjunction_features"][:5],
        "points_certified": sum(bool(p.get("kkt_passed")) for p in points),
        "points": len(points),
        "model_certified": bool(rep["kkt"]["passed"] and rep["kkt"]["conjunctions"]["passed"]),
    }


def fold_label(args) -> str:
    return f" folds={args.folds}" if args.folds else ""


def fold_row(row: dict, rep: dict, args) -> None:
    """A path chosen by k folds (``train.choice.folds``): the chosen point,
    the mean fold score of every grid point, and the refit's held-out score
    (the held-out part plays no part in a fold choice)."""
    folds = rep["folds"]
    parameter, setting = folds["parameter"], folds["grid"][folds["chosen"]]
    row.update(
        chosen_setting=f"{parameter}={setting:.4g}",
        fits_or_path_points=len(folds["grid"]),
        folds=folds["k"],
        heldout_score=rep.get("heldout_loss") and -rep["heldout_loss"],
        heldout_accuracy=rep.get("heldout_accuracy"),
        candidates=rep["candidate_features"],
        fold_points=[
            {parameter: g, "mean_score": m, "se": e}
            for g, m, e in zip(folds["grid"], folds["mean_score"], folds["se"], strict=True)
        ],
        single_fit_keys={**dict(args.set), parameter: setting},
        single_fit="pending",
    )
    if "automatic" in folds:  # train.choice.folds = 0 chose folds: training and held-out events
        row.update(folds_automatic=True, fold_events=folds["events"])
    if "l2_mix" in folds:  # the l2 mix chosen along with gamma1 by the folds
        mix = folds["l2_mix"]
        row["chosen_setting"] += f", l2_mix={mix:g}"
        row["single_fit_keys"].update(elastic_l2=setting * mix / (1 - mix), l2_mixes=[0])
    if "elastic" in folds:
        keys = ("l2_mix", "elastic_l2", "l1", "features", "heldout_score", "heldout_se",
                "heldout_accuracy", "points", "path_passes", "chosen")  # fmt: skip
        row["elastic"] = [{k: e.get(k) for k in keys if k in e} for e in folds["elastic"]]
        row["elastic_not_run"] = folds.get("elastic_not_run", [])
    for key in ("mean_accuracy", "features", "passes"):  # of each point, over the folds
        for point, value in zip(row["fold_points"], folds.get(key, []), strict=False):
            point[key if key != "features" else "mean_features"] = value


#: characters of a plot's variant suffix, at most (``variant_suffix``)
MAX_SUFFIX = 80


def variant_suffix(settings: list) -> str:
    """A file-name suffix naming a run's --set keys ('' at the defaults), so
    a variant run does not overwrite the defaults' plot. A suffix past
    ``MAX_SUFFIX`` characters (a --set list of grid values) keeps its head
    and a hash of the whole: file names have a length limit, and the run
    must not fail at its plot after its fit."""
    text = re.sub(r"[^A-Za-z0-9_.-]+", "", "".join(f"_{k}-{v}" for k, v in settings))
    if len(text) <= MAX_SUFFIX:
        return text
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    return f"{text[: MAX_SUFFIX - 11]}_{digest}"


def stage_points(rounds: list[dict], count: int = 60) -> list[dict]:
    """The held-out curve of a stage run, at most ``count`` stages spread
    evenly (the chosen one always among them): where it peaks, and why."""
    keys = ("round", "active", "objective", "heldout_score", "heldout_accuracy", "passes")
    picked = set(np.linspace(0, len(rounds) - 1, min(count, len(rounds))).astype(int).tolist())
    picked.update(i for i, r in enumerate(rounds) if r.get("chosen"))
    return [{k: rounds[i].get(k) for k in keys} for i in sorted(picked)]


def stage_costs(rounds: list[dict]) -> dict:
    """Where an SGC run's passes per stage go: gain batches per stage (2
    passes each with the sketch), the refits of multi-feature stages (their
    share of the stages' passes and seconds), re-estimations, by quarter of
    the run."""
    passes = np.array([r["stage_passes"] for r in rounds], dtype=float)
    seconds = np.diff([0.0] + [float(r["elapsed_s"]) for r in rounds])[1:]  # stage 1: setup too
    batches = np.array([r["batches"] for r in rounds], dtype=float)
    quarters = np.array_split(np.arange(len(rounds)), 4)
    return {
        "mean_stage_passes": round(float(passes.mean()), 2),
        "mean_batches": round(float(batches.mean()), 2),
        "passes_per_batch": round(float(passes.sum() / max(batches.sum(), 1)), 2),
        "max_batches": int(batches.max()),
        "refit_share_of_passes": round(
            sum(r.get("refit_passes", 0) for r in rounds) / max(passes.sum(), 1.0), 3
        ),
        "refit_share_of_seconds": round(
            sum(r.get("refit_s", 0.0) for r in rounds[1:]) / max(float(seconds.sum()), 1e-9), 3
        ),
        "reestimations": int(sum(bool(r.get("reestimated")) for r in rounds)),
        "mean_gain_evaluations": round(float(np.mean([r["gain_evaluations"] for r in rounds])), 1),
        "by_quarter": [
            {
                "stages": f"{q[0] + 1}-{q[-1] + 1}",
                "passes": round(float(passes[q].mean()), 2),
                "batches": round(float(batches[q].mean()), 2),
            }
            for q in quarters
            if len(q)
        ],
    }


def single_fit(row: dict, method: str, dirs: dict, cap_s: float, spark=None) -> None:
    """One cold fit at a path row's chosen setting (``wall_s_single_fit``;
    the path's cost target is <= 3x it), on the path's backend (``spark``:
    the row's ``backend``). Grafting stops after the round
    that ends past ``cap_s`` seconds (``max_seconds``; 0: no cap) and the
    row says ``single_fit: unfinished`` with the seconds it ran."""
    keys: dict = {**ATOM_PATHS.get(method, {"method": method}), **row["single_fit_keys"]}
    if keys["method"] == "grafting" and cap_s:
        keys["max_seconds"] = cap_s
    kind = row.get("backend", "local") if spark is not None else "local"
    t0 = time.perf_counter()
    events = backend(dirs["train"], kind, spark)
    try:
        single = train(events, train_config(**keys))
    finally:
        if kind != "local":
            events.close()
    row["wall_s_single_fit"] = round(time.perf_counter() - t0, 2)
    row["passes_single_fit"] = single.report.passes
    unfinished = (
        single.report.stop is not None and single.report.stop.reason is StopReason.MAX_SECONDS
    )
    row["single_fit"] = "unfinished" if unfinished else "done"


# ---- scikit-learn ------------------------------------------------------------------


def arrays(directory: str):
    return concat_blocks(read_blocks(directory, DatasetInfo.load(directory), n_blocks=1))


#: scikit-learn's solver of each method name (liblinear: one-vs-rest l1)
SOLVERS = {"sklearn-l2": "lbfgs", "sklearn-l1": "saga", "sklearn-l1-liblinear": "liblinear"}
#: fold_seed of --folds (train.choice.fold_seed), ours and scikit-learn's alike
FOLD_SEED = 0
#: scikit-learn's l1 ratio of each penalty (its ``penalty`` is deprecated from 1.8)
L1_RATIOS = {"l2": 0.0, "l1": 1.0}


def lrcv_keys(penalty: str) -> dict:
    """LogisticRegressionCV's keywords for ``penalty`` (l1 or l2): its
    ``l1_ratios``, and the attribute layout scikit-learn 1.10 makes the
    default (``use_legacy_attributes=False``: ``C_`` a float, ``scores_``
    and ``n_iter_`` arrays) where the release has the choice."""
    from sklearn.linear_model import LogisticRegressionCV

    keys: dict = {"l1_ratios": (L1_RATIOS[penalty],)}
    if "use_legacy_attributes" in LogisticRegressionCV().get_params():
        keys["use_legacy_attributes"] = False
    return keys


def sklearn_cv(penalty: str, solver: str, tr, he, max_iter: int, folds: int = 0):
    """LogisticRegressionCV over the predefined held-out split (refit=True:
    refitted on the sub-train and held-out parts at the chosen C, as our
    paths refit, ``train.choice.refit``), or with
    ``folds`` over the sub-train part's k folds of ``train.choice.folds``
    (kernels/infold.py, the same events in each fold as ours; refit=True: on
    the whole sub-train part at the chosen C, as ours)."""
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import PredefinedSplit

    if folds:
        X, y, w = tr.X, tr.y, tr.c
        fold = event_folds(tr, folds, FOLD_SEED)
    else:
        X = sp.vstack([tr.X, he.X]).tocsr()
        y = np.concatenate([tr.y, he.y])
        w = np.concatenate([tr.c, he.c])
        fold = np.concatenate([np.full(len(tr.y), -1), np.zeros(len(he.y), dtype=int)])
    keep = y >= 0  # held-out events of labels unseen in training cannot be scored
    if solver == "liblinear" and len(np.unique(y[keep])) > 2:
        ovr = OneVsRestL1CV(max_iter)
        return ovr.fit(X[keep], y[keep], w[keep], PredefinedSplit(fold[keep]), bool(folds))
    cv = LogisticRegressionCV(Cs=10, cv=PredefinedSplit(fold[keep]), solver=solver,
                              scoring="neg_log_loss", refit=True, max_iter=max_iter,
                              **lrcv_keys(penalty))  # fmt: skip
    cv.fit(X[keep], y[keep], sample_weight=w[keep])
    return cv


class OneVsRestL1CV:
    """l1 logistic regression one-vs-rest with liblinear, C chosen as
    LogisticRegressionCV chooses it (Cs = logspace(-4, 4, 10), the best mean
    log-loss over the predefined split's folds; refit on all the events with
    ``refit``, else the fit on the split's training part). scikit-learn's
    liblinear takes two labels only: each label is its own binary fit, and
    the probabilities are the binary ones normalized, as in
    OneVsRestClassifier."""

    def __init__(self, max_iter: int):
        self.max_iter = max_iter

    def fit(self, X, y, w, split, refit: bool) -> OneVsRestL1CV:
        from sklearn.metrics import log_loss

        self.classes_ = np.unique(y)
        Cs = np.logspace(-4, 4, 10)
        parts = list(split.split())
        loss = [
            np.mean([
                log_loss(y[te], self._fit(X[tr], y[tr], w[tr], C).predict_proba(X[te]),
                         sample_weight=w[te], labels=self.classes_)
                for tr, te in parts
            ])
            for C in Cs
        ]  # fmt: skip
        self.C_ = np.array([Cs[int(np.argmin(loss))]])
        rows = np.arange(len(y)) if refit else parts[0][0]
        self._fit(X[rows], y[rows], w[rows], float(self.C_[0]))
        return self

    def _fit(self, X, y, w, C: float) -> OneVsRestL1CV:
        from sklearn.linear_model import LogisticRegression

        coef, intercept = np.zeros((len(self.classes_), X.shape[1])), np.zeros(len(self.classes_))
        for k, label in enumerate(self.classes_):
            target = (y == label).astype(int)
            if target.min() == target.max():  # a label absent from (or alone in) this part
                intercept[k] = 30.0 if target[0] else -30.0
                continue
            fit = LogisticRegression(l1_ratio=1.0, solver="liblinear", C=C, max_iter=self.max_iter)
            fit.fit(X, target, sample_weight=w)
            coef[k], intercept[k] = fit.coef_[0], fit.intercept_[0]
        self.coef_, self.intercept_ = coef, intercept
        return self

    def decision_function(self, X) -> np.ndarray:
        return np.asarray(X @ self.coef_.T) + self.intercept_

    def predict_proba(self, X) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(-self.decision_function(X)))
        return p / p.sum(axis=1, keepdims=True)


def event_folds(block, k: int, seed: int) -> np.ndarray:
    """The fold of each event of ``block`` under ``train.choice.folds = k``
    (kernels/infold.py's assignment of its groups)."""
    units, fold_of_unit = fold_of_groups(block.group, block.y, k, seed)
    return fold_of_unit[np.searchsorted(units, block.group)]


def _capped(queue, penalty, solver, tr, he, max_iter, folds):
    t0, cpu0 = time.perf_counter(), time.process_time()
    cv = sklearn_cv(penalty, solver, tr, he, max_iter, folds)
    queue.put((cv, time.perf_counter() - t0, time.process_time() - cpu0))


def sklearn_row(
    name: str,
    method: str,
    dirs: dict,
    cap_s: float,
    folds: int = 0,
    single: bool = True,
    keep: dict | None = None,
) -> dict:
    """A scikit-learn row; the cross-validated fit in a child process
    stopped after ``cap_s`` seconds (``single``: then l2's one fit at the
    chosen C, ``wall_s_single_fit``); ``keep`` (a dict) receives the
    fitted estimator as ``cv``."""
    from sklearn.linear_model import LogisticRegression

    penalty, solver = method.split("-")[1], SOLVERS[method]
    tr, he, te = (arrays(dirs[s]) for s in ("train", "heldout", "test"))
    label = method + (f" folds={folds}" if folds else "")
    row: dict = {"corpus": name, "method": label, "fits_or_path_points": 10, "solver": solver}
    ctx = mp.get_context("spawn")  # a fork would share the Spark gateway socket
    queue = ctx.Queue()
    proc = ctx.Process(target=_capped, args=(queue, penalty, solver, tr, he, 1000, folds))
    t0 = time.perf_counter()
    proc.start()
    try:
        cv, wall, cpu = queue.get(timeout=cap_s)
    except Exception:  # queue.Empty: over the cap
        proc.terminate()
        proc.join()
        row.update(timed_out=True, wall_s=round(time.perf_counter() - t0, 2))
        return row
    proc.join()
    if keep is not None:
        keep["cv"] = cv
    C = float(np.atleast_1d(cv.C_)[0])
    coef = cv.coef_
    row.update(
        chosen_setting=f"C={C:.4g}", features=int(np.count_nonzero(coef)), wall_s=round(wall, 2)
    )
    row["cpu_s"] = round(cpu, 1)  # the child's CPU seconds
    row["test_score"] = round(100 * sklearn_test(cv, te, name, list(cv.classes_), dirs), 3)
    if folds:
        row["folds"] = folds
    if penalty == "l2" and single:
        t0 = time.perf_counter()
        LogisticRegression(C=C, max_iter=1000).fit(tr.X, tr.y, sample_weight=tr.c)
        row["wall_s_single_fit"] = round(time.perf_counter() - t0, 2)
    return row


def sklearn_test(cv, te, name: str, classes: list, dirs: dict) -> float:
    """Test accuracy (chunk F1 for chunking) of scikit-learn's predictions,
    scored by the code that scores ours."""
    scores = cv.decision_function(te.X)
    scores = np.column_stack([-scores, scores]) if scores.ndim == 1 else scores
    pred = np.asarray(classes)[scores.argmax(axis=1)]
    hit = pred == te.y
    missing = np.full(len(pred), -1)
    group = te.group if te.group is not None else missing
    event_id = te.event_id if te.event_id is not None else missing
    ev = EventScores(te.c, np.zeros(len(pred)), hit, te.y, pred, group, event_id)
    criterion = "chunk_f1" if name in CHUNKED else "accuracy"
    labels = list(DatasetInfo.load(dirs["train"]).labels)
    return criterion_score(ev, criterion, labels)["heldout_score"]


# ---- the run -----------------------------------------------------------------------


def setting(text: str) -> tuple[str, object]:
    """KEY=VALUE of --set, the value parsed as JSON when it parses (numbers)."""
    key, _, value = text.partition("=")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def targets(rows: list[dict]) -> dict:
    """Issue 21's targets over the corpora present, each against
    LogisticRegressionCV l2 on the same corpus and sentence count: grafting
    within 0.5 point with <= 10% of its weights, or, where none of its
    path's points refitted that sparse gets within 0.5 point on test
    (``--path-test``), within 0.5 point with the sparsest refit that does
    reported (``sparsest_within``;
    the chunked corpora at full size too: a missing row is not met); SGC
    and the Bayes factor at their defaults within 1 point; a grafting path
    <= 3x one fit's seconds (a single fit still unfinished at its cap makes
    the ratio an upper bound)."""
    by: dict[tuple, dict] = {}
    for r in rows:
        method = re.sub(r" max_seconds=\S+", "", r["method"])  # a time budget, no setting
        if " " not in method and r.get("test_score") is not None:
            by[(r["corpus"], r.get("conll_sentences"), method)] = r
    groups = sorted({k[:2] for k in by}, key=str)
    close, defaults, paths, atoms = [], [], [], []
    for corpus, n in groups:
        name = corpus + ("" if n is None else " full" if n == 0 else f" {n}")
        comb = atom_paths(by, corpus, n)
        if comb:
            atoms.append((name, *comb))
        peer, ours = by.get((corpus, n, "sklearn-l2")), by.get((corpus, n, "grafting"))
        if peer and ours:
            d, share = ours["test_score"] - peer["test_score"], ours["features"] / peer["features"]
            text, ok = f"{d:+.2f} ({share:.1%} of the weights)", d >= -0.5 and share <= 0.1
            if d >= -0.5 and share > 0.1 and ours.get("path_test"):
                # no model that sparse gets there: the sparsest that does, with its share
                found, fallback = sparsest_within(ours["path_test"], peer, 0.5, 0.1)
                text, ok = text + found, fallback
            close.append((name, text, ok))
        for method in ("sgc", "bayes-factor"):
            if peer and (corpus, n, method) in by:
                d = by[(corpus, n, method)]["test_score"] - peer["test_score"]
                defaults.append((f"{method} {name}", f"{d:+.2f}", d >= -1))
        if ours and ours.get("wall_s_single_fit"):
            ratio = ours["wall_s"] / ours["wall_s_single_fit"]
            bound = " (single fit unfinished)" if ours.get("single_fit") == "unfinished" else ""
            paths.append((name, f"{ratio:.2f}x{bound}", ratio <= 3))

    def entry(goal: str, parts: list[tuple]) -> dict:
        value = "; ".join(f"{name} {v}" + ("" if ok else " (not met)") for name, v, ok in parts)
        return target(goal, value, all(ok for *_, ok in parts))

    out = {}
    # the chunked corpora at all 8,936 training sentences (--conll-sentences 0) are part of it
    close += [(f"{c} full", "no rows", False) for c in TEMPLATED if (c, 0) not in set(groups)]
    if close:
        goal = "grafting with held-out choice within 0.5 point of LogisticRegressionCV l2 "
        goal += (
            "with <= 10% of its non-zero weights, or, where no point of its path that sparse "
            "gets within 0.5 point on test, the sparsest that does reported"
        )
        out["grafting_vs_lrcv"] = entry(goal, close)
    if defaults:
        goal = (
            "SGC and the Bayes factor at their defaults within 1 point of LogisticRegressionCV l2"
        )
        out["sgc_bayes_defaults"] = entry(goal, defaults)
    if paths:
        out["path_cost"] = entry("a whole grafting path <= 3x one fit at the chosen gamma1", paths)
    if atoms:
        goal = (
            "combination features (degree 2) with automatic gamma1, every path point "
            "certified: test score at least l1-Orig's on the same atoms (l2 path beside)"
        )
        out["combination_vs_atoms"] = entry(goal, atoms)
    full = conll_full_path(rows)
    if full is not None:
        goal = (
            f"combination features (degree 2) on CoNLL-2000 over the 10 unigram atoms at full "
            f"size: the held-out gamma1 path run until held-out stops improving, each point "
            f"certified in <= {POINT_SECONDS / 60:g} minutes; test chunk F1 of the held-out "
            f"choice against l1-Orig and l2 over the same atoms"
        )
        out["conll_full_path"] = target(goal, *full)
    versus = path_vs_l2(rows)
    if versus:
        goal = (
            "a grafting path no slower than the l2 path on a many-label corpus (wall seconds, "
            "same data, split, backend and choice mode; in-process and on Spark local[2])"
        )
        out["path_vs_l2"] = entry(goal, versus)
    return out


#: corpora of many labels (Brown's 15 genres, CoNLL-2000's 22 chunk tags) and the
#: sentence count on which path_vs_l2 asks for a held-out pair on each backend
MANY_LABELS = {"brown": None, "conll": DEFAULT_SENTENCES}
#: a path row's label: the method, then only the --set keys that say where and how
#: it chose (any other key makes it a variant, not a path at the defaults)
PATH_LABEL = re.compile(r"(grafting|l2)((?: (?:folds|backend)=\S+)*)")


def path_mode(row: dict) -> tuple[str, str, str, str] | None:
    """(method, backend, choice mode, label settings) of a grafting or l2 path
    row at the defaults (None for any other row): the backend is the row's
    (in-process before rows said), the mode ``held-out`` or ``k folds`` (an
    automatic or ``--folds`` k-fold choice records ``folds``; ``--set folds=1``
    is the held-out part)."""
    match = PATH_LABEL.fullmatch(row["method"])
    if match is None or not (row.get("test_score") is not None or row.get("unfinished")):
        return None
    keys = dict(k.split("=", 1) for k in match.group(2).split())
    k = int(keys.get("folds", row.get("folds") or 1))
    where = row.get("backend") or keys.get("backend", "local")
    return match.group(1), where, "held-out" if k == 1 else f"{k} folds", match.group(2)


def path_vs_l2(rows: list[dict]) -> list[tuple[str, str, bool]]:
    """(name, figures, met) of each (corpus of ``MANY_LABELS``, sentences,
    backend, choice mode) with a grafting and an l2 path row: grafting's wall seconds over l2's
    (a grafting row of the same label settings preferred, e.g. both with
    ``folds=1``; else the defaults' row, named). A path stopped at its cap
    gives a bound: grafting stopped past l2's whole time is slower, l2
    stopped past grafting's whole time is slower; else no ratio. Each
    corpus of ``MANY_LABELS`` without a held-out pair in-process and on
    Spark: "no pair", not met."""
    groups: dict[tuple, dict[str, list]] = {}
    for r in rows:
        mode = path_mode(r) if r["corpus"] in MANY_LABELS else None
        if mode:
            key = (r["corpus"], r.get("conll_sentences"), mode[1], mode[2])
            groups.setdefault(key, {"grafting": [], "l2": []})[mode[0]].append((r, mode[3]))
    out = []
    for (corpus, n, where, mode), pair in sorted(groups.items(), key=str):
        if not (pair["grafting"] and pair["l2"]):
            continue
        l2, settings = pair["l2"][0]
        same = [g for g, s in pair["grafting"] if s == settings]
        graft = (same or [g for g, _ in pair["grafting"]])[0]
        name = f"{corpus}{'' if n is None else f' {n}'} {backend_name(where)}, {mode}"
        out.append((name, *wall_ratio(graft, l2)))
    for corpus, n in MANY_LABELS.items():
        for where in ("local", "spark"):
            if not any(k == (corpus, n, where, "held-out") for k in groups if _paired(groups[k])):
                name = f"{corpus}{'' if n is None else f' {n}'} {backend_name(where)}, held-out"
                out.append((name, "no pair", False))
    return out


def _paired(pair: dict) -> bool:
    return bool(pair["grafting"] and pair["l2"])


def backend_name(kind: str) -> str:
    return "in-process" if kind == "local" else f"on Spark local[2] ({kind})"


def wall_ratio(graft: dict, l2: dict) -> tuple[str, bool]:
    """(figures, met) of grafting's wall seconds over l2's, a bound when a
    path was stopped at its cap (``unfinished``), with both rows' methods,
    CPU seconds (on a shared machine the wall ratio moves with the load),
    commits and loads."""
    g, w = graft["wall_s"], l2["wall_s"]
    text = f"{graft['method']} {g:,.1f} s / {l2['method']} {w:,.1f} s"
    if graft.get("unfinished") and l2.get("unfinished"):
        text, met = text + ": both stopped at their caps, no ratio", False
    elif graft.get("unfinished"):
        met = False
        text += f" = > {g / w:.2f}x (grafting stopped)" if g >= w else ": grafting stopped first"
    elif l2.get("unfinished"):
        met = g <= w
        text += f" = < {g / w:.2f}x (l2 stopped)" if met else ": l2 stopped first, no ratio"
    else:
        text, met = text + f" = {g / w:.2f}x", g <= w
    if graft.get("cpu_s") and l2.get("cpu_s"):  # this process's CPU: the load apart
        text += f", CPU {graft['cpu_s']:,.1f} s / {l2['cpu_s']:,.1f} s"
    loads = ", ".join(load_span(r) for r in (graft, l2))
    return f"{text} (commits {graft.get('commit')}, {l2.get('commit')}; loads {loads})", met


def load_span(row: dict) -> str:
    """The row's load averages (1, 5, 15 minutes at its end) as low-high."""
    load = row.get("load_average") or []
    return f"{min(load):.0f}-{max(load):.0f}" if load else "unknown"


#: the corpus and sentence count of the full-size combination path (0: all 8,936)
FULL_COMBINATION = ("conll-unigrams", 0)
#: wall seconds a certified point of that path may take (issue 37)
POINT_SECONDS = 1800.0


def conll_full_path(rows: list[dict]) -> tuple[str, bool] | None:
    """(figures, met) of the l1-Comb paths on ``FULL_COMBINATION`` (None
    without such a row; the defaults' row and any ``--set`` variant, e.g. a
    user's ``l1_grid``, each named): every point run (the atoms' path
    beside it, then the combination path) certified within
    ``POINT_SECONDS`` and the path ended by its stop rule (held-out stopped
    improving; not the end of a grid, not a cap, not stopped by hand: then
    "stopped after k points"), for some row; with test chunk F1 of its
    choice (or of each path's best held-out point so far when stopped)
    against the l1-Orig and l2 rows on the same data."""
    mine = [r for r in rows if (r["corpus"], r.get("conll_sentences")) == FULL_COMBINATION]
    combs = [r for r in mine if r["method"].split(" ", 1)[0] == "l1-Comb"]
    if not combs:
        return None
    texts, met = [], False
    for comb in combs:
        text, ok = _full_path_row(comb)
        texts.append(f"{comb['method']}: {text}")
        met = met or ok
    refs = []
    for r in mine:
        if r["method"] in ("l1-Orig", "l2"):
            refs.append(f"{r['method']} " + _row_f1(r))
    if refs:
        texts.append("; ".join(refs))
    return " | ".join(texts), met


def _row_f1(row: dict) -> str:
    """A row's test chunk F1: its choice's, or each path's best point so far."""
    if row.get("test_score") is not None:
        return f"{row['test_score']:.2f} ({row['features']:,} weights)"
    best = row.get("best_so_far") or {}
    if not best:
        return "no test F1 (stopped before a point)"
    return (
        ", ".join(
            f"{fit} path's best point so far {b['test_score']:.2f} at "
            f"{'gamma1' if 'l1' in b else 'gamma2'} {b.get('l1', b.get('l2')):.3g} "
            f"({b['features']:,} weights)"
            for fit, b in best.items()
        )
        + f" (stopped after {len(row.get('points_run') or [])} points at {row['wall_s']:,.0f} s)"
    )


def _full_path_row(comb: dict) -> tuple[str, bool]:
    """(figures, met) of one l1-Comb row for ``conll_full_path``."""
    points = comb.get("points_run") or []
    combined = [p for p in points if p["fit"] == "combination"]
    slow = [p for p in points if p["seconds"] > POINT_SECONDS]
    uncertified = [p for p in points if p.get("kkt_passed") is not True]
    done = comb.get("test_score") is not None
    parts = [
        f"{len(combined)} combination points and {len(points) - len(combined)} atoms points "
        f"run, {len(points) - len(uncertified)} of {len(points)} certified"
    ]
    if combined:
        worst = max(combined, key=lambda p: p["seconds"])
        parts.append(
            f"slowest combination point {worst['seconds']:,.0f} s / {worst['passes']} passes "
            f"at gamma1 {worst['l1']:.3g} ({worst['features']:,} weights)"
        )
    if done:
        parts.append(f"path ended: {comb.get('path_stop')}")
        parts.append(f"test chunk F1 {_row_f1(comb)}")
    else:
        state = "in progress" if comb.get("in_progress") else "stopped"
        parts.append(f"path {state} after {len(points)} points at {comb['wall_s']:,.0f} s")
        if comb.get("best_so_far"):
            parts.append("test chunk F1 " + _row_f1(comb))
    text = "; ".join(parts) + f" (load {load_span(comb)})"
    ended = str(comb.get("path_stop") or "").startswith("stop rule")
    return text, done and ended and bool(points) and not slow and not uncertified


def atom_paths(by: dict, corpus: str, n) -> tuple[str, bool] | None:
    """(figures, met) of l1-Comb against l1-Orig and the l2 path on one
    corpus (None without both l1 rows)."""
    comb, orig, l2 = (by.get((corpus, n, m)) for m in ("l1-Comb", "l1-Orig", "l2"))
    if not (comb and orig):
        return None
    l2_name = "l2"
    if l2 is None:  # the l2 path not run here: LogisticRegressionCV's l2 on the same split
        l2_name, l2 = "sklearn-l2", by.get((corpus, n, "sklearn-l2"))

    def fig(label: str, r: dict) -> str:
        return f"{label} {r['test_score']:.2f} ({r['features']:,} weights)"

    facts = comb.get("combination") or {}
    certified = facts.get("points_certified") == facts.get("points") and bool(
        facts.get("model_certified")
    )
    pairs = (("l1-Comb", comb), ("l1-Orig", orig), (l2_name, l2))
    text = ", ".join(fig(k, r) for k, r in pairs if r)
    text += f", {facts.get('conjunction_weights', 0):,} conjunction weights"
    if (comb.get("versus_atoms") or {}).get("kept") == "atoms":
        text += ", the atoms' path kept (combination's held-out gain within its standard error)"
        certified = True
    text += "" if certified else ", not every point certified"
    return text, certified and comb["test_score"] >= orig["test_score"]


def stamped(row: dict, name: str, args) -> dict:
    """``row`` with its sentence count (the chunked corpora), the command,
    commit and load average of the run."""
    if name in CHUNKED:
        row["conll_sentences"] = args.conll_sentences
    row.update(command=command_line(), commit=commit(), load_average=load_average())
    return row


def row_key(row: dict) -> tuple:
    """What a row measures: corpus, sentence count (CoNLL, Base-NP) and
    method label (with its --set keys and folds)."""
    return row["corpus"], row.get("conll_sentences"), row["method"]


def merged_rows(earlier: list[dict], rows: list[dict]) -> list[dict]:
    """The page's rows: ``earlier`` ones this run has not measured again
    (by ``row_key``), then this run's, ordered by corpus as first seen."""
    page = replace_rows(earlier, rows, row_key)
    order = {c: i for i, c in enumerate(dict.fromkeys(r["corpus"] for r in page))}
    return sorted(page, key=lambda r: order[r["corpus"]])


def corpus_methods(args: argparse.Namespace, app: str):
    """(corpus, method, prepared dirs) for each of ``args.corpora`` and
    ``args.methods``, the corpora prepared in one local[2] session (their
    work directories kept with ``--reuse``: then no session is started)."""
    from sparkmaxent.backends.session import spark_session

    def session():  # no JVM when every corpus is reused
        return spark_session("local[2]", app, SPARK_CONF)

    for name in args.corpora:
        work = os.path.join(args.work, name)
        if not args.reuse:
            shutil.rmtree(work, ignore_errors=True)
        dirs = prepared(session, name, work, args)
        for method in args.methods:
            log.info("%s: %s", name, method)
            yield name, method, dirs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", choices=CORPORA, default=list(CORPORA))
    parser.add_argument(
        "--methods", nargs="+", default=list(METHODS) + ["sklearn-l2", "sklearn-l1"]
    )
    parser.add_argument("--data", default=SHARED_DATA, help="the shared corpora")
    parser.add_argument("--work", default="/tmp/sparkmaxent-model-choice")
    parser.add_argument("--reuse", action="store_true", help="reuse prepared data in --work")
    parser.add_argument("--output", default=os.path.join(RESULTS, "model_choice.json"))
    parser.add_argument("--conll-sentences", type=int, default=DEFAULT_SENTENCES)
    parser.add_argument(
        "--folds",
        type=int,
        default=0,
        help="choose by k folds of the sub-train part (train.choice.folds; scikit-learn "
        "with the same folds) instead of the held-out part (0)",
    )
    parser.add_argument("--stage-seconds", type=float, default=120.0)
    parser.add_argument(
        "--path-seconds",
        type=float,
        default=0.0,
        help="stop a path after this many seconds: a row 'unfinished' with its points' costs "
        "(0: no cap)",
    )
    parser.add_argument(
        "--path-test",
        action="store_true",
        help="refit every point of a grafting path on training + held-out events "
        "and score it on test, for the sparsest-model report only (row's path_test)",
    )
    parser.add_argument("--l1-cap", type=float, default=120.0, help="seconds for sklearn-l1")
    parser.add_argument("--l2-cap", type=float, default=600.0, help="seconds for sklearn-l2")
    parser.add_argument(
        "--single-fit-cap",
        type=float,
        default=0.0,
        help="grafting's single fit stops after the round past this many seconds (0: none)",
    )
    parser.add_argument(
        "--skip-single-fit",
        action="store_true",
        help="no cold fit at a path's chosen setting (nor scikit-learn l2's at its chosen C)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        type=setting,
        metavar="KEY=VALUE",
        help="a train key (by name, e.g. variance=evidence) for our methods; named in the row",
    )
    parser.add_argument(
        "--backend",
        choices=BACKEND_KINDS,
        default="local",
        help="where our methods' passes run: in-process (local) or on Spark local[2] "
        "(train.backend; named in the row as --set backend=KIND)",
    )
    merge_arguments(parser)
    args = start(parser, argv)
    if args.merge:
        merge_pages(args.output, args.merge, merged_rows, targets, "model_choice")
        return 0
    if args.backend != "local":  # a variant of its own: the label and plot name say where
        from sparkmaxent.backends.session import spark_session

        args.set.append(("backend", args.backend))
        args.spark = spark_session("local[2]", "model-choice", SPARK_CONF)
    earlier = page_rows(args.output)
    rows: list[dict] = []
    for name, method, dirs in corpus_methods(args, "model-choice"):
        if method.startswith("sklearn-"):
            cap = args.l1_cap if method.startswith("sklearn-l1") else args.l2_cap
            single = not args.skip_single_fit
            rows.append(sklearn_row(name, method, dirs, cap, args.folds, single))
        else:

            def progress(row: dict, name=name) -> None:  # the page after every path point
                page = merged_rows(earlier, [*rows, stamped(row, name, args)])
                write_result(args.output, page, targets(page))

            rows.append(ours(name, method, dirs, args, progress=progress))
        stamped(rows[-1], name, args)
        if rows[-1].get("single_fit") == "pending" and args.skip_single_fit:
            rows[-1]["single_fit"] = "skipped"  # before the write: a run's last row says so too
        print_table(rows[-1:], ROW_KEYS)
        page = merged_rows(earlier, rows)
        write_result(args.output, page, targets(page))
        if rows[-1].get("single_fit") == "pending":  # written first: a stopped run keeps it
            single_fit(rows[-1], method, dirs, args.single_fit_cap, getattr(args, "spark", None))
            print_table(rows[-1:], ROW_KEYS)
            page = merged_rows(earlier, rows)
            write_result(args.output, page, targets(page))
    print_table(rows, ROW_KEYS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
