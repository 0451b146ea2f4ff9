"""In-memory blocks of events: the unit every kernel works on.

A block is a batch of events held as CSR matrices, built once per partition
and cached; kernels never see rows one at a time.

Two event shapes share one model (docs/design.md, notation):

* ``MulticlassBlock``: event i has a sparse predicate vector x_i and a label
  y_i; the candidate features are (predicate, label) pairs, numbered
  ``j = p * n_labels + k``.
* ``CandidateBlock``: event i lists candidates, each with its own sparse
  feature vector, and a non-empty subset of correct candidates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class MulticlassBlock:
    """Multiclass events.

    Attributes
    ----------
    X : csr_matrix, shape (m, n_predicates)
        Predicate values of each event.
    y : ndarray of int64, shape (m,)
        Label index of each event; -1 marks a label unseen in training
        (allowed only when scoring, never when training).
    c : ndarray of float64, shape (m,)
        Event weights (counts of merged identical events).
    n_labels : int
        Number of labels K of the model.
    event_id, group : ndarray of int64, shape (m,), or None
        Where each event came from (see data/schema.py); carried for
        prediction output, unused by training kernels.
    """

    X: sp.csr_matrix
    y: np.ndarray
    c: np.ndarray
    n_labels: int
    event_id: np.ndarray | None = None
    group: np.ndarray | None = None

    @property
    def n_events(self) -> int:
        return self.X.shape[0]

    @property
    def n_predicates(self) -> int:
        return self.X.shape[1]


@dataclass(frozen=True)
class CandidateBlock:
    """Candidate-set events (parse reranking, TADM format).

    Attributes
    ----------
    F : csr_matrix, shape (n_candidates_total, n_features)
        Feature vectors of all candidates of all events, event after event.
    event_ptr : ndarray of int64, shape (m + 1,)
        Candidates of event i are rows ``event_ptr[i]:event_ptr[i + 1]``;
        every event has at least one candidate.
    correct : ndarray of bool, shape (n_candidates_total,)
        Which candidates are correct; every event used for training has at
        least one.
    c : ndarray of float64, shape (m,)
        Event weights.
    event_id, group : ndarray of int64, shape (m,), or None
        As for MulticlassBlock.
    """

    F: sp.csr_matrix
    event_ptr: np.ndarray
    correct: np.ndarray
    c: np.ndarray
    event_id: np.ndarray | None = None
    group: np.ndarray | None = None

    @property
    def n_events(self) -> int:
        return len(self.event_ptr) - 1

    @property
    def n_predicates(self) -> int:
        return self.F.shape[1]

    @property
    def n_labels(self) -> int:
        return 1

    @property
    def event_of_candidate(self) -> np.ndarray:
        """Event index of every candidate, shape (n_candidates_total,)."""
        return np.repeat(np.arange(self.n_events), np.diff(self.event_ptr))


Block = MulticlassBlock | CandidateBlock


def multiclass_block(
    indptr, indices, values, labels, weights, n_predicates: int, n_labels: int
) -> MulticlassBlock:
    """Build a multiclass block from CSR parts (no copies where dtypes allow)."""
    m = len(indptr) - 1
    X = sp.csr_matrix(
        (
            np.asarray(values, dtype=np.float64),
            np.asarray(indices, dtype=np.int32),
            np.asarray(indptr, dtype=np.int64),
        ),
        shape=(m, n_predicates),
    )
    return MulticlassBlock(
        X=X,
        y=np.asarray(labels, dtype=np.int64),
        c=np.asarray(weights, dtype=np.float64),
        n_labels=n_labels,
    )


def candidate_block(
    event_ptr, cand_indptr, indices, values, correct, weights, n_features: int
) -> CandidateBlock:
    """Build a candidate-set block from its CSR parts."""
    n = len(cand_indptr) - 1
    F = sp.csr_matrix(
        (
            np.asarray(values, dtype=np.float64),
            np.asarray(indices, dtype=np.int32),
            np.asarray(cand_indptr, dtype=np.int64),
        ),
        shape=(n, n_features),
    )
    return CandidateBlock(
        F=F,
        event_ptr=np.asarray(event_ptr, dtype=np.int64),
        correct=np.asarray(correct, dtype=bool),
        c=np.asarray(weights, dtype=np.float64),
    )


def concat_blocks(blocks: list[Block]) -> Block:
    """Stack blocks of one shape into one (for tests and small data),
    keeping ``event_id`` and ``group`` when every block has them (chunk F1
    rebuilds sentences from them)."""
    if not blocks:
        raise ValueError("expected at least one block, got none")
    multi = [b for b in blocks if isinstance(b, MulticlassBlock)]
    cands = [b for b in blocks if isinstance(b, CandidateBlock)]
    if multi and cands:
        raise ValueError(
            f"expected blocks of one shape, got {len(multi)} multiclass "
            f"and {len(cands)} candidate-set blocks"
        )
    ids = {name: _concat_ids(blocks, name) for name in ("event_id", "group")}
    if multi:
        return MulticlassBlock(
            X=sp.vstack([b.X for b in multi], format="csr"),
            y=np.concatenate([b.y for b in multi]),
            c=np.concatenate([b.c for b in multi]),
            n_labels=multi[0].n_labels,
            **ids,
        )
    ptrs, offset = [np.zeros(1, dtype=np.int64)], 0
    for cb in cands:
        ptrs.append(cb.event_ptr[1:] + offset)
        offset += cb.event_ptr[-1]
    return CandidateBlock(
        F=sp.vstack([cb.F for cb in cands], format="csr"),
        event_ptr=np.concatenate(ptrs),
        correct=np.concatenate([cb.correct for cb in cands]),
        c=np.concatenate([cb.c for cb in cands]),
        **ids,
    )


def _concat_ids(blocks: list[Block], name: str) -> np.ndarray | None:
    """Blocks' ``event_id`` or ``group`` end to end; None unless all have it."""
    parts = [getattr(b, name) for b in blocks]
    if any(p is None for p in parts):
        return None
    return np.concatenate(parts)


def take_events(block: Block, keep: np.ndarray) -> Block:
    """The events of ``block`` where the boolean ``keep`` is set, in order."""
    ids = {
        name: None if getattr(block, name) is None else getattr(block, name)[keep]
        for name in ("event_id", "group")
    }
    if isinstance(block, MulticlassBlock):
        return MulticlassBlock(block.X[keep], block.y[keep], block.c[keep], block.n_labels, **ids)
    rows = keep[block.event_of_candidate]
    sizes = np.diff(block.event_ptr)[keep]
    return CandidateBlock(
        F=block.F[rows],
        event_ptr=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        correct=block.correct[rows],
        c=block.c[keep],
        **ids,
    )


def trainable_events(block: Block) -> Block:
    """``block`` without the events a fit cannot use: a label unseen in
    training (y = -1, allowed only when scoring), a candidate set without a
    correct candidate. The block itself when every event is usable."""
    if isinstance(block, MulticlassBlock):
        keep = block.y >= 0
    else:
        keep = (
            np.bincount(block.event_of_candidate, weights=block.correct, minlength=block.n_events)
            > 0
        )
    return block if keep.all() else take_events(block, keep)


def split_block(block: Block, n_parts: int) -> list[Block]:
    """Cut a block into ``n_parts`` consecutive blocks of events, each
    keeping its events' ``event_id`` and ``group`` (k folds are made of groups)."""
    m = block.n_events
    bounds = np.linspace(0, m, n_parts + 1).astype(int)
    parts: list[Block] = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        ids = {
            name: None if getattr(block, name) is None else getattr(block, name)[lo:hi]
            for name in ("event_id", "group")
        }
        if isinstance(block, MulticlassBlock):
            parts.append(
                MulticlassBlock(
                    X=block.X[lo:hi],
                    y=block.y[lo:hi],
                    c=block.c[lo:hi],
                    n_labels=block.n_labels,
                    **ids,
                )
            )
        else:
            a, b = block.event_ptr[lo], block.event_ptr[hi]
            parts.append(
                CandidateBlock(
                    F=block.F[a:b],
                    event_ptr=block.event_ptr[lo : hi + 1] - a,
                    correct=block.correct[a:b],
                    c=block.c[lo:hi],
                    **ids,
                )
            )
    return parts
