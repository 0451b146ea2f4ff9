"""Small random blocks for kernel tests (no Spark)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from sparkmaxent.kernels import CANDIDATES, MULTICLASS, CandidateBlock, MulticlassBlock, Space
from sparkmaxent.kernels.blocks import take_events


def random_multiclass(rng: np.random.Generator, m=40, P=12, K=4, density=0.3) -> MulticlassBlock:
    X = sp.random(
        m, P, density=density, format="csr", random_state=rng, data_rvs=lambda n: rng.normal(size=n)
    )
    return MulticlassBlock(
        X=X, y=rng.integers(0, K, size=m), c=rng.uniform(0.5, 3, size=m), n_labels=K
    )


def random_candidates(
    rng: np.random.Generator, m=15, D=10, max_cands=5, density=0.4
) -> CandidateBlock:
    sizes = rng.integers(1, max_cands + 1, size=m)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    n = ptr[-1]
    F = sp.random(
        n, D, density=density, format="csr", random_state=rng, data_rvs=lambda k: rng.normal(size=k)
    )
    correct = np.zeros(n, dtype=bool)
    for i in range(m):  # one or more correct candidates per event
        k = rng.integers(1, sizes[i] + 1)
        correct[ptr[i] + rng.choice(sizes[i], size=k, replace=False)] = True
    return CandidateBlock(F=F, event_ptr=ptr, correct=correct, c=rng.uniform(0.5, 3, size=m))


def orthant_box_qp(seed: int = 0, n: int = 2000, m: int = 8000):
    """An l1 round's box model (H, g, lo, hi, tol): every weight's step
    bounded at 0 on one side (its orthant), features of frequencies over
    five orders of magnitude (rare ones with little curvature), solved to a
    twentieth of the gradient as the forcing term asks."""
    rng = np.random.default_rng(seed)
    freq = np.exp(rng.uniform(np.log(2 / m), np.log(0.3), size=n))
    X = sp.csr_matrix((rng.random((m, n)) < freq).astype(float))
    H = (X.T @ X).toarray() * (0.25 / m) + 1e-6 * np.eye(n)
    g = rng.normal(size=n) * np.sqrt(np.diag(H))
    lo = np.where(rng.random(n) < 0.5, 0.0, -np.inf)
    hi = np.where(lo == 0.0, np.inf, 0.0)
    return H, g, lo, hi, 0.05 * np.abs(g).max()


def random_block(rng: np.random.Generator, shape: str):
    """A small random block of either event shape and its Space (multiclass
    with a bias)."""
    if shape == MULTICLASS:
        block = random_multiclass(rng)
        return block, Space(MULTICLASS, block.n_predicates, block.n_labels, bias=True)
    block = random_candidates(rng)
    return block, Space(CANDIDATES, block.n_predicates, 1)


class Interrupted(Exception):
    """Raised from on_round to stop a selection run as a crash would."""


def interrupt_and_resume(make_backend, config, tmp_path, after: int):
    """Train once through (output ``whole``), then stop a second run after
    round ``after`` and resume it from its checkpoint (output ``cut``).
    Returns (whole result, resumed result, the checkpoint state the
    interrupted run left)."""
    import json
    import os

    import pytest

    from sparkmaxent.selection.checkpoint import CHECKPOINT_DIR, STATE_FILE
    from sparkmaxent.train import train

    whole = train(make_backend(), config, output_dir=str(tmp_path / "whole"))

    def stop(state):
        if state.round == after:
            raise Interrupted

    out = str(tmp_path / "cut")
    with pytest.raises(Interrupted):
        train(make_backend(), config, output_dir=out, on_round=stop)
    with open(os.path.join(out, CHECKPOINT_DIR, STATE_FILE)) as f:
        left = json.load(f)
    return whole, train(make_backend(), config, output_dir=out, resume=True), left


class PassClock:
    """A fake clock for ``train(clock=...)`` (no wall-clock flakiness): 1 s
    a pass over any of ``backends``, and ``setup`` seconds more from the
    first pass on (a method's setup, which a run's time budget counts)."""

    def __init__(self, *backends, setup: float = 0.0):
        self.backends, self.setup = backends, setup

    def __call__(self) -> float:
        passes = sum(b.passes for b in self.backends)
        return float(passes) + (self.setup if passes else 0.0)


def brute_force_folds(block, space, grid, k, seed, mix: float = 0.0) -> np.ndarray:
    """(fold x gamma1) held-out log-likelihoods of cold grafting fits
    (gamma2 = gamma1 mix / (1 - mix)) on each fold's other events, the folds
    of ``train.choice.folds = k`` (``fold_seed``: ``seed``) really split."""
    from sparkmaxent.backends import LocalBackend
    from sparkmaxent.choice.folds import fold_of_groups
    from sparkmaxent.choice.heldout import score_on
    from sparkmaxent.config import train_config
    from sparkmaxent.kernels.blocks import take_events
    from sparkmaxent.train import train

    units, fold = fold_of_groups(block.group, block.y, k, seed)
    of_event = fold[np.searchsorted(units, block.group)]
    table = np.zeros((k, len(grid)))
    for f in range(k):
        fit_on = LocalBackend([take_events(block, of_event != f)], space)
        held = LocalBackend([take_events(block, of_event == f)], space)
        for j, gamma in enumerate(grid):
            keys = dict(method="grafting", l1=gamma, elastic_l2=gamma * mix / (1 - mix))
            cold = train(fit_on, train_config(gtol=1e-9, **keys))
            table[f, j] = score_on(held, cold.weights, None, "loglik")["heldout_score"]
    return table


def round_problem(block, space: Space, ids: np.ndarray, l1: float):
    """A grafting round's box problem over ``ids`` at gamma1 ``l1``: each
    weight's orthant from the sign of the loss gradient at zero weights (the
    sign its first step takes), as grafting opens a round."""
    from sparkmaxent.backends import LocalBackend
    from sparkmaxent.kernels import LossGradTask, Weights
    from sparkmaxent.problem.penalty import orthant_problem

    zero = Weights(ids, np.zeros(len(ids)), np.zeros(space.n_labels))
    lg = LocalBackend([block], space).run(LossGradTask(space, zero, None, ids))
    return orthant_problem(np.where(lg.grad > 0, -1.0, 1.0), l1, space.n_bias)


def planted_round(planted, step: int, l1: float = 1e-4):
    """A round over every ``step``-th feature of a planted problem (the
    (data, block, space) of ``test_grafting.planted``), from zero weights:
    (block, space, ids, box problem, starting point)."""
    _, block, space = planted
    ids = np.arange(0, space.n_features, step)
    theta0 = np.zeros(len(ids) + space.n_bias)
    return block, space, ids, round_problem(block, space, ids, l1), theta0


def runs_past_budget(clocked_run, free_wall_s: float, fractions, slack: float = 0.0):
    """A time-bound run at each budget ``fractions`` x ``free_wall_s`` (the
    same run's seconds without a budget): ``clocked_run(max_seconds=b)``
    on a fake clock. Every run must give a model (some weight non-zero).
    Returns the results and the (budget, seconds) of every run that ended
    more than ``slack`` seconds past its budget (none, for a run that
    keeps its budget)."""
    results, over = [], []
    for budget in np.asarray(fractions) * free_wall_s:
        res = clocked_run(max_seconds=float(budget))
        assert res.weights.nnz > 0, f"no model within {float(budget)} s"
        results.append(res)
        if res.report.wall_s > budget + slack:
            over.append((float(budget), res.report.wall_s))
    return results, over


def planted_documents(n: int = 240, words: int = 150):
    """Planted 'documents' where l2 wins: every word a little more frequent
    under one of two labels (0.25 against 0.15), so the evidence is spread
    over every word and no few of them carry it (as a genre over its rare
    words); the first half training, the second held-out, and the space."""
    rng = np.random.default_rng(0)
    favour = rng.integers(0, 2, size=words)
    y = rng.integers(0, 2, size=n)
    rate = np.where(favour[None, :] == y[:, None], 0.25, 0.15)
    X = sp.csr_matrix((rng.random((n, words)) < rate).astype(float))
    block = MulticlassBlock(X=X, y=y, c=np.ones(n), n_labels=2)
    space = Space(MULTICLASS, words, 2, bias=True)
    half = n // 2
    return take_events(block, np.arange(half)), take_events(block, np.arange(half, n)), space
