"""Generated events as files: random splits and the maxent text format.

``write_splits`` is what the CLI's built-in data uses: one draw of the
planted model split into train / held-out / test text files, with the
planted truth next to them.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Sequence

import numpy as np

from ... import storage
from .generator import generate
from .planted import SyntheticData, SyntheticSpec

logger = logging.getLogger("sparkmaxent.data.synthetic")


def write_maxent_text(data: SyntheticData, path: str | os.PathLike) -> int:
    """Write the events in the "maxent" text format, ``label feat feat ...``
    one event per line (``feat:value`` where a value is not 1), as read by
    ``sparkmaxent.data.readers.parse_maxent``.

    Returns
    -------
    int
        Number of lines written.
    """
    names = np.array(data.feature_names, dtype=object)
    ptr, n = data.indptr, 0
    f = io.StringIO()  # synthetic data is small: built here, written through storage
    for i in range(data.n_events):
        a, b = ptr[i], ptr[i + 1]
        toks = names[data.indices[a:b]]
        vals = data.values[a:b]
        if np.any(vals != 1.0):
            toks = [t if v == 1.0 else f"{t}:{v!r}" for t, v in zip(toks, vals.tolist())]
        f.write(data.label_names[int(data.labels[i])])
        if len(toks):
            f.write(" ")
            f.write(" ".join(toks))
        f.write("\n")
        n += 1
    storage.write_text(os.fspath(path), f.getvalue())
    return n


def split(data: SyntheticData, fractions: Sequence[float], seed: int = 0) -> list[SyntheticData]:
    """Split the events at random into parts of the given shares.

    Events are i.i.d. draws of one planted model, so the parts are samples of
    the same distribution (train / held-out / test). Event ids keep the
    position in the generated set, so the parts never share an id.

    Parameters
    ----------
    fractions : sequence of float
        Shares of the parts, positive and summing to 1 (within 1e-9); part
        sizes are rounded down, the remainder goes to the last part.
    seed : int
        Seed of the permutation.
    """
    fr = np.asarray(fractions, dtype=np.float64)
    if fr.ndim != 1 or len(fr) == 0 or np.any(fr <= 0) or abs(fr.sum() - 1.0) > 1e-9:
        raise ValueError(f"expected positive fractions summing to 1, got {list(fractions)}")
    order = np.random.default_rng(seed).permutation(data.n_events)
    sizes = np.floor(fr * data.n_events).astype(np.int64)
    sizes[-1] = data.n_events - sizes[:-1].sum()
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [data.subset(np.sort(order[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]


def train_test_split(
    data: SyntheticData, test_fraction: float = 0.2, seed: int = 0
) -> tuple[SyntheticData, SyntheticData]:
    """Random (train, test) split; see ``split``."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"expected 0 < test_fraction < 1, got {test_fraction}")
    train, test = split(data, [1.0 - test_fraction, test_fraction], seed)
    return train, test


SPLIT_NAMES = ("train", "heldout", "test")
TRUTH_FILE = "truth.json"


def write_splits(
    spec: SyntheticSpec | None,
    directory: str | os.PathLike,
    fractions: Sequence[float] = (0.7, 0.1, 0.2),
    seed: int | None = None,
) -> dict[str, str]:
    """Generate ``spec``'s events once, split them into train / held-out /
    test (``split``) and write each as a maxent text file, with the planted
    truth next to them.

    Parameters
    ----------
    spec : SyntheticSpec or None
        None for the defaults.
    directory : path
        Created if missing; receives ``train.maxent``, ``heldout.maxent``,
        ``test.maxent`` and ``truth.json`` (``PlantedTruth.save``).
    fractions : (float, float, float)
        Shares of train, held-out and test.
    seed : int, optional
        Seed of the split; default ``spec.seed``.

    Returns
    -------
    dict
        "train", "heldout", "test" -> path of the text file; "truth" -> path
        of the truth JSON.
    """
    spec = spec or SyntheticSpec()
    if len(fractions) != len(SPLIT_NAMES):
        raise ValueError(
            f"expected {len(SPLIT_NAMES)} fractions (train, heldout, test), got {list(fractions)}"
        )
    data = generate(spec)
    storage.mkdirs(os.fspath(directory))
    out, sizes = {}, {}
    parts = split(data, fractions, spec.seed if seed is None else seed)
    for name, part in zip(SPLIT_NAMES, parts):
        out[name] = storage.join(os.fspath(directory), f"{name}.maxent")
        sizes[name] = write_maxent_text(part, out[name])
    out["truth"] = storage.join(os.fspath(directory), TRUTH_FILE)
    data.truth().save(out["truth"])
    logger.info("wrote synthetic splits to %s: %s events", directory, sizes)
    return out


__all__ = [
    "SPLIT_NAMES",
    "TRUTH_FILE",
    "split",
    "train_test_split",
    "write_maxent_text",
    "write_splits",
]
