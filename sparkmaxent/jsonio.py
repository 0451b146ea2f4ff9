"""JSON for reports, metadata and checkpoints: numpy values, atomic writes."""

from __future__ import annotations

import json
import os

import numpy as np


def json_default(o):
    """``json.dump(default=...)`` for numpy scalars and arrays."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"cannot write {type(o).__name__} to JSON")


def write_json(path: str, obj) -> None:
    """Write JSON atomically: a temporary file in the same folder, then rename."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2, default=json_default)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
