"""The pyspark.ml API on CoNLL-2000 chunking (17 templates as array<string>),
in one Spark session: issue 20's figures for classic sessions.

- ``train``: ``MaxEntClassifier(method="grafting").fit`` on the training
  DataFrame against the command line's ``prepare`` + ``train`` on the same
  tokens written as text (the same objective and passes; the Estimator's
  overhead is its share of wall time).
- ``score``: ``MaxEntClassificationModel.transform`` (the default: given
  Vectors MLlib's own model, ml/mllib.py, given tokens MLlib's
  ``CountVectorizerModel`` over the model's vocabulary then that model,
  ml/mllib_text.py, each checked equal to the Arrow UDF on every test row;
  the Arrow UDF; SQL scoring) against MLlib's
  ``LogisticRegressionModel.transform`` on the same cached test rows: given
  the ``CountVectorizer``'s Vectors (our model then fitted on them too), and
  from the templates (MLlib with its ``CountVectorizer``; an MLlib model
  trained for ``--mllib-iter`` iterations, for its accuracy only). The test
  rows are unioned ``--score-copies`` times (cached and counted before any
  timing) so each transform runs for seconds; each transform is
  materialized with the ``noop`` writer, every system once per repeat in
  turn (a load that changes during the run hits each alike), its best wall
  time and the CPU seconds of the Spark JVM and its Python workers
  (``cpu_s``: what the session itself spent, whatever else runs) kept.
- ``grid``: ``fitMultiple`` over ``--grid`` gamma1 values (what
  CrossValidator calls per fold) with and without warmStart.
- ``auto``: the documented ``Tokenizer -> MaxEntClassifier(l1="auto")``
  Pipeline against ``CrossValidator`` (``--folds`` folds) over the gamma1
  values of the same held-out path, both choosing on the training
  documents only, accuracy on the test documents, on each of
  ``--auto-corpora``: ``pp``, PP attachment (short texts
  ``v=.. n=.. p=.. m=..``, labels V/N: a question-classification-like
  task; the ``training`` and ``test`` files) and ``brown``, the 500 Brown
  documents as texts with their genre (15 labels; model_choice's split:
  file number divisible by 5 -> test). ``--auto-cv-seconds`` bounds the
  CrossValidator (stopped at its next fit; the row then says so).
- ``cv``: ``CrossValidator`` (``--folds`` folds, ``ParamGridBuilder`` over
  ``--grid``) on the first ``--cv-sentences`` sentences with and without
  warmStart; the run checks that both choose the same gamma1 and fit the
  same models (objectives to 1e-6 relative).

    python -m benchmarks.ml_api --train-sentences 2000

Writes benchmarks/results/ml_api.json (rows: system, task, wall_s,
rows_per_s, passes, accuracy, stage, command, load_average) after each
stage; a run of some ``--stages`` keeps the file's rows of the other stages,
so stages can run one at a time (each under the benchmark lock), and a
run of some ``--auto-corpora`` keeps the other corpora's auto rows;
``--merge PAGE ...`` measures nothing and puts those pages' rows into
``--output`` (rows of the same stage, system and task replaced);
``machine`` holds the load average at the end.
"""

from __future__ import annotations

import argparse
import logging
import os
import time

from benchmarks.common import (
    SHARED_DATA,
    command_line,
    descendants,
    merge_arguments,
    merge_pages,
    print_table,
    proc_stat,
    replace_rows,
    shared_corpus,
    start,
    target,
    work_arguments,
    write_result,
)

log = logging.getLogger("ml_api")
KEYS = ["system", "task", "wall_s", "rows_per_s", "passes", "accuracy"]
STAGES = ("train", "score", "grid", "cv", "auto")
#: the auto stage's corpora: name on the command line -> name in rows and targets
AUTO_CORPORA = {"pp": "PP", "brown": "Brown"}


def tokens(spark, path: str):
    """(label, features) rows of a CoNLL file: one per token, the conll
    reader's 17 templates as array<string>."""
    from pyspark.sql import functions as F

    from sparkmaxent.data.inputs import resolve_options
    from sparkmaxent.data.raw import KIND_EVENT, read_files

    src = read_files(spark, [path], "conll", resolve_options("conll", {}), False)
    return src.raw.where(F.col("kind") == KIND_EVENT).select("label", "features")


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, round(time.perf_counter() - t0, 3)


def materialize(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def accuracy(df, label="label_index") -> float:
    from pyspark.ml.evaluation import MulticlassClassificationEvaluator

    return MulticlassClassificationEvaluator(labelCol=label, metricName="accuracy").evaluate(df)


def train_stage(spark, args, text: str, train, rows: list[dict]):
    """Estimator (the DataFrame of ``text``'s tokens) against the command
    line (``text`` prepared as conll) on the same events, after one untimed
    run of each on 50 sentences."""
    import json

    from sparkmaxent import cli
    from sparkmaxent.ml import MaxEntClassifier

    n = train.count()
    est = MaxEntClassifier(method="grafting", l1=args.l1, nBest=args.n_best)
    prepared, out = os.path.join(args.work, "prepared"), os.path.join(args.work, "run")
    sets = ["train.method=grafting", f"train.grafting.l1={args.l1}"]
    sets.append(f"train.grafting.n_best={args.n_best}")

    def run_cli(path: str) -> None:
        argv = ["prepare", "--input", path, "--format", "conll", "--output", prepared]
        assert cli.main([*argv, "--overwrite"]) == 0
        argv = ["train", "--train", prepared, "--output", out]
        assert cli.main([*argv, *(x for s in sets for x in ("--set", s))]) == 0

    # warm-up: both paths once on a few sentences (imports, first-call costs),
    # so neither timed run pays them for the other
    few = sentences(text, os.path.join(args.work, "warmup.txt"), 50)
    est.fit(tokens(spark, few))
    run_cli(few)
    model, wall = timed(lambda: est.fit(train))
    rows.append(row("sparkmaxent Estimator", "train (prepare_table + fit)", wall, n, model.report))
    _, wall = timed(lambda: run_cli(text))
    with open(os.path.join(out, "train_report.json")) as f:
        report = json.load(f)
    rows.append(row("sparkmaxent CLI", "train (prepare + train)", wall, n, report))
    rows[-2]["objective"], rows[-1]["objective"] = model.report["objective"], report["objective"]
    return model


def sentences(src: str, dst: str, limit: int) -> str:
    """The first ``limit`` sentences of a CoNLL file (all: 0) written to ``dst``."""
    with open(src) as f:
        blocks = [b for b in f.read().split("\n\n") if b.strip()]
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "w") as f:
        f.write("\n\n".join(blocks[:limit] if limit else blocks) + "\n\n")
    return dst


def row(system: str, task: str, wall: float, n: int, report: dict | None = None, acc=None):
    return {
        "system": system,
        "task": task,
        "wall_s": wall,
        "rows_per_s": round(n / wall, 1) if wall else None,
        "passes": (report or {}).get("passes"),
        "accuracy": acc,
    }


def score_stage(spark, args, train, test, model, rows: list[dict]) -> None:
    """Scoring throughput on the cached test rows: our model on the
    templates (array<string>) and, fitted on the CountVectorizer's Vectors,
    on the same Vectors MLlib's model reads; each by the default (MLlib's
    models), in SQL and in the Arrow UDF."""
    from pyspark.ml.classification import LogisticRegression
    from pyspark.ml.feature import CountVectorizer, StringIndexer
    from pyspark.sql import functions as F

    from sparkmaxent.ml import MaxEntClassifier

    indexer = StringIndexer(inputCol="label", outputCol="label_index", handleInvalid="keep")
    indexer = indexer.fit(train)
    vectorizer = CountVectorizer(inputCol="features", outputCol="vec", binary=True).fit(train)
    train_vectors = vectorizer.transform(indexer.transform(train)).cache()
    lr = LogisticRegression(
        featuresCol="vec",
        labelCol="label_index",
        maxIter=args.mllib_iter,
        regParam=args.l1,
        elasticNetParam=1.0,
        standardization=False,
    ).fit(train_vectors)
    ours_vec = None
    if args.score_given == "all":
        ours_vec = MaxEntClassifier(
            method="grafting", l1=args.l1, nBest=args.n_best, featuresCol="vec"
        ).fit(train_vectors.select("label", "vec"))
    test = copies(indexer.transform(test), args.score_copies).cache()
    vectors = vectorizer.transform(test).cache()
    n = test.count()
    if ours_vec is not None:  # the Vector rows read them
        vectors.count()
    # our model's classes are its sorted label strings; score against those indices
    labels = model.labels
    position = F.array_position(F.array(*[F.lit(x) for x in labels]), F.col("label")) - 1
    ours = test.withColumn("label_index", position.cast("double"))
    ours_vectors = vectors.withColumn("label_index", position.cast("double"))
    arrow, sql = model.copy(), model.copy()
    arrow.scoring, sql.scoring = "arrow", "sql"
    default_text = model.copy()  # tokens: MLlib's vectoriser and model (ml/mllib_text.py)
    scored = {
        "sparkmaxent transform (array<string>)": lambda: default_text.transform(ours),
        "sparkmaxent SQL transform (array<string>)": lambda: sql.transform(ours),
        "sparkmaxent Arrow transform (array<string>)": lambda: arrow.transform(ours),
        "mllib CountVectorizer + transform": lambda: lr.transform(vectorizer.transform(test)),
    }
    if ours_vec is not None:
        arrow_vec, sql_vec = ours_vec.copy(), ours_vec.copy()
        arrow_vec.scoring, sql_vec.scoring = "arrow", "sql"
        default_vec = ours_vec  # Vectors with their size: MLlib's model (ml/mllib.py)
        scored = {
            "sparkmaxent transform (Vector given)": lambda: default_vec.transform(ours_vectors),
            "sparkmaxent SQL transform (Vector given)": lambda: sql_vec.transform(ours_vectors),
            "sparkmaxent Arrow transform (Vector given)": lambda: arrow_vec.transform(ours_vectors),
            "mllib transform (Vector given)": lambda: lr.transform(vectors),
            **scored,
        }
    accuracies = {system: accuracy(fn()) for system, fn in scored.items()}
    for fn in scored.values():
        materialize(fn())  # warm-up
    clock = ProcessClock(spark)
    walls: dict[str, list[float]] = {system: [] for system in scored}
    cpus: dict[str, list[float]] = {system: [] for system in scored}
    for _ in range(args.repeats):  # each repeat runs every system: a load change hits all
        for system, fn in scored.items():
            cpu = clock.seconds()
            walls[system].append(timed(lambda fn=fn: materialize(fn()))[1])
            cpus[system].append(round(clock.seconds() - cpu, 2))
    for system in scored:
        rows.append(row(system, "score test", min(walls[system]), n, acc=accuracies[system]))
        rows[-1].update(wall_s_all=walls[system], score_copies=args.score_copies)
        rows[-1].update(cpu_s=min(cpus[system]), cpu_s_all=cpus[system])
    at = {r["system"]: r for r in rows[-len(scored) :]}
    if ours_vec is not None:
        at["sparkmaxent transform (Vector given)"].update(
            differences(default_vec.transform(ours_vectors), arrow_vec)
        )
    at["sparkmaxent transform (array<string>)"].update(
        differences(default_text.transform(ours), arrow)
    )


class ProcessClock:
    """CPU seconds (user + system) of the Spark driver JVM and every process
    under it (its Python workers), read from /proc: on a shared machine
    wall time also counts other users' work, CPU seconds count only this
    session's (a local session runs its executors in the JVM); 0.0 where
    /proc is absent."""

    def __init__(self, spark):
        gateway = getattr(spark.sparkContext, "_gateway", None)
        self.root = getattr(getattr(gateway, "proc", None), "pid", None)

    def seconds(self) -> float:
        if self.root is None or not os.path.isdir("/proc"):
            return 0.0
        stats = (proc_stat(pid) for pid in [self.root, *descendants(self.root)])
        ticks = sum(int(x) for fields in stats if fields is not None for x in fields[11:15])
        return ticks / os.sysconf("SC_CLK_TCK")


def copies(df, k: int):
    """``df``'s rows ``k`` times over (a union of ``k`` copies): each timed
    transform then runs for seconds, so a scheduling hiccup or a stage's
    fixed cost is a small share of its wall time."""
    from functools import reduce

    if k < 1:
        raise ValueError(f"--score-copies must be >= 1, got {k}")
    return reduce(lambda a, b: a.unionAll(b), [df] * k)


def differences(scored, arrow) -> dict:
    """Largest |difference| of ``scored``'s probability and rawPrediction
    entries from the Arrow scorer's on the same rows (-inf entries equal),
    and the rows whose prediction differs."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    other = arrow.copy()
    other.setRawPredictionCol("raw_a").setProbabilityCol("p_a").setPredictionCol("y_a")
    both = other.transform(scored)

    def gap(a: str, b: str):
        pairs = F.arrays_zip(vector_to_array(a).alias("x"), vector_to_array(b).alias("y"))
        d = F.transform(pairs, lambda e: F.when(e.x == e.y, 0.0).otherwise(F.abs(e.x - e.y)))
        return F.max(F.array_max(d))

    out = both.agg(
        gap("probability", "p_a").alias("max_abs_diff_probability"),
        gap("rawPrediction", "raw_a").alias("max_abs_diff_raw"),
        F.sum((F.col("prediction") != F.col("y_a")).cast("int")).alias("predictions_differing"),
        F.count("*").alias("rows"),
    ).first()
    return {k: out[k] for k in out.asDict()}


def grid_stage(spark, args, train, rows: list[dict]) -> None:
    """fitMultiple over a descending gamma1 grid, warm-started or not."""
    from sparkmaxent.ml import MaxEntClassifier

    n = train.count()
    est = MaxEntClassifier(method="grafting", nBest=args.n_best)
    grid = [{est.l1: g} for g in args.grid]
    for warm in (True, False):
        e = est.copy({est.warmStart: warm})
        models, wall = timed(lambda e=e: dict(e.fitMultiple(train, grid)))
        r = row("sparkmaxent fitMultiple", f"grid of {len(grid)} gamma1, warm={warm}", wall, n)
        r["passes"] = sum(m.report["passes"] for m in models.values())
        r["objectives"] = [models[i].report["objective"] for i in range(len(grid))]
        rows.append(r)


def cv_stage(spark, args, text: str, rows: list[dict]) -> None:
    """``CrossValidator`` (``--folds`` folds) over the ``--grid`` gamma1
    values on the first ``--cv-sentences`` sentences, with warmStart and
    without: the same folds (seed), so the same chosen gamma1 and the same
    models to the optimizer's tolerance (checked here)."""
    import numpy as np
    from pyspark.ml.evaluation import MulticlassClassificationEvaluator
    from pyspark.ml.feature import StringIndexer
    from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

    from sparkmaxent.ml import MaxEntClassifier

    small = sentences(text, os.path.join(args.work, "cv.txt"), args.cv_sentences)
    data = tokens(spark, small)
    index = StringIndexer(inputCol="label", outputCol="label_index", stringOrderType="alphabetAsc")
    data = index.fit(data).transform(data).cache()
    n = data.count()
    est = MaxEntClassifier(method="grafting", nBest=args.n_best, labelCol="label_index")
    grid = ParamGridBuilder().addGrid(est.l1, args.grid).build()
    evaluator = MulticlassClassificationEvaluator(labelCol="label_index", metricName="accuracy")
    evaluator.evaluate(est.copy({est.l1: args.grid[0]}).fit(data).transform(data))  # warm-up
    fitted = {}
    for warm in (True, False):
        cv = CrossValidator(
            estimator=est.copy({est.warmStart: warm}),
            estimatorParamMaps=grid,
            evaluator=evaluator,
            numFolds=args.folds,
            seed=7,
            collectSubModels=True,
        )
        model, wall = timed(lambda cv=cv: cv.fit(data))
        best = model.bestModel
        subs = [m for fold in model.subModels for m in fold]
        r = row(
            "sparkmaxent CrossValidator",
            f"{args.folds} folds x {len(grid)} gamma1, warm={warm}",
            wall,
            n,
        )
        r["passes"] = sum(m.report["passes"] for m in subs) + best.report["passes"]
        r["accuracy"] = float(max(model.avgMetrics))
        r["chosen_l1"] = best.getOrDefault(best.l1)
        r["avg_metrics"] = [float(x) for x in model.avgMetrics]
        r["objectives"] = [m.report["objective"] for m in subs]
        r["train_rows"] = n
        rows.append(r)
        fitted[warm] = (model, best, subs)
    (cw, bw, sw), (cc, bc, sc) = fitted[True], fitted[False]
    assert bw.getOrDefault(bw.l1) == bc.getOrDefault(bc.l1), "warm and cold chose different gamma1"
    for a, b in zip([bw, *sw], [bc, *sc], strict=True):
        ra, rb = a.report["objective"], b.report["objective"]
        assert abs(ra - rb) <= 1e-6 * abs(rb), f"objectives differ: {ra} vs {rb}"
    assert np.allclose(cw.avgMetrics, cc.avgMetrics, atol=1e-3), "validation accuracies differ"


def pp_texts(spark, path: str):
    """(text, label) rows of a PP attachment file: its four head words tagged
    with their slot as one short text (``v=join n=board p=as m=director``)."""
    from pyspark.sql import functions as F

    schema = "id string, v string, n string, p string, m string, label string"
    df = spark.read.csv(path, sep=" ", schema=schema)
    text = F.concat_ws(" ", *[F.concat(F.lit(f"{c}="), F.col(c)) for c in "vnpm"])
    return df.select(text.alias("text"), "label")


def brown_texts(spark, data_dir: str):
    """(train, test) DataFrames of (text, label): the 500 Brown documents as
    texts (combination_brown.read_brown: lowercased words, tags dropped),
    labelled with their genre letter (15 labels); model_choice's split by
    file name: a file number divisible by 5 -> test (100 documents)."""
    from benchmarks.combination_brown import brown_names, read_brown

    docs, genres = read_brown(data_dir)
    split: dict[bool, list] = {False: [], True: []}
    for name, doc, genre in zip(brown_names(data_dir), docs, genres, strict=True):
        split[int(name[2:]) % 5 == 0].append((doc, str(genre)))
    return tuple(spark.createDataFrame(split[t], "text string, label string") for t in (0, 1))


class CVCapped(Exception):
    """The CrossValidator passed ``--auto-cv-seconds``: raised by the next fit
    it starts (a fit under way runs to its end)."""


def capped_classifier():
    """A ``MaxEntClassifier`` whose ``_fit`` first checks the class's
    ``deadline`` (``time.perf_counter()`` seconds, None: none) and counts the
    fits started, so a CrossValidator over it stops at a fit boundary."""
    from sparkmaxent.ml import MaxEntClassifier

    class Capped(MaxEntClassifier):
        deadline: float | None = None
        fits = 0

        def _fit(self, dataset):
            if Capped.deadline is not None and time.perf_counter() > Capped.deadline:
                raise CVCapped(f"stopped after {Capped.fits} fits")
            Capped.fits += 1
            return super()._fit(dataset)

    return Capped


def auto_frames(spark, args, corpus, name: str):
    """(train, test) (text, label) DataFrames of an ``auto`` stage corpus."""
    if name == "pp":
        ppattach = [pp_texts(spark, corpus("ppattach", f)) for f in ("training", "test")]
        return ppattach[0], ppattach[1]
    return brown_texts(spark, args.data or SHARED_DATA)


def auto_stage(spark, args, corpus, rows: list[dict]) -> None:
    """``l1="auto"`` (one fit: the held-out path, then the chosen gamma1
    refitted on all rows) against a ``--folds``-fold CrossValidator over the
    same path's gamma1 values, both in the documented Tokenizer Pipeline,
    both choosing on the training documents only; accuracy on the test
    documents; each corpus of ``--auto-corpora`` in turn."""
    from pyspark.ml.feature import StringIndexer

    for name in args.auto_corpora:
        raw, raw_test = auto_frames(spark, args, corpus, name)
        index = StringIndexer(
            inputCol="label", outputCol="label_index", stringOrderType="alphabetAsc"
        ).fit(raw)
        train = index.transform(raw).cache()
        test = index.transform(raw_test).cache()
        auto_corpus(args, name, train, test, rows)
        train.unpersist()
        test.unpersist()


def auto_corpus(args, name: str, train, test, rows: list[dict]) -> None:
    """One corpus's ``auto`` rows: l1="auto" and the CrossValidator, the
    latter stopped at ``--auto-cv-seconds`` (0: never) if it runs longer."""
    from pyspark.ml import Pipeline
    from pyspark.ml.evaluation import MulticlassClassificationEvaluator
    from pyspark.ml.feature import Tokenizer
    from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

    from sparkmaxent.ml import MaxEntClassifier

    label = AUTO_CORPORA[name]
    n, n_test = train.count(), test.count()
    sizes = {"corpus": name, "train_rows": n, "test_rows": n_test}
    tokenizer = Tokenizer(inputCol="text", outputCol="words")
    est = MaxEntClassifier(featuresCol="words", labelCol="label_index", l1="auto")
    auto, wall = timed(lambda: Pipeline(stages=[tokenizer, est]).fit(train))
    summary = auto.stages[-1].summary
    r = row(f"sparkmaxent l1='auto' ({label})", f"{label} Tokenizer Pipeline, held-out path",
            wall, n)  # fmt: skip
    r.update(sizes, accuracy=accuracy(auto.transform(test)))
    r["chosen_l1"] = summary.chosenRegularization
    r["grid"] = [p["l1"] for p in summary.regularizationPath]
    r["passes"] = auto.stages[-1].report.get("passes")
    rows.append(r)
    log.info("auto %s: %s", name, {k: r[k] for k in ("wall_s", "accuracy", "chosen_l1")})
    Capped = capped_classifier()
    fixed = Capped(featuresCol="words", labelCol="label_index", method="grafting")
    grid = ParamGridBuilder().addGrid(fixed.l1, r["grid"]).build()
    cv = CrossValidator(
        estimator=Pipeline(stages=[tokenizer, fixed]),
        estimatorParamMaps=grid,
        evaluator=MulticlassClassificationEvaluator(labelCol="label_index", metricName="accuracy"),
        numFolds=args.folds,
        seed=7,
    )
    t0 = time.perf_counter()
    Capped.deadline = t0 + args.auto_cv_seconds if args.auto_cv_seconds > 0 else None
    task = f"{label} Tokenizer Pipeline, {args.folds} folds"
    c = row(f"sparkmaxent CrossValidator ({label})", task, 0.0, n)
    c.update(sizes, grid=r["grid"], fits_total=args.folds * len(grid) + 1)
    try:
        model = cv.fit(train)
    except CVCapped:
        model = None
    wall = round(time.perf_counter() - t0, 3)
    c.update(wall_s=wall, rows_per_s=round(n / wall, 1), fits_started=Capped.fits)
    if model is None:  # stopped at its bound: its wall time is a lower bound, no accuracy
        c.update(capped=True, cap_s=args.auto_cv_seconds)
    else:
        c["accuracy"] = accuracy(model.transform(test))
        c["chosen_l1"] = model.bestModel.stages[-1].getOrDefault("l1")
    rows.append(c)
    log.info("cv %s: %s", name, {k: c.get(k) for k in ("wall_s", "accuracy", "fits_started")})


def targets(rows: list[dict]) -> dict:
    """Issues 20 and 39's targets, from the rows present: scoring throughput
    against MLlib's (with its CountVectorizer, and given Vectors), equal
    scores given Vectors, l1='auto' against CrossValidator, and the
    Estimator's wall time against the CLI's on the same training."""
    by = {r["system"]: r for r in rows}
    out = {}

    def ratio(key: str, ours: str, theirs: str, goal: str) -> None:
        if ours in by and theirs in by:
            x = by[ours]["rows_per_s"] / by[theirs]["rows_per_s"]
            out[key] = target(f"{goal} ({ours} / {theirs})", f"{x:.2f}x", x >= 1)

    goal = "transform throughput >= MLlib's LogisticRegressionModel.transform"
    ratio("transform_vectors", "sparkmaxent transform (Vector given)",
          "mllib transform (Vector given)", goal)  # fmt: skip
    ratio("transform_text", "sparkmaxent transform (array<string>)",
          "mllib CountVectorizer + transform", goal)  # fmt: skip
    equal_goals = (
        ("vectors_equal", "Vector given", "given Vectors, transform (MLlib's model)"),
        ("text_equal", "array<string>", "given tokens, transform (MLlib's vectoriser and model)"),
    )
    for key, given, what in equal_goals:
        equal = by.get(f"sparkmaxent transform ({given})", {})
        if "max_abs_diff_raw" in equal:
            worst = max(equal["max_abs_diff_raw"], equal["max_abs_diff_probability"])
            out[key] = target(
                f"{what} equal to the Arrow scorer to 1e-12 "
                "(largest |difference| of rawPrediction and probability; predictions differing)",
                f"{worst:.2e}; {equal['predictions_differing']} of {equal['rows']} rows",
                worst <= 1e-12 and equal["predictions_differing"] == 0,
            )
    # SQL and Arrow rows/s against each other and MLlib: the rows (docs/benchmarks.md's table)
    for name, label in AUTO_CORPORA.items():
        auto = by.get(f"sparkmaxent l1='auto' ({label})")
        cv = by.get(f"sparkmaxent CrossValidator ({label})")
        if auto and cv and auto.get("stage") == cv.get("stage") == "auto":
            out.update(auto_targets(name, label, auto, cv))
    est, cli = by.get("sparkmaxent Estimator"), by.get("sparkmaxent CLI")
    if est and cli:
        ratio = est["wall_s"] / cli["wall_s"]
        goal = "Estimator overhead <= 5% of the CLI's wall time (same training)"
        out["overhead"] = target(goal, f"{ratio:.3f}x", ratio <= 1.05)
    return out


def auto_targets(name: str, label: str, auto: dict, cv: dict) -> dict:
    """A corpus's two ``auto`` targets: test accuracy within 0.5 point of the
    CrossValidator's and less wall time. A CrossValidator stopped at its
    bound (``capped``) has no accuracy (that target is not met, saying so)
    and its wall time is a lower bound of what it needed."""
    x = auto["wall_s"] / cv["wall_s"]
    goal = f"{label}: l1='auto' test accuracy within 0.5 point of the CrossValidator's (same grid)"
    if cv.get("capped"):
        stop = (
            f"CrossValidator stopped at its {cv['cap_s']:g} s bound "
            f"({cv['fits_started']} of {cv['fits_total']} fits started)"
        )
        acc = target(goal, f"not measured: {stop}", False)
        time_value = f"<= {x:.2f}x ({stop}: its time is at least {cv['wall_s']:.0f} s)"
    else:
        gap = 100 * (cv["accuracy"] - auto["accuracy"])
        acc = target(goal, f"{gap:+.2f} points below", gap <= 0.5)
        time_value = f"{x:.2f}x"
    return {
        f"auto_accuracy_{name}": acc,
        f"auto_time_{name}": target(
            f"{label}: l1='auto' wall time < the CrossValidator's", time_value, x < 1
        ),
    }


def row_corpus(r: dict) -> str | None:
    """The ``auto`` corpus of a row (rows before the field: from its system)."""
    if "corpus" in r:
        return r["corpus"]
    return next((k for k, v in AUTO_CORPORA.items() if f"({v})" in r["system"]), None)


def row_key(r: dict) -> tuple:
    """What makes two rows one measurement: the same stage, system and task."""
    return (r.get("stage"), r["system"], r["task"])


def merged_rows(earlier: list[dict], rows: list[dict]) -> list[dict]:
    """``earlier``'s rows that ``rows`` do not measure again (``row_key``),
    then ``rows``: what ``--merge`` puts on the page."""
    return replace_rows(earlier, rows, row_key)


def kept_rows(path: str, stages: list[str], corpora: list[str] = ()) -> list[dict]:
    """The rows of an earlier result file from stages not run now (each
    row names its stage and command), so stages can run one at a time; of
    the ``auto`` stage, the rows of corpora not in ``corpora``."""
    import json

    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = json.load(f)["rows"]

    def measured(r: dict) -> bool:  # run again now: another auto corpus is kept
        stage = r.get("stage", stages[0])
        return stage in stages and (stage != "auto" or row_corpus(r) in corpora)

    return [r for r in rows if not measured(r)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", default=None, help="directory holding conll2000/ (../shared/data)")
    p.add_argument("--train-sentences", type=int, default=0, help="first N (0: all)")
    p.add_argument("--l1", type=float, default=1e-4)
    p.add_argument("--n-best", type=int, default=1000)
    p.add_argument("--mllib-iter", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--score-copies",
        type=int,
        default=20,
        help="score stage: the test rows unioned K times (cached) so each transform runs seconds",
    )
    p.add_argument(
        "--score-given",
        choices=("all", "tokens"),
        default="all",
        help="score stage: every system, or the array<string> ones and MLlib's "
        "CountVectorizer + transform only (their rows alone; a page merge keeps the others)",
    )
    p.add_argument("--driver-memory", default="4g", help="spark.driver.memory (cached test rows)")
    p.add_argument("--grid", type=float, nargs="+", default=[1e-2, 3e-3, 1e-3, 3e-4])
    p.add_argument("--folds", type=int, default=3)
    p.add_argument("--cv-sentences", type=int, default=1000, help="first N for CrossValidator")
    p.add_argument(
        "--stages", nargs="+", choices=STAGES, default=list(STAGES), help="run in this order"
    )
    p.add_argument(
        "--auto-corpora", nargs="+", choices=list(AUTO_CORPORA), default=list(AUTO_CORPORA)
    )
    p.add_argument(
        "--auto-cv-seconds",
        type=float,
        default=0.0,
        help="auto stage: stop the CrossValidator at its next fit after this many seconds "
        "(0: never); its row then says so and has no accuracy",
    )
    work_arguments(p, "/tmp/sparkmaxent-ml-api", "ml_api.json")
    merge_arguments(p)
    args = start(p, argv)
    if args.merge:
        merge_pages(args.output, args.merge, merged_rows, targets, "ml_api")
        return 0
    from sparkmaxent.backends.session import spark_session

    # the score stage caches --score-copies copies of the test rows: room for them in memory
    conf = {"spark.ui.enabled": "false", "spark.driver.memory": args.driver_memory}
    spark = spark_session("local[2]", "ml-api", conf)
    corpus = (lambda *a: shared_corpus(*a, data_dir=args.data)) if args.data else shared_corpus
    text = sentences(
        corpus("conll2000", "train.txt"), os.path.join(args.work, "train.txt"), args.train_sentences
    )
    train = tokens(spark, text).cache()
    test = tokens(spark, corpus("conll2000", "test.txt"))
    rows: list[dict] = []
    extra = {
        "train_rows": train.count(),
        "train_sentences": args.train_sentences or "all",
        "l1": args.l1,
        "n_best": args.n_best,
    }

    previous = kept_rows(args.output, args.stages, args.auto_corpora)

    def save(stage: str) -> None:
        for r in rows:
            r.setdefault("stage", stage)
        stamp = {"command": command_line(), "load_average": [round(x, 2) for x in os.getloadavg()]}
        for r in rows:
            for k, v in stamp.items():
                r.setdefault(k, v)
        # the CoNLL run's settings: the auto rows (other corpora) carry their own sizes
        page = previous + [r if r["stage"] == "auto" else {**extra, **r} for r in rows]
        write_result(args.output, page, targets(page))
        print_table(previous + rows, KEYS)

    model = None
    for stage in args.stages:  # in the order given
        if stage == "train":
            model = train_stage(spark, args, text, train, rows)
        elif stage == "score":
            if model is None:
                from sparkmaxent.ml import MaxEntClassifier

                est = MaxEntClassifier(method="grafting", l1=args.l1, nBest=args.n_best)
                model = est.fit(train)
            score_stage(spark, args, train, test, model, rows)
        elif stage == "grid":
            grid_stage(spark, args, train, rows)
        elif stage == "cv":
            cv_stage(spark, args, text, rows)
        elif stage == "auto":
            auto_stage(spark, args, corpus, rows)
        save(stage)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
