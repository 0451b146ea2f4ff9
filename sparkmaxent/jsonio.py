"""JSON for reports, metadata and checkpoints: numpy values, atomic writes,
on any file system (``storage``)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from . import storage
from .errors import InputError


def json_default(o):
    """``json.dump(default=...)`` for numpy scalars and arrays."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"cannot write {type(o).__name__} to JSON")


def write_json(path: str, obj) -> None:
    """Write JSON (numpy values too) atomically: a temporary sibling, then
    replaced in (``storage.write_atomic``)."""
    storage.write_json(path, obj, default=json_default)


def read_json_object(
    path: str, what: str, version: int, keys: Sequence[str], hint: str = ""
) -> dict:
    """The JSON object in ``path`` (a ``what``, e.g. "model metadata"),
    checked: valid JSON, an object, ``format_version == version``, every one
    of ``keys`` present; an InputError naming the file otherwise."""
    try:
        doc = json.loads(storage.read_bytes(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(
            f"{path}: expected the JSON of a {what}, got content that is not valid JSON "
            f"({e}): damaged or truncated{hint}"
        ) from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(doc).__name__}{hint}")
    if doc.get("format_version") != version:
        raise InputError(
            f"{path}: expected {what} format_version {version}, "
            f"got {doc.get('format_version')}{hint}"
        )
    missing = [key for key in keys if key not in doc]
    if missing:
        raise InputError(
            f"{path}: expected the {what} keys {list(keys)}, missing "
            f"key{'s' if len(missing) > 1 else ''} {', '.join(missing)}{hint}"
        )
    return doc
