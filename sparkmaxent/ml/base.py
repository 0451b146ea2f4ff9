"""What the estimators share: fit = prepare the DataFrame into a scratch
directory, then train it with ``api.train_model`` (the code ``sparkmaxent
train`` runs); fitMultiple prepares once for a whole grid and warm-starts
grafting down a descending gamma1 grid."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pyspark import keyword_only
from pyspark.ml import Estimator

from ..config import Config, ConfigError, digest
from ..kernels import Weights
from ..model import MaxentModel
from .params import TrainingParams


@dataclass
class Prepared:
    """A training DataFrame prepared for ``api.train_model`` (``train_dir``),
    with what the model needs besides the weights (``extra``)."""

    spark: Any
    train_dir: str
    extra: dict = field(default_factory=dict)


class MaxEntEstimator(Estimator, TrainingParams):
    """An estimator over a prepared dataset. Subclasses prepare the
    DataFrame (:meth:`_prepare_into`) and wrap the trained model
    (:meth:`_model`); :meth:`_data_params` are the Params that change what
    is prepared."""

    _input_kwargs: dict[str, Any]

    @keyword_only
    def __init__(self, **kwargs) -> None:
        super().__init__()
        self._set(**self._input_kwargs)

    @keyword_only
    def setParams(self, **kwargs):
        return self._set(**self._input_kwargs)

    def setMethod(self, value: str):
        return self._set(method=value)

    def setRegParam(self, value: float):
        return self._set(regParam=value)

    def setElasticNetParam(self, value: float):
        return self._set(elasticNetParam=value)

    def setL1(self, value: float):
        return self._set(l1=value)

    def setL2(self, value: float):
        return self._set(l2=value)

    def setNBest(self, value: int):
        return self._set(nBest=value)

    def setConfig(self, value: dict):
        return self._set(config=value)

    def setFeaturesCol(self, value: str):
        return self._set(featuresCol=value)

    def setWeightCol(self, value: str):
        return self._set(weightCol=value)

    # ---- what subclasses provide ----------------------------------------
    def _prepare_into(self, spark, dataset, train_dir: str, cfg: Config) -> dict:
        raise NotImplementedError

    def _model(self, maxent: MaxentModel, report: dict, extra: dict):
        raise NotImplementedError

    def _data_params(self) -> tuple:
        """Params that change what ``fit`` prepares (``config`` may hold data keys)."""
        return (self.featuresCol, self.weightCol, self.checkpointDir, self.config)

    def weight_col(self) -> str | None:
        return (
            (self.getOrDefault(self.weightCol) or None) if self.isDefined(self.weightCol) else None
        )

    # ---- fitting ---------------------------------------------------------
    def _fit(self, dataset):
        with self._prepared(dataset) as prepared:
            return self._train(prepared)

    def fitMultiple(self, dataset, paramMaps):
        """One model per param map (CrossValidator, TrainValidationSplit),
        all trained on one preparation of ``dataset`` when the maps change
        training Params only."""
        from pyspark.ml.base import _FitMultipleIterator

        self.grid_configs(paramMaps)  # a bad point is refused before any fit
        names = {p.name for p in self._data_params()}
        if any(p.name in names for pm in paramMaps for p in pm):
            return super().fitMultiple(dataset, paramMaps)
        with self._prepared(dataset) as prepared:
            models = self._train_grid(prepared, paramMaps)
        return _FitMultipleIterator(lambda i: models[i], len(models))

    def grid_configs(self, paramMaps) -> list[Config]:
        """The Config of each param map; the first one that cannot be
        trained (a Param its method does not read, ...) is an error naming
        the map, before anything is fitted."""
        configs = []
        for i, pm in enumerate(paramMaps):
            try:
                configs.append(self.copy(pm).training_config())
            except ConfigError as e:
                shown = {p.name: v for p, v in pm.items()}
                raise ConfigError(f"param map {i} {shown}: {e}") from e
        return configs

    def _train_grid(self, prepared: Prepared, paramMaps) -> list:
        """A model per param map. With warmStart, grafting points whose
        configurations differ only in gamma1 (and elastic_l2, n_best) are fitted
        strongest gamma1 first, each from the previous point's weights, as
        glmnet's paths are (Friedman et al. 2010, section 2.5; selection/path.py):
        the l1 optimum of each point is the same, reached in fewer passes."""
        estimators = [self.copy(pm) for pm in paramMaps]
        configs = self.grid_configs(paramMaps)
        order = sorted(range(len(configs)), key=lambda i: -configs[i].train.grafting.l1)
        models: list = [None] * len(configs)
        previous: tuple[str, Weights] | None = None
        for i in order:
            cfg, est = configs[i], estimators[i]
            rest = digest(cfg, exclude=("l1", "elastic_l2", "n_best"))
            warm = (
                est.getOrDefault(est.warmStart)
                and cfg.train.method == "grafting"
                and cfg.train.grafting.combination_degree == 1
                and not cfg.train.choice.path
            )
            start = previous[1] if warm and previous and previous[0] == rest else None
            models[i] = est._train(prepared, start)
            previous = (rest, models[i].maxentModel.weights) if warm else None
        return models

    @contextmanager
    def _prepared(self, dataset) -> Iterator[Prepared]:
        """``dataset`` prepared into a scratch directory under checkpointDir
        (else output.scratch_dir, else the driver's temporary directory, for
        a local master only), removed on exit."""
        from .. import api

        cfg = self.training_config()
        spark = dataset.sparkSession
        scratch = dataclasses.replace(
            cfg.output, scratch_dir=self.getOrDefault(self.checkpointDir) or cfg.output.scratch_dir
        )
        with api.scratch_for(spark, dataclasses.replace(cfg, output=scratch), None) as work:
            train_dir = f"{work}/train"
            extra = self._prepare_into(spark, dataset, train_dir, cfg)
            yield Prepared(spark, train_dir, extra)

    def _train(self, prepared: Prepared, start: Weights | None = None):
        """Train this estimator's configuration on a prepared dataset with
        ``api.train_model``, from ``start`` (grafting's warm start) if given."""
        from .. import api

        maxent, report = api.train_model(
            prepared.spark, self.training_config(), prepared.train_dir, warm_start=start
        )
        # the scratch dictionary goes away: the model's vocabulary is its used features
        maxent = dataclasses.replace(maxent, dictionary="")
        model = self._copyValues(self._model(maxent, report, prepared.extra))
        model._session = prepared.spark  # the dataset's session, classic or Connect
        return model


__all__ = ["MaxEntEstimator", "Prepared"]
