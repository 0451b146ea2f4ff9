"""Prediction and evaluation statistics of one block.

Unlike the training kernels these accept events whose gold label was never
seen in training (label -1): they count as errors and are left out of the
log-likelihood, which is undefined for them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .blocks import Block, MulticlassBlock
from .loss import candidate_scores, multiclass_scores
from .params import Scaling, Space, Weights
from .softmax import row_logsumexp, row_softmax, segment_logsumexp


def predict_multiclass(
    block: MulticlassBlock, space: Space, weights: Weights, scaling: Scaling | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Most probable label and p(k | x_i) of each event: shapes (m,), (m, K)."""
    S = multiclass_scores(block, space, weights, scaling)
    return S.argmax(axis=1), row_softmax(S)[1]


@dataclass
class EvalStats:
    """Mergeable evaluation sums.

    Attributes
    ----------
    weight : float
        Total event weight.
    correct : float
        Weight of events whose top candidate is correct.
    loss : float
        sum c_i * -log p(correct | x_i) over events with a known label.
    weight_known : float
        Weight of those events.
    confusion : ndarray, shape (K + 1, K) or (0, 0)
        Multiclass only: weight of events by gold label (last row: labels
        unseen in training) and predicted label.
    """

    weight: float
    correct: float
    loss: float
    weight_known: float
    confusion: np.ndarray

    def merge(self, other: EvalStats) -> EvalStats:
        return EvalStats(
            self.weight + other.weight,
            self.correct + other.correct,
            self.loss + other.loss,
            self.weight_known + other.weight_known,
            self.confusion + other.confusion,
        )

    @property
    def accuracy(self) -> float:
        return self.correct / self.weight if self.weight else float("nan")

    @property
    def mean_loss(self) -> float:
        return self.loss / self.weight_known if self.weight_known else float("nan")


def evaluate_block(
    block: Block, space: Space, weights: Weights, scaling: Scaling | None = None
) -> EvalStats:
    if isinstance(block, MulticlassBlock):
        K = space.n_labels
        S = multiclass_scores(block, space, weights, scaling)
        lse = row_logsumexp(S)
        pred = S.argmax(axis=1)
        known = block.y >= 0
        y = np.where(known, block.y, 0)
        loss = float(block.c[known] @ (lse - S[np.arange(len(y)), y])[known])
        confusion = np.zeros((K + 1, K))
        np.add.at(confusion, (np.where(known, block.y, K), pred), block.c)
        correct = float(block.c @ (known & (pred == block.y)))
        return EvalStats(
            float(block.c.sum()), correct, loss, float(block.c[known].sum()), confusion
        )
    ptr, lengths = block.event_ptr, np.diff(block.event_ptr)
    s = candidate_scores(block, space, weights, scaling)
    lse_all = segment_logsumexp(s, ptr)
    lse_correct = segment_logsumexp(np.where(block.correct, s, -np.inf), ptr)
    known = np.isfinite(lse_correct)
    loss = float(block.c[known] @ (lse_all - lse_correct)[known])
    top = np.maximum.reduceat(s, ptr[:-1])
    hit = np.maximum.reduceat(
        (block.correct & (s == np.repeat(top, lengths))).astype(np.int8), ptr[:-1]
    )
    return EvalStats(
        float(block.c.sum()),
        float(block.c @ hit),
        loss,
        float(block.c[known].sum()),
        np.zeros((0, 0)),
    )


@dataclass(frozen=True)
class EvalTask:
    """A picklable pass computing EvalStats of every block."""

    space: Space
    weights: Weights
    scaling: Scaling | None = None

    def __call__(self, block: Block) -> EvalStats:
        return evaluate_block(block, self.space, self.weights, self.scaling)
