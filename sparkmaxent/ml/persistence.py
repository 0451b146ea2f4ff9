"""MLWritable / MLReadable for the pyspark.ml models over the project's
model format.

A saved model directory holds pyspark.ml's ``metadata/`` (class, uid,
Params, and the label mapping), written and read by pyspark's
``DefaultParamsWriter`` / ``DefaultParamsReader`` so that a ``PipelineModel``
holding the model saves and loads it like any Python stage; ``model/``, the
project's JSON + Parquet model (``MaxentModel.save``, published atomically
through ``sparkmaxent.storage``); and ``report.json``, the run report.
"""

from __future__ import annotations

from typing import Any

from pyspark.ml.util import (
    DefaultParamsReader,
    DefaultParamsWriter,
    MLReadable,
    MLReader,
    MLWritable,
    MLWriter,
)

from .. import storage
from ..jsonio import json_default

MODEL_DIR = "model"
REPORT_FILE = "report.json"


def path_exists(path: str):
    """pyspark's error for saving over an existing path without overwrite
    (``AnalysisException`` PATH_ALREADY_EXISTS, as ``DefaultParamsWriter``
    raises it for every Python stage)."""
    from pyspark.errors import AnalysisException

    return AnalysisException(
        message=f"[PATH_ALREADY_EXISTS] Path {path} already exists. To overwrite it, "
        "use write().overwrite().save(path). SQLSTATE: 42K04",
        errorClass="PATH_ALREADY_EXISTS",
        messageParameters={"outputPath": path},
    )


class MaxEntWriter(MLWriter):
    """Writes a model with ``extra_metadata()`` and ``maxentModel``."""

    def __init__(self, instance) -> None:
        super().__init__()
        self.instance = instance

    def _handleOverwrite(self, path: str) -> None:
        """Remove ``path`` through ``sparkmaxent.storage``: pyspark's own
        overwrite calls the JVM, which a Spark Connect client has not."""
        storage.delete(path)

    def saveImpl(self, path: str) -> None:
        if storage.exists(path):
            raise path_exists(path)
        storage.mkdirs(storage.split(path)[0])
        try:
            self.instance.maxentModel.save(storage.join(path, MODEL_DIR), overwrite=True)
            storage.write_json(
                storage.join(path, REPORT_FILE), self.instance.report, default=json_default
            )
            # last: pyspark's metadata makes the directory a loadable model
            DefaultParamsWriter.saveMetadata(
                self.instance, path, self.sparkSession, extraMetadata=self.instance.extra_metadata()
            )
        except BaseException:
            storage.delete(path)  # a failed save leaves nothing (the path was new)
            raise
        self.instance._storage_path = path  # its own storage (ml/mllib_stored.py)


class MaxEntReader(MLReader):
    """Reads what :class:`MaxEntWriter` wrote into an instance of ``cls``."""

    def __init__(self, cls) -> None:
        super().__init__()
        self.cls = cls

    def load(self, path: str):
        from ..model import MaxentModel

        meta = DefaultParamsReader.loadMetadata(path, self.sparkSession)
        maxent = MaxentModel.load(storage.join(path, MODEL_DIR))
        report_path = storage.join(path, REPORT_FILE)
        report = storage.read_json(report_path) if storage.exists(report_path) else {}
        instance = self.cls.from_saved(maxent, meta, report)
        instance._session = self.sparkSession
        instance._storage_path = path
        instance._resetUid(meta["uid"])
        DefaultParamsReader.getAndSetParams(instance, meta)
        return instance


class MaxEntWritable(MLWritable):
    #: the session that fitted or loaded the model (classic or Spark Connect)
    _session: Any = None
    #: the path the model was saved to or loaded from, if any
    _storage_path: str | None = None

    def spark_session(self):
        """The session that fitted or loaded this model, else the active one:
        a model made under Spark Connect keeps its Connect session."""
        from pyspark.sql import SparkSession

        return self._session if self._session is not None else SparkSession.active()

    def write(self) -> MLWriter:
        writer = MaxEntWriter(self)
        return writer if self._session is None else writer.session(self._session)

    def extra_metadata(self) -> dict[str, Any]:
        raise NotImplementedError


class MaxEntReadable(MLReadable):
    @classmethod
    def read(cls) -> MLReader:
        return MaxEntReader(cls)


__all__ = ["MaxEntWriter", "MaxEntReader", "MaxEntWritable", "MaxEntReadable"]
