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
from .mergeable import Summed
from .params import Scaling, Space, Weights
from .softmax import row_logsumexp, row_softmax, segment_logsumexp


def predict_multiclass(
    block: MulticlassBlock, space: Space, weights: Weights, scaling: Scaling | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Most probable label and p(k | x_i) of each event: shapes (m,), (m, K)."""
    S = multiclass_scores(block, space, weights, scaling)
    return S.argmax(axis=1), row_softmax(S)[1]


@dataclass
class EvalStats(Summed):
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

    @property
    def accuracy(self) -> float:
        return self.correct / self.weight if self.weight else float("nan")

    @property
    def mean_loss(self) -> float:
        return self.loss / self.weight_known if self.weight_known else float("nan")


def event_results(
    block: Block, space: Space, weights: Weights, scaling: Scaling | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per event: -log p(correct | x_i) (NaN for a label unseen in
    training), whether the top candidate is correct, and the predicted label
    (multiclass; -1 for candidate sets). EvalStats sums these; held-out
    model choice (choice/heldout.py) needs them one by one."""
    if isinstance(block, MulticlassBlock):
        S = multiclass_scores(block, space, weights, scaling)
        pred = S.argmax(axis=1)
        known = block.y >= 0
        y = np.where(known, block.y, 0)
        loss = np.where(known, row_logsumexp(S) - S[np.arange(len(y)), y], np.nan)
        return loss, known & (pred == block.y), pred
    ptr, lengths = block.event_ptr, np.diff(block.event_ptr)
    s = candidate_scores(block, space, weights, scaling)
    lse_all = segment_logsumexp(s, ptr)
    lse_correct = segment_logsumexp(np.where(block.correct, s, -np.inf), ptr)
    known = np.isfinite(lse_correct)
    loss = np.where(known, lse_all - np.where(known, lse_correct, 0.0), np.nan)
    top = np.maximum.reduceat(s, ptr[:-1])
    hit = np.maximum.reduceat(
        (block.correct & (s == np.repeat(top, lengths))).astype(np.int8), ptr[:-1]
    )
    return loss, hit.astype(bool), np.full(len(hit), -1, dtype=np.int64)


def evaluate_block(
    block: Block, space: Space, weights: Weights, scaling: Scaling | None = None
) -> EvalStats:
    loss, hit, pred = event_results(block, space, weights, scaling)
    known = ~np.isnan(loss)
    total = float(block.c[known] @ loss[known])
    confusion = np.zeros((0, 0))
    if isinstance(block, MulticlassBlock):
        K = space.n_labels
        confusion = np.zeros((K + 1, K))
        np.add.at(confusion, (np.where(block.y >= 0, block.y, K), pred), block.c)
    return EvalStats(
        float(block.c.sum()), float(block.c @ hit), total, float(block.c[known].sum()), confusion
    )


@dataclass(frozen=True)
class EvalTask:
    """A picklable pass computing EvalStats of every block."""

    space: Space
    weights: Weights
    scaling: Scaling | None = None

    def __call__(self, block: Block) -> EvalStats:
        return evaluate_block(block, self.space, self.weights, self.scaling)


@dataclass
class EventScores:
    """Per-event results of a held-out pass, concatenated over blocks:
    weight ``c``, ``loss`` (NaN: label unseen in training), ``hit``, gold
    ``y`` and predicted ``pred`` label (-1 for candidate sets), and
    ``group`` / ``event_id`` (-1 when the block does not carry them), which
    put tagged sentences back together for chunk F1."""

    c: np.ndarray
    loss: np.ndarray
    hit: np.ndarray
    y: np.ndarray
    pred: np.ndarray
    group: np.ndarray
    event_id: np.ndarray

    def merge(self, other: EventScores) -> EventScores:
        return EventScores(
            *(np.concatenate([getattr(self, f), getattr(other, f)]) for f in _EVENT_FIELDS)
        )


_EVENT_FIELDS = ("c", "loss", "hit", "y", "pred", "group", "event_id")


@dataclass(frozen=True)
class EventScoresTask:
    """A picklable pass returning EventScores of every block."""

    space: Space
    weights: Weights
    scaling: Scaling | None = None

    def __call__(self, block: Block) -> EventScores:
        loss, hit, pred = event_results(block, self.space, self.weights, self.scaling)
        m = len(loss)
        missing = np.full(m, -1, dtype=np.int64)
        y = block.y if isinstance(block, MulticlassBlock) else missing
        group = getattr(block, "group", None)
        event_id = getattr(block, "event_id", None)
        return EventScores(
            block.c,
            loss,
            hit,
            y,
            pred,
            group if group is not None else missing,
            event_id if event_id is not None else missing,
        )
