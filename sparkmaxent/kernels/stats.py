"""Per-predicate moments for standardization, and the scaling they give;
feature counts; the trivial pass; the bytes of the blocks' own arrays."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .blocks import Block, MulticlassBlock
from .mergeable import Summed
from .params import Scaling


@dataclass
class Moments(Summed):
    """Weighted sums over rows (events, or candidates of candidate sets).

    Attributes
    ----------
    weight : float
        sum of row weights.
    total : ndarray, shape (n_predicates,)
        sum of weight * x_p.
    total_sq : ndarray, shape (n_predicates,)
        sum of weight * x_p ** 2.
    count : ndarray, shape (n_predicates,)
        sum of weight over rows where x_p != 0.
    """

    weight: float
    total: np.ndarray
    total_sq: np.ndarray
    count: np.ndarray

    def scaling(self, exclude: np.ndarray | None = None) -> Scaling:
        """Zero-mean, unit-variance scaling. Predicates of zero variance get
        inv_scale 0 (they carry no information); those in ``exclude`` are left
        as they are (mean 0, inv_scale 1)."""
        mean = self.total / self.weight
        var = np.maximum(self.total_sq / self.weight - mean**2, 0.0)
        std = np.sqrt(var)
        # relative test: a constant predicate's variance is rounding noise
        informative = std > 1e-12 * np.maximum(np.abs(mean), 1.0)
        inv = np.where(informative, 1.0 / np.where(informative, std, 1.0), 0.0)
        mean = np.where(informative, mean, 0.0)
        if exclude is not None:
            mean[exclude], inv[exclude] = 0.0, 1.0
        return Scaling(mean=mean, inv_scale=inv)


def moments(block: Block) -> Moments:
    if isinstance(block, MulticlassBlock):
        X, w = block.X, block.c
    else:
        X, w = block.F, np.repeat(block.c, np.diff(block.event_ptr))
    Xw = X.multiply(w[:, None]).tocsr() if X.nnz else X
    total = np.asarray(Xw.sum(axis=0)).ravel()
    total_sq = np.asarray(Xw.multiply(X).sum(axis=0)).ravel()
    nz = X.copy()
    nz.data = np.ones_like(nz.data)
    count = np.asarray(nz.multiply(w[:, None]).sum(axis=0)).ravel()
    return Moments(float(w.sum()), total, total_sq, count)


class MomentsTask:
    """A picklable pass computing Moments of every block."""

    def __call__(self, block: Block) -> Moments:
        return moments(block)


@dataclass
class FeatureCounts(Summed):
    """Weighted empirical counts of every candidate feature, shape (n_features,).

    Multiclass: weight of events with label k in which predicate p fires, for
    feature (p, k). Candidate sets: weight of candidates on which the feature
    fires. The count cutoff (l0 baseline) keeps features counted >= k times.
    """

    counts: np.ndarray


def feature_counts(block: Block) -> FeatureCounts:
    if isinstance(block, MulticlassBlock):
        nz = block.X.copy()
        nz.data = np.ones_like(nz.data)
        Y = np.zeros((block.n_events, block.n_labels))
        known = block.y >= 0
        Y[np.flatnonzero(known), block.y[known]] = block.c[known]
        return FeatureCounts(np.asarray(nz.T @ Y).ravel())
    return FeatureCounts(moments(block).count)


class FeatureCountTask:
    """A picklable pass computing FeatureCounts of every block."""

    def __call__(self, block: Block) -> FeatureCounts:
        return feature_counts(block)


@dataclass
class Count(Summed):
    """Mergeable size of the data: the result of the trivial pass."""

    events: int
    weight: float
    blocks: int


class CountTask:
    """A trivial pass: how many events, how much weight, how many blocks.

    Its cost is the fixed cost of a pass (scheduling, shipping blocks to the
    Python workers), against which kernel passes are measured.
    """

    def __call__(self, block: Block) -> Count:
        return Count(int(block.n_events), float(np.sum(block.c)), 1)


def block_nbytes(block: Block) -> int:
    """Bytes of a block's own numpy arrays (a sparse matrix counted as its
    data, indices and index pointer): what the block holds, without any
    interpreter, pickle or cache overhead. What a cached block's memory is
    judged against (benchmarks/scale.py)."""
    total = 0
    for f in dataclasses.fields(block):
        value = getattr(block, f.name)
        if sp.issparse(value):
            total += value.data.nbytes + value.indices.nbytes + value.indptr.nbytes
        elif isinstance(value, np.ndarray):
            total += value.nbytes
    return total


@dataclass
class ArrayBytes(Summed):
    """Mergeable bytes of the blocks' own arrays (``block_nbytes``), with
    the events, stored non-zeros and blocks they hold."""

    nbytes: int
    events: int
    nonzeros: int
    blocks: int


class ArrayBytesTask:
    """A pass measuring every cached block's own arrays where it is held
    (on the executors for Spark), not a driver-side estimate."""

    def __call__(self, block: Block) -> ArrayBytes:
        matrix = block.X if isinstance(block, MulticlassBlock) else block.F
        return ArrayBytes(block_nbytes(block), int(block.n_events), int(matrix.nnz), 1)
