"""Building configurations: from TOML files, ``--set`` overrides and
Python keywords, all checked by the schema (config/schema.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tomllib
from dataclasses import fields
from typing import Any

from ..errors import ConfigError
from .rules import Section, rule_of
from .schema import Config, TrainConfig, sections

SECTIONS = sections()


def _key_names(cls: type) -> list[str]:
    return [f.name for f in fields(cls) if rule_of(f) is not None]


def _suggest(name: str) -> str:
    """Where a key of this name lives, for an unknown-key message."""
    homes = [path for path, cls in SECTIONS.items() if name in _key_names(cls)]
    return f" ({name} is a key of [{'], ['.join(homes)}])" if homes else ""


def build_section(cls: type, values: dict, path: str) -> Any:
    """A section from a (nested) dict of TOML values; unknown keys are an error."""
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a table, got {values!r}")
    subsections = {f.name for f in fields(cls) if rule_of(f) is None}
    known = set(_key_names(cls)) | subsections
    unknown = sorted(set(values) - known)
    if unknown:
        hints = "".join(_suggest(u) for u in unknown)
        raise ConfigError(
            f"{path}: unknown key(s) {unknown}{hints}; expected some of {sorted(known)}"
        )
    kwargs = {
        name: (
            build_section(SECTIONS[f"{path}.{name}"], value, f"{path}.{name}")
            if name in subsections
            else value
        )
        for name, value in values.items()
    }
    return cls(**kwargs)


def config_from_dict(raw: dict, source: str = "config") -> Config:
    """A Config from TOML-shaped data; errors name ``source`` and the key."""
    top = {f.name for f in fields(Config)}
    try:
        unknown = sorted(set(raw) - top)
        if unknown:
            raise ConfigError(f"unknown section(s) {unknown}; expected some of {sorted(top)}")
        return Config(
            **{name: build_section(SECTIONS[name], raw[name], name) for name in top if name in raw}
        )
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def parse_override(item: str) -> tuple[list[str], Any]:
    """``train.grafting.l1=1e-5`` -> (["train", "grafting", "l1"], 1e-05); the
    value is parsed as TOML, falling back to a plain string (so bare words
    such as ``train.method=grafting`` work)."""
    path, sep, text = item.partition("=")
    parts = [p.strip() for p in path.split(".")]
    if not sep or len(parts) < 2 or not all(parts):
        raise ConfigError(f"--set: expected SECTION.KEY=VALUE like 'train.l2=1e-5', got {item!r}")
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()
    return parts, value


def read_toml(path: str) -> dict:
    if os.path.isdir(path):
        raise ConfigError(f"{path}: is a directory, expected a TOML configuration file")
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None


def load_config(path: str | None = None, overrides: list[str] | None = None) -> Config:
    """Read a TOML file (or start from defaults) and apply overrides."""
    raw: dict = read_toml(path) if path else {}
    for item in overrides or []:
        parts, value = parse_override(item)
        table = raw
        for part in parts[:-1]:
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise ConfigError(f"--set {item}: {part} is a key, not a section")
        table[parts[-1]] = value
    source = path or "--set"
    if path and overrides:
        source = f"{path} with --set"
    return config_from_dict(raw, source)


def with_values(cfg: Config, values: dict[str, Any]) -> Config:
    """``cfg`` with keys replaced by dotted name (``{"data.prepare_cutoff": 3}``),
    each value checked by the schema as a ``--set`` value is (ConfigError
    naming the key)."""
    for name, value in values.items():
        cfg = _replaced(cfg, name.split("."), value, name)
    return cfg


def _replaced(section: Any, parts: list[str], value: Any, name: str) -> Any:
    known = dataclasses.is_dataclass(section) and not isinstance(section, type)
    if not known or parts[0] not in {f.name for f in fields(section)}:
        raise ConfigError(f"{name}: no such configuration key")
    if len(parts) > 1:
        value = _replaced(getattr(section, parts[0]), parts[1:], value, name)
    return dataclasses.replace(section, **{parts[0]: value})


def _train_homes() -> dict[str, str]:
    """Each [train] key name -> the dotted path of its section."""
    return {
        name: path
        for path, cls in SECTIONS.items()
        if path.startswith("train")
        for name in _key_names(cls)
    }


def train_keys(config: TrainConfig) -> dict[str, Any]:
    """Every key of a TrainConfig by name (the inverse of ``train_config``)."""
    return {
        name: getattr(config if path == "train" else getattr(config, path.split(".", 1)[1]), name)
        for name, path in _train_homes().items()
    }


def train_config(base: TrainConfig | None = None, /, **keys: Any) -> TrainConfig:
    """A TrainConfig from keys by name, for Python callers: every key name
    is unique across [train] and its sub-sections, so
    ``train_config(method="grafting", l1=1e-4, n_best=100)`` puts l1 and
    n_best into [train.grafting]. ``base``: start from it instead of the
    defaults."""
    base = base if base is not None else TrainConfig()
    homes = _train_homes()
    grouped: dict[str, dict] = {}
    for name, value in keys.items():
        if name not in homes:
            raise ConfigError(f"train: unknown key {name!r}; expected one of {sorted(homes)}")
        grouped.setdefault(homes[name], {})[name] = value
    subs = {
        path.split(".", 1)[1]: dataclasses.replace(getattr(base, path.split(".", 1)[1]), **values)
        for path, values in grouped.items()
        if path != "train"
    }
    return dataclasses.replace(base, **grouped.get("train", {}), **subs)


def digest(section: Section | Config, exclude: tuple[str, ...] = ()) -> str:
    """Short hash of a resolved configuration (less the ``exclude`` keys at
    any depth): what a checkpoint must match to be resumed."""

    def strip(d: dict) -> dict:
        return {k: strip(v) if isinstance(v, dict) else v for k, v in d.items() if k not in exclude}

    blob = json.dumps(strip(dataclasses.asdict(section)), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
