"""docs/benchmarks.md, generated from the result pages
``benchmarks/results/<benchmark>.json`` (``benchmarks.common.write_result``):
a targets-at-a-glance table, then one section per benchmark with what it
measures, its command, one table of its current figures and its targets.

    python -m benchmarks.report            # rewrite docs/benchmarks.md
    python -m benchmarks.report --check    # exit 1 if it is not current

What each benchmark measures, and which columns and rows its table shows,
is said once here (``PAGES``); the figures come from the result files only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.common import RESULTS, ROOT
from sparkmaxent.selection.stops import StopReason, reason_of_message

DOC = os.path.join(ROOT, "docs", "benchmarks.md")
MAX_LINES = 600


@dataclass(frozen=True)
class Page:
    """How a benchmark's section reads: its title, what it measures, the
    columns of its table and which rows it shows (all by default)."""

    title: str
    measures: str
    columns: tuple[str, ...]
    rows: Callable[[dict], bool] = field(default=lambda row: True)


PAGES: dict[str, Page] = {
    "grafting_vs_mllib": Page(
        "Grafting against Spark MLlib",
        "l1 n-best grafting (Spark backend, n = 1,000) against Spark MLlib's multinomial l1 "
        "LogisticRegression in one local[2] session on CoNLL-2000 chunking, at gamma1 1e-4, 1e-5 "
        "and 1e-6 (each gamma1's pair from one run): objective, KKT violation, accuracy, "
        "non-zeros, passes (Spark jobs) and wall time; the targets take the first round at "
        "MLlib's objective from grafting's trace. MLlib runs to its own rule or until its time "
        "cap ('time cap': cancelled, no objective; its wall time a lower bound of MLlib's).",
        ("system", "gamma", "n", "objective", "kkt_violation", "token_accuracy", "chunk_f1",
         "nonzero_weights", "passes", "wall_s", "stopped"),
    ),
    "round_tol": Page(
        "Grafting: inexact rounds",
        "Grafting on CoNLL-2000 (n = 1,000, in-process, one core) at each "
        "`train.grafting.round_tol_ratio`: the round, passes and CPU seconds at MLlib's "
        "objective, and where the run ended; runs taken in turns.",
        ("round_tol_ratio", "gamma1", "target_round", "target_passes", "target_cpu_s", "rounds",
         "passes", "cpu_s", "objective", "certified"),
    ),
    "round_cost": Page(
        "Grafting: one round's cost against the active set (issue 37)",
        "One grafting round (the first at n_best = N, gamma1 1e-6) on CoNLL-2000, in-process "
        "(2 blocks, one BLAS thread) and on Spark local[2] (2 partitions; CPU: driver plus "
        "Python workers), solved by exact Newton (the Hessian block per pass) and by newton-cg "
        "(each partition's Newton step by projected CG, n-vectors per pass, corrected by "
        "secant pairs, each partition's CG to a forcing term that follows the outer "
        "contraction; newton-cg-plain: uncorrected; newton-cg-fixed: CG to a fixed tenth of "
        "the violation, the forcing term before it; newton-cg-global: the late iterations on "
        "a settled free set by the driver's CG across passes, one Hessian-vector product of "
        "the whole data a pass, at most `--global-cg` an iteration; newton-cg-face: each "
        "partition's model solved face by face after TRON, CG through the bounds within a "
        "region and a projected search, `SolverOptions.cg_face`, newton-cg's default from "
        "`SolverOptions.face_from` weights; newton-cg-stop: each partition's CG stopped at "
        "the first bound at every size, the default below): CPU seconds (the "
        "process's CPU time: the slope's measure), wall seconds, passes, "
        "Hessian-vector products, bytes a pass ships to the driver (the mean over the round's "
        "passes, the full-gradient pass included; the direction passes' own mean beside it, "
        "every kind of pass in the file's by_pass); targets: the log-log slopes from 1,000 "
        "weights. Each round is solved to the tolerance in its row (`--tol`: one fixed "
        "tolerance at every size, or grafting's own loose first-round one; the bytes "
        "count the solver's last pass, which ships the thresholded test's partials). Each "
        "row names the run that measured it (measured_by). product-pass rows (`--probe`): a "
        "product pass's CPU with each block's operator computed afresh and from the cache "
        "(on Spark from the worker's own or from the store the executor's workers share; "
        "following passes in which a block's operator was built again counted apart). "
        "Shown: newton's and newton-cg's rows at 1,000, 4,000, 16,000 and 64,000 weights (of a "
        "page without tolerances, Spark's); the rest in the file.",
        ("backend", "solver", "active", "cpu_s", "wall_s", "passes", "hessian_products",
         "bytes_per_pass_mean", "direction_bytes_per_pass", "objective", "converged", "tol",
         "load"),
        lambda row: row["active"] in (1000, 4000, 16000, 64000)
        and (row["backend"] == "spark" or "tol_mode" in row)
        and row["solver"] in ("newton", "newton-cg"),
    ),
    "grafting_solvers": Page(
        "Grafting: round solver, Newton against L-BFGS-B",
        "Grafting's round optimizer, Newton with Hessian-block passes against L-BFGS-B, "
        "in-process: passes (the figure that carries over to Spark), rounds, objective, KKT.",
        ("data", "l1", "n_best", "solver", "passes", "rounds", "objective", "nonzero",
         "kkt_passed", "wall_s"),
    ),
    "box_qp_faces": Page(
        "Grafting: the Newton round's model solve",
        "The round's box-constrained model solve (`box_qp_cd`) against a baseline copy of the "
        "solver on models captured from CoNLL-2000 rounds: sweeps, seconds, the model's value "
        "and projected gradient, one BLAS thread, taking turns.",
        ("model", "n", "solver", "sweeps", "seconds", "q", "projected_gradient", "tol"),
        lambda row: row["model"].startswith("qp13"),  # one round's models; the rest in the file
    ),
    "blas_threads": Page(
        "BLAS threads of the Newton solve",
        "The Newton solve's dense work (Cholesky factor and solve) and a whole in-process "
        "grafting fit (PP attachment) with one BLAS thread against BLAS's default (0).",
        ("measure", "n", "blas_threads", "median_s", "passes", "objective"),
    ),
    "grafting_10m": Page(
        "Grafting: block-wise gradient test at 10M candidates",
        "The block-wise against the dense gradient test on 10M generated candidate features: "
        "passes, time, driver and JVM peak memory, the same selection on both paths.",
        ("path", "candidate_features", "rounds", "passes", "wall_s", "driver_peak_rss_mb",
         "jvm_heap_peak_mb", "objective", "active_features"),
    ),
    "pass_overhead": Page(
        "Pass overhead",
        "The cost of the Spark backend's passes (active set, gradient test at gamma1 1e-5 and "
        "1e-4, the old dense partials, a fetch pass, the block-wise test) against a trivial "
        "pass in one local[2] session, CoNLL-2000 chunking features (200k events, 22 labels); "
        "median, least and greatest ratio over runs.",
        ("pass", "runs", "ratio_median", "ratio_min", "ratio_max", "wall_s_median",
         "kernel_s_median"),
    ),
    "pass_breakdown": Page(
        "Where a pass's time goes",
        "The passes of `pass_overhead` split by clock stamps of an instrumented copy: "
        "broadcast, launch, kernel, result pickling, return through the JVMs, unpickling and "
        "merge (seconds), and the result's size.",
        ("pass", "wall_s", "broadcast", "launch", "kernel", "pickle", "return", "unpickle",
         "merge", "total", "result_mb"),
    ),
    "pass_parts": Page(
        "The thresholded gradient test's parts",
        "In-process CPU seconds of the parts of grafting's thresholded gradient test on "
        "CoNLL-2000: executor kernel and driver-side merge and resolution, per gamma1.",
        ("l1", "tau", "keep", "executor_s", "driver_s", "merge_s", "resolve_s", "decided"),
        lambda row: "l1" in row,
    ),
    "scale": Page(
        "Scale: grafting against MLlib on generated data",
        "Grafting against MLlib's l1 LogisticRegression on generated data (Zipf predicate "
        "rates, one planted model for every size) along events, candidate features and Spark "
        "partitions: wall, passes, time per pass, driver and executor peak RSS (the JVM and "
        "its Python workers summed; the JVM's own, and the cached blocks' arrays, where "
        "measured), objective.",
        ("axis", "system", "events", "candidates", "partitions", "status", "gradient_test",
         "wall_s", "passes", "s_per_pass", "driver_peak_rss_mb", "executor_peak_rss_mb",
         "jvm_peak_rss_mb", "block_arrays_mb", "nonzero_weights"),
    ),
    "cluster_overhead": Page(
        "Cluster overhead: local against a standalone cluster",
        "One grafting run (CoNLL-2000, gamma1 1e-4, n_best 1000) through `scripts/submit.sh` "
        "in local[2] and on a standalone cluster whose worker has its own mount namespace.",
        ("mode", "wall_s", "job_wall_s", "passes", "objective", "rounds", "nonzero_weights"),
    ),
    "connect": Page(
        "Spark Connect",
        "Per-pass wall time (gradient pass, active-set pass) and a whole small grafting fit: "
        "a classic session with the RDD backend, classic with the DataFrame backend, Spark "
        "Connect with the DataFrame backend.",
        ("system", "task", "wall_s", "passes", "per_pass_s", "objective"),
    ),
    "env_archive": Page(
        "Python environment archive",
        "`scripts/submit.sh --python-env archive`: each virtualenv packed whole and as "
        "shipped (without pyspark and py4j, which the cluster's Spark provides, pandas, the "
        "installers, tests, bytecode, headers, sources, scipy subpackages nothing imports: "
        "`scripts/pack_env.py`); the runtime venv as shipped, and for `--deploy-mode "
        "cluster` (pandas kept), here, every row in the JSON.",
        ("venv", "archive", "left_out", "archive_mb", "unpacked_mb", "files", "pack_s"),
        rows=lambda row: row.get("venv") == "runtime"
        and row.get("archive") in ("shipped", "cluster-deploy"),
    ),
    "ml_api": Page(
        "pyspark.ml API on CoNLL-2000",
        "The pyspark.ml Estimator and Model against MLlib's LogisticRegression on CoNLL-2000: "
        "training and CrossValidator wall time and passes, transform throughput; l1='auto' "
        "against a 3-fold CrossValidator over the same grid in the documented Tokenizer "
        "Pipeline on PP attachment and on the Brown genres (500 documents, 15 labels). The "
        "score and auto rows here; the SQL join, train and cv rows in the JSON, their targets "
        "below.",
        ("system", "task", "stage", "wall_s", "rows_per_s", "cpu_s", "passes", "accuracy",
         "chosen_l1"),
        rows=lambda row: row.get("stage") == "auto"
        or (row.get("stage") == "score" and " join " not in row["system"]),
    ),
    "time_to_first_model": Page(
        "Time to first model",
        "`sparkmaxent pipeline` on a generated 5,000-line `label f f:v` file, whole process, "
        "with its phases, small data in-process or every phase on Spark.",
        ("setting", "repeat", "wall_s", "spark_start_s", "prepare_s", "train_s", "evaluate_s",
         "test_accuracy"),
    ),
    "evaluate_small": Page(
        "Evaluate of a small file",
        "`sparkmaxent evaluate` of a 500-line PP test file (prepared and scored in-process, "
        "and with data.in_process_max_events = 0 on Spark) against a bare Spark session's "
        "start-up and stop, whole processes taking turns.",
        ("corpus", "run", "repeat", "wall_s", "load_average_1min", "spark_start_s",
         "evaluate_s", "evaluate_spark_s", "ratio", "ratio_spark_path"),
    ),
    "conll2000_baselines": Page(
        "Baselines: CoNLL-2000 against scikit-learn",
        "CoNLL-2000 chunking: MLE, l2 and count cutoff on Spark local[2] against "
        "scikit-learn's l2 LogisticRegression at the same regularization (chosen on held-out "
        "training sentences).",
        ("system", "method", "regularization", "objective", "token_accuracy", "chunk_f1",
         "nonzero_weights", "passes", "wall_s"),
    ),
    "riezler_tables": Page(
        "Riezler & Vasserman's Tables 2 and 3, in shape",
        "Riezler & Vasserman (2004) Tables 2 and 3 on CoNLL-2000 Base-NP: mle, std, l0, l2, "
        "l1 n-best grafting, mle-ifs, l2-ifs (settings chosen by held-out chunk F1) with test "
        "chunk F1, compression, iterations, passes and time.",
        ("method", "setting", "chunk_f1", "precision", "recall", "compression",
         "nonzero_weights", "iterations", "passes", "wall_s"),
    ),
    "sgc_vs_ifs": Page(
        "IFS and SGC on CoNLL-2000 Base-NP",
        "IFS, SGC and SGC with look-ahead on CoNLL-2000 Base-NP (Zhou et al. Figures 3-5): "
        "chunk P/R/F1 against the number of selected features next to the count cutoff and l2 "
        "over all features; gain evaluations, passes and time (table: at 1,160 features, "
        "the target's size).",
        ("method", "features", "precision", "recall", "f1", "refit_f1", "gain_evaluations",
         "passes", "wall_s"),
        lambda row: row["method"] == "l2-all" or row["features"] == 1160,
    ),
    "sgc_long_documents": Page(
        "SGC passes per stage on long documents",
        "SGC on the Brown genre task (bag of words, held-out part of the training data): "
        "passes per stage with counts and binary features, held-out loss and accuracy by stage "
        "at each `train.ifs.gain_prior_variance`.",
        ("experiment", "features", "prior_variance", "stages", "passes_per_stage",
         "best_heldout_loss_stage", "best_heldout_loss", "accuracy_at_best_loss", "wall_s"),
    ),
    "bayes_factor": Page(
        "Bayes factor selection",
        "Bayes-factor selection (both signs, S = 1, 10, 100 per round, model priors) against "
        "l1 grafting and SGC on PP attachment and CoNLL-2000 chunking (table: the Laplace "
        "sign, without the prior-variance grid).",
        ("dataset", "method", "variant", "features", "accuracy", "f1", "dev_accuracy",
         "passes", "wall_s"),
        lambda row: "sigma^2" not in row["variant"] and "printed sign" not in row["variant"],
    ),
    "model_choice": Page(
        "Model choice",
        "Model choice with no user grid: grafting and l2 paths, SGC and Bayes-factor best "
        "stage, chosen on a held-out part carved at prepare time, against scikit-learn's "
        "LogisticRegressionCV (l2; l1 under a cap) on synthetic data, PP attachment, Brown "
        "genres, CoNLL-2000 Base-NP and chunking (and chunking over the 10 unigram atoms, "
        "`conll-unigrams`: combination features against those atoms; every point of its "
        "paths in the file's `points_run`) (table: the defaults, no variants, runs that "
        "ended with a model).",
        ("corpus", "method", "conll_sentences", "test_score", "features", "chosen_setting",
         "heldout_score", "passes", "wall_s", "passes_single_fit", "wall_s_single_fit"),
        lambda row: " " not in row["method"] and row.get("test_score") is not None,
    ),
    "choice_folds": Page(
        "Held-out against k-fold choice by training size",
        "A path (l2; grafting, pure l1 or with its l2 mixes) on nested subsamples of "
        "model_choice's sub-train part, chosen on an inner held-out fifth (then refitted) or "
        "by 5 folds of the subsample (a path's automatic choice below "
        "`train.choice.kfold_max_events` or `kfold_max_events_grafting`); both refitted on "
        "the subsample and scored on model_choice's held-out part, which neither saw (no test "
        "data): the measurements behind both thresholds.",
        ("corpus", "method", "events", "choice", "chosen", "features", "loglik", "loglik_se",
         "accuracy", "passes", "wall_s"),
    ),
    "stage_methods": Page(
        "SGC and the Bayes factor at their automatic settings",
        "SGC (adaptive stages of several features) and the Bayes factor (going on past its "
        "rule while held-out improves, proposing from the misclassified and, while those are "
        "few, the lowest-margin training events), each keeping its best held-out stage, stopped "
        "by the paths' held-out "
        "rule or `train.selection.max_seconds`, against scikit-learn's LogisticRegressionCV l2 "
        "chosen on the same held-out part (model_choice's split) on PP attachment, Brown genres "
        "and CoNLL-2000 (2,000 sentences); targets: within 1 point of l2, a model at the end. "
        "Shown: the automatic settings' rows (a `--set` variant's are in the file). `vs_l2_*`: "
        "ours minus l2 on the same test events, accuracy points (per token for CoNLL) and "
        "log-likelihood, each with the standard error of the paired difference, and the "
        "events the two models score differently (`vs_l2_differ`, `vs_l2_ours_right` of them "
        "ours); blank where the anchor was not run alongside.",
        ("corpus", "method", "test_score", "features", "chosen_setting", "heldout_score",
         "vs_l2_accuracy", "vs_l2_accuracy_se", "vs_l2_differ", "vs_l2_ours_right",
         "vs_l2_loglik", "vs_l2_loglik_se", "passes", "wall_s", "stage_cap_s", "stopped"),
        lambda row: " " not in row["method"],  # a --set variant: in the file
    ),
    "sgc_prior": Page(
        "SGC's chosen stage under other Gaussian priors",
        "SGC at the defaults on Brown genres (model_choice's split, no refit): the chosen "
        "stage's features refitted on the training part at each prior sigma^2 (sum units) and "
        "scored on the held-out part, against the stage's own fit (the gain prior); `gap_se`: "
        "the held-out log-likelihood's difference in standard errors of the paired difference.",
        ("corpus", "stage", "features", "sigma2", "train_loss", "heldout_score",
         "heldout_accuracy", "gap_se"),
        lambda row: not row.get("stage_fit"),  # the stage's own fit: the sigma^2 = 1 refit's
    ),
    "combination": Page(
        "Combination features",
        "Combination features (Okanohara & Tsujii 2009) on PP attachment, CoNLL-2000 over the "
        "10 unigram atoms and Brown genres: l1-Comb at degree 2 and 3 against l1 and l2 over "
        "the atoms and l2 over every conjunction; gamma chosen on held-out data; conjunctions "
        "examined against those existing; passes, time, memory (table: fits not stopped by "
        "a time cap).",
        ("task", "method", "degree", "gamma", "dev_score", "test_score", "active_features",
         "conjunctions_examined", "conjunctions_existing", "passes", "wall_s", "rss_peak_mb"),
        lambda row: row["stop_reason"] is not StopReason.MAX_SECONDS,
    ),
    "lattice_sbd": Page(
        "Feature lattice: sentence boundaries and PP attachment",
        "Mikheev's feature lattice (settings chosen on held-out data) against l2, l1 grafting, "
        "l1-Comb, the period-space-capital rule and NLTK Punkt on sentence boundary "
        "disambiguation (WSJ sample and Brown), and on PP attachment; lattice build and "
        "selection against one l2 fit.",
        ("task", "system", "error_rate", "errors", "candidates", "constraints", "passes",
         "wall_s", "ratio"),
    ),
}  # fmt: skip


def slug(benchmark: str) -> str:
    """The section's anchor: the benchmark's name (GitHub keeps underscores)."""
    return benchmark


def cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def typed_stops(doc: dict) -> dict:
    """The page ``doc`` with each row's ``stop_reason`` a StopReason (None:
    the row's fit has none, or its ``stopped`` text is no reason's message):
    a row written before reports carried ``stop_reason`` gets it from its
    ``stopped`` text, here once, so pages decide on the typed reason."""
    for row in doc.get("rows", []):
        if isinstance(row, dict):
            code = row.get("stop_reason")
            row["stop_reason"] = StopReason(code) if code else reason_of_message(row.get("stopped"))
    return doc


def load_pages(results: str = RESULTS) -> dict[str, dict]:
    """Every result page, by benchmark; a page without a ``PAGES`` entry or an
    entry without a page is an error (the doc would silently miss it)."""
    found = {}
    for name in sorted(os.listdir(results)):
        if name.endswith(".json"):
            with open(os.path.join(results, name)) as f:
                found[name[: -len(".json")]] = typed_stops(json.load(f))
    missing = sorted(set(PAGES) - set(found))
    unknown = sorted(set(found) - set(PAGES))
    if missing or unknown:
        raise SystemExit(
            f"benchmarks/report.py: no result page for {missing}; "
            f"no PAGES entry (title, what it measures, columns) for {unknown}"
        )
    return {name: found[name] for name in PAGES}


def figures(benchmark: str, results: str = RESULTS) -> list[str]:
    return sorted(
        f
        for f in os.listdir(results)
        if f.endswith(".png") and (f == benchmark + ".png" or f.startswith(benchmark + "_"))
    )


def section(benchmark: str, doc: dict, page: Page, results: str = RESULTS) -> list[str]:
    machine = doc.get("machine") or {}
    load = doc.get("load")
    facts = f"commit `{doc['commit']}`, {doc['date']}"
    if machine.get("cores"):
        facts += f", {machine['cores']} cores"
    if load:
        facts += f", load {' / '.join(f'{x:g}' for x in load)} (1 / 5 / 15 min) at the end"
    about = (f"**{page.title}.** {page.measures} [`{benchmark}.json`](../benchmarks/results/"
             f"{benchmark}.json): {facts}.")  # fmt: skip
    pngs = figures(benchmark, results)
    if pngs:
        about += " Figures: " + ", ".join(f"[`{p}`](../benchmarks/results/{p})" for p in pngs)
    rows = [r for r in doc["rows"] if page.rows(r)]
    if len(rows) < len(doc["rows"]):
        about += f" Table: {len(rows)} of the {len(doc['rows'])} rows; the others are in the file."
    if doc["targets"]:  # listed once, in the targets table at the top
        met = sum(bool(t["met"]) for t in doc["targets"].values())
        about += (f" Targets: {met} of {len(doc['targets'])} met, in the table"
                  " [at a glance](#targets-at-a-glance).")  # fmt: skip
    lines = [f"## {benchmark}", "", about, "", f"    {doc['command']}"]
    columns = [c for c in page.columns if any(c in r for r in rows)]
    lines += [""] + table(columns, [[cell(r.get(c)) for c in columns] for r in rows])
    return lines + [""]


HEADER = """\
# Benchmarks

<!-- Generated by `python -m benchmarks.report` from benchmarks/results/*.json;
do not edit: change a benchmark's description in benchmarks/report.py, or rerun
the benchmark. `scripts/lint.sh` fails when this page is not current. -->

Every benchmark writes one page, `benchmarks/results/<benchmark>.json`, with its
latest run only (command, commit, date, machine, load, rows, targets); earlier runs
are in git's history. Benchmarks read the corpora from `../shared/data/` (never
copied into the project); run them as modules from the project root, e.g.
`SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.grafting_vs_mllib --help`.
The machine is a shared 2-core one: where it was loaded (see each load average),
seconds are inflated, passes are not. Scratch paths in commands read `$WORK`.
"""


def render(results: str = RESULTS) -> str:
    docs = load_pages(results)
    rows = []
    for benchmark, doc in docs.items():
        for t in doc["targets"].values():
            met = "**met**" if t["met"] else "**not met**"
            rows.append([t["goal"], cell(t["value"]), met, f"[{benchmark}](#{slug(benchmark)})"])
    lines = HEADER.splitlines() + ["", "## Targets at a glance", ""]
    lines += table(["target", "value", "met", "section"], rows) + [""]
    for benchmark, doc in docs.items():
        lines += section(benchmark, doc, PAGES[benchmark], results)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/benchmarks.md is stale")
    args = parser.parse_args(argv)
    text = render()
    n_lines = text.count("\n")
    if n_lines > MAX_LINES:
        print(f"docs/benchmarks.md would be {n_lines} lines (at most {MAX_LINES})", file=sys.stderr)
        return 1
    if args.check:
        with open(DOC) as f:
            if f.read() != text:
                print(
                    "docs/benchmarks.md is not current: run python -m benchmarks.report",
                    file=sys.stderr,
                )
                return 1
        return 0
    with open(DOC, "w") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(DOC, ROOT)} ({n_lines} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
