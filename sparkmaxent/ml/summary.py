"""MLlib's classification summaries for ``MaxEntClassificationModel``:
``model.evaluate(df)`` and the training summary ``model.summary``, with
pyspark's metric names, computed by ``MulticlassClassificationEvaluator``
over the scored DataFrame (the DataFrame API only: classic and Connect)."""

from __future__ import annotations

from functools import cached_property


class MaxEntClassificationSummary:
    """Metrics of a model on a DataFrame, as MLlib's
    ``LogisticRegressionSummary``: ``predictions`` (the scored DataFrame),
    accuracy, weighted and per-label precision, recall, F-measure, true and
    false positive rates, and the log loss."""

    def __init__(self, predictions, model, label_col: str) -> None:
        self._predictions = predictions
        self._model = model
        self._label_col = label_col

    @property
    def predictions(self):
        """The DataFrame ``model.transform`` gave, with the label column."""
        return self._predictions

    @property
    def labelCol(self) -> str:
        return self._label_col

    @property
    def predictionCol(self) -> str:
        return self._model.getPredictionCol()

    @property
    def probabilityCol(self) -> str:
        return self._model.getProbabilityCol()

    @property
    def weightCol(self) -> str | None:
        return self._model.weight_col()

    @property
    def labels(self) -> list[float]:
        """The class indices, 0 .. numClasses - 1 (MLlib's ``labels``)."""
        return [float(k) for k in range(self._model.numClasses)]

    def _metric(self, name: str, **extra) -> float:
        from pyspark.ml.evaluation import MulticlassClassificationEvaluator

        ev = MulticlassClassificationEvaluator(
            metricName=name,  # type: ignore[arg-type]
            labelCol=self._label_col,
            predictionCol=self.predictionCol,
            probabilityCol=self.probabilityCol,
            **extra,
        )
        if self.weightCol:
            ev.setWeightCol(self.weightCol)
        return float(ev.evaluate(self._predictions))

    def _by_label(self, name: str) -> list[float]:
        return [self._metric(name, metricLabel=k) for k in self.labels]

    @cached_property
    def accuracy(self) -> float:
        return self._metric("accuracy")

    @cached_property
    def weightedPrecision(self) -> float:
        return self._metric("weightedPrecision")

    @cached_property
    def weightedRecall(self) -> float:
        return self._metric("weightedRecall")

    @cached_property
    def weightedTruePositiveRate(self) -> float:
        return self._metric("weightedTruePositiveRate")

    @cached_property
    def weightedFalsePositiveRate(self) -> float:
        return self._metric("weightedFalsePositiveRate")

    def weightedFMeasure(self, beta: float = 1.0) -> float:
        return self._metric("weightedFMeasure", beta=beta)

    @cached_property
    def logLoss(self) -> float:
        return self._metric("logLoss")

    @cached_property
    def precisionByLabel(self) -> list[float]:
        return self._by_label("precisionByLabel")

    @cached_property
    def recallByLabel(self) -> list[float]:
        return self._by_label("recallByLabel")

    @cached_property
    def truePositiveRateByLabel(self) -> list[float]:
        return self._by_label("truePositiveRateByLabel")

    @cached_property
    def falsePositiveRateByLabel(self) -> list[float]:
        return self._by_label("falsePositiveRateByLabel")

    def fMeasureByLabel(self, beta: float = 1.0) -> list[float]:
        return [self._metric("fMeasureByLabel", metricLabel=k, beta=beta) for k in self.labels]


class MaxEntTrainingSummary(MaxEntClassificationSummary):
    """The summary of the fit on its training DataFrame (MLlib's
    ``LogisticRegressionTrainingSummary``), with the run's objective history:
    the objective C(w) after each L-BFGS iteration (l2, mle, cutoff) or
    after each selection round (grafting, ifs, ...)."""

    @property
    def objectiveHistory(self) -> list[float]:
        report = self._model.report
        rows = report.get("rounds") or report.get("trace") or []
        return [float(r["objective"]) for r in rows if r.get("objective") is not None]

    @property
    def regularizationPath(self) -> list[dict]:
        """With ``l1="auto"`` (or ``l2="auto"``): every point of the held-out
        path, strongest penalty first (its penalty, held-out scores, features,
        passes; ``docs/methods/model-choice.md``); else []."""
        path = self._model.report.get("path") or {}
        return [dict(p) for p in path.get("points", [])]

    def plotRegularizationPath(self, path: str) -> str | None:
        """Write the held-out path as a PNG at ``path`` (any storage path):
        held-out score and number of non-zero weights against the penalty
        (log scale), the chosen point marked, as the command line's
        plots/path.png (``choice.heldout.write_path_plot``). Returns
        ``path``; None without matplotlib (the ``plots`` extra). Raises
        ValueError for a model fitted without an ``"auto"`` penalty."""
        from ..choice.heldout import write_path_plot

        found = self._model.report.get("path")
        if not found:
            raise ValueError(
                "plotRegularizationPath: this model was fitted without l1='auto' or "
                "l2='auto', so it has no regularization path"
            )
        parameter, points = found["parameter"], found["points"]
        return write_path_plot(
            [p[parameter] for p in points],
            [p["heldout_score"] for p in points],
            [p["features"] for p in points],
            "gamma1" if parameter == "l1" else "gamma2",
            found["chosen"],
            found.get("criterion") or "score",
            path,
        )

    @property
    def chosenRegularization(self) -> float | None:
        """The penalty the path chose on the held-out rows (gamma1 for
        ``l1="auto"``, gamma2 for ``l2="auto"``), refitted on all rows; else None."""
        path = self._model.report.get("path")
        if not path:
            return None
        return float(path["points"][path["chosen"]][path["parameter"]])

    @property
    def totalIterations(self) -> int:
        """Optimizer iterations over the whole fit (report ``iterations``)."""
        return int(self._model.report.get("iterations") or 0)


__all__ = ["MaxEntClassificationSummary", "MaxEntTrainingSummary"]
