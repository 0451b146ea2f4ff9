"""Round checkpoints of a selection run, in ``<output>/checkpoint/``.

``state.json`` (round, trace, configuration hash, counters) plus
``round-NNNNN.npz`` (active ids, weights, bias, method arrays), never
pickle. The JSON names the .npz it belongs to and is replaced atomically
after the .npz is written, so a run killed at any moment leaves a
consistent checkpoint. A checkpoint is resumed only under the same
configuration hash (``run_digest``) and on the same training data: the
content fingerprints of the dataset's events and vocabulary
(data/fingerprint.py) are recorded and must match (a checkpoint or dataset
without them resumes with a warning). The resumed run takes the same steps
from the same weights as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import re
import zipfile

import numpy as np

from .. import storage
from ..config import TrainConfig
from ..config import digest as config_digest
from ..data.fingerprint import describe as describe_fingerprint
from ..errors import InputError
from ..jsonio import read_json_object, write_json
from ..kernels import Space, Weights
from ..problem.kkt import Certificate
from .base import BestStage, LoopState, RoundDetail, RoundRecord
from .stops import Stop

CHECKPOINT_DIR = "checkpoint"
STATE_FILE = "state.json"
CHECKPOINT_VERSION = 2

# Keys that change how far, where or how fast a run goes, not the path it
# takes: a run may be resumed with a different value.
RUN_CONTROL_KEYS = ("backend", "max_rounds", "max_seconds", "plots", "blas_threads")
# The keys of LoopState.certificate and LoopState.best in state.json's info.
_CERTIFICATE = "kkt"
_CHOICE_ROUND, _CHOICE_SCORE = "choice_round", "choice_score"
# Prefix of LoopState.arrays entries in a round's .npz.
_STATE_ARRAY = "state_"
# The only weights_file a state.json may name: a file in the checkpoint directory.
_WEIGHTS_FILE = re.compile(r"round-[0-9]{5,}\.npz")
_STATE_KEYS = (
    "digest",
    "method",
    "round",
    "passes",
    "elapsed_s",
    "done",
    "weights_file",
    "info",
    "trace",
)

log = logging.getLogger(__name__)


def run_digest(config: TrainConfig, space: Space) -> str:
    """Hash of everything that decides a run's path: the training
    configuration (less RUN_CONTROL_KEYS) and the candidate space."""
    blob = json.dumps(
        {"train": config_digest(config, RUN_CONTROL_KEYS), "space": dataclasses.asdict(space)},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def data_fingerprint(backend) -> dict | None:
    """What a checkpoint records of the training data: the dataset's path and
    its events and vocabulary fingerprints ({} each when the dataset has
    none); None for a backend without a dataset (in-memory blocks)."""
    info = getattr(backend, "info", None)
    if info is None:
        return None
    return {
        "dataset": getattr(backend, "dataset_dir", None),
        "events": dict(getattr(info, "events_fingerprint", None) or {}),
        "vocabulary": dict(getattr(info, "vocabulary_fingerprint", None) or {}),
    }


def _info_json(state: LoopState) -> dict:
    """The checkpoint's ``info``: the best held-out stage
    (``choice_round``, ``choice_score``) and the certificate (``kkt``),
    each when the state has one."""
    info: dict = {}
    if state.best is not None:
        info.update({_CHOICE_ROUND: state.best.round, _CHOICE_SCORE: state.best.score})
    if state.certificate is not None:
        info[_CERTIFICATE] = state.certificate.to_json()
    return info


def checkpoint_dir(output_dir: str) -> str:
    return storage.join(output_dir, CHECKPOINT_DIR)


def has_checkpoint(output_dir: str | None) -> bool:
    if not output_dir:
        return False
    return storage.exists(storage.join(checkpoint_dir(output_dir), STATE_FILE))


def seconds_spent(output_dir: str | None) -> float:
    """Seconds the run checkpointed in ``output_dir`` had spent
    (``LoopState.elapsed_s``: the whole ``train()`` call, every session);
    0 with no checkpoint. Read before the run resumes, so that a budget
    split among several runs (a k-fold choice) splits what is left; the
    full checks come when the loop loads the checkpoint."""
    if not has_checkpoint(output_dir):
        return 0.0
    assert output_dir is not None  # has_checkpoint
    return float(Checkpoint(checkpoint_dir(output_dir), "")._read_state()["elapsed_s"])


class Checkpoint:
    """Round checkpoints in ``directory`` (JSON + .npz)."""

    def __init__(self, directory: str, digest: str, data: dict | None = None):
        self.directory = directory
        self.digest = digest
        self.data = data  # data_fingerprint(backend): what to record and check on resume

    @property
    def state_path(self) -> str:
        return storage.join(self.directory, STATE_FILE)

    def save(self, state: LoopState, method: str) -> None:
        name = f"round-{state.round:05d}.npz"
        w = state.weights
        arrays = {"ids": w.active_ids(), "values": w.values}
        if w.bias is not None:
            arrays["bias"] = w.bias
        arrays.update({f"{_STATE_ARRAY}{k}": v for k, v in state.arrays.items()})
        buf = io.BytesIO()
        np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy stub: **kwds vs allow_pickle
        storage.write_bytes(storage.join(self.directory, name), buf.getvalue())
        doc = {
            "format_version": CHECKPOINT_VERSION,
            "digest": self.digest,
            "method": method,
            "round": state.round,
            "passes": state.passes,
            "elapsed_s": state.elapsed_s,
            "done": state.done,
            "weights_file": name,
            "info": _info_json(state),
            "stop": state.stop.to_json() if state.stop is not None else None,
            "trace": [row.to_json() for row in state.trace],
        }
        if self.data is not None:
            doc["data"] = self.data
        write_json(self.state_path, doc)
        for old in storage.listdir(self.directory):  # earlier rounds' weights
            if old.startswith("round-") and old.endswith(".npz") and old != name:
                storage.delete(storage.join(self.directory, old))

    def load(
        self,
        method: str,
        score_name: str = "max_gradient",
        detail: type[RoundDetail] | None = None,
    ) -> LoopState | None:
        """The saved state, or None if there is no checkpoint; ``score_name``:
        the trace key of the rounds' score (``RoundRecord.score_name``);
        ``detail``: the type of the method's own entries of a row
        (``RoundRecord.detail``; None: it has none).

        Raises InputError naming the file for a state.json that is not a
        checkpoint's JSON, a ``weights_file`` other than a round-NNNNN.npz in
        this directory, an unreadable .npz, and a checkpoint of another
        configuration, method or training data."""
        if not storage.exists(self.state_path):
            return None
        doc = self._read_state()
        self._check_data(doc.get("data"))  # first: other data also changes the hash
        if doc["digest"] != self.digest or doc["method"] != method:
            raise InputError(
                f"{self.state_path}: cannot resume: the checkpoint is of method {doc['method']!r} "
                f"with configuration hash {doc['digest']}, this run is {method!r} with hash "
                f"{self.digest} (same train.* settings and data needed; "
                f"{', '.join(RUN_CONTROL_KEYS)} may differ)"
            )
        weights_path = self._weights_path(doc["weights_file"])
        try:
            with np.load(io.BytesIO(storage.read_bytes(weights_path))) as z:
                bias = z["bias"].copy() if "bias" in z.files else None
                ids = z["ids"].astype(np.int64)
                weights = Weights(ids, z["values"].astype(np.float64), bias)
                arrays = {
                    k[len(_STATE_ARRAY) :]: z[k].copy()
                    for k in z.files
                    if k.startswith(_STATE_ARRAY)
                }
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
            raise InputError(
                f"{weights_path}: cannot read the checkpoint's weights "
                f"(named by {self.state_path}): {type(e).__name__}: {e}"
            ) from None
        if len(ids) != len(weights.values):
            raise InputError(
                f"{weights_path}: expected as many ids as values, got "
                f"{len(ids)} ids and {len(weights.values)} values"
            )
        try:
            stop = Stop.from_json(doc["stop"]) if doc.get("stop") else None
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise InputError(
                f"{self.state_path}: 'stop': not a stop reason ({type(e).__name__}: {e}); "
                "remove the checkpoint directory to start over"
            ) from None
        if not isinstance(doc["info"], dict):
            raise InputError(f"{self.state_path}: 'info': expected an object, got {doc['info']!r}")
        info = doc["info"]  # keys of earlier versions that nothing reads are left out
        certificate = self._certificate(info.get(_CERTIFICATE))
        return LoopState(
            round=doc["round"],
            weights=weights,
            passes=doc["passes"],
            elapsed_s=doc["elapsed_s"],
            trace=self._trace(doc["trace"], score_name, detail),
            # a finished run checkpointed before stops were typed has no stop:
            # its next round stops it again, with a typed stop
            done=bool(doc["done"]) and stop is not None,
            best=self._best(info),
            arrays=arrays,
            stop=stop,
            certificate=certificate,
        )

    def _trace(self, rows, score_name: str, detail: type[RoundDetail] | None) -> list[RoundRecord]:
        """The trace a state.json holds, as records."""
        try:
            return [RoundRecord.from_json(row, score_name, detail) for row in rows]
        except (TypeError, KeyError, AttributeError) as e:
            raise InputError(
                f"{self.state_path}: 'trace': not a selection trace ({type(e).__name__}: {e}); "
                "remove the checkpoint directory to start over"
            ) from None

    def _best(self, info: dict) -> BestStage | None:
        """The best held-out stage a state.json's info holds (None if none)."""
        if _CHOICE_ROUND not in info:
            return None
        try:
            return BestStage(int(info[_CHOICE_ROUND]), float(info[_CHOICE_SCORE]))
        except (TypeError, ValueError, KeyError) as e:
            raise InputError(
                f"{self.state_path}: 'info.{_CHOICE_ROUND}', 'info.{_CHOICE_SCORE}': not a "
                f"best stage ({type(e).__name__}: {e}); remove the checkpoint directory to "
                "start over"
            ) from None

    def _certificate(self, doc) -> Certificate | None:
        """The certificate a state.json's info holds (None if none)."""
        if doc is None:
            return None
        try:
            return Certificate.from_json(doc)
        except (TypeError, KeyError, AttributeError) as e:
            raise InputError(
                f"{self.state_path}: 'info.{_CERTIFICATE}': not a KKT certificate "
                f"({type(e).__name__}: {e}); remove the checkpoint directory to start over"
            ) from None

    def _read_state(self) -> dict:
        """state.json, checked to be a checkpoint of this format."""
        return read_json_object(
            self.state_path,
            "checkpoint",
            CHECKPOINT_VERSION,
            _STATE_KEYS,
            "; remove the checkpoint directory to start over",
        )

    def _weights_path(self, name) -> str:
        """``<directory>/<name>`` for a plain round-NNNNN.npz name only."""
        if not isinstance(name, str) or not _WEIGHTS_FILE.fullmatch(name):
            raise InputError(
                f"{self.state_path}: expected weights_file to be a file name "
                f"round-NNNNN.npz in {self.directory}, got {name!r}"
            )
        return storage.join(self.directory, name)

    def _check_data(self, saved: dict | None) -> None:
        """Refuse a checkpoint made on other training data (events or
        vocabulary fingerprints differ); warn when either side has none."""
        current = self.data
        if current is None:  # in-memory blocks: no dataset to compare
            return
        if not isinstance(saved, dict):
            log.warning(
                "%s: the checkpoint records no training data fingerprint (older "
                "version or in-memory data): resuming without checking that this "
                "run's training data is the checkpoint's",
                self.state_path,
            )
            return
        where = {
            "saved": f" from {saved['dataset']}" if saved.get("dataset") else "",
            "current": f" {current['dataset']}" if current.get("dataset") else "",
        }
        differences, unknown = [], []
        for kind, what in (("events", "data"), ("vocabulary", "vocabulary")):
            a, b = saved.get(kind) or {}, current.get(kind) or {}
            if (
                not a
                or not b
                or a.get("scheme") != b.get("scheme")
                or "id" not in a
                or "id" not in b
            ):
                unknown.append(kind)
            elif a["id"] != b["id"]:
                differences.append(
                    f"the checkpoint was made on {what} {describe_fingerprint(a, kind)}"
                    f"{where['saved']}, this run's training data (--train){where['current']} "
                    f"has {what} {describe_fingerprint(b, kind)}"
                )
        if differences:
            raise InputError(
                f"{self.state_path}: cannot resume on other training data: "
                + "; ".join(differences)
                + " (resume with the same --train, or start over without --resume)"
            )
        if unknown:
            log.warning(
                "%s: no %s fingerprint to compare (the checkpoint or the dataset "
                "predates them; prepare the data again to get them): resuming without "
                "checking that this run's training data is the checkpoint's",
                self.state_path,
                " or ".join(unknown),
            )
