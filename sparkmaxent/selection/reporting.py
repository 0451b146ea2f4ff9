"""What a selection run shows a person: feature names for progress lines,
and PNG plots of the per-round trace."""

from __future__ import annotations

import logging

import numpy as np

from .. import storage
from ..kernels import MULTICLASS
from ..kernels.conjunctions import SEPARATOR, Conjunctions
from ..plots import new_figure, save_png
from .base import RoundRecord

log = logging.getLogger(__name__)

PLOTS_DIR = "plots"


class FeatureNamer:
    """Names of features for progress lines: ``predicate|label``, with the
    predicate's string when the backend knows its dataset directory (the
    dictionary is read once, on the first name asked for), its label name
    when it knows the labels; ids otherwise."""

    def __init__(self, backend) -> None:
        self.space = backend.space
        info = getattr(backend, "info", None)
        self.labels = list(info.labels) if info is not None and info.labels else None
        self.dataset_dir = getattr(backend, "dataset_dir", None)
        self._ids: np.ndarray | None = None
        self._names: list | None = None
        #: derived predicates (kernels/conjunctions.py), named by their atoms
        self.conjunctions: Conjunctions | None = None

    def predicate(self, p: int) -> str:
        conj = self.conjunctions
        if conj is not None and p >= conj.n_atoms:
            atoms = conj.atoms[p - conj.n_atoms]
            return SEPARATOR.join(self.predicate(int(a)) for a in atoms if a >= 0)
        if self._ids is None:
            self._ids, self._names = np.zeros(0, dtype=np.int64), []
            if self.dataset_dir:
                try:
                    from ..model import feature_table

                    ids, self._names = feature_table(self.dataset_dir)
                    self._ids = ids
                except (OSError, ValueError) as e:  # a name is a nicety, never a failure
                    log.debug("no feature names from %s: %s", self.dataset_dir, e)
        assert self._names is not None, "set together with _ids"
        pos = int(np.searchsorted(self._ids, p))
        if pos < len(self._ids) and self._ids[pos] == p:
            return str(self._names[pos].as_py())
        return str(p)

    def __call__(self, j: int) -> str:
        p, k = divmod(int(j), self.space.n_labels)
        pred = self.predicate(p)
        if self.space.shape != MULTICLASS:
            return pred
        label = self.labels[k] if self.labels and k < len(self.labels) else str(k)
        return f"{pred}|{label}"


def write_plots(
    trace: list[RoundRecord],
    directory: str,
    score_name: str = "max_gradient",
    score_label: str = "candidate |gradient|",
) -> list[str]:
    """PNG plots of a selection trace: objective (and, with a held-out set,
    held-out accuracy) against round and against active-set size. Needs
    matplotlib (the ``plots`` extra); without it, one log line and no plots.

    Returns
    -------
    list of str
        The files written.
    """
    rounds = [r.round for r in trace]
    active = [r.active for r in trace]
    panels = [
        ("objective", "objective C(w)", False, [r.objective for r in trace]),
        (score_name, f"max {score_label}", True, [r.score for r in trace]),
    ]
    if any(r.heldout_accuracy is not None for r in trace):
        nan = float("nan")
        held = [nan if r.heldout_accuracy is None else r.heldout_accuracy for r in trace]
        panels.append(("heldout_accuracy", "held-out accuracy", False, held))
    written = []
    for key, label, logy, values in panels:
        fig = new_figure("plots")
        if fig is None:
            return []
        for ax, x, xlabel in (
            (fig.add_subplot(1, 2, 1), rounds, "round"),
            (fig.add_subplot(1, 2, 2), active, "active features"),
        ):
            ax.plot(x, values, marker="o", markersize=3)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(label)
            if logy and all(v > 0 for v in values):
                ax.set_yscale("log")
            ax.grid(True, alpha=0.3)
        written.append(save_png(fig, storage.join(directory, f"{key}.png")))
    return written
