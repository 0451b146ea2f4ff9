"""Spark Connect rules that need no server: which URL a run connects to,
how a Connect session is told apart, its default parallelism, the storage
refusal of non-local URIs, and the backend the factory refuses."""

from __future__ import annotations

import pytest

from sparkmaxent.backends import factory
from sparkmaxent.backends.session import REMOTE_ENV, remote_url
from sparkmaxent.errors import ConfigError, InputError
from sparkmaxent.session_kind import default_parallelism, is_connect
from sparkmaxent.storage import fs


class _Conf:
    def __init__(self, values: dict):
        self.values = values

    def get(self, key, default=None):
        return self.values.get(key, default)


def _connect_like(conf: dict):
    """An object whose class lives in pyspark.sql.connect, as a Connect
    session's does."""
    cls = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})
    session = cls()
    session.conf = _Conf(conf)
    return session


def test_remote_url_prefers_the_given_url_over_the_environment(monkeypatch):
    monkeypatch.delenv(REMOTE_ENV, raising=False)
    assert remote_url(None) is None and remote_url("") is None
    monkeypatch.setenv(REMOTE_ENV, "sc://127.0.0.1:15002")
    assert remote_url(None) == "sc://127.0.0.1:15002"
    assert remote_url("sc://127.0.0.1:16000") == "sc://127.0.0.1:16000"


def test_a_connect_session_is_told_by_its_class():
    assert is_connect(_connect_like({}))
    assert not is_connect(object())


def test_connect_default_parallelism_comes_from_the_settings():
    assert default_parallelism(_connect_like({"spark.default.parallelism": "6"})) == 6
    assert default_parallelism(_connect_like({"spark.sql.shuffle.partitions": "3"})) == 3
    assert default_parallelism(_connect_like({})) == 8


def test_storage_under_connect_refuses_remote_uris_naming_the_limitation(monkeypatch):
    monkeypatch.setattr(fs, "connect_active", lambda: True)
    with pytest.raises(InputError, match="under Spark Connect the client has no Hadoop"):
        fs.LocalFS().exists("hdfs://namenode/data/train")
    assert fs.LocalFS().qualify("file:///tmp/x") == "file:///tmp/x"  # local paths work
    monkeypatch.setattr(fs, "connect_active", lambda: False)
    with pytest.raises(InputError, match="needs the Hadoop FileSystem of a running Spark"):
        fs.LocalFS().exists("hdfs://namenode/data/train")


def test_the_rdd_backend_is_refused_under_connect():
    with pytest.raises(ConfigError, match="spark-rdd needs a classic Spark session"):
        factory.make_backend("spark-rdd", "/nonexistent", spark=_connect_like({}))


def test_a_model_saved_under_connect_to_a_remote_fs_is_refused_before_writing(monkeypatch):
    from sparkmaxent import storage
    from sparkmaxent.ml import MaxEntClassificationModel
    from sparkmaxent.ml.persistence import MaxEntWriter

    monkeypatch.setattr(storage, "filesystem", fs.LocalFS)
    monkeypatch.setattr(fs, "connect_active", lambda: True)
    writer = MaxEntWriter(MaxEntClassificationModel())
    with pytest.raises(InputError, match="under Spark Connect the client has no Hadoop"):
        writer.save("hdfs://namenode/models/m")
    with pytest.raises(InputError, match="under Spark Connect the client has no Hadoop"):
        writer.overwrite().save("s3a://bucket/models/m")


def test_a_model_is_not_saved_over_an_existing_path_without_overwrite(tmp_path, monkeypatch):
    from pyspark.errors import AnalysisException

    from sparkmaxent import storage
    from sparkmaxent.ml import MaxEntClassificationModel

    monkeypatch.setattr(storage, "filesystem", fs.LocalFS)
    (tmp_path / "m").mkdir()
    with pytest.raises(AnalysisException, match="PATH_ALREADY_EXISTS.*write\\(\\).overwrite\\(\\)"):
        MaxEntClassificationModel().write().save(str(tmp_path / "m"))
