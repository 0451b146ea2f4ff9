"""The Params of the pyspark.ml estimators, checked by the configuration
schema (config/schema.py) and mapped onto one :class:`Config`.

Each training Param stands for one schema key (``nBest`` is
``train.grafting.n_best``, ...): setting it checks the value with that key's
type and rule, so a bad value fails when it is set, with the Param and the
key named. ``config`` passes any other key by its dotted name
(``{"train.ifs.gain_prior_variance": 2.0}``), checked by building the
configuration. ``regParam`` and ``elasticNetParam`` mean what they mean in
MLlib's ``LogisticRegression`` (:func:`penalty_keys`).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import (
    HasFeaturesCol,
    HasLabelCol,
    HasPredictionCol,
    HasProbabilityCol,
    HasRawPredictionCol,
    HasThresholds,
    HasValidationIndicatorCol,
    HasWeightCol,
)

from .. import registry
from ..config import Config, ConfigError, config_from_dict
from ..config.load import SECTIONS
from ..config.rules import Rule, check_value, default_of, rule_of

#: training Param -> the schema key it stands for
SCHEMA_PARAMS = {
    "method": "train.method",
    "l1": "train.grafting.l1",
    "l2": "train.l2",
    "nBest": "train.grafting.n_best",
    "maxRounds": "train.selection.max_rounds",
    "maxFeatures": "train.selection.max_features",
    "standardization": "train.standardize",
    "tol": "train.gtol",
    "maxIter": "train.max_iter",
    "binary": "data.binary",
}
#: the ``method`` Param's default: the method MLlib's LogisticRegression
#: reads regParam and elasticNetParam as (:func:`chosen_method`)
AUTO = "auto"
#: Params that only some methods read -> those methods (their registry
#: entries' ``ml_params``); set with any other method, ``fit`` refuses them
#: (no Param is silently ignored)
USED_BY = {name: registry.reading(name) for name in registry.ML_PARAMS}


def schema_field(dotted: str):
    """(default, Rule) of a schema key given by its dotted name."""
    section, _, name = dotted.rpartition(".")
    for f in fields(SECTIONS[section]):
        if f.name == name and rule_of(f) is not None:
            return default_of(f), rule_of(f)
    raise ConfigError(f"{dotted}: not a key of [{section}]")


def _plain(value: Any) -> Any:
    """numpy scalars (e.g. from a grid built with numpy) as Python values."""
    return value.item() if hasattr(value, "item") and not isinstance(value, (list, dict)) else value


def schema_converter(param: str, dotted: str):
    """A Param type converter checking values with the schema key's rule."""
    default, rule = schema_field(dotted)

    def convert(value: Any) -> Any:
        return check_value(f"{param} ({dotted})", default, _plain(value), rule)

    return convert


def _checked(param: str, rule: Rule, default: Any):
    def convert(value: Any) -> Any:
        return check_value(param, default, _plain(value), rule)

    return convert


def nested(flat: dict, where: str = "config") -> dict:
    """``{"train.l2": 1.0}`` -> ``{"train": {"l2": 1.0}}`` (TOML-shaped)."""
    if not isinstance(flat, dict):
        raise ConfigError(f"{where}: expected a dict of dotted keys, got {flat!r}")
    out: dict = {}
    for key, value in flat.items():
        parts = str(key).split(".")
        if len(parts) < 2 or not all(parts):
            raise ConfigError(f"{where}: expected keys like 'train.l2', got {key!r}")
        table = out
        for part in parts[:-1]:
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise ConfigError(f"{where}: {part} is a key, not a section ({key!r})")
        table[parts[-1]] = _plain(value)
    return out


def auto_or(convert):
    """A converter also taking ``"auto"`` (a penalty chosen on held-out rows)."""

    def convert_or_auto(value: Any) -> Any:
        return AUTO if value == AUTO else convert(value)

    return convert_or_auto


def _method_converter(value: Any) -> str:
    """The ``method`` Param: ``"auto"`` or a method of the schema."""
    if value == AUTO:
        return AUTO
    return schema_converter("method", SCHEMA_PARAMS["method"])(value)


def _config_converter(value: Any) -> dict:
    """The ``config`` Param: dotted keys, checked now by building a Config."""
    if not isinstance(value, dict):
        raise ConfigError(f"config: expected a dict of dotted keys, got {value!r}")
    flat = {str(k): _plain(v) for k, v in value.items()}
    config_from_dict(nested(flat), "config")
    return flat


class TrainingParams(HasFeaturesCol, HasPredictionCol, HasWeightCol):
    """The training Params every estimator (and its model) has."""

    method = Param(
        Params._dummy(),
        "method",
        f"training method (train.method): {AUTO!r} ({registry.MLLIB_METHOD[True]} when l1 "
        f"is set or elasticNetParam > 0, else {registry.MLLIB_METHOD[False]}) or one of "
        f"{', '.join(registry.METHODS)}",
        typeConverter=_method_converter,
    )
    regParam = Param(
        Params._dummy(),
        "regParam",
        "MLlib's regParam: gamma1 = regParam * elasticNetParam, gamma2 = regParam * "
        "(1 - elasticNetParam), the loss averaged over event weight",
        typeConverter=_checked("regParam", Rule("regParam", ge=0), 0.0),
    )
    elasticNetParam = Param(
        Params._dummy(),
        "elasticNetParam",
        "MLlib's elasticNetParam in [0, 1]: 1 is pure l1 (grafting), 0 pure l2",
        typeConverter=_checked("elasticNetParam", Rule("elasticNetParam", ge=0, le=1), 0.0),
    )
    l1 = Param(
        Params._dummy(),
        "l1",
        "gamma1 of grafting (train.grafting.l1), or 'auto': chosen on held-out rows "
        "(validationIndicatorCol or validationFraction) by a warm-started path, then "
        "refitted on all rows",
        typeConverter=auto_or(schema_converter("l1", SCHEMA_PARAMS["l1"])),
    )
    l2 = Param(
        Params._dummy(),
        "l2",
        "gamma2 of l2, cutoff, l2-ifs, lattice and re-estimation (train.l2); grafting's "
        "elastic-net gamma2 (train.grafting.elastic_l2); or 'auto' (method l2: chosen "
        "on held-out rows as l1='auto')",
        typeConverter=auto_or(schema_converter("l2", SCHEMA_PARAMS["l2"])),
    )
    nBest = Param(
        Params._dummy(),
        "nBest",
        "grafting: candidates added per round (train.grafting.n_best)",
        typeConverter=schema_converter("nBest", SCHEMA_PARAMS["nBest"]),
    )
    maxRounds = Param(
        Params._dummy(),
        "maxRounds",
        "selection rounds at most, 0: no limit (train.selection.max_rounds)",
        typeConverter=schema_converter("maxRounds", SCHEMA_PARAMS["maxRounds"]),
    )
    maxFeatures = Param(
        Params._dummy(),
        "maxFeatures",
        "ifs, sgc, bayes-factor: selected features at most (train.selection.max_features)",
        typeConverter=schema_converter("maxFeatures", SCHEMA_PARAMS["maxFeatures"]),
    )
    standardization = Param(
        Params._dummy(),
        "standardization",
        "zero mean, unit variance per predicate (train.standardize)",
        typeConverter=schema_converter("standardization", SCHEMA_PARAMS["standardization"]),
    )
    tol = Param(
        Params._dummy(),
        "tol",
        "largest (projected) gradient entry at convergence (train.gtol)",
        typeConverter=schema_converter("tol", SCHEMA_PARAMS["tol"]),
    )
    maxIter = Param(
        Params._dummy(),
        "maxIter",
        "L-BFGS (or a round's Newton) iterations at most (train.max_iter)",
        typeConverter=schema_converter("maxIter", SCHEMA_PARAMS["maxIter"]),
    )
    binary = Param(
        Params._dummy(),
        "binary",
        "binary predicates (data.binary), as CountVectorizer's binary: a feature counts 1.0 "
        "in a row however often it occurs (array<string> repeats; map or Vector values: 1.0 "
        "where non-zero); the model scores presence too. Combination features need it on "
        "count data",
        typeConverter=schema_converter("binary", SCHEMA_PARAMS["binary"]),
    )
    checkpointDir = Param(
        Params._dummy(),
        "checkpointDir",
        "where fit prepares the DataFrame (removed afterwards); '': output.scratch_dir, "
        "else the driver's temporary directory (local master only)",
        typeConverter=TypeConverters.toString,
    )
    config = Param(
        Params._dummy(),
        "config",
        "other configuration keys by dotted name, e.g. {'train.ifs.gain_prior_variance': 2.0}",
        typeConverter=_config_converter,
    )

    warmStart = Param(
        Params._dummy(),
        "warmStart",
        "fitMultiple (CrossValidator) fits a grafting grid strongest gamma1 first, "
        "each point from the previous one's weights",
        typeConverter=TypeConverters.toBoolean,
    )

    def __init__(self) -> None:
        super().__init__()
        defaults = {name: schema_field(key)[0] for name, key in SCHEMA_PARAMS.items()}
        self._setDefault(
            **{**defaults, "method": AUTO},
            regParam=0.0,
            elasticNetParam=0.0,
            checkpointDir="",
            warmStart=True,
            config={},
        )

    def weight_col(self) -> str | None:
        """The weight column, None when weightCol is unset or empty."""
        return (
            (self.getOrDefault(self.weightCol) or None) if self.isDefined(self.weightCol) else None
        )

    def chosen_method(self, flat: dict | None = None) -> str:
        """The method a fit trains: the ``method`` Param, else
        ``config["train.method"]``, else (``"auto"``) grafting when the
        Params ask for an l1 part (``l1`` set, or ``elasticNetParam`` > 0)
        and l2 otherwise: MLlib's LogisticRegression is pure l2 at
        elasticNetParam 0 and has an l1 part above it."""
        method = self.getOrDefault(self.method)
        if method != AUTO:
            return method
        flat = self.getOrDefault(self.config) if flat is None else flat
        if "train.method" in flat:
            return flat["train.method"]
        return registry.MLLIB_METHOD[
            self.isSet(self.l1) or self.getOrDefault(self.elasticNetParam) > 0
        ]

    def auto_penalty(self) -> str | None:
        """The Param (``l1`` or ``l2``) set to ``"auto"``, else None."""
        for name in ("l1", "l2"):
            if self.isSet(getattr(self, name)) and self.getOrDefault(name) == AUTO:
                return name
        return None

    def refuse_unused(self, method: str) -> None:
        """A Param set for a method that does not read it is an error (no
        Param is silently ignored); the message names both."""
        for name, methods in USED_BY.items():
            if self.isSet(getattr(self, name)) and method not in methods:
                raise ConfigError(
                    f"{name}: method {method!r} does not use it (it applies to "
                    f"{', '.join(methods)}); unset {name} or choose one of those methods"
                )

    def training_config(self) -> Config:
        """The Config of a fit: the ``config`` Param's keys, then every
        training Param set explicitly (a Param and a ``config`` key for the
        same schema key is an error), then regParam/elasticNetParam; a Param
        the chosen method does not read is refused (:meth:`refuse_unused`)."""
        flat: dict = dict(self.getOrDefault("config"))
        method = self.chosen_method(flat)
        self.refuse_unused(method)
        auto = self.auto_penalty()
        if auto is not None and registry.method(method).path != auto:
            raise ConfigError(
                f"{auto}='auto': a path of {auto} is fitted for method "
                f"{', '.join(registry.names(lambda m: m.path == auto))} only, not {method!r}"
            )
        if self.isSet(self.method) and "train.method" in flat:
            raise ConfigError("method and config['train.method'] both set; give one")
        flat["train.method"] = method
        for name, dotted in SCHEMA_PARAMS.items():
            if name == "method" or not self.isSet(getattr(self, name)):
                continue
            keys = registry.method(method).penalty_keys
            if name == "l2" and keys is not None:
                dotted = keys[1]  # the method's gamma2 (grafting's elastic_l2)
            if dotted in flat:
                raise ConfigError(f"{name} and config[{dotted!r}] both set; give one")
            if self.getOrDefault(getattr(self, name)) == AUTO:
                flat["train.choice.path"] = True  # the path's grid, chosen on held-out rows
                flat.setdefault("train.choice.folds", 1)  # the held-out rows, not folds
                continue
            flat[dotted] = self.getOrDefault(getattr(self, name))
        if self.isSet(self.regParam) or self.isSet(self.elasticNetParam):
            for dotted, value in penalty_keys(
                method, self.getOrDefault(self.regParam), self.getOrDefault(self.elasticNetParam)
            ).items():
                if dotted in flat:
                    raise ConfigError(
                        f"regParam/elasticNetParam set {dotted}, which is also given "
                        "(as l1/l2 or in config); give one"
                    )
                flat[dotted] = value
        return config_from_dict(nested(flat), f"{type(self).__name__} params")


class MaxEntParams(
    HasProbabilityCol,
    HasThresholds,
    HasRawPredictionCol,
    HasLabelCol,
    HasValidationIndicatorCol,
    TrainingParams,
):
    """Params of the classifier and its model."""

    validationFraction = Param(
        Params._dummy(),
        "validationFraction",
        "with l1='auto' (or l2='auto') and no validationIndicatorCol: the share of rows "
        "held out to choose the penalty, stratified by label",
        typeConverter=_checked("validationFraction", Rule("validationFraction", gt=0, lt=1), 0.2),
    )

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(rawPredictionCol="rawPrediction", validationFraction=0.2)

    def training_config(self) -> Config:
        self.validation_params()
        return super().training_config()

    def validation_params(self) -> None:
        """The validation Params apply to an ``"auto"`` penalty only."""
        if self.auto_penalty() is None:
            for param in (self.validationIndicatorCol, self.validationFraction):
                if self.isSet(param):
                    raise ConfigError(
                        f"{param.name}: held-out rows choose an 'auto' penalty only; set "
                        "l1='auto' (or l2='auto' with method l2) or unset it"
                    )
        elif self.isSet(self.validationIndicatorCol) and self.isSet(self.validationFraction):
            raise ConfigError("validationIndicatorCol and validationFraction both set; give one")


def with_accessors(cls):
    """Give ``cls`` MLlib's ``get<Param>`` and ``set<Param>`` for each of its
    Params that lacks one (pyspark's shared Params have getters only)."""
    for name in dir(cls):
        if not isinstance(getattr(cls, name, None), Param):
            continue
        cap = name[0].upper() + name[1:]
        if not hasattr(cls, f"get{cap}"):
            setattr(cls, f"get{cap}", _getter(name))
        if not hasattr(cls, f"set{cap}"):
            setattr(cls, f"set{cap}", _setter(name))
    return cls


def _getter(name: str):
    def get(self):
        return self.getOrDefault(getattr(self, name))

    get.__name__ = f"get{name[0].upper()}{name[1:]}"
    get.__doc__ = f"Gets the value of {name} or its default value."
    return get


def _setter(name: str):
    def set_value(self, value):
        return self._set(**{name: value})

    set_value.__name__ = f"set{name[0].upper()}{name[1:]}"
    set_value.__doc__ = f"Sets the value of {name}."
    return set_value


with_accessors(TrainingParams)
with_accessors(MaxEntParams)


def penalty_keys(method: str, reg: float, alpha: float) -> dict[str, float]:
    """Schema keys of MLlib's penalty regParam * (alpha ||w||_1 + (1 - alpha)
    / 2 ||w||_2^2) on the loss averaged over event weight, which is how the
    project scales it too (docs/design.md): the method's l1 key (gamma1)
    = reg * alpha and its l2 key (gamma2) = reg * (1 - alpha), its
    ``penalty_keys`` in the registry (registry.py); a method with an l2
    penalty only takes alpha = 0. Other methods have no such penalty
    (ConfigError)."""
    keys = registry.method(method).penalty_keys
    if keys is None:
        raise ConfigError(
            f"regParam: method {method!r} has no regParam-like penalty; set its keys "
            "through config (e.g. train.ifs.gain_prior_variance) instead"
        )
    l1_key, l2_key = keys
    if l1_key is not None:
        if not alpha > 0:
            raise ConfigError(
                f"elasticNetParam: method {method!r} takes its l1 part gamma1 = regParam * "
                f"elasticNetParam, and elasticNetParam is {alpha} (MLlib's pure l2); set "
                "elasticNetParam > 0 (1: pure l1, gamma1 = regParam), or give l1 instead"
            )
        if not reg > 0:
            raise ConfigError(f"regParam: method {method!r} needs regParam > 0, got {reg}")
        return {l1_key: reg * alpha, l2_key: reg * (1.0 - alpha)}
    if alpha != 0:
        raise ConfigError(
            f"elasticNetParam: method {method!r} has an l2 penalty only; expected 0, "
            f"got {alpha} (methods with an l1 part: "
            f"{', '.join(registry.names(lambda m: m.elastic))})"
        )
    return {l2_key: reg}


__all__ = [
    "AUTO",
    "MaxEntParams",
    "with_accessors",
    "TrainingParams",
    "SCHEMA_PARAMS",
    "nested",
    "penalty_keys",
    "schema_field",
]
