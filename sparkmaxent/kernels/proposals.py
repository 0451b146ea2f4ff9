"""Proposal features: the features of misclassified training events.

Daume III (2004, section 3.6) proposes, each round, only features that
could fix a mistake of the current model. Per block, for the current
weights: for a misclassified multiclass event, every (p, gold label) and
(p, predicted label) with x_ip != 0 (the two columns where the event's
softmax gradient is largest); for a candidate-set event whose best wrong
candidate scores at least as high as every correct one, every feature
firing on a correct candidate or on a wrongly preferred one. The result is
a mergeable sorted union of feature ids; events with a label unseen in
training (-1) raise. See docs/methods/bayes-factor.md.
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

    def merge(self, other: Proposals) -> Proposals:
        return Proposals(
            np.union1d(self.ids, other.ids),
            self.misclassified + other.misclassified,
            self.misclassified_events + other.misclassified_events,
            self.weight + other.weight,
        )


def _features_of_rows(M, rows: np.ndarray) -> np.ndarray:
    """Columns with a stored non-zero in the given CSR rows (unsorted)."""
    sub = M[rows]
    return sub.indices[sub.data != 0].astype(np.int64)


def proposals(
    block: Block, space: Space, weights: Weights, scaling: Scaling | None = None
) -> Proposals:
    """Proposal features of one block (see the module docstring)."""
    if isinstance(block, MulticlassBlock):
        if np.any(block.y < 0):
            raise ValueError(
                "cannot propose features from events whose label was not seen in "
                "training (label -1)"
            )
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


@dataclass
class EventSignatures:
    """Mergeable bitmaps of the events each of some features fires on.

    Attributes
    ----------
    bits : ndarray of uint8, shape (n_ids, n_bits // 8)
        Packed bits (little-endian within a byte, as
        ``np.unpackbits(bitorder="little")`` reads them); event i of a block
        sets bit i % n_bits of every feature firing on it. Two features whose
        bitmaps share no bit fire on no common event (the converse need not
        hold: a shared bit may be two events), so fixing the weight of one
        leaves the other's statistics as they were.
    """

    bits: np.ndarray

    def merge(self, other: EventSignatures) -> EventSignatures:
        return EventSignatures(self.bits | other.bits)


def event_signatures(block: Block, space: Space, ids: np.ndarray, n_bits: int) -> EventSignatures:
    """Event bitmaps of features ``ids`` in one block (``n_bits`` a
    multiple of 8). A multiclass feature (p, k) fires where predicate p does;
    a candidate-set feature on the events of candidates it is non-zero on."""
    if n_bits < 8 or n_bits % 8:
        raise ValueError(f"expected a positive multiple of 8 bits, got {n_bits}")
    ids = np.asarray(ids, dtype=np.int64)
    if isinstance(block, MulticlassBlock):
        cols, event_of_row = ids // space.n_labels, None
        sub = block.X[:, cols].tocsc()
    else:
        cols, event_of_row = ids, block.event_of_candidate
        sub = block.F[:, cols].tocsc()
    feature = np.repeat(np.arange(len(ids)), np.diff(sub.indptr))
    fire = sub.data != 0
    rows = sub.indices[fire].astype(np.int64)
    events = rows if event_of_row is None else event_of_row[rows]
    bit = events % n_bits
    out = np.zeros((len(ids), n_bits // 8), dtype=np.uint8)
    np.bitwise_or.at(out, (feature[fire], bit // 8), (1 << (bit % 8)).astype(np.uint8))
    return EventSignatures(out)


@dataclass(frozen=True)
class EventSignatureTask:
    """A picklable pass: the EventSignatures of ``ids`` over every block."""

    space: Space
    ids: np.ndarray
    n_bits: int

    def __call__(self, block: Block) -> EventSignatures:
        return event_signatures(block, self.space, self.ids, self.n_bits)


__all__ = [
    "Proposals",
    "proposals",
    "ProposalTask",
    "EventSignatures",
    "event_signatures",
    "EventSignatureTask",
]
