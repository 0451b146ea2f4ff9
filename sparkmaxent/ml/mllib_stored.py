"""MLlib's ``LogisticRegressionModel`` for a Spark Connect client, built
on the server through storage.

A Connect client reaches no JVM, and pyspark's Connect
``LogisticRegressionModel`` has no constructor from coefficients: only
``fit`` and ``load`` make one on the server. So under Connect the model's
MLlib form (``ml/mllib.py``: the same rawPrediction, probability and
prediction) is written once in MLlib's saved-model layout with DataFrame
writers (``save_mllib``), loaded with ``LogisticRegressionModel.load``
(the server reads it whole into its own model cache) and the written
files removed right away; the loaded model is kept on the
``MaxEntClassificationModel`` for later transforms, under the model's
weights, the Vector size and the session (a server's model belongs to its
session).

Where it is written (a path every executor of the cluster reaches, through
``sparkmaxent.storage``, so ``hdfs://``, ``s3a://``, ``abfss://`` and
``dbfs:/`` work; never the client's disk unless Spark runs on this host's
local master): a fresh directory under the model's ``checkpointDir``, else
under its ``config['output.scratch_dir']``, else a hidden sibling of the
path the model was saved to or loaded from (its own storage), else, for a
local master, the temporary directory ``fit`` prepares in. With none of
these, :class:`NotMLlib` says how to give one.
"""

from __future__ import annotations

import atexit
import logging
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from .. import storage

log = logging.getLogger(__name__)


class NotMLlib(ValueError):
    """The model has no exact MLlib ``LogisticRegressionModel`` form (or,
    under Spark Connect, no location to build it from: ml/mllib.py)."""


#: the name of the saved MLlib model inside its scratch directory
SAVED = "mllib"


def local_master(spark) -> bool:
    """Whether the Connect ``spark``'s server runs Spark on a local master
    (its executors share the host's disk)."""
    return str(spark.conf.get("spark.master", "") or "").startswith("local")


def scratch_base(model, spark) -> tuple[str, str]:
    """(scratch directory, hidden sibling of) where the MLlib form of
    ``model`` is written under the Connect session ``spark``: exactly one
    of the two is non-empty (module docstring gives the order); ("", "")
    for a local master's temporary directory; NotMLlib naming the Params
    to set when there is no location."""
    base = model.getOrDefault(model.checkpointDir) or ""
    base = base or str(dict(model.getOrDefault(model.config) or {}).get("output.scratch_dir", ""))
    if base:
        return base, ""
    own = getattr(model, "_storage_path", None)
    if own:
        return "", own
    if local_master(spark):
        return "", ""
    raise NotMLlib(
        "under Spark Connect MLlib's model is built on the server from files: set the "
        "model's checkpointDir (or config['output.scratch_dir']) to a directory the cluster "
        "writes (hdfs://, s3a://, abfss://, dbfs:/), or save the model first (its own storage)"
    )


@contextmanager
def scratch_dir(model, spark) -> Iterator[str]:
    """A fresh directory (not created) at :func:`scratch_base`'s location,
    removed with what it holds on exit."""
    base, near = scratch_base(model, spark)
    if base or near:
        with storage.scratch(near, base) as path:
            yield path
        return
    path = storage.local_temp_dir("sparkmaxent-mllib-")
    try:
        yield path
    finally:
        storage.delete(path)


def stored_mllib_model(model, num_features: int, save, slot: str = "_mllib"):
    """``model``'s MLlib ``LogisticRegressionModel`` for Vectors of size
    ``num_features`` under its Connect session: written by ``save(path)``
    (ml/mllib.py's ``save_mllib``) and loaded on first use (module
    docstring), then the one kept on the model (in its attribute ``slot``:
    one per kind of Vector, ml/mllib_text.py keeps another). Its column Params and
    thresholds are the caller's to set; ``save`` writes none, so a model
    whose thresholds change later needs no other."""
    from pyspark.ml.classification import LogisticRegressionModel

    spark = model.spark_session()
    key = (id(model.maxentModel), num_features, getattr(spark, "session_id", id(spark)))
    cached = getattr(model, slot, None)
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        with scratch_dir(model, spark) as work:
            path = storage.join(work, SAVED)
            save(path)
            loaded = LogisticRegressionModel.load(path)
    except NotMLlib:
        raise
    except Exception as e:  # the storage layer's or the server's, naming the path
        log.warning("MLlib's model could not be written and loaded on the server: %s", e)
        raise NotMLlib(
            f"MLlib's model could not be written and loaded on the server ({e}); set the "
            "model's checkpointDir to a directory the cluster writes"
        ) from e
    setattr(model, slot, (key, released_at_exit(loaded)))
    return loaded


#: the server-side references of the models built here, still alive
_SERVER_REFS: weakref.WeakSet = weakref.WeakSet()


def released_at_exit(server_model):
    """``server_model`` (a pyspark model held on the Connect server), its
    reference forgotten when the process exits. pyspark's Connect client
    deletes a model's server copy from the model's finalizer; at interpreter
    shutdown that call waits for gRPC threads that are gone, so a script
    that never called ``spark.stop()`` hung after its last line. The
    session's whole model cache is released by pyspark's own exit hook
    (the client's ``_on_exit``, registered before ours, so run after it),
    so the finalizers have nothing left to do."""
    ref = getattr(server_model, "_java_obj", None)
    if ref is not None and hasattr(ref, "_ref_id"):  # a RemoteModelRef
        atexit.unregister(_forget_server_refs)  # once, and after the client's own hook
        atexit.register(_forget_server_refs)
        _SERVER_REFS.add(ref)
    return server_model


def _forget_server_refs() -> None:
    """At exit: the finalizers of the models built here delete nothing
    (``del_remote_cache`` skips a reference without an id)."""
    for ref in list(_SERVER_REFS):
        ref._ref_id = None
    _SERVER_REFS.clear()


__all__ = [
    "NotMLlib",
    "scratch_base",
    "scratch_dir",
    "stored_mllib_model",
    "local_master",
    "released_at_exit",
]
