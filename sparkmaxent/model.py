"""The trained model: sparse weights by feature string, scoring, save/load.

Saved as JSON metadata plus Parquet weights, never pickle (Spark MLlib's
habit)::

    <dir>/metadata.json  format version, shape, labels, bias, configuration,
                         training summary, standardization flag, and the
                         model's conjunctions (derived predicates) if any
    <dir>/weights/       Parquet: feature, predicate (id in the training
                         dictionary), label, label_index, weight, and the
                         standardization mean and inv_scale of the predicate
    <dir>/vocabulary/    the model's predicates and labels as a prepared-dataset
                         dictionary, so new text is prepared for this model with
                         ``prepare --vocabulary <dir>/vocabulary``: the whole
                         training dictionary (models trained by ``api``), or
                         only the predicates with a weight (dataset.json
                         source["dictionary"] says which)

A model with conjunctions (model_conjunctions.py) has n_atoms atomic predicates
(the vocabulary's) followed by its derived predicates; scoring forms them
in every event from its atoms. Only non-zero weights are stored.
Standardization statistics are stored for the predicates the model uses;
the others do not affect any score.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from . import storage
from .errors import InputError
from .jsonio import json_default, read_json_object
from .kernels import CANDIDATES, MULTICLASS, Scaling, Space, Weights
from .kernels.blocks import Block, CandidateBlock, MulticlassBlock
from .kernels.loss import candidate_proba
from .kernels.predict import EvalStats, evaluate_block, predict_multiclass
from .model_conjunctions import Conjunctions, atoms_used, from_json, to_json

MODEL_FORMAT_VERSION = 1
METADATA_FILE = "metadata.json"
WEIGHTS_DIR = "weights"
VOCABULARY_DIR = "vocabulary"
# what a model's vocabulary holds (its dataset.json source["dictionary"])
VOCABULARY_TRAINING = "training"  # the whole training dictionary
VOCABULARY_USED = "used"  # only the features with a weight (and older models)
METADATA_KEYS = ("shape", "n_predicates", "labels", "bias", "standardized", "config", "summary")

WEIGHTS_SCHEMA = pa.schema(
    [
        ("feature", pa.string()),
        ("predicate", pa.int32()),
        ("label", pa.string()),
        ("label_index", pa.int32()),
        ("weight", pa.float64()),
        ("mean", pa.float64()),
        ("inv_scale", pa.float64()),
    ]
)


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
    dictionary : str
        A prepared dataset (the training data) whose whole feature dictionary
        is saved as the model's vocabulary, so that ``unknown_features`` of
        data prepared for the model counts features the training data lacks;
        empty: only the features the model uses.
    conjunctions : Conjunctions or None
        Derived predicates ``n_atoms + j`` (then ``space.n_predicates`` is
        ``conjunctions.n_predicates``, and ``feature_names`` also names the
        atoms they are made of).
    """

    space: Space
    weights: Weights
    labels: list[str]
    feature_names: dict[int, str]
    scaling: Scaling | None = None
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    dictionary: str = ""
    conjunctions: Conjunctions | None = None

    def __post_init__(self):
        if self.conjunctions is not None and self.conjunctions.n_predicates != (
            self.space.n_predicates
        ):
            raise ValueError(
                f"expected {self.space.n_predicates} predicates, the conjunctions make "
                f"{self.conjunctions.n_predicates}"
            )

    @property
    def n_atoms(self) -> int:
        """Predicates of the data the model reads (its vocabulary's)."""
        return self.space.n_predicates if self.conjunctions is None else self.conjunctions.n_atoms

    def expand(self, block: Block) -> Block:
        """The block with the model's conjunctions formed in it."""
        return block if self.conjunctions is None else self.conjunctions.expand(block)

    # ---- scoring -------------------------------------------------------
    def predict(self, block: MulticlassBlock) -> tuple[np.ndarray, np.ndarray]:
        """Predicted label index (m,) and probabilities (m, K) of each event."""
        expanded = self.expand(block)
        assert isinstance(expanded, MulticlassBlock), "expand keeps the block's shape"
        return predict_multiclass(expanded, self.space, self.weights, self.scaling)

    def candidate_proba(self, block) -> np.ndarray:
        """p(candidate | event) for every candidate (n_candidates_total,)."""
        expanded = self.expand(block)
        assert isinstance(expanded, CandidateBlock), "expand keeps the block's shape"
        return candidate_proba(expanded, self.space, self.weights, self.scaling)

    def evaluate_block(self, block: Block) -> EvalStats:
        """Accuracy, loss and confusion of the model on ``block`` (its
        conjunctions formed first)."""
        return evaluate_block(self.expand(block), self.space, self.weights, self.scaling)

    @property
    def nonzero(self) -> int:
        return self.weights.nnz

    def selected_features(self) -> list[tuple[str, str]]:
        """(feature string, label) of every non-zero weight."""
        p, k = self.space.split(self.weights.active_ids())
        label = (lambda i: self.labels[i]) if self.space.shape == MULTICLASS else (lambda i: "")
        return [
            (self.feature_names[int(a)], label(int(b)))
            for a, b, v in zip(p, k, self.weights.values)
            if v != 0
        ]

    # ---- persistence ---------------------------------------------------
    def save(self, path: str, overwrite: bool = False) -> None:
        """Write all or nothing (``storage.staged``): into a temporary sibling
        published in its place, so a failure at any point leaves the old
        model (if any) at ``path``; where nothing can be renamed (a remote
        file system under Spark Connect) in place, ``metadata.json`` last,
        and deleted if the save fails. ``path``: a local path or a URI."""
        if storage.exists(path) and not overwrite:
            raise FileExistsError(f"model output {path} exists; pass overwrite=True to replace it")
        with storage.staged(path) as directory:
            self._write(directory)

    def _write(self, directory: str) -> None:
        w = self.weights.sparse()
        p, k = self.space.split(w.active_ids())
        mean = self.scaling.mean[p] if self.scaling is not None else np.zeros(len(p))
        inv = self.scaling.inv_scale[p] if self.scaling is not None else np.ones(len(p))
        table = pa.table(
            {
                "feature": [self.feature_names[int(i)] for i in p],
                "predicate": p.astype(np.int32),
                "label": [self.labels[int(i)] for i in k]
                if self.space.shape == MULTICLASS
                else [None] * len(p),
                "label_index": k.astype(np.int32),
                "weight": w.values,
                "mean": mean,
                "inv_scale": inv,
            },
            schema=WEIGHTS_SCHEMA,
        )
        storage.write_parquet(storage.join(directory, WEIGHTS_DIR, "part-0.parquet"), table)
        meta = {
            "format_version": MODEL_FORMAT_VERSION,
            "shape": self.space.shape,
            "n_predicates": self.space.n_predicates,
            "labels": self.labels,
            "bias": None if w.bias is None else [float(b) for b in w.bias],
            "standardized": self.scaling is not None,
            "config": self.config,
            "summary": self.summary,
        }
        if self.conjunctions is not None:
            meta["conjunctions"] = to_json(self.conjunctions)
        self._write_vocabulary(storage.join(directory, VOCABULARY_DIR))
        storage.write_json(storage.join(directory, METADATA_FILE), meta, default=json_default)

    def _write_vocabulary(self, directory: str) -> None:
        from .data.schema import FEATURES_DIR, FEATURES_SCHEMA, DatasetInfo

        storage.mkdirs(directory)
        if self.dictionary:  # the training dictionary, every feature of it: a file-system copy
            storage.copy(
                storage.join(self.dictionary, FEATURES_DIR), storage.join(directory, FEATURES_DIR)
            )
        else:
            used = sorted(i for i in self.feature_names if i < self.n_atoms)
            missing = np.setdiff1d(atoms_used(self.conjunctions), used)
            if len(missing):
                raise ValueError(
                    f"no feature name for atoms {missing[:5].tolist()} of conjunctions"
                )
            storage.write_parquet(
                storage.join(directory, FEATURES_DIR, "part-0.parquet"),
                pa.table(
                    {
                        "feature": [self.feature_names[i] for i in used],
                        "id": np.asarray(used, dtype=np.int32),
                        "count": np.zeros(len(used)),
                    },
                    schema=FEATURES_SCHEMA,
                ),
            )
        source: dict = {
            "model": "vocabulary of a saved model",
            "dictionary": VOCABULARY_TRAINING if self.dictionary else VOCABULARY_USED,
        }
        if self.dictionary:  # data scored by the model is prepared as its training data
            source["binary"] = bool(DatasetInfo.load(self.dictionary).source.get("binary"))
        DatasetInfo(
            shape=self.space.shape,
            n_features=self.n_atoms,
            labels=list(self.labels),
            source=source,
        ).save(directory)

    @staticmethod
    def load(path: str) -> MaxentModel:
        """Read a saved model, checking what it reads.

        Raises
        ------
        FileNotFoundError
            ``path`` has no metadata.json.
        InputError
            Naming the file: metadata.json that is not valid JSON (e.g.
            truncated), lacks a key or holds a value of the wrong kind; a
            weights/ Parquet that cannot be read or lacks a column; a
            predicate id outside [0, n_predicates), a label index outside
            [0, number of labels), a non-finite weight (or standardization
            statistic), a (predicate, label) given twice; a vocabulary/
            whose dataset.json is unreadable or whose Parquet file is
            truncated.
        """
        meta_path = storage.join(path, METADATA_FILE)
        if not storage.exists(meta_path):
            raise FileNotFoundError(f"{path} is not a saved model: no {METADATA_FILE} in it")
        meta = _read_metadata(meta_path)
        conj = None
        if meta.get("conjunctions") is not None:
            conj = from_json(meta["conjunctions"], meta_path)
            if conj.n_predicates != meta["n_predicates"]:
                raise InputError(
                    f"{meta_path}: n_predicates {meta['n_predicates']} is not n_atoms "
                    f"{conj.n_atoms} plus {len(conj)} conjunctions"
                )
        shape, labels = meta["shape"], meta["labels"]
        n_labels = len(labels) if shape == MULTICLASS else 1
        space = Space(shape, meta["n_predicates"], n_labels, bias=meta["bias"] is not None)
        weights_path = storage.join(path, WEIGHTS_DIR)
        t = _read_weights(weights_path, space, meta["standardized"])
        p = t.column("predicate").to_numpy().astype(np.int64)
        k = t.column("label_index").to_numpy().astype(np.int64)
        ids = p * n_labels + k
        order = np.argsort(ids, kind="stable")
        weights = Weights(
            ids[order],
            t.column("weight").to_numpy()[order],
            None if meta["bias"] is None else np.asarray(meta["bias"], dtype=np.float64),
        )
        scaling = None
        if meta["standardized"]:
            mean, inv = np.zeros(space.n_predicates), np.ones(space.n_predicates)
            mean[p] = t.column("mean").to_numpy()
            inv[p] = t.column("inv_scale").to_numpy()
            scaling = Scaling(mean, inv)
        names = dict(zip(p.tolist(), t.column("feature").to_pylist()))
        _check_vocabulary(storage.join(path, VOCABULARY_DIR))
        return MaxentModel(
            space, weights, labels, names, scaling, meta["config"], meta["summary"], "", conj
        )


def _check_vocabulary(vocab: str) -> None:
    """A saved model's vocabulary/ (the dictionary that prepares text input
    for it), when it has one: its dataset.json readable and every Parquet
    file whole (InputError naming the file), checked here rather than
    failing inside a Spark job."""
    from .data.schema import FEATURES_DIR, DatasetInfo

    if not storage.exists(vocab):
        return
    try:
        DatasetInfo.load(vocab)
    except (FileNotFoundError, TypeError) as e:
        raise InputError(f"{vocab}: the model's vocabulary is damaged: {e}") from None
    storage.check_parquet_files(storage.join(vocab, FEATURES_DIR))


def _read_metadata(meta_path: str) -> dict:
    """A saved model's metadata.json, checked key by key (InputError naming it)."""
    meta = read_json_object(meta_path, "model metadata", MODEL_FORMAT_VERSION, METADATA_KEYS)

    def bad(key: str, expected: str):
        return InputError(f"{meta_path}: {key}: expected {expected}, got {meta[key]!r}")

    if meta["shape"] not in (MULTICLASS, CANDIDATES):
        raise bad("shape", f"{MULTICLASS!r} or {CANDIDATES!r}")
    n = meta["n_predicates"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise bad("n_predicates", "an integer >= 0")
    labels = meta["labels"]
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise bad("labels", "a list of strings")
    n_labels = len(labels) if meta["shape"] == MULTICLASS else 1
    bias = meta["bias"]
    if meta["shape"] == CANDIDATES and bias is not None:
        raise bad("bias", "null (candidate-set models have no bias)")
    if bias is not None and not (
        isinstance(bias, list)
        and len(bias) == n_labels
        and all(
            isinstance(b, (int, float)) and not isinstance(b, bool) and np.isfinite(b) for b in bias
        )
    ):
        raise bad("bias", f"null or a list of {n_labels} finite numbers (one per label)")
    if not isinstance(meta["standardized"], bool):
        raise bad("standardized", "true or false")
    for key in ("config", "summary"):
        if not isinstance(meta[key], dict):
            raise bad(key, "a JSON object")
    return meta


def _read_weights(weights_path: str, space: Space, standardized: bool) -> pa.Table:
    """A saved model's weights/ Parquet, checked row by row (InputError naming it)."""
    try:
        t = storage.read_parquet(weights_path)
    except (OSError, ValueError, pa.ArrowException) as e:
        raise InputError(
            f"{weights_path}: cannot read the model's weights as Parquet ({e})"
        ) from None
    needed = ["feature", "predicate", "label_index", "weight"]
    if standardized:
        needed += ["mean", "inv_scale"]
    missing = [c for c in needed if c not in t.column_names]
    if missing:
        raise InputError(
            f"{weights_path}: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (found {', '.join(t.column_names)})"
        )
    for c in needed[1:]:
        col = t.column(c)
        if col.null_count:
            raise InputError(f"{weights_path}: {col.null_count} null value(s) in column {c}")
        kind = pa.types.is_integer if c in ("predicate", "label_index") else pa.types.is_floating
        if not kind(col.type):
            raise InputError(f"{weights_path}: column {c}: unexpected type {col.type}")

    def first(bad: np.ndarray) -> int:
        return int(np.flatnonzero(bad)[0])

    p = t.column("predicate").to_numpy().astype(np.int64)
    k = t.column("label_index").to_numpy().astype(np.int64)
    out = (p < 0) | (p >= space.n_predicates)
    if out.any():
        i = first(out)
        raise InputError(
            f"{weights_path}: row {i}: predicate id {p[i]} is out of range "
            f"[0, {space.n_predicates}) ({int(out.sum())} row(s) out of range); "
            "the weights do not belong to this metadata.json"
        )
    out = (k < 0) | (k >= space.n_labels)
    if out.any():
        i = first(out)
        raise InputError(
            f"{weights_path}: row {i}: label index {k[i]} is out of range "
            f"[0, {space.n_labels}) ({int(out.sum())} row(s) out of range)"
        )
    for c in needed[3:]:
        v = t.column(c).to_numpy()
        if not np.isfinite(v).all():
            i = first(~np.isfinite(v))
            raise InputError(
                f"{weights_path}: row {i}: non-finite {c} {v[i]} "
                f"({int((~np.isfinite(v)).sum())} row(s))"
            )
    ids = p * space.n_labels + k
    order = np.argsort(ids, kind="stable")
    dup = np.flatnonzero(ids[order][1:] == ids[order][:-1])
    if len(dup):
        a, b = sorted(order[dup[0] : dup[0] + 2].tolist())
        raise InputError(
            f"{weights_path}: rows {a} and {b} both hold predicate {p[a]}, "
            f"label index {k[a]} ({len(dup)} duplicate row(s))"
        )
    return t


def vocabulary_is_complete(model_dir: str) -> bool:
    """Whether a saved model's vocabulary holds its whole training dictionary
    (then a feature it lacks is one the training data lacked) rather than
    only the features the model uses (older models, or models built without
    ``dictionary``)."""
    from .data.schema import FEATURES_DIR, DatasetInfo

    vocab = storage.join(model_dir, VOCABULARY_DIR)
    info = DatasetInfo.load(vocab)
    if info.source.get("dictionary") == VOCABULARY_TRAINING:
        return True
    rows = storage.read_parquet(storage.join(vocab, FEATURES_DIR), columns=["id"]).num_rows
    return rows >= info.n_features


def feature_table(dataset_dir: str):
    """A prepared dataset's dictionary as (predicate ids in increasing
    order, their feature column): names found by binary search."""
    from .data.schema import FEATURES_DIR

    t = storage.read_parquet(storage.join(dataset_dir, FEATURES_DIR), columns=["feature", "id"])
    t = t.sort_by("id")
    return t.column("id").to_numpy().astype(np.int64), t.column("feature")


def feature_names_for(dataset_dir: str, ids: np.ndarray) -> dict[int, str]:
    """Feature strings of the given predicate ids from a prepared dataset's dictionary."""
    import pyarrow.compute as pc

    from .data.schema import FEATURES_DIR

    t = storage.read_parquet(storage.join(dataset_dir, FEATURES_DIR), columns=["feature", "id"])
    wanted = pa.array(np.unique(ids).astype(np.int32))
    t = t.filter(pc.is_in(t.column("id"), value_set=wanted))
    return dict(zip(t.column("id").to_pylist(), t.column("feature").to_pylist()))


__all__ = [
    "MaxentModel",
    "feature_names_for",
    "vocabulary_is_complete",
    "feature_table",
    "CANDIDATES",
    "MULTICLASS",
]
