"""MLlib's model through storage (ml/mllib_stored.py), the route transform
takes under Spark Connect, run here in a classic session (whose
``LogisticRegressionModel.load`` reads the same files): written under the
model's checkpointDir, config['output.scratch_dir'] or beside its saved
path, loaded, the written files removed, kept on the model; it scores as
the Arrow scorer to 1e-12 (with and without thresholds, which are not
saved); with no location the error says what to set. Under a Connect
server: tests/spark/test_connect_ml.py."""

from __future__ import annotations

import os

import pytest

from sparkmaxent.ml.mllib import NotMLlib, save_mllib
from sparkmaxent.ml.mllib_stored import scratch_base, stored_mllib_model

from .test_sql_mllib import _equal_to_arrow, _no_python, planted  # noqa: F401 (fixture)


def _stored(model, size):
    """The route transform takes under Connect (ml/mllib.py's mllib_model)."""
    return stored_mllib_model(
        model, size, lambda path: save_mllib(model, path, size, thresholds=False)
    )


def _listing(path) -> list[str]:
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def test_written_under_checkpoint_dir_loaded_removed_and_kept(planted, tmp_path):  # noqa: F811
    _, vectors, size, model = planted
    model = model.copy()
    model._mllib = None
    work = tmp_path / "work"
    model.setCheckpointDir(str(work))
    assert scratch_base(model, model.spark_session()) == (str(work), "")
    lr = _stored(model, size)
    assert _listing(work) == []  # the written model is removed once loaded
    assert (lr.numClasses, lr.numFeatures) == (3, size)
    assert not lr.isSet(lr.thresholds)
    assert _stored(model, size) is lr  # kept: written once
    present = vectors.where("features IS NOT NULL")
    lr.setFeaturesCol("features")
    got = _equal_to_arrow(model, present, lr.transform(present))
    _no_python(got)
    # thresholds are the caller's to set on the loaded model (ml/mllib.py sets them)
    tilted = model.copy({model.thresholds: [1.0, 2.0, 0.5]})
    lr.setThresholds([1.0, 2.0, 0.5])
    _equal_to_arrow(tilted, present, lr.transform(present))
    lr.clear(lr.thresholds)
    assert _stored(model, size + 1) is not lr  # another size


def test_location_order_and_the_error_without_one(planted, tmp_path):  # noqa: F811
    _, _, size, model = planted
    model = model.copy()
    model._mllib = None

    class Remote:
        """A session whose Spark runs on a cluster (not a local master)."""

        class conf:
            @staticmethod
            def get(key, default=None):
                return "yarn" if key == "spark.master" else default

    with pytest.raises(NotMLlib, match="checkpointDir"):
        scratch_base(model, Remote())
    scratch = str(tmp_path / "scratch")
    configured = model.copy({model.config: {"output.scratch_dir": scratch}})
    assert scratch_base(configured, Remote()) == (scratch, "")
    saved = str(tmp_path / "saved")
    model.write().save(saved)
    assert scratch_base(model, Remote()) == ("", saved)  # beside its own storage
    assert scratch_base(model.copy({model.checkpointDir: "/c"}), Remote()) == ("/c", "")
    lr = _stored(model, size)
    assert lr.numFeatures == size
    assert sorted(os.listdir(tmp_path)) == ["saved"]  # the hidden sibling is gone
    fresh = model.copy()
    fresh._storage_path, fresh._mllib = None, None
    assert scratch_base(fresh, model.spark_session()) == ("", "")  # local master: temp dir


def test_a_location_that_cannot_be_written_is_named(planted, tmp_path):  # noqa: F811
    _, _, size, model = planted
    model = model.copy()
    model._mllib = None
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    model.setCheckpointDir(str(blocked))
    with pytest.raises(NotMLlib, match="checkpointDir"):
        _stored(model, size)


class _Client:
    def __init__(self):
        self.deleted: list[list[str]] = []

    def _delete_ml_cache(self, ids):
        self.deleted.append(list(ids))


class _Held:
    """A pyspark model held on a Connect server: its ``_java_obj`` a RemoteModelRef."""

    def __init__(self, ref_id: str):
        from pyspark.ml.util import RemoteModelRef

        self._java_obj = RemoteModelRef(ref_id)


def test_server_models_are_forgotten_at_exit(monkeypatch):
    """At exit the finalizers of models built on the server send nothing:
    pyspark's own exit hook releases the session's model cache, and a
    finalizer's call at interpreter shutdown waited forever (a Connect script
    that never called spark.stop() hung after its last line). Before the hook
    a release still deletes the server copy, as pyspark does."""
    from pyspark.sql.connect.session import SparkSession

    from sparkmaxent.ml import mllib_stored

    client = _Client()
    monkeypatch.setattr(
        SparkSession, "getActiveSession", classmethod(lambda cls: type("S", (), {"client": client}))
    )
    before, after = _Held("model-a"), _Held("model-b")
    for held in (before, after):
        assert mllib_stored.released_at_exit(held) is held
    before._java_obj.release_ref()
    assert client.deleted == [["model-a"]]
    mllib_stored._forget_server_refs()  # what atexit runs
    after._java_obj.release_ref()  # the finalizer's call at shutdown
    assert client.deleted == [["model-a"]]
    assert not mllib_stored._SERVER_REFS
    assert mllib_stored.released_at_exit(object()) is not None  # a classic model: not held
    assert not mllib_stored._SERVER_REFS
