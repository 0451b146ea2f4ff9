"""How a ``MaxEntClassificationModel`` scores a DataFrame: the route
``transform`` takes for each features column kind.

- A ``Vector`` column with a known size: MLlib's own
  ``LogisticRegressionModel`` built from the model (ml/mllib.py; under
  Spark Connect loaded on the server, ml/mllib_stored.py).
- An ``array<string>`` column: the tokens through MLlib's
  ``CountVectorizerModel`` over the model's vocabulary, then that
  logistic model over its Vectors (ml/mllib_text.py) when
  :attr:`MaxEntScoring.text_route` is ``"mllib"``.
- Otherwise (a ``map`` column, a model with no MLlib form, no Vector
  size, no location under Connect): Spark SQL expressions under Spark
  Connect (ml/sql.py: the server's Python workers may not have this
  package, SQL needs none), else the Arrow UDF (ml/scoring.py).

Every route adds rawPrediction, probability and prediction (with the
class names as nominal metadata) after the input columns, with equal
values (the tests check each against the Arrow scorer).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..data.columns import ARRAY, VECTOR, feature_kind, names_and_values
from .base import refuse_existing_columns, scoring_binary
from .mllib import checked_size, mllib_transform
from .mllib_text import text_transform
from .scoring import Scorer, score_column

#: the temporary column the Arrow UDF scores into
_SCORES = "__sparkmaxent_scores"


class MaxEntScoring:
    """``scorer``, the ``scoring`` choice and the scored DataFrame of a
    ``MaxEntClassificationModel`` (module docstring)."""

    #: how ``transform`` scores: "auto" (the default: the routes of ml/transform.py's
    #: docstring), "mllib" (MLlib's models for a Vector or array<string> column, or
    #: NotMLlib naming why not), "arrow" (ml/scoring.py) or "sql" (Spark SQL expressions,
    #: no Python worker, every features column kind; conjunction features fall back to
    #: "arrow")
    scoring = "auto"
    #: the route of "auto" for an array<string> column in a classic session: "mllib"
    #: (ml/mllib_text.py) or "arrow"
    text_route = "mllib"

    def scorer(self: Any) -> Scorer:
        thresholds = self.getThresholds() if self.isDefined(self.thresholds) else None
        if thresholds is not None:
            from pyspark.errors import IllegalArgumentException

            t = np.asarray(thresholds, dtype=np.float64)
            if len(t) != self._n_classes or np.any(t < 0) or np.sum(t == 0) > 1:
                raise IllegalArgumentException(
                    message=f"requirement failed: thresholds {list(thresholds)} must have "
                    f"numClasses = {self._n_classes} entries >= 0, at most one of them 0"
                )
        return Scorer.of(
            self.maxentModel,
            self._classes,
            self._n_classes,
            None if thresholds is None else np.asarray(thresholds, dtype=np.float64),
            binary=scoring_binary(self),
        )

    def uses_sql(self: Any, scorer: Scorer, spark=None) -> bool:
        """Whether ``transform`` scores in SQL: a model with a linear form (no
        conjunctions; standardization folded in) and ``scoring == "sql"``, or
        ``"auto"`` in a Spark Connect session ``spark`` (default: the
        model's; the server's Python workers may not have this package, SQL
        needs none)."""
        from ..session_kind import is_connect

        wanted = self.scoring == "sql" or (
            self.scoring == "auto" and is_connect(spark or self.spark_session())
        )
        return wanted and scorer.compact is not None

    def uses_mllib_text(self: Any) -> bool:
        """Whether ``transform`` tries MLlib's vectoriser and model on an
        ``array<string>`` column: ``scoring == "mllib"``, or ``"auto"`` with
        ``text_route == "mllib"`` (classic or Spark Connect)."""
        return self.scoring == "mllib" or (self.scoring == "auto" and self.text_route == "mllib")

    def _mllib_scored(self: Any, dataset, col: str, kind: str, size: int | None):
        """``dataset`` scored by MLlib's models (every output column added),
        or None where that route does not apply (module docstring); ``size``:
        a Vector column's checked size."""
        required = self.scoring == "mllib"
        if kind == VECTOR and self.scoring in ("auto", "mllib"):
            return mllib_transform(self, dataset, col, size, required)
        if kind == ARRAY and self.uses_mllib_text():
            return text_transform(self, dataset, col, required)
        return None

    def _scored(self: Any, dataset):
        """``dataset`` with the output columns (``_transform``)."""
        from pyspark.ml.functions import array_to_vector
        from pyspark.sql import functions as F

        from .sql import sql_scored

        outputs = {
            param: self.getOrDefault(param)
            for param in (self.rawPredictionCol, self.probabilityCol, self.predictionCol)
            if self.getOrDefault(param)
        }
        refuse_existing_columns(dataset, outputs.values())
        where, col = "transform input", self.getFeaturesCol()
        kind = feature_kind(dataset, where, col)
        scorer = self.scorer()
        fields: dict[str, str] = {}
        drop: list[str] = []
        # a Vector column of another size is refused by every route
        size = checked_size(dataset, col, self._vector_size) if kind == VECTOR else None
        scored = self._mllib_scored(dataset, col, kind, size)  # MLlib adds the outputs
        if scored is None and self.uses_sql(scorer, dataset.sparkSession):
            tables = self.sql_tables(scorer, kind)
            scored, fields, drop = sql_scored(scorer, dataset, col, kind, tables)
        elif scored is None:
            names, values = names_and_values(dataset, where, col)
            binary = kind == ARRAY  # values all 1.0: not shipped
            scored = dataset.withColumn(
                _SCORES, score_column(scorer, names, None if binary else values)
            )
            fields = {k: f"{_SCORES}.{k}" for k in ("raw", "probability", "prediction")}
            drop = [_SCORES]
        columns = {}
        for param, name in outputs.items() if fields else ():
            if param == self.predictionCol:
                columns[name] = F.col(fields["prediction"])
            else:
                field = "raw" if param == self.rawPredictionCol else "probability"
                columns[name] = array_to_vector(F.col(fields[field]))
        scored = (scored.withColumns(columns) if columns else scored).drop(*drop)  # none: MLlib's
        for param in (self.rawPredictionCol, self.probabilityCol):  # as MLlib's own columns
            if param in outputs:
                scored = scored.withMetadata(
                    outputs[param], {"ml_attr": {"num_attrs": self._n_classes}}
                )
        if self.predictionCol in outputs:  # nominal, so IndexToString needs no labels=
            name = outputs[self.predictionCol]
            meta = {"ml_attr": {"type": "nominal", "name": name, "vals": self.labels}}
            # withMetadata: Connect's WithColumns drops an inner alias(metadata=)'s metadata
            scored = scored.withMetadata(name, meta)
        return scored


__all__ = ["MaxEntScoring"]
