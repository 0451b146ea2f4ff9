"""The round loop every feature-selection method shares.

A selection method (grafting, IFS/SGC, Bayes factor, ...) supplies one
``round(state) -> RoundOutcome``: test candidates, grow the active set,
re-optimize. This module does the rest, the same way for all of them:

* one progress line per round (round, active features, added, objective,
  the largest candidate statistic, held-out score, passes, elapsed);
* a per-round trace (one dict per round) for the run report;
* a checkpoint after every round in ``<output>/checkpoint/``: ``state.json``
  (round, trace, configuration hash, counters) plus ``round-NNNNN.npz``
  (active ids, weights, bias), never pickle. The JSON names the .npz it
  belongs to and is replaced atomically after the .npz is written, so a run
  killed at any moment leaves a consistent checkpoint;
* ``resume``: continue from the checkpoint if its configuration hash matches
  (a mismatch is an error naming both hashes); the resumed run takes the
  same steps from the same weights as an uninterrupted one;
* PNG plots of the objective and held-out score against round and active-set
  size (matplotlib's Agg canvas, no pyplot state).

Checkpoints go to a local (or locally mounted) directory: the driver writes
them with plain file operations.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..config import TrainConfig
from ..jsonio import write_json
from ..kernels import MULTICLASS, Space, Weights

if TYPE_CHECKING:  # train imports the selection modules that import this one
    from ..train import TrainingContext

log = logging.getLogger(__name__)

CHECKPOINT_DIR = "checkpoint"
STATE_FILE = "state.json"
PLOTS_DIR = "plots"
CHECKPOINT_VERSION = 1

# Keys that change how far or where a run goes, not the path it takes:
# a run may be resumed with a different value.
RUN_CONTROL_KEYS = ("backend", "max_rounds", "max_seconds", "plots")
# Prefix of LoopState.arrays entries in a round's .npz.
_STATE_ARRAY = "state_"


@dataclass
class LoopState:
    """The changing state of a selection run: what a checkpoint holds.

    Attributes
    ----------
    round : int
        Rounds completed.
    weights : Weights
        Active features (ids), their weights, and the bias.
    passes : int
        Training passes of the selection loop so far (all sessions).
    elapsed_s : float
        Wall time of the selection loop so far (all sessions).
    trace : list of dict
        One row per completed round.
    done : bool
        The last candidate test found nothing to add.
    info : dict
        Method-specific, JSON-able (for example the final certificate).
    arrays : dict of str to ndarray
        Method-specific arrays kept between rounds (for example SGC's stale
        gains); saved in the round's .npz.
    """

    round: int
    weights: Weights
    passes: int = 0
    elapsed_s: float = 0.0
    trace: list[dict] = field(default_factory=list)
    done: bool = False
    info: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)


@dataclass
class RoundOutcome:
    """What one round of a method did.

    Attributes
    ----------
    stop : bool
        No candidate passed the test: nothing changed, the loop ends.
    weights : Weights
        Weights after the round (unchanged when ``stop``).
    added, removed : int
        Features that entered the active set, and that were pruned from it.
    objective : float
        The method's objective at ``weights``.
    score : float
        The largest candidate statistic of the test that opened the round
        (grafting: max |dC/dw_j| over inactive features).
    info : dict
        Extra trace fields (JSON-able).
    arrays : dict or None
        New ``LoopState.arrays`` (None: unchanged).
    note : str
        Added to the round's progress line (e.g. the feature selected); for
        a stop, why (default "no candidate passes the test").
    """

    stop: bool
    weights: Weights
    added: int = 0
    removed: int = 0
    objective: float = float("nan")
    score: float = float("nan")
    info: dict = field(default_factory=dict)
    arrays: dict | None = None
    note: str = ""


class RoundMethod(Protocol):
    def round(self, state: LoopState) -> RoundOutcome:
        """Run one round from ``state`` (not modified)."""
        ...


def run_digest(config: TrainConfig, space: Space) -> str:
    """Hash of everything that decides a run's path: the training
    configuration (less RUN_CONTROL_KEYS) and the candidate space."""
    cfg = {k: v for k, v in dataclasses.asdict(config).items() if k not in RUN_CONTROL_KEYS}
    blob = json.dumps({"train": cfg, "space": dataclasses.asdict(space)}, sort_keys=True,
                      default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


class Checkpoint:
    """Round checkpoints in ``directory`` (JSON + .npz)."""

    def __init__(self, directory: str, digest: str):
        self.directory = directory
        self.digest = digest

    @property
    def state_path(self) -> str:
        return os.path.join(self.directory, STATE_FILE)

    def save(self, state: LoopState, method: str) -> None:
        os.makedirs(self.directory, exist_ok=True)
        name = f"round-{state.round:05d}.npz"
        w = state.weights
        arrays = {"ids": w.active_ids(), "values": w.values}
        if w.bias is not None:
            arrays["bias"] = w.bias
        arrays.update({f"{_STATE_ARRAY}{k}": v for k, v in state.arrays.items()})
        tmp = os.path.join(self.directory, f".tmp-{os.getpid()}-{name}")
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, os.path.join(self.directory, name))
        doc = {"format_version": CHECKPOINT_VERSION, "digest": self.digest, "method": method,
               "round": state.round, "passes": state.passes, "elapsed_s": state.elapsed_s,
               "done": state.done, "weights_file": name, "info": state.info, "trace": state.trace}
        write_json(self.state_path, doc)
        for old in os.listdir(self.directory):  # earlier rounds' weights
            if old.startswith("round-") and old.endswith(".npz") and old != name:
                os.remove(os.path.join(self.directory, old))

    def load(self, method: str) -> LoopState | None:
        """The saved state, or None if there is no checkpoint."""
        if not os.path.exists(self.state_path):
            return None
        with open(self.state_path) as f:
            doc = json.load(f)
        if doc.get("format_version") != CHECKPOINT_VERSION:
            raise ValueError(f"{self.state_path}: expected checkpoint format_version "
                             f"{CHECKPOINT_VERSION}, got {doc.get('format_version')}")
        if doc["digest"] != self.digest or doc["method"] != method:
            raise ValueError(
                f"{self.state_path}: cannot resume: the checkpoint is of method {doc['method']!r} "
                f"with configuration hash {doc['digest']}, this run is {method!r} with hash "
                f"{self.digest} (same train.* settings and data needed; "
                f"{', '.join(RUN_CONTROL_KEYS)} may differ)")
        with np.load(os.path.join(self.directory, doc["weights_file"])) as z:
            bias = z["bias"].copy() if "bias" in z.files else None
            weights = Weights(z["ids"].astype(np.int64), z["values"].astype(np.float64), bias)
            arrays = {k[len(_STATE_ARRAY):]: z[k].copy() for k in z.files
                      if k.startswith(_STATE_ARRAY)}
        return LoopState(round=doc["round"], weights=weights, passes=doc["passes"],
                         elapsed_s=doc["elapsed_s"], trace=doc["trace"], done=doc["done"],
                         info=doc["info"], arrays=arrays)


def limit_reached(cfg, state: LoopState) -> str:
    """The run-control cap (``max_rounds``, ``max_seconds``) that ends the
    loop before the method stops by itself; '' while none is reached."""
    if cfg.max_rounds and state.round >= cfg.max_rounds:
        return f"max_rounds = {cfg.max_rounds}"
    if cfg.max_seconds and state.elapsed_s >= cfg.max_seconds:
        return f"max_seconds = {cfg.max_seconds:g}"
    return ""


def run_rounds(ctx, method: RoundMethod, name: str, score_name: str = "max_gradient",
               score_label: str = "candidate |gradient|", start: Weights | None = None
               ) -> LoopState:
    """Run ``method`` round after round until it stops or a cap
    (``max_rounds``, ``max_seconds``: ``limit_reached``).

    Parameters
    ----------
    ctx : sparkmaxent.train.TrainingContext
        Backend, configuration, scaling, held-out backend, and
        ``output_dir`` / ``resume`` / ``on_round`` for checkpoints.
    method : RoundMethod
    name : str
        Method name (stored in the checkpoint).
    score_name : str
        Trace key of ``RoundOutcome.score``.
    score_label : str
        How progress lines and plots name it.
    start : Weights or None
        Initial weights (all-zero with the bias at 0 by default).

    Returns
    -------
    LoopState
        The final state; ``state.trace`` is the per-round trace.
    """
    from ..train import evaluate  # the loop is used from inside train's registry

    cfg = ctx.config
    space = ctx.backend.space
    checkpoint = (Checkpoint(os.path.join(ctx.output_dir, CHECKPOINT_DIR), run_digest(cfg, space))
                  if ctx.output_dir else None)
    state = None
    if ctx.resume:
        if checkpoint is None:
            raise ValueError("resume needs an output directory holding a checkpoint, got none")
        state = checkpoint.load(name)
        if state is None:
            log.info("no checkpoint in %s: starting from round 0", checkpoint.directory)
        else:
            log.info("resuming %s after round %d (%d active features, %d passes so far)",
                     name, state.round, len(state.weights.values), state.passes)
    if state is None:
        state = LoopState(round=0, weights=start if start is not None else Weights.zeros(space))
    t0, passes0 = time.perf_counter(), ctx.backend.passes
    base_passes, base_elapsed = state.passes, state.elapsed_s

    def counters() -> None:
        state.passes = base_passes + ctx.backend.passes - passes0
        state.elapsed_s = round(base_elapsed + time.perf_counter() - t0, 3)

    while not state.done and not limit_reached(cfg, state):
        outcome = method.round(state)
        counters()
        if outcome.stop:
            state.done = True
            state.info.update(outcome.info)
            best = "" if np.isnan(outcome.score) else f" (max {score_label} {outcome.score:.4g})"
            log.info("round %d: %s%s; %d passes, %.1fs", state.round + 1,
                     outcome.note or "no candidate passes the test", best, state.passes,
                     state.elapsed_s)
            if checkpoint is not None:
                checkpoint.save(state, name)
            break
        state.round += 1
        state.weights = outcome.weights
        if outcome.arrays is not None:
            state.arrays = outcome.arrays
        row = {"round": state.round, "active": int(len(outcome.weights.values)),
               "added": outcome.added, "removed": outcome.removed,
               "objective": outcome.objective, score_name: outcome.score}
        held = f", {outcome.note}" if outcome.note else ""
        if ctx.heldout is not None:
            stats = evaluate(ctx.heldout, state.weights, ctx.scaling)
            row.update(heldout_accuracy=stats.accuracy, heldout_loss=stats.mean_loss)
            held += f", held-out accuracy {stats.accuracy:.4f}"
        row.update(passes=state.passes, elapsed_s=state.elapsed_s, **outcome.info)
        state.trace.append(row)
        log.info("round %d: %d active (+%d, -%d), objective %.10g, max %s %.4g%s, %d passes, %.1fs",
                 state.round, row["active"], outcome.added, outcome.removed, outcome.objective,
                 score_label, outcome.score, held, state.passes, state.elapsed_s)
        if checkpoint is not None:
            checkpoint.save(state, name)
        if ctx.on_round is not None:
            ctx.on_round(state)
    counters()
    if ctx.output_dir and cfg.plots and state.trace:
        write_plots(state.trace, os.path.join(ctx.output_dir, PLOTS_DIR), score_name, score_label)
    return state


def write_plots(trace: list[dict], directory: str, score_name: str = "max_gradient",
                score_label: str = "candidate |gradient|") -> list[str]:
    """PNG plots of a selection trace: objective (and, with a held-out set,
    held-out accuracy) against round and against active-set size.

    Returns
    -------
    list of str
        The files written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    os.makedirs(directory, exist_ok=True)
    rounds = [r["round"] for r in trace]
    active = [r["active"] for r in trace]
    panels = [("objective", "objective C(w)", False),
              (score_name, f"max {score_label}", True)]
    if any(r.get("heldout_accuracy") is not None for r in trace):
        panels.append(("heldout_accuracy", "held-out accuracy", False))
    written = []
    for key, label, logy in panels:
        fig = Figure(figsize=(10, 4))
        FigureCanvasAgg(fig)
        values = [r.get(key, float("nan")) for r in trace]
        for ax, x, xlabel in ((fig.add_subplot(1, 2, 1), rounds, "round"),
                              (fig.add_subplot(1, 2, 2), active, "active features")):
            ax.plot(x, values, marker="o", markersize=3)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(label)
            if logy and all(v > 0 for v in values):
                ax.set_yscale("log")
            ax.grid(True, alpha=0.3)
        fig.tight_layout()
        path = os.path.join(directory, f"{key}.png")
        fig.savefig(path, dpi=90)
        written.append(path)
    return written


# ---- helpers the selection methods share -------------------------------------

#: Relative tolerance under which two gains count as tied.
TIE_RTOL = 1e-12


def check_gain_selection(cfg: TrainConfig) -> None:
    """The keys every gain-fitting selection method (IFS, SGC, Bayes factor) reads."""
    from ..solvers.gains import GAIN_METHODS

    if cfg.max_features < 0:
        raise ValueError(f"expected train.max_features >= 0, got {cfg.max_features}")
    if cfg.gain_method not in GAIN_METHODS:
        raise ValueError(f"expected train.gain_method in {sorted(GAIN_METHODS)}, "
                         f"got {cfg.gain_method!r}")


def best_of(gains: np.ndarray, ids: np.ndarray) -> int:
    """Position of the largest gain; gains within TIE_RTOL (relative) of it
    tie, and ties go to the lowest id. Ties are common: with two labels the
    features (p, 0) and (p, 1) are mirror images with the same gain, which
    the closed form and the Newton fit reproduce only to rounding."""
    top = gains.max()
    tied = np.flatnonzero(gains >= top - TIE_RTOL * abs(top))
    return int(tied[np.argmin(ids[tied])])


class FeatureNamer:
    """Names of features for progress lines: ``predicate|label``, with the
    predicate's string when the backend knows its dataset directory, its
    label name when it knows the labels; ids otherwise."""

    def __init__(self, backend):
        self.space = backend.space
        info = getattr(backend, "info", None)
        self.labels = list(info.labels) if info is not None and info.labels else None
        self.dataset_dir = getattr(backend, "dataset_dir", None)

    def __call__(self, j: int) -> str:
        p, k = divmod(int(j), self.space.n_labels)
        pred = str(p)
        if self.dataset_dir:
            try:
                from ..model import feature_names_for

                pred = feature_names_for(self.dataset_dir, np.array([p])).get(p, pred)
            except (OSError, ValueError) as e:  # a name is a nicety, never a failure
                log.debug("no feature name for predicate %d: %s", p, e)
        if self.space.shape != MULTICLASS:
            return pred
        label = self.labels[k] if self.labels and k < len(self.labels) else str(k)
        return f"{pred}|{label}"


def add_feature(weights: Weights, j: int, alpha: float) -> Weights:
    """The weights with feature j added at alpha (or incremented, if present)."""
    ids = weights.active_ids()
    pos = int(np.searchsorted(ids, j))
    if pos < len(ids) and ids[pos] == j:
        values = weights.values.copy()
        values[pos] += alpha
        return Weights(ids.copy(), values, weights.bias)
    return Weights(np.insert(ids, pos, j), np.insert(weights.values, pos, alpha), weights.bias)


def has_checkpoint(ctx: TrainingContext) -> bool:
    return bool(ctx.output_dir) and os.path.exists(
        os.path.join(ctx.output_dir, CHECKPOINT_DIR, STATE_FILE))
