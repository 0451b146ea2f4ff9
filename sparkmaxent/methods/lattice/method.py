"""The ``lattice`` training method: build the empirical lattice, select the
optimized lattice by frequency redistribution, constrain its frequent
nodes, fit and generalize (Mikheev 1998, sections 2-4); the result is a
model over atoms and conjunctions like any other."""

from __future__ import annotations

import logging
import time

import numpy as np

from ... import storage
from ...errors import ConfigError
from ...selection.base import FitResult, TrainingContext
from .build import Lattice, build_lattice, choose_atoms, count_configurations
from .curves import write_plot
from .generalize import fit_result, generalize
from .select import CandidateScorer, HeldoutConfigs, Optimized, TrainingAic, select

log = logging.getLogger(__name__)


def constrained_nodes(lat: Lattice, opt: Optimized, threshold: float) -> np.ndarray:
    """Optimized nodes whose feature frequency over the optimized lattice,
    marginal over labels (the sum of xi'^w over the optimized nodes above
    them, section 4's footnote), exceeds ``threshold``."""
    nodes = opt.nodes()
    sub = lat.desc[nodes][:, nodes]
    freq = np.asarray(sub @ opt.groups[nodes].sum(axis=1)).ravel()
    return nodes[freq > threshold]


def fit_lattice(ctx: TrainingContext) -> FitResult:
    cfg = ctx.config.lattice
    if ctx.heldout is None:
        log.warning(
            "lattice: no held-out data: selection and generalization stop by the "
            "training AIC (give data.heldout or data.heldout_fraction for held-out stops)"
        )
    t0 = time.perf_counter()
    atoms = choose_atoms(ctx.backend, cfg.max_atoms)
    lat = build_lattice(count_configurations(ctx.backend, atoms), atoms, cfg.max_nodes)
    held = count_configurations(ctx.heldout, atoms) if ctx.heldout is not None else None
    built_s = time.perf_counter() - t0
    arrays = lat.arrays(cfg.smoothing)
    scorer = CandidateScorer(arrays, getattr(ctx.backend, "sc", None), cfg.score_batches)
    try:
        sel = select(
            arrays,
            scorer,
            HeldoutConfigs.of(held.masks, held.counts) if held is not None else TrainingAic(arrays),
            cfg.select_patience,
            cfg.max_steps,
        )
    finally:
        scorer.close()
    selected_s = time.perf_counter() - t0 - built_s
    constrained = constrained_nodes(lat, sel.optimized, cfg.constraint_threshold)
    if not len(constrained):
        raise ConfigError(
            "train.lattice.constraint_threshold: no optimized node is seen more than "
            f"{cfg.constraint_threshold:g} times; lower it"
        )
    tuples = [lat.node_atoms(int(i)) for i in constrained]
    t1 = time.perf_counter()
    gen = generalize(
        ctx, tuples, lat.masks[constrained], cfg.unconstrain_fraction, cfg.generalize_patience
    )
    generalized_s = time.perf_counter() - t1
    best = gen.trace[gen.best_round]
    report = {
        "objective": best["objective"],
        "stop_criterion": "heldout" if held is not None else "training AIC",
        "lattice": {
            "atoms": len(atoms),
            "nodes": lat.n_nodes,
            "reference_nodes": lat.n_reference,
            "hidden_nodes": lat.n_nodes - lat.n_reference,
            "build_s": round(built_s, 3),
        },
        "selection": {
            "steps": len(sel.trace) - 1,
            "best_step": sel.best_step,
            "optimized_nodes": int(len(sel.optimized.nodes())),
            "stop": sel.stop.message,
            "seconds": round(selected_s, 3),
            "scoring": sel.scoring,
            "trace": sel.trace,
        },
        "generalization": {
            "constraints_before": len(tuples),
            "constraints_after": len(gen.constrained),
            "atomic_features_used": len({a for t in gen.constrained for a in t}),
            "best_round": gen.best_round,
            "seconds": round(generalized_s, 3),
            "stop": gen.stop.message,
            "initial_constraints": [list(t) for t in tuples],
            "trace": gen.trace,
        },
    }
    if ctx.output_dir and ctx.config.selection.plots:
        report["plots"] = [write_plot(report, storage.join(ctx.output_dir, "plots", "lattice.png"))]
    log.info(
        "lattice: %d nodes, %d after selection, constraints %d -> %d",
        lat.n_nodes,
        len(sel.optimized.nodes()),
        len(tuples),
        len(gen.constrained),
    )
    return fit_result(gen, ctx.backend.space, report)
