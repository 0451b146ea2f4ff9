"""Proposal features: the features of misclassified training events.

Daume III (2004, section 3.6) proposes, each round, only features that
could fix a mistake of the current model: the features active on training
events the model gets wrong. Per block, for the current weights:

* multiclass event i, predicted label k^ = argmax_k s_k(x_i) != y_i: every
  (p, y_i) and (p, k^) with x_ip != 0, the gold and the predicted label
  (the two labels the mistake implicates; the softmax gradient of the
  event is largest in magnitude on exactly those two columns);
* candidate-set event i where some wrong candidate scores at least as
  high as every correct one (a tie is no win): every feature firing on a
  correct candidate or on a wrongly preferred one (the wrong candidates at
  the top wrong score).

The result is a mergeable sorted union of feature ids; the driver removes
the features already active. Events with a label unseen in training (-1)
are not training events and raise, as in the other training kernels.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .blocks import Block, MulticlassBlock
from .loss import candidate_scores, multiclass_scores
from .params import Scaling, Space, Weights


@dataclass
class Proposals:
    """Mergeable proposal set of some blocks.

    Attributes
    ----------
    ids : ndarray of int64, shape (n,)
        Sorted, unique feature ids proposed.
    misclassified : float
        Weight of the misclassified events.
    misclassified_events : int
        Their number.
    weight : float
        Weight of all events.
    """

    ids: np.ndarray
    misclassified: float
    misclassified_events: int
    weight: float

    def merge(self, other: "Proposals") -> "Proposals":
        return Proposals(np.union1d(self.ids, other.ids), self.misclassified + other.misclassified,
                         self.misclassified_events + other.misclassified_events,
                         self.weight + other.weight)


def _features_of_rows(M, rows: np.ndarray) -> np.ndarray:
    """Columns with a stored non-zero in the given CSR rows (unsorted)."""
    sub = M[rows]
    return sub.indices[sub.data != 0].astype(np.int64)


def proposals(block: Block, space: Space, weights: Weights,
              scaling: Scaling | None = None) -> Proposals:
    """Proposal features of one block (see the module docstring)."""
    if isinstance(block, MulticlassBlock):
        if np.any(block.y < 0):
            raise ValueError("cannot propose features from events whose label was not seen in "
                             "training (label -1)")
        pred = multiclass_scores(block, space, weights, scaling).argmax(axis=1)
        wrong = np.flatnonzero(pred != block.y)
        sub = block.X[wrong]
        row = np.repeat(np.arange(len(wrong)), np.diff(sub.indptr))
        fire = sub.data != 0
        p, row = sub.indices[fire].astype(np.int64), row[fire]
        K = space.n_labels
        gold, guess = block.y[wrong][row], pred[wrong][row]
        ids = np.unique(np.concatenate([p * K + gold, p * K + guess]))
        c = block.c[wrong]
    else:
        ptr = block.event_ptr
        s = candidate_scores(block, space, weights, scaling)
        event = block.event_of_candidate
        top_right = np.maximum.reduceat(np.where(block.correct, s, -np.inf), ptr[:-1])
        top_wrong = np.maximum.reduceat(np.where(block.correct, -np.inf, s), ptr[:-1])
        # a tie with a wrong candidate is no win (at all-zero weights every
        # event with a wrong candidate is a mistake, whatever the order)
        bad = top_wrong >= top_right
        wrong = np.flatnonzero(bad)
        preferred = ~block.correct & bad[event] & (s == top_wrong[event])
        rows = np.flatnonzero(preferred | (block.correct & bad[event]))
        ids = np.unique(_features_of_rows(block.F, rows))
        c = block.c[wrong]
    return Proposals(ids, float(c.sum()), int(len(wrong)), float(block.c.sum()))


@dataclass(frozen=True)
class ProposalTask:
    """A picklable pass: the Proposals of every block under ``weights``."""

    space: Space
    weights: Weights
    scaling: Scaling | None = None

    def __call__(self, block: Block) -> Proposals:
        return proposals(block, self.space, self.weights, self.scaling)


__all__ = ["Proposals", "proposals", "ProposalTask"]
