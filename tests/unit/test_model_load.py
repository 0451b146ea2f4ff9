"""MaxentModel.load checks what it reads: every damaged file gives an
InputError naming the file, never a traceback from numpy or json."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.errors import InputError
from sparkmaxent.kernels import MULTICLASS, Scaling, Space, Weights
from sparkmaxent.model import (
    METADATA_FILE,
    VOCABULARY_DIR,
    WEIGHTS_DIR,
    MaxentModel,
    vocabulary_is_complete,
)

P, K = 5, 3


def small_model(standardize: bool = True) -> MaxentModel:
    space = Space(MULTICLASS, P, K, bias=True)
    ids = np.array([0 * K + 1, 2 * K + 0, 2 * K + 2, 4 * K + 1], dtype=np.int64)
    weights = Weights(ids, np.array([0.5, -1.0, 2.0, 0.25]), np.array([0.1, 0.0, -0.1]))
    scaling = Scaling(np.linspace(0, 1, P), np.linspace(1, 2, P)) if standardize else None
    return MaxentModel(
        space,
        weights,
        ["a", "b", "c"],
        {0: "f0", 2: "f2", 4: "f4"},
        scaling,
        {"train": {"l2": 0.1}},
        {"objective": 1.0},
    )


@pytest.fixture
def saved(tmp_path):
    path = str(tmp_path / "m")
    small_model().save(path)
    return path


def meta_path(model_dir):
    return os.path.join(model_dir, METADATA_FILE)


def weights_file(model_dir):
    return os.path.join(model_dir, WEIGHTS_DIR, "part-0.parquet")


def edit_metadata(model_dir, change):
    meta = json.load(open(meta_path(model_dir)))
    change(meta)
    json.dump(meta, open(meta_path(model_dir), "w"))


def edit_weights(model_dir, change):
    d = pq.read_table(weights_file(model_dir)).to_pydict()
    change(d)
    pq.write_table(
        pa.table(d, schema=pq.read_schema(weights_file(model_dir))), weights_file(model_dir)
    )


def load_error(model_dir) -> str:
    with pytest.raises(InputError) as e:
        MaxentModel.load(model_dir)
    return str(e.value)


def test_round_trip_still_loads(saved):
    model = small_model()
    loaded = MaxentModel.load(saved)
    np.testing.assert_array_equal(loaded.weights.ids, model.weights.ids)
    np.testing.assert_array_equal(loaded.weights.values, model.weights.values)
    assert loaded.feature_names == model.feature_names and loaded.labels == model.labels


def test_truncated_metadata_names_the_file(saved):
    text = open(meta_path(saved)).read()
    open(meta_path(saved), "w").write(text[: len(text) // 2])
    msg = load_error(saved)
    assert meta_path(saved) in msg and "not valid JSON" in msg


def test_metadata_that_is_not_an_object(saved):
    open(meta_path(saved), "w").write("[1, 2]")
    msg = load_error(saved)
    assert meta_path(saved) in msg and "JSON object" in msg


@pytest.mark.parametrize("key", ["shape", "n_predicates", "labels", "bias", "standardized"])
def test_missing_metadata_key_names_file_and_key(saved, key):
    edit_metadata(saved, lambda m: m.pop(key))
    msg = load_error(saved)
    assert meta_path(saved) in msg and f"missing key {key}" in msg


@pytest.mark.parametrize(
    "key,value",
    [
        ("shape", "matrix"),
        ("n_predicates", -1),
        ("n_predicates", "5"),
        ("labels", "abc"),
        ("bias", [0.0]),
        ("bias", [0.0, "x", 1.0]),
        ("standardized", "yes"),
        ("config", []),
    ],
)
def test_wrong_metadata_value_names_file_and_key(saved, key, value):
    edit_metadata(saved, lambda m: m.update({key: value}))
    msg = load_error(saved)
    assert meta_path(saved) in msg and f"{key}: expected" in msg


def test_unreadable_weights_name_the_file(saved):
    open(weights_file(saved), "wb").write(b"PAR1 this is not parquet")
    msg = load_error(saved)
    assert os.path.join(saved, WEIGHTS_DIR) in msg and "cannot read" in msg


def test_missing_weights_directory_names_it(saved):
    os.remove(weights_file(saved))
    os.rmdir(os.path.join(saved, WEIGHTS_DIR))
    msg = load_error(saved)
    assert os.path.join(saved, WEIGHTS_DIR) in msg


def test_weights_without_a_column(saved):
    t = pq.read_table(weights_file(saved)).drop(["weight"])
    pq.write_table(t, weights_file(saved))
    msg = load_error(saved)
    assert os.path.join(saved, WEIGHTS_DIR) in msg and "missing column weight" in msg


@pytest.mark.parametrize("bad", [P, -1, 10**6])
def test_predicate_out_of_range(saved, bad):
    edit_weights(saved, lambda d: d["predicate"].__setitem__(2, bad))
    msg = load_error(saved)
    assert os.path.join(saved, WEIGHTS_DIR) in msg
    assert f"row 2: predicate id {bad} is out of range [0, {P})" in msg


@pytest.mark.parametrize("bad", [K, -1])
def test_label_index_out_of_range(saved, bad):
    edit_weights(saved, lambda d: d["label_index"].__setitem__(1, bad))
    msg = load_error(saved)
    assert os.path.join(saved, WEIGHTS_DIR) in msg
    assert f"row 1: label index {bad} is out of range [0, {K})" in msg


@pytest.mark.parametrize(
    "column,bad",
    [
        ("weight", float("nan")),
        ("weight", float("inf")),
        ("mean", float("-inf")),
        ("inv_scale", float("nan")),
    ],
)
def test_non_finite_weight(saved, column, bad):
    edit_weights(saved, lambda d: d[column].__setitem__(3, bad))
    msg = load_error(saved)
    assert os.path.join(saved, WEIGHTS_DIR) in msg and f"row 3: non-finite {column}" in msg


def test_null_weight(saved):
    edit_weights(saved, lambda d: d["weight"].__setitem__(0, None))
    msg = load_error(saved)
    assert os.path.join(saved, WEIGHTS_DIR) in msg and "null" in msg


def test_duplicate_predicate_label_rows(saved):
    def dup(d):
        for c in d:
            d[c].append(d[c][1])

    edit_weights(saved, dup)
    msg = load_error(saved)
    assert os.path.join(saved, WEIGHTS_DIR) in msg
    assert "rows 1 and 4 both hold predicate 2, label index 0" in msg


def test_vocabulary_of_used_features_is_incomplete(saved):
    assert not vocabulary_is_complete(saved)


@pytest.mark.parametrize("binary", [False, True])
def test_vocabulary_from_the_training_dictionary(tmp_path, binary):
    """The vocabulary is the training dictionary's, and records whether it
    was prepared as binary predicates (data scored by the model follows it)."""
    train = tmp_path / "train"
    (train / "features").mkdir(parents=True)
    names = [f"f{i}" for i in range(P)]
    pq.write_table(
        pa.table({"feature": names, "id": pa.array(range(P), pa.int32()), "count": [1.0] * P}),
        str(train / "features" / "part-0.parquet"),
    )
    DatasetInfo(shape=MULTICLASS, n_features=P, source={"binary": binary}).save(str(train))
    model = small_model()
    model.dictionary = str(train)
    model.save(str(tmp_path / "m"))
    assert vocabulary_is_complete(str(tmp_path / "m"))
    vocab = pq.read_table(str(tmp_path / "m" / VOCABULARY_DIR / "features"))
    assert sorted(vocab.column("feature").to_pylist()) == names
    info = DatasetInfo.load(str(tmp_path / "m" / VOCABULARY_DIR))
    assert info.n_features == P and info.source["binary"] is binary


def test_old_dataset_json_without_feature_occurrences_loads(tmp_path):
    info = DatasetInfo(shape=MULTICLASS, n_features=3, labels=["a", "b"], unknown_features=4)
    info.save(str(tmp_path))
    raw = json.load(open(tmp_path / "dataset.json"))
    raw.pop("feature_occurrences")
    json.dump(raw, open(tmp_path / "dataset.json", "w"))
    loaded = DatasetInfo.load(str(tmp_path))
    assert loaded.unknown_features == 4 and loaded.feature_occurrences == 0


def test_a_failed_replace_keeps_the_old_model(saved, monkeypatch):
    """Issue 23 item 5: the old model is moved aside, not deleted, until the
    new one is in place; a failure at the rename puts it back."""
    from sparkmaxent import storage

    before = open(meta_path(saved)).read()
    fs = storage.filesystem()
    real_rename = fs.rename

    def failing_rename(src, dst):
        if os.path.basename(src).startswith(f".{os.path.basename(saved)}.tmp-"):
            raise OSError("disk full (simulated)")
        return real_rename(src, dst)

    monkeypatch.setattr(fs, "rename", failing_rename)
    with pytest.raises(OSError, match="simulated"):
        small_model(standardize=False).save(saved, overwrite=True)
    monkeypatch.undo()
    assert open(meta_path(saved)).read() == before
    MaxentModel.load(saved)
    parent = os.path.dirname(saved)
    assert sorted(os.listdir(parent)) == ["m"], "no temporary or set-aside directory left"
    small_model(standardize=False).save(saved, overwrite=True)
    assert MaxentModel.load(saved).scaling is None


@pytest.mark.parametrize(
    "part",
    [
        WEIGHTS_DIR,
        pytest.param(f"{VOCABULARY_DIR}/features", marks=[pytest.mark.slow, pytest.mark.ci]),
    ],
)
def test_every_byte_flipped_in_a_model_parquet_page_is_found_naming_the_file(saved, part):
    """issue 40 item 2: damage in the middle of a model's Parquet file (the
    footer intact) is never loaded as other names or weights: each byte of
    the pages flipped in turn, the load is an InputError naming that file
    (the files carry page checksums, verified on reading), or the same
    model (a flip in a page header field that reading does not use)."""
    path = os.path.join(saved, part, "part-0.parquet")
    data = open(path, "rb").read()
    pages_end = len(data) - 8 - int.from_bytes(data[-8:-4], "little")  # the footer's start
    table = pq.read_table(path)
    found = 0
    for offset in range(4, pages_end):
        damaged = bytearray(data)
        damaged[offset] ^= 0x5A
        open(path, "wb").write(bytes(damaged))
        try:
            MaxentModel.load(saved)
        except InputError as e:
            assert f"{path}: cannot read it as Parquet" in str(e), (offset, str(e))
            found += 1
            continue
        assert pq.read_table(path).equals(table), f"byte {offset} flipped: loaded other values"
    assert found > (pages_end - 4) / 2, (found, pages_end)  # the rest: unused header fields
    open(path, "wb").write(data)
