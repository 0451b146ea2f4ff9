"""The scale benchmark's datasets (``benchmarks/scale.py``, issue 22): every
size drawn from one planted model (``SyntheticSpec.model_events``), that
model's weights, and gamma1 chosen once on held-out data of the smallest
size. Generation and the choice run in child processes, so the driver's
peak memory stays the training's.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import multiprocessing
import os
import time

import numpy as np

from benchmarks.common import command_line

PLANTED = "planted.json"


def dataset(work: str, n_events: int, n_candidates: int, args, heldout: float = 0.0) -> str:
    """The generated events, prepared under ``work`` (reused when there),
    generated in a child process (the driver's memory stays the training's).
    Every size draws from one planted model, chosen for ``--model-events``
    events (``SyntheticSpec.model_events``). With ``heldout`` > 0 the last
    such share of the events is a held-out dataset: ``<path>/train`` and
    ``<path>/heldout``."""
    n_predicates = max(1, n_candidates // args.labels)
    name = f"synthetic-{n_events}x{n_predicates}x{args.labels}-model{args.model_events}"
    path = os.path.join(work, name + (f"-heldout{heldout:g}" if heldout else ""))
    if os.path.exists(os.path.join(path, "heldout" if heldout else "", "dataset.json")):
        return path
    spec = dict(
        n_events=n_events,
        n_predicates=n_predicates,
        n_labels=args.labels,
        active_per_event=args.nnz,
        n_support=args.support,
        n_copies=0,
        n_conjunctions=0,
        seed=args.seed,
        model_events=args.model_events,
    )
    child = multiprocessing.get_context("spawn").Process(
        target=write_dataset, args=(path, spec, heldout)
    )
    child.start()
    child.join()
    if child.exitcode != 0:
        raise RuntimeError(f"generating {path} failed (exit code {child.exitcode})")
    return path


def write_dataset(path: str, spec: dict, heldout: float = 0.0) -> None:
    """Generate the planted-model events (``SyntheticSpec(**spec)``) and
    write them as a prepared dataset (two with ``heldout``: see ``dataset``),
    with the planted W's non-zeros and bias in ``planted.json``."""
    from sparkmaxent.data.load import write_events
    from sparkmaxent.data.schema import DatasetInfo
    from sparkmaxent.data.synthetic import SyntheticSpec, generate
    from sparkmaxent.kernels import MULTICLASS

    data = generate(SyntheticSpec(**spec))
    info = DatasetInfo(MULTICLASS, data.n_predicates, list(data.label_names))
    m = data.n_events
    cut = m - int(round(heldout * m))
    parts = {"train": range(cut), "heldout": range(cut, m)} if heldout else {"": range(m)}
    for part, rows in parts.items():
        sub = data if len(rows) == m else data.subset(np.arange(rows.start, rows.stop))
        files = max(8, len(rows) // 200_000)
        write_events(sub.block(), os.path.join(path, part) if part else path, info, files)
    planted = {
        "feature_ids": (data.support_ids * data.n_labels + data.support_labels).tolist(),
        "weights": data.support_weights.tolist(),
        "bias": data.bias.tolist(),
    }
    with open(os.path.join(path, PLANTED), "w") as f:
        json.dump(planted, f)


def planted_weights(train_dir: str):
    """The planted model of a dataset written by ``write_dataset``, as kernel
    ``Weights`` (feature ``j = p * K + k``, ids increasing)."""
    from sparkmaxent.kernels import Weights

    with open(os.path.join(train_dir, PLANTED)) as f:
        planted = json.load(f)
    ids = np.asarray(planted["feature_ids"], dtype=np.int64)
    order = np.argsort(ids)
    values = np.asarray(planted["weights"], dtype=np.float64)[order]
    return Weights(ids[order], values, np.asarray(planted["bias"], dtype=np.float64))


CHOICE = "gamma_choice.json"


def chosen_gamma(args) -> dict:
    """gamma1 for every size and system, chosen once on held-out data of
    ``--choice-events`` events (the smallest size; same planted model): its
    last ``--heldout-fraction`` held out, a grafting path over
    ``--gamma-grid`` on the rest (warm-started, ``train.choice.path``,
    held-out log-likelihood, patience 1), in a child process (the driver's
    memory stays the training's). Reused from the work directory when made
    with the same grid and n_best, so one size per invocation keeps it."""
    path = dataset(
        args.work, args.choice_events, args.base_candidates, args, heldout=args.heldout_fraction
    )
    grid = sorted(args.gamma_grid, reverse=True)
    saved = os.path.join(path, CHOICE)
    if os.path.exists(saved):
        with open(saved) as f:
            choice = json.load(f)
        if choice["grid"] == grid and choice["n"] == args.n_best:
            return choice
    child = multiprocessing.get_context("spawn").Process(
        target=write_choice, args=(path, grid, args.n_best, command_line())
    )
    child.start()
    child.join()
    if child.exitcode != 0:
        raise RuntimeError(f"choosing gamma1 on {path} failed (exit code {child.exitcode})")
    with open(saved) as f:
        return json.load(f)


def write_choice(path: str, grid: list[float], n_best: int, command: str) -> None:
    """The grafting path of ``chosen_gamma`` on ``path``'s train and
    held-out parts (in-process backend), its points and choice to ``CHOICE``."""
    from sparkmaxent.backends.factory import make_backend
    from sparkmaxent.config import train_config
    from sparkmaxent.train import train

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    t0 = time.perf_counter()
    train_dir, heldout_dir = os.path.join(path, "train"), os.path.join(path, "heldout")
    backends = [make_backend("local", d, bias=True) for d in (train_dir, heldout_dir)]
    cfg = train_config(
        method="grafting", n_best=n_best, path=True, l1_grid=grid, patience=1, plots=False
    )
    rep = train(backends[0], cfg, backends[1]).report.path
    assert rep is not None, "a grafting run with train.choice.path reports its path"
    choice = {
        "gamma": rep.chosen_point.gamma,
        "grid": grid,
        "n": n_best,
        "criterion": rep.criterion,
        "train_events": backends[0].info.n_events,
        "heldout_events": backends[1].info.n_events,
        "points": [
            {
                "l1": p.gamma,
                "features": p.features,
                "heldout_score": p.heldout.get("heldout_score"),
                "passes": p.passes,
                "chosen": p.chosen,
                "cut": p.cut,
            }
            for p in rep.points
        ],
        "wall_s": round(time.perf_counter() - t0, 1),
        "command": command,
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    with open(os.path.join(path, CHOICE), "w") as f:
        json.dump(choice, f, indent=1)
