"""How a configuration key is declared and checked: ``key`` declares a
field with its default, meaning and rule (type, choices, range); ``Section``
checks every field when a section is built. The sections themselves are in
``schema``."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from ..errors import ConfigError


@dataclass(frozen=True)
class Rule:
    """What a key accepts: ``choices`` for strings; bounds for numbers
    (``gt``/``ge``/``le``: exclusive/inclusive); ``multiple_of`` for ints."""

    doc: str
    choices: tuple = ()
    gt: float | None = None
    ge: float | None = None
    le: float | None = None
    lt: float | None = None
    multiple_of: int | None = None

    def describe(self) -> str:
        parts = []
        if self.choices:
            parts.append(" | ".join(self.choices))
        for op, bound in ((">", self.gt), (">=", self.ge), ("<", self.lt), ("<=", self.le)):
            if bound is not None:
                parts.append(f"{op} {bound:g}")
        if self.multiple_of:
            parts.append(f"multiple of {self.multiple_of}")
        return ", ".join(parts)


def key(default: Any, doc: str, **rule: Any) -> Any:
    """A configuration key: its default, one-paragraph doc and Rule."""
    meta = {"rule": Rule(doc, **rule)}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def rule_of(f: dataclasses.Field) -> Rule | None:
    return f.metadata.get("rule")


def default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise TypeError(f"expected a default or default_factory for key {f.name!r}")


def _type_name(value: Any) -> str:
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "table"}.get(
        type(value), type(value).__name__
    )


def check_value(path: str, expected: Any, value: Any, rule: Rule) -> Any:
    """``value`` checked against the key's type (that of its default) and
    rule; ints are accepted for floats. Returns the value to store."""
    kind = type(expected)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is str and isinstance(value, bool) and str(value).lower() in rule.choices:
        value = str(value).lower()  # a key of choices "false" | "true" | ...: TOML's booleans
    if type(value) is not kind:
        raise ConfigError(
            f"{path}: expected a {_type_name(expected)}, got {value!r} ({_type_name(value)})"
        )
    if kind is float and not math.isfinite(value):
        raise ConfigError(f"{path}: expected a finite number, got {value!r}")
    if rule.choices and value not in rule.choices:
        raise ConfigError(f"{path}: expected one of {list(rule.choices)}, got {value!r}")
    for bad, bound, op in (
        (rule.gt is not None and not value > rule.gt, rule.gt, ">"),
        (rule.ge is not None and not value >= rule.ge, rule.ge, ">="),
        (rule.lt is not None and not value < rule.lt, rule.lt, "<"),
        (rule.le is not None and not value <= rule.le, rule.le, "<="),
    ):
        if bad:
            raise ConfigError(f"{path}: expected a value {op} {bound:g}, got {value!r}")
    if rule.multiple_of and value % rule.multiple_of:
        raise ConfigError(f"{path}: expected a multiple of {rule.multiple_of}, got {value!r}")
    return value


class Section:
    """A frozen dataclass of keys (and sub-sections) checked on creation."""

    PATH: ClassVar[str] = ""
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def __post_init__(self) -> None:
        for f in fields(self):
            rule = rule_of(f)
            if rule is None:
                continue
            default = default_of(f)
            value = check_value(f"{self.PATH}.{f.name}", default, getattr(self, f.name), rule)
            object.__setattr__(self, f.name, value)
