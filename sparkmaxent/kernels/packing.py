"""Exact compact pickling of mostly-zero float64 vectors: the sums a pass
ships from every partition to the driver.

A block's partial gradient over all candidates is zero at every predicate
the block never holds, and a Hessian triangle is zero wherever two features
never fire in one event. The pickled form is a bit mask of the non-zero
entries plus their values. The round trip is exact: every non-zero comes back
bit for bit, and every zero as 0.0 (a -0.0 too, equal to it as a number
and in every sum).
"""

from __future__ import annotations

import numpy as np


def pack_nonzero(a: np.ndarray) -> dict:
    """The non-zero entries of the 1-d float64 array ``a`` and where they are."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    nonzero = a != 0
    return {"size": len(a), "mask": np.packbits(nonzero), "values": a[nonzero]}


def unpack_nonzero(packed: dict) -> np.ndarray:
    """The array ``pack_nonzero`` packed (its zeros as 0.0)."""
    nonzero = np.unpackbits(packed["mask"], count=packed["size"]).view(bool)
    out = np.zeros(packed["size"])
    out[nonzero] = packed["values"]
    return out
