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

from pyspark.ml import Estimator

from .. import registry
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
    #: the held-out rows an 'auto' penalty is chosen on, prepared with train_dir's dictionary
    heldout_dir: str = ""


def refuse_existing_columns(dataset, names) -> None:
    """MLlib's refusal to overwrite a column: transform adds its output
    columns, and one already in ``dataset`` is an IllegalArgumentException."""
    from pyspark.errors import IllegalArgumentException

    present = set(dataset.columns)
    for name in names:
        if name in present:
            raise IllegalArgumentException(
                message=f"requirement failed: Column {name} already exists."
            )


def trained_binary(maxent: MaxentModel) -> bool:
    """Whether ``maxent`` was trained on binary predicates (its saved
    configuration's ``data.binary``; ``prepare(binary=True)``)."""
    return bool(maxent.config.get("data", {}).get("binary", False))


def scoring_binary(model) -> bool:
    """Whether a fitted model scores presence (``indexing.presence``) rather
    than counts: as its training data was prepared. A ``binary`` Param set
    otherwise on the model would score features unlike its training data,
    so it is refused, naming the Param."""
    trained = trained_binary(model.maxentModel)
    if model.isSet(model.binary) and model.getOrDefault(model.binary) != trained:
        raise ConfigError(
            f"binary: the model was trained with binary = {str(trained).lower()} and scores "
            f"its features the same way; got binary = {str(not trained).lower()} "
            "(refit to change it)"
        )
    return trained


class MaxEntEstimator(Estimator, TrainingParams):
    """An estimator over a prepared dataset. Subclasses prepare the
    DataFrame (:meth:`_prepare_into`) and wrap the trained model
    (:meth:`_model`); :meth:`_data_params` are the Params that change what
    is prepared."""

    _input_kwargs: dict[str, Any]

    def __init__(self) -> None:
        super().__init__()

    # ---- what subclasses provide ----------------------------------------
    def _prepare_into(
        self, spark, dataset, train_dir: str, cfg: Config, vocabulary: str | None = None
    ) -> dict:
        """Prepare ``dataset`` into ``train_dir`` (with ``vocabulary``: as
        held-out data, over that dataset's dictionary, unmerged)."""
        raise NotImplementedError

    def _validation_split(self, dataset) -> tuple:
        """(training rows, held-out rows) an 'auto' penalty is chosen on."""
        raise NotImplementedError

    def _model(self, maxent: MaxentModel, report: dict, extra: dict):
        raise NotImplementedError

    def _data_params(self) -> tuple:
        """Params that change what ``fit`` prepares (``config`` may hold data keys)."""
        return (self.featuresCol, self.weightCol, self.binary, self.checkpointDir, self.config)

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
        glmnet's paths are (Friedman et al. 2010, section 2.5; choice/path.py):
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
                and registry.method(cfg.train.method).warm_start
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
            train_dir, heldout_dir = f"{work}/train", ""
            if self.auto_penalty() is None:
                extra = self._prepare_into(spark, dataset, train_dir, cfg)
            else:
                train_part, heldout_part = self._validation_split(dataset)
                heldout_dir = f"{work}/heldout"
                extra = self._prepare_into(spark, train_part, train_dir, cfg)
                self._prepare_into(spark, heldout_part, heldout_dir, cfg, vocabulary=train_dir)
            yield Prepared(spark, train_dir, {**extra, "dataset": dataset}, heldout_dir)

    def _train(self, prepared: Prepared, start: Weights | None = None):
        """Train this estimator's configuration on a prepared dataset with
        ``api.train_model``, from ``start`` (grafting's warm start) if given."""
        from .. import api

        maxent, report = api.train_model(
            prepared.spark,
            self.training_config(),
            prepared.train_dir,
            prepared.heldout_dir,
            warm_start=start,
        )
        # the scratch dictionary goes away: the model's vocabulary is its used features
        maxent = dataclasses.replace(maxent, dictionary="")
        model = self._copyValues(self._model(maxent, report.to_json(), prepared.extra))
        model._set(binary=trained_binary(maxent))  # also when given as config['data.binary']
        model._session = prepared.spark  # the dataset's session, classic or Connect
        return model


__all__ = [
    "MaxEntEstimator",
    "Prepared",
    "refuse_existing_columns",
    "scoring_binary",
    "trained_binary",
]
