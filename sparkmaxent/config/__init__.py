"""Configuration: checked dataclasses, one section per concern and per
method family, loaded from TOML with ``--set section.key=value`` overrides.
The resolved configuration is saved with every model."""

from ..errors import ConfigError
from .load import config_from_dict, digest, load_config, parse_override, train_config, train_keys
from .method_sections import BayesConfig, GraftingConfig, IfsConfig, LatticeConfig
from .runtime import OutputConfig, SparkConfig
from .schema import ChoiceConfig, Config, DataConfig, SelectionConfig, TrainConfig

__all__ = [
    "BayesConfig",
    "ChoiceConfig",
    "Config",
    "ConfigError",
    "DataConfig",
    "GraftingConfig",
    "IfsConfig",
    "LatticeConfig",
    "OutputConfig",
    "SelectionConfig",
    "SparkConfig",
    "TrainConfig",
    "config_from_dict",
    "digest",
    "load_config",
    "parse_override",
    "train_config",
    "train_keys",
]
