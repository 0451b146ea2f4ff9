"""Binary predicates at prepare (``binary=True``, ``data.binary``,
``--binary``): repeated tokens give the events of unique tokens, on Spark
and in-process alike, for every text format and table column kind; data
prepared with a vocabulary follows it; combination features, which refuse
counts, accept the binarized data."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent import api
from sparkmaxent.config.load import load_config
from sparkmaxent.data.dictionary import binary_setting
from sparkmaxent.data.prepare import prepare, prepare_table
from sparkmaxent.data.readers import InputError
from sparkmaxent.data.schema import DatasetInfo

from .test_local_prepare import FORMATS, IN_PROCESS, SPARK_ONLY, _both, _dataset
from .test_local_tables import KINDS, _table
from .test_local_tables import _both as _both_tables

# the same events twice: tokens repeated within an event, then each once
REPEATED = "A x x y x\nB z z w\nA y y\nC x w w w\n"
UNIQUE = "A x y\nB z w\nA y\nC x w\n"


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_repeated_tokens_give_the_events_of_unique_tokens(spark, tmp_path):
    repeated = _write(tmp_path, "repeated.txt", REPEATED)
    unique = _write(tmp_path, "unique.txt", UNIQUE)
    # each checked the same on Spark and in-process by _both
    binary = _both(spark, tmp_path, "rep-bin", [repeated], "maxent", binary=True)
    _both(spark, tmp_path, "uni", [unique], "maxent")
    counts = _both(spark, tmp_path, "rep", [repeated], "maxent")
    ev_b, f_b, _ = _dataset(str(tmp_path / f"rep-bin-{SPARK_ONLY}"), "multiclass")
    ev_u, f_u, _ = _dataset(str(tmp_path / f"uni-{SPARK_ONLY}"), "multiclass")
    ev_c, _, _ = _dataset(str(tmp_path / f"rep-{SPARK_ONLY}"), "multiclass")
    assert ev_b.to_pylist() == ev_u.to_pylist()
    assert f_b.to_pylist() == f_u.to_pylist()
    assert binary["source"]["binary"] is True and counts["source"]["binary"] is False
    # without binary the repeats are counts: x three times in the first event
    assert max(v for vs in ev_c.column("values").to_pylist() for v in vs) == 3.0


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_text_format_binarizes_on_spark_and_in_process_alike(spark, tmp_path, fmt):
    texts, test_text, options, cutoff = FORMATS[fmt]
    inputs = [_write(tmp_path, f"part{i}.txt", t) for i, t in enumerate(texts)]
    info = _both(spark, tmp_path, "train", inputs, fmt, options=options, cutoff=cutoff, binary=True)
    shape = "candidates" if fmt == "tadm" else "multiclass"
    events, _, _ = _dataset(str(tmp_path / f"train-{IN_PROCESS}"), shape)
    values = [v for vs in events.column("values").to_pylist() for v in vs]
    assert values and set(values) <= {0.0, 1.0}
    assert info["source"]["binary"] is True
    # test data prepared with the vocabulary follows it (binary=None)
    test = _write(tmp_path, "test.txt", test_text)
    vocab = str(tmp_path / f"train-{SPARK_ONLY}")
    kw = dict(options=options, vocabulary=vocab, merge_duplicates=False, require_labels=False)
    info = _both(spark, tmp_path, "test", [test], fmt, **kw)
    assert info["source"]["binary"] is True


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_table_column_kind_binarizes_on_spark_and_in_process_alike(spark, tmp_path, kind):
    df = _table(spark).cache()
    info = _both_tables(
        spark, tmp_path, prepare_table, df, "t", weight_col="w", binary=True, **KINDS[kind]
    )
    assert info["source"]["binary"] is True
    events, _, _ = _dataset(str(tmp_path / f"t-{IN_PROCESS}"), "multiclass")
    values = [v for vs in events.column("values").to_pylist() for v in vs]
    assert values and set(values) == {1.0}  # map/Vector values, negative ones too: non-zero


def test_array_repeats_prepare_as_the_distinct_array(spark, tmp_path):
    from pyspark.sql import functions as F

    df = _table(spark).cache()
    distinct = df.withColumn("names", F.array_distinct("names"))
    for name, frame, binary in (("rep", df, True), ("distinct", distinct, False)):
        out = str(tmp_path / name)
        prepare_table(spark, frame, out, features_col="names", weight_col="w", binary=binary)
    assert _dataset(str(tmp_path / "rep"), "multiclass")[0].to_pylist() == (
        _dataset(str(tmp_path / "distinct"), "multiclass")[0].to_pylist()
    )


def test_binary_against_the_vocabulary_is_refused(spark, tmp_path):
    train = _write(tmp_path, "train.txt", REPEATED)
    vocab = str(tmp_path / "vocab")
    prepare(spark, [train], vocab, "maxent", binary=True)
    with pytest.raises(InputError, match=r"prepared with binary = true.*got binary = false"):
        prepare(spark, [train], str(tmp_path / "t"), "maxent", vocabulary=vocab, binary=False)
    info = DatasetInfo.load(vocab)
    assert binary_setting(None, info, vocab) is True
    assert binary_setting(None, None, None) is False


def _combination_config():
    return load_config(
        None,
        [
            "train.method=grafting",
            "train.grafting.l1=0.01",
            "train.grafting.combination_degree=2",
            "train.standardize=false",
            f"data.in_process_max_events={IN_PROCESS}",
        ],
    )


def test_combination_features_accept_the_binarized_data(spark, tmp_path):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(6)]
    lines = []
    for _ in range(60):
        tokens = list(rng.choice(words, size=5))  # repeats within an event
        label = "A" if ("w0" in tokens) == ("w1" in tokens) else "B"  # an XOR: needs a pair
        lines.append(" ".join([label, *tokens]))
    path = _write(tmp_path, "xor.txt", "\n".join(lines) + "\n")
    cfg = _combination_config()
    counts, binary = str(tmp_path / "counts"), str(tmp_path / "binary")
    prepare(spark, [path], counts, "maxent")
    with pytest.raises(InputError, match=r"need binary values.*prepare --binary, data.binary"):
        api.train_model(spark, cfg, counts)
    prepare(spark, [path], binary, "maxent", binary=True)
    model, report = api.train_model(spark, cfg, binary)
    assert model.conjunctions is not None and len(model.conjunctions) > 0


def test_cli_binary_flag_overrides_the_config_and_the_heldout_part_follows(spark, tmp_path):
    from sparkmaxent.cli import job_main

    path = _write(tmp_path, "train.txt", REPEATED * 5)
    data = str(tmp_path / "data")
    args = ["--input", path, "--format", "maxent", "--output", data]
    assert job_main("prepare")([*args, "--binary", "--heldout-fraction", "0.25"]) == 0
    assert DatasetInfo.load(data).source["binary"] is True
    assert DatasetInfo.load(data + "-heldout").source["binary"] is True
    other = str(tmp_path / "other")
    args = ["--input", path, "--format", "maxent", "--output", other]
    assert job_main("prepare")([*args, "--set", "data.binary=true", "--no-binary"]) == 0
    assert DatasetInfo.load(other).source["binary"] is False
    assert job_main("prepare")([*args, "--set", "data.binary=true", "--overwrite"]) == 0
    assert DatasetInfo.load(other).source["binary"] is True
