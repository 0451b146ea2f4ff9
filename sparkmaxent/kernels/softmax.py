"""Numerically stable log-sum-exp over rows and over segments."""

from __future__ import annotations

import numpy as np


def row_logsumexp(S: np.ndarray) -> np.ndarray:
    """log sum_k exp(S[i, k]) for each row i; S has shape (m, K)."""
    mx = S.max(axis=1)
    return mx + np.log(np.exp(S - mx[:, None]).sum(axis=1))


def _row_exp(
    S: np.ndarray, overwrite: bool, mx: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row maxima, exp(S - max) (in S itself when ``overwrite``) and its row sums."""
    if mx is None:
        mx = S.max(axis=1)
    E = np.subtract(S, mx[:, None], out=S if overwrite else None)
    np.exp(E, out=E)
    # einsum sums the short rows as fast as a product with ones and faster
    # than sum(axis=1), each row in the same order however many rows there
    # are (BLAS's product handles the rows past its last full group apart,
    # and threads split them by count): the same sums over a block's rows
    # at once or chunk by chunk (loss.py)
    return mx, E, np.einsum("ij->i", E)


def row_softmax(
    S: np.ndarray, overwrite: bool = False, mx: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Row log-normalizers and probabilities of scores S, shape (m, K), with
    one exp per entry (the exp dominates the kernel's own time).

    ``overwrite``: the probabilities replace S (no (m, K) temporaries);
    ``mx``: the row maxima of S, when the caller has them already."""
    mx, E, total = _row_exp(S, overwrite, mx)
    E /= total[:, None]
    return mx + np.log(total), E


def weighted_softmax(
    S: np.ndarray, c: np.ndarray, mx: np.ndarray | None = None, keep_proba: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Row log-normalizers of S, c_i p(k | x_i) in place of S (the
    normalization and the event weights in one sweep), and p(k | x_i) itself
    when ``keep_proba``; c c_i p is the same bits either way."""
    mx, E, total = _row_exp(S, True, mx)
    proba = E / total[:, None] if keep_proba else None
    E *= (c / total)[:, None]
    return mx + np.log(total), E, proba


def segment_logsumexp(s: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """log sum exp of ``s[ptr[i]:ptr[i+1]]`` for each segment i.

    Segments must be non-empty. Entries equal to -inf are ignored; a segment
    of only -inf gives -inf.
    """
    starts = ptr[:-1]
    mx = np.maximum.reduceat(s, starts)
    safe = np.where(np.isfinite(mx), mx, 0.0)
    lengths = np.diff(ptr)
    total = np.add.reduceat(np.exp(s - np.repeat(safe, lengths)), starts)
    with np.errstate(divide="ignore"):
        return safe + np.log(total)
