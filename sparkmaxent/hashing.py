"""The one 64-bit integer mixer: splitmix64's finalizer (Steele, Lea &
Flood 2014), elementwise on uint64 with wrapping arithmetic. Every input
bit reaches every output bit, so masks, positions and seeds hash evenly.
Used by the data fingerprints (data/fingerprint.py), the seeded fold order
(choice/folds.py) and the lattice's row hashes (methods/lattice/build.py)."""

from __future__ import annotations

import numpy as np

#: splitmix64's increment, 2**64 / the golden ratio
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer of uint64 values (wrapping, no overflow warning)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))
