"""Proposal features: the features of misclassified training events.

Daume III (2004, section 3.6) proposes, each round, only features that
could fix a mistake of the current model. Per block, for the current
weights: for a misclassified multiclass event, every (p, gold label) and
(p, predicted label) with x_ip != 0 (the two columns where the event's
softmax gradient is largest); for a candidate-set event whose best wrong
candidate scores at least as high as every correct one, every feature
firing on a correct candidate or on a wrongly preferred one. The result is
a mergeable sorted union of feature ids; events with a label unseen in
training (-1) raise.

Extension (not in the note): when no event is misclassified, the same
features are proposed from the events of smallest margin, the correct
label's probability minus the best other's (candidate sets: the best
correct candidate's minus the best wrong one's), the rival label or
candidate taking the predicted one's place. Every pass returns a histogram
of the margins (``MARGIN_EDGES``) from which the driver sets the margin
below which events propose (``margin_below``). See
docs/methods/bayes-factor.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .blocks import Block, MulticlassBlock
from .loss import candidate_scores, multiclass_scores
from .mergeable import Summed, merged_by
from .params import Scaling, Space, Weights

#: Bin edges of the margin histogram, on the scale t = artanh(margin)
#: (clipped to +-MARGIN_T): margins near 1, where a well-fitted model puts
#: most events, get as fine bins as margins near 0.
MARGIN_T = 20.0
MARGIN_EDGES = np.linspace(-MARGIN_T, MARGIN_T, 4097)


def margin_scale(margin: np.ndarray) -> np.ndarray:
    """t = artanh(margin) clipped to [-MARGIN_T, MARGIN_T] (margin in [-1, 1])."""
    with np.errstate(divide="ignore"):
        return np.clip(np.arctanh(np.clip(margin, -1.0, 1.0)), -MARGIN_T, MARGIN_T)


@dataclass
class Proposals(Summed):
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
    margins : ndarray, shape (len(MARGIN_EDGES) - 1,)
        Event weight per bin of the margin scale (``margin_scale``).
    proposing_events : int
        Events the ids come from: the misclassified ones, and with
        ``margin_below`` those of a margin scale below it too.
    """

    ids: np.ndarray = field(metadata=merged_by(np.union1d))
    misclassified: float
    misclassified_events: int
    weight: float
    margins: np.ndarray
    proposing_events: int

    def margin_below(self, fraction: float) -> float:
        """The margin scale below which events of at least ``fraction`` of
        the weight lie (an edge of the histogram)."""
        cum = np.cumsum(self.margins)
        i = int(np.searchsorted(cum, fraction * cum[-1]))
        return float(MARGIN_EDGES[min(i + 1, len(MARGIN_EDGES) - 1)])


def _features_of_rows(M, rows: np.ndarray) -> np.ndarray:
    """Columns with a stored non-zero in the given CSR rows (unsorted)."""
    sub = M[rows]
    return sub.indices[sub.data != 0].astype(np.int64)


def proposals(
    block: Block,
    space: Space,
    weights: Weights,
    scaling: Scaling | None = None,
    margin_below: float | None = None,
) -> Proposals:
    """Proposal features of one block (see the module docstring); with
    ``margin_below``, also those of the events whose margin scale is below it."""
    if isinstance(block, MulticlassBlock):
        if np.any(block.y < 0):
            raise ValueError(
                "cannot propose features from events whose label was not seen in "
                "training (label -1)"
            )
        scores = multiclass_scores(block, space, weights, scaling)
        pred = scores.argmax(axis=1)
        bad = pred != block.y
        probs = np.exp(scores - scores.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        gold_p = probs[np.arange(block.n_events), block.y]
        probs[np.arange(block.n_events), block.y] = -np.inf
        # the rival: the predicted label of a mistake, else the best other one
        rival = np.where(bad, pred, probs.argmax(axis=1))
        t = margin_scale(gold_p - probs.max(axis=1))
        chosen = bad | (t < margin_below) if margin_below is not None else bad
        events = np.flatnonzero(chosen)
        sub = block.X[events]
        row = np.repeat(np.arange(len(events)), np.diff(sub.indptr))
        fire = sub.data != 0
        p, row = sub.indices[fire].astype(np.int64), row[fire]
        K = space.n_labels
        gold, other = block.y[events][row], rival[events][row]
        ids = np.unique(np.concatenate([p * K + gold, p * K + other]))
    else:
        ptr = block.event_ptr
        s = candidate_scores(block, space, weights, scaling)
        event = block.event_of_candidate
        top_right = np.maximum.reduceat(np.where(block.correct, s, -np.inf), ptr[:-1])
        top_wrong = np.maximum.reduceat(np.where(block.correct, -np.inf, s), ptr[:-1])
        # a tie with a wrong candidate is no win (at all-zero weights every
        # event with a wrong candidate is a mistake, whatever the order)
        bad = top_wrong >= top_right
        top = np.maximum(top_right, top_wrong)
        norm = np.add.reduceat(np.exp(s - top[event]), ptr[:-1])
        t = margin_scale((np.exp(top_right - top) - np.exp(top_wrong - top)) / norm)
        chosen = bad | (t < margin_below) if margin_below is not None else bad
        # an event without a wrong candidate has nothing to fix
        chosen &= np.isfinite(top_wrong)
        preferred = ~block.correct & chosen[event] & (s == top_wrong[event])
        rows = np.flatnonzero(preferred | (block.correct & chosen[event]))
        ids = np.unique(_features_of_rows(block.F, rows))
        events = np.flatnonzero(chosen)
    margins = np.histogram(t, MARGIN_EDGES, weights=block.c)[0]
    wrong = np.flatnonzero(bad)
    return Proposals(
        ids,
        float(block.c[wrong].sum()),
        int(len(wrong)),
        float(block.c.sum()),
        margins,
        int(len(events)),
    )


@dataclass(frozen=True)
class ProposalTask:
    """A picklable pass: the Proposals of every block under ``weights``."""

    space: Space
    weights: Weights
    scaling: Scaling | None = None
    margin_below: float | None = None

    def __call__(self, block: Block) -> Proposals:
        return proposals(block, self.space, self.weights, self.scaling, self.margin_below)


@dataclass
class EventSignatures(Summed):
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

    bits: np.ndarray = field(metadata=merged_by(np.bitwise_or))


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
