"""The trained model: sparse weights by feature string, scoring, save/load.

Saved as JSON metadata plus Parquet weights, never pickle (Spark MLlib's
habit)::

    <dir>/metadata.json  format version, shape, labels, bias, configuration,
                         training summary, standardization flag
    <dir>/weights/       Parquet: feature, predicate (id in the training
                         dictionary), label, label_index, weight, and the
                         standardization mean and inv_scale of the predicate
    <dir>/vocabulary/    the model's predicates and labels as a prepared-dataset
                         dictionary, so new text is prepared for this model with
                         ``prepare --vocabulary <dir>/vocabulary``

Only non-zero weights are stored. Standardization statistics are stored for
the predicates the model uses; the others do not affect any score.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import InputError
from .jsonio import json_default
from .kernels import CANDIDATES, MULTICLASS, Scaling, Space, Weights
from .kernels.blocks import Block, MulticlassBlock
from .kernels.loss import candidate_proba
from .kernels.predict import EvalStats, evaluate_block, predict_multiclass

MODEL_FORMAT_VERSION = 1
METADATA_FILE = "metadata.json"
WEIGHTS_DIR = "weights"
VOCABULARY_DIR = "vocabulary"

WEIGHTS_SCHEMA = pa.schema([
    ("feature", pa.string()), ("predicate", pa.int32()), ("label", pa.string()),
    ("label_index", pa.int32()), ("weight", pa.float64()),
    ("mean", pa.float64()), ("inv_scale", pa.float64()),
])


@dataclass
class MaxentModel:
    """A conditional maxent model over a training dictionary.

    Attributes
    ----------
    space : Space
    weights : Weights
        Non-zero weights over ``space`` (feature ids ``p * K + k``).
    labels : list of str
        Label strings (multiclass), index = label id.
    feature_names : dict int -> str
        Feature string of every predicate the model uses.
    scaling : Scaling or None
        Dense over ``space.n_predicates``.
    config, summary : dict
        Resolved configuration and training summary, saved with the model.
    """

    space: Space
    weights: Weights
    labels: list[str]
    feature_names: dict[int, str]
    scaling: Scaling | None = None
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)

    # ---- scoring -------------------------------------------------------
    def predict(self, block: MulticlassBlock) -> tuple[np.ndarray, np.ndarray]:
        """Predicted label index (m,) and probabilities (m, K) of each event."""
        return predict_multiclass(block, self.space, self.weights, self.scaling)

    def candidate_proba(self, block) -> np.ndarray:
        """p(candidate | event) for every candidate (n_candidates_total,)."""
        return candidate_proba(block, self.space, self.weights, self.scaling)

    def evaluate(self, block: Block) -> EvalStats:
        return evaluate_block(block, self.space, self.weights, self.scaling)

    @property
    def nonzero(self) -> int:
        return self.weights.nnz

    def selected_features(self) -> list[tuple[str, str]]:
        """(feature string, label) of every non-zero weight."""
        p, k = self.space.split(self.weights.active_ids())
        label = (lambda i: self.labels[i]) if self.space.shape == MULTICLASS else (lambda i: "")
        return [(self.feature_names[int(a)], label(int(b)))
                for a, b, v in zip(p, k, self.weights.values) if v != 0]

    # ---- persistence ---------------------------------------------------
    def save(self, path: str, overwrite: bool = False) -> None:
        """Write atomically: into a temporary sibling, then rename."""
        if os.path.exists(path) and not overwrite:
            raise FileExistsError(f"model output {path} exists; pass overwrite=True to replace it")
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".tmp-model-", dir=parent)
        try:
            self._write(tmp)
            if os.path.exists(path):
                shutil.rmtree(path)
            os.rename(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _write(self, directory: str) -> None:
        w = self.weights.sparse()
        p, k = self.space.split(w.active_ids())
        mean = self.scaling.mean[p] if self.scaling is not None else np.zeros(len(p))
        inv = self.scaling.inv_scale[p] if self.scaling is not None else np.ones(len(p))
        table = pa.table({
            "feature": [self.feature_names[int(i)] for i in p],
            "predicate": p.astype(np.int32),
            "label": [self.labels[int(i)] for i in k] if self.space.shape == MULTICLASS
            else [None] * len(p),
            "label_index": k.astype(np.int32), "weight": w.values, "mean": mean, "inv_scale": inv,
        }, schema=WEIGHTS_SCHEMA)
        os.makedirs(os.path.join(directory, WEIGHTS_DIR))
        pq.write_table(table, os.path.join(directory, WEIGHTS_DIR, "part-0.parquet"))
        meta = {
            "format_version": MODEL_FORMAT_VERSION, "shape": self.space.shape,
            "n_predicates": self.space.n_predicates, "labels": self.labels,
            "bias": None if w.bias is None else [float(b) for b in w.bias],
            "standardized": self.scaling is not None,
            "config": self.config, "summary": self.summary,
        }
        with open(os.path.join(directory, METADATA_FILE), "w") as f:
            json.dump(meta, f, indent=2, default=json_default)
        self._write_vocabulary(os.path.join(directory, VOCABULARY_DIR))

    def _write_vocabulary(self, directory: str) -> None:
        from .data.schema import FEATURES_DIR, FEATURES_SCHEMA, DatasetInfo

        used = sorted(self.feature_names)
        os.makedirs(os.path.join(directory, FEATURES_DIR))
        pq.write_table(pa.table({"feature": [self.feature_names[i] for i in used],
                                 "id": np.asarray(used, dtype=np.int32),
                                 "count": np.zeros(len(used))}, schema=FEATURES_SCHEMA),
                       os.path.join(directory, FEATURES_DIR, "part-0.parquet"))
        DatasetInfo(shape=self.space.shape, n_features=self.space.n_predicates,
                    labels=list(self.labels), source={"model": "vocabulary of a saved model"}
                    ).save(directory)

    @staticmethod
    def load(path: str) -> "MaxentModel":
        meta_path = os.path.join(path, METADATA_FILE)
        if not os.path.exists(meta_path):
            raise FileNotFoundError(f"{path} is not a saved model: no {METADATA_FILE} in it")
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("format_version") != MODEL_FORMAT_VERSION:
            raise InputError(f"{meta_path}: expected model format_version {MODEL_FORMAT_VERSION}, "
                             f"got {meta.get('format_version')}")
        shape, labels = meta["shape"], meta["labels"]
        n_labels = len(labels) if shape == MULTICLASS else 1
        space = Space(shape, meta["n_predicates"], n_labels, bias=meta["bias"] is not None)
        t = pq.read_table(os.path.join(path, WEIGHTS_DIR))
        p = t.column("predicate").to_numpy().astype(np.int64)
        k = t.column("label_index").to_numpy().astype(np.int64)
        ids = p * n_labels + k
        order = np.argsort(ids, kind="stable")
        weights = Weights(ids[order], t.column("weight").to_numpy()[order],
                          None if meta["bias"] is None else np.asarray(meta["bias"], dtype=np.float64))
        scaling = None
        if meta["standardized"]:
            mean, inv = np.zeros(space.n_predicates), np.ones(space.n_predicates)
            mean[p] = t.column("mean").to_numpy()
            inv[p] = t.column("inv_scale").to_numpy()
            scaling = Scaling(mean, inv)
        names = dict(zip(p.tolist(), t.column("feature").to_pylist()))
        return MaxentModel(space, weights, labels, names, scaling, meta["config"], meta["summary"])


def feature_table(dataset_dir: str):
    """A prepared dataset's dictionary as (predicate ids in increasing
    order, their feature column): names found by binary search."""
    from .data.schema import FEATURES_DIR

    t = pq.read_table(os.path.join(dataset_dir, FEATURES_DIR), columns=["feature", "id"])
    t = t.sort_by("id")
    return t.column("id").to_numpy().astype(np.int64), t.column("feature")


def feature_names_for(dataset_dir: str, ids: np.ndarray) -> dict[int, str]:
    """Feature strings of the given predicate ids from a prepared dataset's dictionary."""
    import pyarrow.compute as pc

    from .data.schema import FEATURES_DIR

    t = pq.read_table(os.path.join(dataset_dir, FEATURES_DIR), columns=["feature", "id"])
    wanted = pa.array(np.unique(ids).astype(np.int32))
    t = t.filter(pc.is_in(t.column("id"), value_set=wanted))
    return dict(zip(t.column("id").to_pylist(), t.column("feature").to_pylist()))


__all__ = ["MaxentModel", "feature_names_for", "feature_table", "CANDIDATES", "MULTICLASS"]
