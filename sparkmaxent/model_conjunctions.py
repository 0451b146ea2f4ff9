"""Conjunctions (combination features) on the driver: names, how a model
stores them, and the atoms of found keys (the inverse of
``kernels.conjunctions.conjunction_keys``, with the check that keys fit an int64).

The representation itself (a sorted tuple of 2-3 atomic predicate ids,
derived predicate ``n_atoms + j``, value = product of the atoms' values where
all fire) and forming it inside events live in ``kernels/conjunctions.py``,
which runs on executors. This module adds what the driver needs: readable
names (``v=join & p=as``), and the JSON form saved in a model's
metadata.json (docs/formats.md)::

    "conjunctions": {"n_atoms": 812, "atoms": [[3, 17], [3, 17, 40], ...]}

where row j is derived predicate ``n_atoms + j``.
"""

from __future__ import annotations

import numpy as np

from .errors import InputError
from .kernels.conjunctions import MAX_DEGREE, SEPARATOR, Conjunctions, Expanding

__all__ = [
    "MAX_DEGREE",
    "SEPARATOR",
    "Conjunctions",
    "Expanding",
    "conjunction_names",
    "from_json",
    "to_json",
]


def conjunction_names(conj: Conjunctions, atom_names) -> dict[int, str]:
    """Name of every derived predicate id, from the atoms' names
    (a mapping or sequence indexed by atom id)."""
    return {conj.n_atoms + j: conj.name(j, atom_names) for j in range(len(conj))}


def to_json(conj: Conjunctions) -> dict:
    return {"n_atoms": int(conj.n_atoms), "atoms": [list(t) for t in conj.tuples()]}


def from_json(doc, where: str) -> Conjunctions:
    """The conjunctions of a saved model, checked (InputError naming ``where``)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("atoms"), list):
        raise InputError(f"{where}: conjunctions: expected an object with n_atoms and atoms")
    n = doc.get("n_atoms")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise InputError(f"{where}: conjunctions.n_atoms: expected an integer >= 0, got {n!r}")
    for j, t in enumerate(doc["atoms"]):
        if not (isinstance(t, list) and all(isinstance(a, int) for a in t)):
            raise InputError(
                f"{where}: conjunctions.atoms[{j}]: expected a list of atom ids, got {t!r}"
            )
    try:
        return Conjunctions.from_tuples(n, doc["atoms"], max_degree=0)
    except ValueError as e:
        raise InputError(f"{where}: conjunctions: {e}") from None


def atoms_used(conj: Conjunctions | None) -> np.ndarray:
    """The atom ids some conjunction is made of (sorted, distinct)."""
    if conj is None or not len(conj):
        return np.zeros(0, dtype=np.int64)
    return np.unique(conj.atoms[conj.atoms >= 0])


def atoms_of_keys(keys: np.ndarray, degree: int, n_atoms: int) -> np.ndarray:
    """The (n, 3) atom rows (padded with -1) of keys of one ``degree``."""
    keys = np.asarray(keys, dtype=np.int64)
    out = np.full((len(keys), MAX_DEGREE), -1, dtype=np.int64)
    rest = keys - (n_atoms * n_atoms if degree == MAX_DEGREE else 0)
    for d in range(degree - 1, -1, -1):
        out[:, d] = rest % n_atoms
        rest = rest // n_atoms
    return out


def check_key_range(n_atoms: int, n_labels: int) -> None:
    """Keys of triples times labels must fit an int64."""
    if (n_atoms**MAX_DEGREE + n_atoms**2) * max(n_labels, 1) >= 2**62:
        raise ValueError(
            f"{n_atoms} atomic predicates x {n_labels} labels: conjunction keys of degree 3 "
            "overflow int64"
        )
