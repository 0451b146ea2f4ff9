"""Round checkpoints of a selection run, in ``<output>/checkpoint/``.

``state.json`` (round, trace, configuration hash, counters) plus
``round-NNNNN.npz`` (active ids, weights, bias, method arrays), never
pickle. The JSON names the .npz it belongs to and is replaced atomically
after the .npz is written, so a run killed at any moment leaves a
consistent checkpoint. A checkpoint is resumed only under the same
configuration hash (``run_digest``); the resumed run takes the same steps
from the same weights as an uninterrupted one.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import numpy as np

from ..config import TrainConfig
from ..config import digest as config_digest
from ..errors import InputError
from ..jsonio import write_json
from ..kernels import Space, Weights
from .base import LoopState

CHECKPOINT_DIR = "checkpoint"
STATE_FILE = "state.json"
CHECKPOINT_VERSION = 2

# Keys that change how far or where a run goes, not the path it takes:
# a run may be resumed with a different value.
RUN_CONTROL_KEYS = ("backend", "max_rounds", "max_seconds", "plots")
# Prefix of LoopState.arrays entries in a round's .npz.
_STATE_ARRAY = "state_"


def run_digest(config: TrainConfig, space: Space) -> str:
    """Hash of everything that decides a run's path: the training
    configuration (less RUN_CONTROL_KEYS) and the candidate space."""
    blob = json.dumps({"train": config_digest(config, RUN_CONTROL_KEYS),
                       "space": dataclasses.asdict(space)}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def checkpoint_dir(output_dir: str) -> str:
    return os.path.join(output_dir, CHECKPOINT_DIR)


def has_checkpoint(output_dir: str | None) -> bool:
    if not output_dir:
        return False
    return os.path.exists(os.path.join(checkpoint_dir(output_dir), STATE_FILE))


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
            np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy stub: **kwds vs allow_pickle
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
            raise InputError(f"{self.state_path}: expected checkpoint format_version "
                             f"{CHECKPOINT_VERSION}, got {doc.get('format_version')}")
        if doc["digest"] != self.digest or doc["method"] != method:
            raise InputError(
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
