"""Mikheev's feature lattice against its peers on sentence boundary
disambiguation (SBD) and PP attachment, in one run.

SBD (sparkmaxent/data/sbd.py): events from the WSJ sample and Brown with
fixed splits by file; training = WSJ train + Brown train, held-out = WSJ
held-out + Brown held-out (the only data any choice is made on: l2's
gamma2, grafting's gamma1, the lattice's stops), tests WSJ test and Brown
test, scored separately. Systems: the lattice (``train.method = lattice``),
l2 and l1 grafting over the same atoms, the period-space-capital baseline
(a sentence ends when the next word is capitalized or the document ends),
NLTK's Punkt trained unsupervised on the training text (when nltk is
installed: the bench extra), and l1-Comb (grafting with combination
features, ``train.grafting.combination_degree``) over the same atoms. The
lattice's k, smoothing T, constraint threshold and unconstrain fraction
are chosen together on held-out accuracy (the product of their grids).

PP attachment (../shared/data/ppattach): the four head words as the only
atoms (v=, n1=, p=, n2=), training / devset (held-out) / test; the lattice
against l1 grafting, l1-Comb and l2 over the same atoms.

Also measured: the lattice's build and selection time against one l2 fit on
the same data, and one selection step's candidate scoring on Spark
executors (batches) against in-process scoring.

Usage::

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python -m benchmarks.lattice_sbd

writes benchmarks/results/lattice_sbd.json (and lattice_sbd.png).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import logging
import os
import time

import numpy as np

from benchmarks.common import SHARED_DATA, print_table, shared_corpus, start, target, work_arguments
from benchmarks.common import write_result as write_json_result
from sparkmaxent.api import evaluate_model, train_model
from sparkmaxent.backends.session import spark_session
from sparkmaxent.config import Config, train_config
from sparkmaxent.data import sbd
from sparkmaxent.data.load import read_blocks, read_events_table
from sparkmaxent.data.prepare import prepare
from sparkmaxent.errors import ConfigError
from sparkmaxent.methods.lattice.curves import write_plot
from sparkmaxent.model_conjunctions import atoms_used

log = logging.getLogger("lattice_sbd")
KEYS = [
    "task",
    "system",
    "error_rate",
    "errors",
    "candidates",
    "constraints",
    "atomic_features_used",
    "lattice_nodes",
    "passes",
    "wall_s",
]


def prepared(spark, work: str, name: str, files: list[str], fmt: str, vocab: str = "") -> str:
    out = os.path.join(work, "prepared", name)
    if not os.path.exists(os.path.join(out, "dataset.json")):
        prepare(
            spark,
            files,
            out,
            fmt,
            merge_duplicates=not vocab,
            vocabulary=vocab or None,
            partitions=2,
        )
    return out


def fit(spark, train_dir: str, heldout_dir: str, common: dict, data=None, **keys):
    """Train on ``train_dir`` with ``common`` keys (backend, gtol) and ``keys``
    (``data``: the data section, default Config's)."""
    t0 = time.perf_counter()
    cfg = Config(train=train_config(**common, **keys), data=data or Config().data)
    model, report = train_model(spark, cfg, train_dir, heldout_dir)
    return model, report, time.perf_counter() - t0


def choose(spark, train_dir, heldout_dir, common, grid: dict, trace=None, **fixed):
    """The model of the best held-out accuracy over the product of ``grid``
    (key -> values; ties: the first); returns (model, report, wall, chosen),
    chosen the value for one key, else a dict of the keys' values.
    ``trace`` (a dict) gets each setting's held-out accuracy, or the message
    of a ConfigError (the lattice's node limit) for settings that stopped."""
    best = None
    for values in itertools.product(*grid.values()):
        keys = dict(zip(grid, values))
        name = str(values[0]) if len(keys) == 1 else setting(keys)
        try:
            run = fit(spark, train_dir, heldout_dir, common, **keys, **fixed)
        except ConfigError as e:
            log.warning("%s %s stopped: %s", fixed.get("method"), name, e)
            if trace is not None:
                trace[name] = f"stopped: {e}"
            continue
        log.info(
            "%s %s: held-out accuracy %.5f", fixed.get("method"), name, run[1]["heldout_accuracy"]
        )
        if trace is not None:
            trace[name] = {
                "heldout_accuracy": run[1]["heldout_accuracy"],
                "wall_s": round(run[2], 1),
                **{
                    f: run[1].get(sec, {}).get(f)
                    for sec, f in (("lattice", "nodes"), ("generalization", "constraints_after"))
                },
            }
        if best is None or run[1]["heldout_accuracy"] > best[1]["heldout_accuracy"]:
            best = (*run, values[0] if len(keys) == 1 else keys)
    if best is None:
        raise SystemExit(f"every setting of {grid} stopped (see the log)")
    return best


def setting(keys: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in keys.items())


def atoms_of(model) -> int:
    """Atomic predicates the model's non-zero weights use (a conjunction's atoms counted)."""
    preds = np.unique(model.weights.sparse().active_ids() // model.space.n_labels)
    conj = model.conjunctions
    if conj is None:
        return len(preds)
    used = conj.subset(preds[preds >= conj.n_atoms] - conj.n_atoms)[0]
    return len(np.union1d(preds[preds < conj.n_atoms], atoms_used(used)))


def model_rows(spark, task, system, run, tests: dict[str, str]) -> list[dict]:
    model, report, wall = run[:3]
    out = []
    for name, test_dir in tests.items():
        scored = evaluate_model(spark, model, test_dir, chunks=False)
        n = scored["events"]
        errors = int(round((1 - scored["accuracy"]) * n))
        lat = report.get("lattice", {})
        gen = report.get("generalization", {})
        wrong = wrong_events(model, test_dir)
        if len(wrong) != errors:
            raise SystemExit(f"{test_dir}: {len(wrong)} wrong events, evaluate counted {errors}")
        out.append(
            {
                "task": f"{task}-{name}",
                "system": system,
                "error_rate": errors / n,
                "errors": errors,
                "candidates": n,
                "constraints": gen.get("constraints_after", report["nonzero_weights"]),
                "atomic_features_used": gen.get("atomic_features_used", atoms_of(model)),
                "lattice_nodes": lat.get("nodes"),
                "passes": report["passes"],
                "wall_s": round(wall, 1),
                "wrong_event_ids": wrong,
            }
        )
    return out


def wrong_events(model, test_dir: str) -> list[int]:
    """Event ids (lines of the events file, from 0) of the test events the
    model gets wrong, to look at them (never to choose anything)."""
    ids = read_events_table(test_dir).column("event_id").to_numpy()
    (block,) = read_blocks(test_dir)
    pred, _ = model.predict(block)
    return [int(i) for i in ids[pred != block.y]]


def text_rows(task: str, system: str, predict, files: dict[str, str]) -> list[dict]:
    """Rows of a rule or external system: ``predict(path) -> (gold, predicted)`` lists."""
    out = []
    for name, path in files.items():
        t0 = time.perf_counter()
        gold, pred = predict(path)
        errors = int(sum(g != p for g, p in zip(gold, pred)))
        out.append(
            {
                "task": f"{task}-{name}",
                "system": system,
                "error_rate": errors / len(gold),
                "errors": errors,
                "candidates": len(gold),
                "wall_s": round(time.perf_counter() - t0, 1),
            }
        )
    return out


def period_space_capital(path: str):
    gold, pred = [], []
    with open(path) as f:
        for line in f:
            label, *atoms = line.split()
            gold.append(label == "yes")
            s = set(atoms)
            pred.append(bool(s & {"next_shape=upper", "next_shape=allcaps", "next=<end>"}))
    return gold, pred


def punkt(train_docs, test_docs_by_name):
    """Punkt trained on the training text; its decision at every candidate."""
    from nltk.tokenize.punkt import PunktSentenceTokenizer, PunktTrainer

    trainer = PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = True
    trainer.train(" ".join(" ".join(" ".join(s) for s in d) for d in train_docs), finalize=True)
    tok = PunktSentenceTokenizer(trainer.get_params())

    def predict(name: str):
        gold, pred = [], []
        for doc in test_docs_by_name[name]:
            toks = sbd.stream(doc)
            text, ends = "", []
            for t, _ in toks:
                text += ("" if not text else " ") + t
                ends.append(len(text))
            breaks = {e for _, e in tok.span_tokenize(text)}
            for (t, end), e in zip(toks, ends):
                if sbd.core(t).endswith(sbd.ENDS):
                    gold.append(end)
                    pred.append(e in breaks)
        return gold, pred

    return predict


def scoring_measure(spark, train_dir: str, max_atoms: int, smoothing: float) -> dict:
    """One selection step's candidate scoring: on Spark in batches vs in process."""
    from sparkmaxent.backends.factory import make_backend
    from sparkmaxent.methods.lattice.build import build_lattice, choose_atoms, count_configurations
    from sparkmaxent.methods.lattice.select import CandidateScorer, Optimized

    backend = make_backend("local", train_dir, bias=True)
    atoms = choose_atoms(backend, max_atoms)
    lat = build_lattice(count_configurations(backend, atoms), atoms, 200_000)
    arr = lat.arrays(smoothing)
    opt = Optimized.empty(lat.n_nodes, backend.space.n_labels)
    cands = np.arange(lat.n_nodes)
    out = {"nodes": lat.n_nodes}
    for name, sc in (("in_process", None), ("spark", spark.sparkContext)):
        scorer = CandidateScorer(arr, sc)
        t0 = time.perf_counter()
        best = scorer.best(opt, cands)
        out[name] = {
            "seconds": round(time.perf_counter() - t0, 3),
            "batches": scorer.n_batches,
            "best": best,
        }
        scorer.close()
    return out


def lattice_grid(args) -> dict:
    """The SBD lattice's settings, each chosen on held-out data (product)."""
    return {
        "max_atoms": args.max_atoms,
        "smoothing": args.smoothing,
        "constraint_threshold": args.constraint_threshold,
        "unconstrain_fraction": args.unconstrain_fraction,
    }


def comb_rows(spark, args, task, train, held, tests, extra: dict) -> list[dict]:
    """l1-Comb (grafting with combination features of degree
    ``--comb-degree`` over the same atoms), gamma1 chosen on held-out
    accuracy. The fits get no held-out data: combination.py's per-round
    held-out score runs its widened weights on unwidened held-out blocks
    (an index error); the held-out accuracy is taken after each fit."""
    be = {"backend": args.backend, "gtol": args.gtol}
    trace: dict = {}
    best = None
    for gamma in args.comb_grid:
        model, report, wall = fit(
            spark,
            train,
            "",
            be,
            method="grafting",
            l1=gamma,
            combination_degree=args.comb_degree,
            max_seconds=args.comb_max_seconds,
        )
        acc = evaluate_model(spark, model, held, chunks=False)["accuracy"]
        trace[str(gamma)] = {
            "heldout_accuracy": acc,
            "wall_s": round(wall, 1),
            "nonzero_weights": report["nonzero_weights"],
            "stopped": report.get("stopped"),
        }
        log.info("l1-Comb gamma1=%g: held-out accuracy %.5f", gamma, acc)
        if best is None or acc > best[0]:
            best = (acc, (model, report, wall, gamma))
    assert best is not None, "a gamma1 grid"
    extra[f"{task}_l1_comb_heldout"] = trace
    comb = best[1]
    name = f"l1-Comb (degree {args.comb_degree}, gamma1={comb[3]:g})"
    return model_rows(spark, task, name, comb, tests)


def sbd_task(spark, args, rows: list[dict], extra: dict, tasks: set[str]) -> None:
    train, held, tests, wsj, brown, f, summary = sbd_datasets(spark, args)
    extra["sbd_data"] = summary["candidates"]
    be = {"backend": args.backend, "gtol": args.gtol}
    if "sbd-comb" in tasks or "sbd" in tasks:
        rows += comb_rows(spark, args, "sbd", train, held, tests, extra)
    if "sbd" not in tasks and "sbd-lattice" not in tasks:
        return
    trace: dict = {}
    lattice = choose(
        spark, train, held, be, lattice_grid(args), trace, method="lattice", l2=args.lattice_l2
    )
    extra["sbd_lattice_heldout"] = trace
    chosen = lattice[3] if isinstance(lattice[3], dict) else {"max_atoms": lattice[3]}
    rows += model_rows(spark, "sbd", f"lattice ({setting(chosen)})", lattice, tests)
    extra["sbd_lattice_report"] = {
        k: v for k, v in lattice[1].items() if k in ("lattice", "selection", "generalization")
    }
    if "sbd" not in tasks:
        return
    l2 = choose(spark, train, held, be, {"l2": args.l2_grid}, method="l2")
    rows += model_rows(spark, "sbd", f"l2 (gamma2={l2[3]:g})", l2, tests)
    l1 = choose(spark, train, held, be, {"l1": args.l1_grid}, method="grafting")
    rows += model_rows(spark, "sbd", f"l1 grafting (gamma1={l1[3]:g})", l1, tests)
    texts = {c: f[f"{c}-test"] for c in ("wsj", "brown")}
    rows += text_rows("sbd", "period-space-capital", period_space_capital, texts)
    try:
        train_docs = sbd.read_corpus("wsj", wsj, sbd.splits(wsj, brown)["wsj"]["train"])
        train_docs += sbd.read_corpus("brown", brown, sbd.splits(wsj, brown)["brown"]["train"])
        parts = sbd.splits(wsj, brown)
        docs = {
            c: sbd.read_corpus(c, wsj if c == "wsj" else brown, parts[c]["test"])
            for c in ("wsj", "brown")
        }
        rows += text_rows("sbd", "nltk punkt", punkt(train_docs, docs), {c: c for c in docs})
    except ImportError:
        log.warning("nltk is not installed (pip install .[bench]): no Punkt row")
    extra["sbd_l2_chosen"] = l2[3]


def sbd_datasets(spark, args) -> tuple[str, str, dict[str, str], str, str, dict[str, str], dict]:
    """Prepared SBD training, held-out and test datasets (built once per work
    directory), the corpora roots, the event files and the data summary."""
    wsj = shared_corpus("treebank", "raw", data_dir=args.data)
    brown = shared_corpus("brown", data_dir=args.data)
    text = os.path.join(args.work, "sbd")
    if os.path.exists(os.path.join(text, "sbd.json")):
        with open(os.path.join(text, "sbd.json")) as fh:
            summary = json.load(fh)
    else:
        summary = sbd.build(wsj, brown, text)
    f = {n: os.path.join(text, f"{n}.txt") for n in summary["candidates"]}
    train = prepared(spark, args.work, "sbd-train", [f["wsj-train"], f["brown-train"]], "maxent")
    held = prepared(
        spark, args.work, "sbd-heldout", [f["wsj-heldout"], f["brown-heldout"]], "maxent", train
    )
    tests = {
        c: prepared(spark, args.work, f"sbd-{c}", [f[f"{c}-test"]], "maxent", train)
        for c in ("wsj", "brown")
    }
    return train, held, tests, wsj, brown, f, summary


def timing_task(spark, args, extra: dict) -> None:
    """The timed figures (run under the benchmark lock): lattice build and
    selection against one l2 fit at ``--timing-l2`` (the held-out choice of
    the accuracy run), one selection step's scoring, and the generalization
    with and without the cached widened blocks."""
    train, held = sbd_datasets(spark, args)[:2]
    be = {"backend": args.backend, "gtol": args.gtol}
    runs = {}
    for cache in (True, False):
        runs[cache] = fit(
            spark,
            train,
            held,
            be,
            method="lattice",
            max_atoms=args.max_atoms[0],
            l2=args.lattice_l2,
            unconstrain_fraction=args.unconstrain_fraction[0],
            cache_widened=cache,
        )
    report = runs[True][1]
    sel, built = report["selection"]["seconds"], report["lattice"]["build_s"]
    l2_one = fit(spark, train, held, be, method="l2", l2=args.timing_l2)
    extra["sbd_build_and_selection_vs_l2_fit"] = {
        "lattice_build_s": built,
        "selection_s": sel,
        "l2_fit_s": round(l2_one[2], 3),
        "l2": args.timing_l2,
        "ratio": round((built + sel) / l2_one[2], 2),
    }
    extra["sbd_generalization_cache"] = {
        f"cache_widened={c}": {
            "seconds": r[1]["generalization"]["seconds"],
            "passes": sum(row["passes"] for row in r[1]["generalization"]["trace"]),
            "constraints_after": r[1]["generalization"]["constraints_after"],
            "heldout_accuracy": r[1]["heldout_accuracy"],
        }
        for c, r in runs.items()
    }
    extra["sbd_scoring_step"] = scoring_measure(spark, train, args.max_atoms[0], 5.0)


def targets(rows: list[dict]) -> dict:
    """Issue 19's targets, from the rows present: the SBD error on the WSJ
    test split, the lattice on PP attachment, build + selection time."""

    def error(task: str, system: str) -> float | None:
        found = [
            r["error_rate"] for r in rows if r["task"] == task and r["system"].startswith(system)
        ]
        return found[0] if found else None

    def lattice(task: str) -> dict | None:
        found = [r for r in rows if r["task"] == task and r["system"].startswith("lattice (")]
        return found[0] if found else None

    out = {}
    wsj, punkt, l2 = lattice("sbd-wsj"), error("sbd-wsj", "nltk punkt"), error("sbd-wsj", "l2")
    if wsj and punkt is not None and l2 is not None:
        err = wsj["error_rate"]
        value = f"{err:.2%} with {wsj['constraints']} constraints; Punkt {punkt:.2%}, l2 {l2:.2%}"
        met = err <= 0.0075 and err < punkt and err < l2 and wsj["constraints"] <= 300
        goal = "SBD error on the WSJ test split <= 0.75%, below Punkt and l2, <= 300 constraints"
        out["sbd"] = target(goal, value, met)
    pp, others = lattice("pp-test"), [error("pp-test", "l2"), error("pp-test", "l1 grafting")]
    if pp and None not in others:
        best = min(e for e in others if e is not None)
        goal = "PP attachment: the lattice within 0.5 point of the best of l1 grafting and l2"
        value = f"{pp['error_rate']:.2%} error against {best:.2%}"
        out["pp"] = target(goal, value, pp["error_rate"] <= best + 0.005)
    ratios = [r["ratio"] for r in rows if r["task"] == "sbd-build-vs-l2-fit"]
    if ratios:
        goal = "lattice build + selection on SBD within 10x one l2 fit"
        value = " and ".join(f"{x:g}x" for x in ratios)
        out["build"] = target(goal, value, max(ratios) <= 10)
    return out


def timing_rows(extra: dict) -> list[dict]:
    """The build + selection against one l2 fit as a row of the page."""
    timing = extra.get("sbd_build_and_selection_vs_l2_fit")
    if not timing:
        return []
    system = f"lattice build + selection against one l2 fit (gamma2={timing['l2']:g})"
    return [{"task": "sbd-build-vs-l2-fit", "system": system, **timing}]


def spark_cache_task(spark, args, extra: dict) -> None:
    """Timed (under the benchmark lock): the lattice's generalization on the
    Spark RDD backend (not in process) with the widened blocks cached as a
    derived RDD and widened in every pass: seconds, passes, passes per second."""
    train, held = sbd_datasets(spark, args)[:2]
    on_spark = dataclasses.replace(Config().data, in_process_max_events=0)
    out = {}
    for cache in (True, False):
        run = fit(
            spark,
            train,
            held,
            {"backend": "spark-rdd", "gtol": args.gtol},
            data=on_spark,
            method="lattice",
            max_atoms=args.max_atoms[0],
            l2=args.lattice_l2,
            unconstrain_fraction=args.unconstrain_fraction[0],
            cache_widened=cache,
        )
        gen = run[1]["generalization"]
        passes = sum(row["passes"] for row in gen["trace"])
        out[f"cache_widened={cache}"] = {
            "generalization_s": gen["seconds"],
            "passes": passes,
            "passes_per_s": round(passes / gen["seconds"], 2),
            "constraints_after": gen["constraints_after"],
            "heldout_accuracy": run[1]["heldout_accuracy"],
            "objective": run[1]["objective"],
            "wall_s": round(run[2], 1),
        }
    extra["sbd_generalization_cache_spark"] = out


def word_classes(path: str) -> dict[str, str]:
    """Ratnaparkhi's mutual-information word classes (``bitstrings``: word,
    bit string), looked up as written and then in lower case."""
    out: dict[str, str] = {}
    with open(path, encoding="latin-1") as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) != 2:
                raise SystemExit(f"{path}:{n}: expected word and bit string")
            out.setdefault(parts[0], parts[1])
            out.setdefault(parts[0].lower(), parts[1])
    return out


def pp_four_atoms(src: str, dst: str, classes: dict[str, str] | None = None, bits: int = 0) -> str:
    """Ratnaparkhi's tuples as maxent events over the four head words and,
    with ``bits`` > 0, each head word's class (its bit string's first
    ``bits`` bits: the backing-off class the paper's section 5 suggests for
    rare words, so a lattice over the k most frequent atoms still sees them)."""
    with open(src) as f, open(dst, "w") as out:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) != 6:
                raise SystemExit(f"{src}:{n}: expected 6 fields, got {len(parts)}")
            heads, label = parts[1:5], parts[5]
            atoms = [f"{s}={w.lower()}" for s, w in zip(("v", "n1", "p", "n2"), heads)]
            if bits and classes is not None:
                atoms += [
                    f"{s}~{classes.get(w, classes.get(w.lower(), '?'))[:bits]}"
                    for s, w in zip(("v", "n1", "n2"), (heads[0], heads[1], heads[3]))
                ]
            out.write(label + " " + " ".join(sbd.escape(a) for a in atoms) + "\n")
    return dst


def pp_coverage(train_dir: str, test_dir: str, max_atoms: int) -> dict:
    """Test events by what the lattice over ``max_atoms`` atoms knows of
    their configuration: seen in training (a reference node), unseen, or
    empty (none of the atoms: only the bias decides)."""
    from sparkmaxent.backends.factory import make_backend
    from sparkmaxent.methods.lattice.build import choose_atoms, count_configurations

    train = make_backend("local", train_dir, bias=True)
    atoms = choose_atoms(train, max_atoms)
    seen = count_configurations(train, atoms)
    test = count_configurations(make_backend("local", test_dir, bias=True), atoms)
    known = {m.tobytes() for m in seen.masks}
    weight = test.counts.sum(axis=1)
    in_train = np.array([m.tobytes() in known for m in test.masks])
    empty = ~test.masks.any(axis=1)
    total = float(weight.sum())
    return {
        "atoms": int(len(atoms)),
        "test_events": total,
        "configuration_seen_in_training": float(weight[in_train & ~empty].sum() / total),
        "configuration_unseen": float(weight[~in_train & ~empty].sum() / total),
        "no_atom": float(weight[empty].sum() / total),
    }


def pp_task(spark, args, rows: list[dict], extra: dict, tasks: set[str]) -> None:
    name = f"pp{args.pp_bits}" if args.pp_bits else "pp"
    os.makedirs(os.path.join(args.work, name), exist_ok=True)
    classes = (
        word_classes(shared_corpus("ppattach", "bitstrings", data_dir=args.data))
        if args.pp_bits
        else None
    )
    f = {
        s: pp_four_atoms(
            shared_corpus("ppattach", s, data_dir=args.data),
            os.path.join(args.work, name, s),
            classes,
            args.pp_bits,
        )
        for s in ("training", "devset", "test")
    }
    train = prepared(spark, args.work, f"{name}-train", [f["training"]], "maxent")
    held = prepared(spark, args.work, f"{name}-devset", [f["devset"]], "maxent", train)
    tests = {"test": prepared(spark, args.work, f"{name}-test", [f["test"]], "maxent", train)}
    be = {"backend": args.backend, "gtol": args.gtol}
    if "pp-comb" in tasks or "pp" in tasks:
        rows += comb_rows(spark, args, "pp", train, held, tests, extra)
    if "pp" not in tasks:
        return
    devset: dict = {}
    lattice = choose(
        spark,
        train,
        held,
        be,
        {"max_atoms": args.pp_max_atoms},
        devset,
        method="lattice",
        l2=args.lattice_l2,
        unconstrain_fraction=args.unconstrain_fraction[0],
    )
    extra["pp_lattice_devset"] = devset
    extra["pp_coverage"] = pp_coverage(train, tests["test"], lattice[3])
    rows += model_rows(spark, "pp", f"lattice (k={lattice[3]})", lattice, tests)
    l2 = choose(spark, train, held, be, {"l2": args.l2_grid}, method="l2")
    rows += model_rows(spark, "pp", f"l2 (gamma2={l2[3]:g})", l2, tests)
    l1 = choose(spark, train, held, be, {"l1": args.l1_grid}, method="grafting")
    rows += model_rows(spark, "pp", f"l1 grafting (gamma1={l1[3]:g})", l1, tests)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=SHARED_DATA, help="the corpora (../shared/data)")
    work_arguments(p, "work/lattice_sbd", "lattice_sbd.json")
    p.add_argument("--backend", default="local", choices=("local", "spark"))
    p.add_argument(
        "--tasks",
        default="sbd,pp,timing",
        help="comma-separated: sbd, pp (accuracy rows), sbd-lattice (the SBD lattice only), "
        "sbd-comb, pp-comb (l1-Comb rows only), timing, spark-cache (timed figures: run "
        "under the bench lock)",
    )
    p.add_argument("--timing-l2", type=float, default=1e-5, help="gamma2 of the timed l2 fit")
    p.add_argument(
        "--max-atoms",
        type=int,
        nargs="+",
        default=[80, 160],
        help="SBD lattice atoms (k most frequent), chosen on held-out data; timing uses the first",
    )
    p.add_argument(
        "--pp-max-atoms",
        type=int,
        nargs="+",
        default=[150, 300, 600],
        help="PP lattice atoms (k most frequent; 0: all), chosen on the devset",
    )
    p.add_argument(
        "--pp-bits",
        type=int,
        default=0,
        help="PP: add each head word's class (first bits of its bit string) as an atom; 0: none",
    )
    p.add_argument("--lattice-l2", type=float, default=1e-5)
    p.add_argument("--l2-grid", type=float, nargs="+", default=[1e-5, 1e-4, 1e-3])
    p.add_argument("--l1-grid", type=float, nargs="+", default=[1e-4, 3e-4, 1e-3])
    p.add_argument("--gtol", type=float, default=1e-6, help="every fit's L-BFGS tolerance")
    p.add_argument(
        "--unconstrain-fraction",
        type=float,
        nargs="+",
        default=[0.1],
        help="the lattice's generalization step (SBD: chosen on held-out data; others: the first)",
    )
    p.add_argument(
        "--smoothing", type=float, nargs="+", default=[5.0], help="SBD lattice T (held-out choice)"
    )
    p.add_argument(
        "--constraint-threshold",
        type=float,
        nargs="+",
        default=[5.0],
        help="SBD lattice generalization threshold (held-out choice)",
    )
    p.add_argument("--comb-degree", type=int, default=2, help="l1-Comb's combination degree")
    p.add_argument(
        "--comb-grid", type=float, nargs="+", default=[1e-4, 5e-4], help="l1-Comb's gamma1 grid"
    )
    p.add_argument(
        "--comb-max-seconds", type=float, default=900, help="cap of each l1-Comb fit (0: none)"
    )
    args = start(p, argv)
    spark = spark_session(
        "local[2]",
        "lattice-sbd",
        {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
    )
    rows: list[dict] = []
    extra: dict = {}
    tasks = set(args.tasks.split(","))
    try:
        if tasks & {"sbd", "sbd-lattice", "sbd-comb"}:
            sbd_task(spark, args, rows, extra, tasks)
        if tasks & {"pp", "pp-comb"}:
            pp_task(spark, args, rows, extra, tasks)
        if "timing" in tasks:
            timing_task(spark, args, extra)
        if "spark-cache" in tasks:
            spark_cache_task(spark, args, extra)
    finally:
        rows += timing_rows(extra)
        write_json_result(args.output, rows, targets(rows))
        if extra.get("sbd_lattice_report"):
            write_plot(extra["sbd_lattice_report"], os.path.splitext(args.output)[0] + ".png")
        if rows:
            print_table(rows, KEYS)
        spark.stop()


if __name__ == "__main__":
    main()
