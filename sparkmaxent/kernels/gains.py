"""Per-candidate gain statistics, per block (executor side): the exact
derivatives S, S', S'' of the log-likelihood change, and the empirical
feature expectations. The logit-histogram sketch is ``gain_sketch.py``; the
1-D solvers that drive both are in ``solvers/gain_fits.py``.

A candidate g is added with weight alpha, every other weight fixed (Berger,
Della Pietra & Della Pietra 1996, section 4.2; Zhou et al. 2003, section 2;
the "mean field" of Daume III 2004, section 3.3). S(alpha) is the change of
the conditional log-likelihood in *sum* units, S' and S'' the differences of
the tilted means and variances of g over the correct and all candidates; the
gain (Zhou et al. Eq. 3) is S / W. ``GainDerivativesTask`` returns the
mergeable sums for a batch in one pass (method (a)), O(nnz of the batch's
predicate columns); ``EmpiricalExpectationTask`` returns E~[g].
The derivation: docs/methods/ifs-sgc.md, "The gain kernel".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit

from .blocks import Block, CandidateBlock, MulticlassBlock
from .loss import candidate_scores, multiclass_scores
from .mergeable import Summed, merged_by
from .params import Scaling, Space, Weights

#: Logits are clipped to +-LOGIT_CLIP, which stands for P = 1 or 0 (a
#: probability underflowed to 0, or K = 1): phi(+-LOGIT_CLIP, beta) equals its
#: limit (beta or 0) exactly for |beta| < LOGIT_CLIP - 40. Finite logits are
#: kept as they are (computed from score differences, they never underflow).
LOGIT_CLIP = 1e6
#: Dense (event x candidate) cells per chunk of the centering term.
_DENSE_CELLS = 1 << 20

# ---------------------------------------------------------------------------
# scalar primitives (logit form: stable for P near 0 and near 1)


def _tilt(t: np.ndarray, beta: np.ndarray, sp_t: np.ndarray | None = None):
    """The effect of weight beta on a binary choice of logit t.

    Returns phi = log(1 - q + q e^beta) = softplus(t + beta) - softplus(t)
    with q = sigma(t), the new probability pi = sigma(t + beta) and 1 - pi,
    with one log and two exps per entry: for t > 0 everything is written in
    terms of -(t + beta), so the large parts of the softplus cancel exactly
    and neither pi nor 1 - pi loses relative precision.

    ``sp_t`` may pass softplus(-|t|) when t is shared (broadcast) by many betas.
    """
    pos = t > 0
    z = t + beta
    u = np.where(pos, -z, z)
    sp_u = np.logaddexp(0.0, u)
    if sp_t is None:
        sp_t = np.logaddexp(0.0, -np.abs(t))
    phi = np.where(pos, beta, 0.0) + sp_u - sp_t
    a, b = np.exp(u - sp_u), np.exp(-sp_u)  # sigma(u), sigma(-u)
    return phi, np.where(pos, b, a), np.where(pos, a, b)


def _dsigma(z: np.ndarray) -> np.ndarray:
    """sigma'(z) = sigma(z) sigma(-z), without the cancellation of s (1 - s)."""
    return expit(z) * expit(-z)


def multiclass_logits(S: np.ndarray) -> np.ndarray:
    """Logits t[i, k] = log P_ik - log(1 - P_ik) of the softmax of scores S.

    Computed from score differences, so they stay accurate (and finite) for
    P near 0 and near 1: 1 - P of the top label is the mass of the other
    labels, summed in log space rather than formed as 1 - P.

    Parameters
    ----------
    S : ndarray, shape (m, K)

    Returns
    -------
    ndarray, shape (m, K), clipped to [-LOGIT_CLIP, LOGIT_CLIP] (K = 1 gives
    +LOGIT_CLIP: the feature is a constant shift).
    """
    m, K = S.shape
    if K == 1:
        return np.full(S.shape, LOGIT_CLIP)
    rows = np.arange(m)
    top = S.argmax(axis=1)
    D = S - S[rows, top][:, None]
    D[rows, top] = -np.inf
    E = np.exp(D)  # top label: 0
    others = E.sum(axis=1)
    # non-top label k: 1 - P_k = (1 + others - E_k) / (1 + others), and 1 + others - E_k >= 1
    T = D - np.log1p(np.maximum(others[:, None] - E, 0.0))
    # top label: logit = -log(others), with others summed relative to the
    # second-best score so that it neither underflows nor loses digits
    second = D.max(axis=1)
    T[rows, top] = -(second + np.log(np.exp(D - second[:, None]).sum(axis=1)))
    return np.clip(T, -LOGIT_CLIP, LOGIT_CLIP)


def check_candidate_ids(space: Space, candidate_ids) -> np.ndarray:
    """Candidate feature ids as a flat int64 array, checked to be in range."""
    ids = np.asarray(candidate_ids, dtype=np.int64).ravel()
    if ids.size and (ids.min() < 0 or ids.max() >= space.n_features):
        raise ValueError(
            f"expected candidate feature ids in [0, {space.n_features}), "
            f"got values in [{ids.min()}, {ids.max()}]"
        )
    return ids


def _expand(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, cols: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every stored entry of the CSC columns ``cols`` (repeats allowed), in
    order of ``cols``: (position in cols, row, value), without a Python loop."""
    cnt = np.diff(indptr)[cols]
    n = int(cnt.sum())
    owner = np.repeat(np.arange(len(cols)), cnt)
    pos = np.arange(n) + np.repeat(indptr[cols] - (np.cumsum(cnt) - cnt), cnt)
    return owner, indices[pos], data[pos]


def _sum_by(owner: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per-owner sums, shape (n,), float even when empty (bincount gives int)."""
    return np.bincount(owner, weights=values, minlength=n)[:n].astype(np.float64, copy=False)


# ---------------------------------------------------------------------------
# (a) exact sums at given alphas


@dataclass
class GainDerivatives(Summed):
    """Mergeable sums over events for a batch of candidates at fixed alphas.

    Attributes
    ----------
    loglik : ndarray, shape (n,)
        S(alpha_j) = sum_i c_i [A_C,i - A_Y,i]: change of the conditional
        log-likelihood (sum units; gain G = loglik / weight).
    grad : ndarray, shape (n,)
        S'(alpha_j) = sum_i c_i (E_C[g] - E_Y[g]) under the tilted model.
    curv : ndarray, shape (n,)
        S''(alpha_j) = sum_i c_i (Var_C[g] - Var_Y[g]) (<= 0 for multiclass).
    weight : float
        W = sum_i c_i.
    value_range : ndarray, shape (n,)
        max |g(x_i, y)| over the events where g is non-zero: alpha moves any
        event's logit by at most alpha * value_range (the solver's trust
        region). Merged by max.
    """

    loglik: np.ndarray
    grad: np.ndarray
    curv: np.ndarray
    weight: float
    value_range: np.ndarray = field(metadata=merged_by(np.maximum))


def _single_entry_sums(
    owner: np.ndarray,
    n: int,
    t: np.ndarray,
    v: np.ndarray,
    alpha: np.ndarray,
    yk: np.ndarray,
    cw: np.ndarray,
):
    """Sums of the multiclass per-event terms, one (event, candidate) pair each.

    c [y_i = k] beta - c phi(t, beta),  c v ([y_i = k] - pi),  -c v^2 pi (1 - pi)
    with beta = alpha v and pi = sigma(t + beta) the new model's P_ik.
    """
    beta = alpha[owner] * v
    phi, pi, qi = _tilt(t, beta)
    S = _sum_by(owner, cw * (yk * beta - phi), n)
    G = _sum_by(owner, cw * v * (yk - pi), n)
    H = -_sum_by(owner, cw * v * v * pi * qi, n)
    return S, G, H


def _dense_sums(
    t: np.ndarray, yk: np.ndarray, c: np.ndarray, v0: np.ndarray, alpha: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The multiclass terms over *every* event for candidates of one label
    whose value is v0 everywhere: (m x n) cells, chunked, reduced by BLAS
    products with the event weights."""
    m, n = len(t), len(v0)
    S, G, H = np.zeros(n), np.zeros(n), np.zeros(n)
    sp_t = np.logaddexp(0.0, -np.abs(t))[:, None]
    cy = float(c @ yk)
    step = max(1, _DENSE_CELLS // max(m, 1))
    for a in range(0, n, step):
        j = slice(a, a + step)
        beta = alpha[j] * v0[j]
        phi, pi, qi = _tilt(t[:, None], beta[None, :], sp_t)
        S[j] = beta * cy - c @ phi
        G[j] = v0[j] * (cy - c @ pi)
        H[j] = -(v0[j] ** 2) * (c @ (pi * qi))
    return S, G, H


@dataclass
class _MulticlassBatch:
    """The (event, candidate) pairs of one block where each candidate's
    predicate fires, plus what the centering term needs."""

    T: np.ndarray  # (m, K) logits of the current model
    y: np.ndarray  # (m,)
    c: np.ndarray  # (m,)
    k: np.ndarray  # (n,) label of each candidate
    v0: np.ndarray  # (n,) feature value where the predicate does not fire
    owner: np.ndarray  # (n_pairs,) candidate position, nondecreasing
    t: np.ndarray  # (n_pairs,) logit of P_ik
    v: np.ndarray  # (n_pairs,) feature value
    yk: np.ndarray  # (n_pairs,) float, [y_i = k]
    cw: np.ndarray  # (n_pairs,) c_i


def _multiclass_batch(
    block: MulticlassBlock, space: Space, weights: Weights, scaling: Scaling | None, ids: np.ndarray
) -> _MulticlassBatch:
    if np.any(block.y < 0):
        raise ValueError(
            "cannot compute gains on events whose label was not seen in training (label -1)"
        )
    K = space.n_labels
    p, k = ids // K, ids % K
    T = multiclass_logits(multiclass_scores(block, space, weights, scaling))
    preds, col = np.unique(p, return_inverse=True)
    Xc = block.X[:, preds].tocsc()
    Xc.eliminate_zeros()  # a stored 0 is no firing (and would break single-valuedness)
    owner, event, x = _expand(Xc.indptr, Xc.indices, Xc.data, col)
    if scaling is None:
        v, v0 = x, np.zeros(len(ids))
    else:
        s, mu = scaling.inv_scale[p], scaling.mean[p]
        v, v0 = s[owner] * (x - mu[owner]), -s * mu
    kk = k[owner]
    return _MulticlassBatch(
        T,
        block.y,
        block.c,
        k,
        v0,
        owner,
        T[event, kk],
        v,
        (block.y[event] == kk).astype(np.float64),
        block.c[event],
    )


def _multiclass_derivatives(b: _MulticlassBatch, alpha: np.ndarray) -> tuple:
    n = len(b.k)
    S, G, H = _single_entry_sums(b.owner, n, b.t, b.v, alpha, b.yk, b.cw)
    centered = b.v0 != 0
    if np.any(centered):
        # With centering the feature is v0 on every event where p does not
        # fire: remove the term at v0 where p fires, add it over all events
        # (dense: O(m) per centered candidate and pass).
        sel = centered[b.owner]
        o = b.owner[sel]
        s2, g2, h2 = _single_entry_sums(o, n, b.t[sel], b.v0[o], alpha, b.yk[sel], -b.cw[sel])
        S, G, H = S + s2, G + g2, H + h2
        for label in np.unique(b.k[centered]):
            j = np.flatnonzero(centered & (b.k == label))
            s2, g2, h2 = _dense_sums(
                b.T[:, label], (b.y == label).astype(np.float64), b.c, b.v0[j], alpha[j]
            )
            S[j] += s2
            G[j] += g2
            H[j] += h2
    return S, G, H


@dataclass
class _Side:
    """(event, candidate) pairs of candidate-set events over one side (all
    candidates Y_i, or the correct ones C_i); entries are the candidates
    y of the event on which the feature fires, grouped by pair."""

    cand: np.ndarray  # (n_pairs,) candidate position
    c: np.ndarray  # (n_pairs,) event weight
    lr: np.ndarray  # (n_pairs,) log of the side's mass where g does not fire
    ptr: np.ndarray  # (n_pairs + 1,) entries of pair q: ptr[q]:ptr[q + 1]
    lq: np.ndarray  # (n_entries,) log p(y | x_i, side)
    v: np.ndarray  # (n_entries,) g(x_i, y)

    @property
    def pair_of_entry(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.cand)), np.diff(self.ptr))


def _side(
    s: np.ndarray,
    ptr: np.ndarray,
    event_of_row: np.ndarray,
    c: np.ndarray,
    rows: np.ndarray,
    owner: np.ndarray,
    v: np.ndarray,
) -> _Side:
    """Build a side from scores ``s`` (-inf on rows outside the side) and the
    firing entries (rows, owner, v), sorted by owner then row."""
    starts = ptr[:-1]
    mx = np.maximum.reduceat(s, starts)
    if not np.all(np.isfinite(mx)):
        raise ValueError("cannot compute gains on candidate-set events without a correct candidate")
    E = np.exp(s - mx[event_of_row])
    at_max = np.flatnonzero(s == mx[event_of_row])
    _, first = np.unique(event_of_row[at_max], return_index=True)
    top = at_max[first]  # (m,) one top-scoring row per event
    E_rest = E.copy()
    E_rest[top] = 0.0
    others = np.add.reduceat(E_rest, starts)  # mass (x total) of the non-top rows
    log_total = np.log1p(others)
    if len(rows) == 0:
        z = np.zeros(0)
        return _Side(np.zeros(0, np.int64), z, z, np.zeros(1, np.int64), z, z)
    ev = event_of_row[rows]
    new = np.ones(len(rows), dtype=bool)
    new[1:] = (owner[1:] != owner[:-1]) | (ev[1:] != ev[:-1])
    start = np.flatnonzero(new)
    pair = np.cumsum(new) - 1
    n_pairs = len(start)
    pe = ev[start]
    # mass where g does not fire, without computing 1 - Q: if the top row
    # fires, it is the non-top mass minus the firing non-top rows
    q_rest = np.bincount(pair, weights=E_rest[rows], minlength=n_pairs)
    has_top = np.bincount(pair, weights=(rows == top[ev]), minlength=n_pairs) > 0
    rest = np.maximum(others[pe] - q_rest + (~has_top), 0.0)
    with np.errstate(divide="ignore"):
        lr = np.log(rest) - log_total[pe]
    lq = s[rows] - mx[ev] - log_total[ev]
    return _Side(owner[start], c[pe], lr, np.append(start, len(rows)), lq, v)


def _side_sums(side: _Side, alpha: np.ndarray, n: int):
    """sum c A, sum c E_alpha[g], sum c Var_alpha[g] per candidate, with
    A = log(e^lr + sum_entries e^(lq + alpha v)) (a log-sum-exp per pair)."""
    if len(side.cand) == 0:
        z = np.zeros(n)
        return z, z.copy(), z.copy()
    pair = side.pair_of_entry
    starts = side.ptr[:-1]
    z = side.lq + alpha[side.cand][pair] * side.v
    M = np.maximum(side.lr, np.maximum.reduceat(z, starts))
    w = np.exp(z - M[pair])
    w0 = np.exp(side.lr - M)
    tot = w0 + np.add.reduceat(w, starts)
    A = M + np.log(tot)
    m1 = np.add.reduceat(w * side.v, starts) / tot
    # two-pass variance: no cancellation when the tilted mass is concentrated
    var = (w0 * m1**2 + np.add.reduceat(w * (side.v - m1[pair]) ** 2, starts)) / tot
    return (
        _sum_by(side.cand, side.c * A, n),
        _sum_by(side.cand, side.c * m1, n),
        _sum_by(side.cand, side.c * var, n),
    )


@dataclass
class _CandidateBatch:
    all: _Side
    correct: _Side
    n: int


def _candidate_batch(
    block: CandidateBlock, space: Space, weights: Weights, scaling: Scaling | None, ids: np.ndarray
) -> _CandidateBatch:
    # centering shifts every candidate of an event alike and cancels (Scaling)
    s = candidate_scores(block, space, weights, scaling)
    cols, col = np.unique(ids, return_inverse=True)
    Fc = block.F[:, cols].tocsc()
    Fc.eliminate_zeros()
    Fc.sort_indices()
    owner, rows, x = _expand(Fc.indptr, Fc.indices, Fc.data, col)
    v = x if scaling is None else x * scaling.inv_scale[ids][owner]
    eor = block.event_of_candidate
    ptr = block.event_ptr
    all_side = _side(s, ptr, eor, block.c, rows, owner, v)
    ok = block.correct[rows]
    s_c = np.where(block.correct, s, -np.inf)
    correct_side = _side(s_c, ptr, eor, block.c, rows[ok], owner[ok], v[ok])
    return _CandidateBatch(all_side, correct_side, len(ids))


def gain_derivatives(
    block: Block,
    space: Space,
    weights: Weights,
    scaling: Scaling | None,
    candidate_ids: np.ndarray,
    alphas: np.ndarray,
) -> GainDerivatives:
    """S, S', S'' of one block for candidates ``candidate_ids`` at ``alphas``.

    Parameters
    ----------
    candidate_ids : ndarray of int64, shape (n,)
        Feature ids (``j = p * K + k`` for multiclass); repeats are allowed
        and evaluated independently (e.g. one feature at several alphas).
        An id already in ``weights`` is scored for an increment of its weight.
    alphas : ndarray, shape (n,)
    """
    ids = check_candidate_ids(space, candidate_ids)
    alpha = np.asarray(alphas, dtype=np.float64).ravel()
    if alpha.shape != ids.shape:
        raise ValueError(f"expected one alpha per candidate ({len(ids)}), got {alpha.shape}")
    n = len(ids)
    if isinstance(block, MulticlassBlock):
        b = _multiclass_batch(block, space, weights, scaling, ids)
        S, G, H = _multiclass_derivatives(b, alpha)
        lo, hi = _minmax_by(b.owner, b.v, n)
        vr = np.maximum(np.abs(b.v0), _abs_range(lo, hi))
    else:
        cb = _candidate_batch(block, space, weights, scaling, ids)
        Sc, Gc, Hc = _side_sums(cb.correct, alpha, n)
        Sa, Ga, Ha = _side_sums(cb.all, alpha, n)
        S, G, H = Sc - Sa, Gc - Ga, Hc - Ha
        vr = _abs_range(*_minmax_by(cb.all.cand[cb.all.pair_of_entry], cb.all.v, n))
    return GainDerivatives(S, G, H, float(block.c.sum()), vr)


def _minmax_by(owner: np.ndarray, vals: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-owner min and max of vals (owner nondecreasing); +inf / -inf if none."""
    lo, hi = np.full(n, np.inf), np.full(n, -np.inf)
    if len(owner):
        start = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        lo[owner[start]] = np.minimum.reduceat(vals, start)
        hi[owner[start]] = np.maximum.reduceat(vals, start)
    return lo, hi


def _abs_range(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(|lo|, |hi|), 0 where nothing was seen (lo = +inf, hi = -inf)."""
    return np.where(np.isfinite(lo), np.maximum(np.abs(lo), np.abs(hi)), 0.0)


@dataclass(frozen=True)
class GainDerivativesTask:
    """A picklable pass: S, S', S'' of a batch of candidates at fixed alphas
    (method (a): one pass per Newton iteration)."""

    space: Space
    weights: Weights
    scaling: Scaling | None
    candidate_ids: np.ndarray
    alphas: np.ndarray

    def __call__(self, block: Block) -> GainDerivatives:
        return gain_derivatives(
            block, self.space, self.weights, self.scaling, self.candidate_ids, self.alphas
        )


# ---------------------------------------------------------------------------
# empirical expectations


@dataclass
class FeatureExpectations(Summed):
    """Empirical feature sums over all candidate features (sum units).

    Attributes
    ----------
    value : ndarray, shape (n_features,)
        sum_i c_i E~[g | x_i]: multiclass sum_i c_i g(x_i, y_i) (scaled and
        centered like the model when a Scaling is given); candidate sets
        sum_i c_i / |C_i| sum_{y in C_i} g(x_i, y) (scaled, uncentered: the
        centering cancels in every gain), which is the exact empirical
        expectation when |C_i| = 1 and the uniform model's E_p[g | C_i]
        otherwise.
    count : ndarray, shape (n_features,)
        The same with g replaced by [g != 0] (unscaled).
    weight : float
        W = sum_i c_i.
    """

    value: np.ndarray
    count: np.ndarray
    weight: float


def feature_expectations(
    block: Block, space: Space, scaling: Scaling | None = None
) -> FeatureExpectations:
    if isinstance(block, MulticlassBlock):
        if np.any(block.y < 0):
            raise ValueError(
                "cannot count features of events whose label was not seen in training (label -1)"
            )
        Y = np.zeros((block.n_events, space.n_labels))
        Y[np.arange(block.n_events), block.y] = block.c
        nz = block.X.copy()
        nz.data = np.ones_like(nz.data)
        value = np.asarray(block.X.T @ Y)
        if scaling is not None:
            value = scaling.inv_scale[:, None] * (value - scaling.mean[:, None] * Y.sum(axis=0))
        return FeatureExpectations(
            value.ravel(), np.asarray(nz.T @ Y).ravel(), float(block.c.sum())
        )
    sizes = np.add.reduceat(block.correct.astype(np.float64), block.event_ptr[:-1])
    w = np.where(
        block.correct, np.repeat(block.c / np.maximum(sizes, 1), np.diff(block.event_ptr)), 0.0
    )
    nz = block.F.copy()
    nz.data = np.ones_like(nz.data)
    value = np.asarray(block.F.T @ w).ravel()
    if scaling is not None:
        value = value * scaling.inv_scale
    return FeatureExpectations(value, np.asarray(nz.T @ w).ravel(), float(block.c.sum()))


@dataclass(frozen=True)
class EmpiricalExpectationTask:
    """A picklable pass: FeatureExpectations of every candidate feature."""

    space: Space
    scaling: Scaling | None = None

    def __call__(self, block: Block) -> FeatureExpectations:
        return feature_expectations(block, self.space, self.scaling)


__all__ = [
    "GainDerivatives",
    "GainDerivativesTask",
    "gain_derivatives",
    "FeatureExpectations",
    "feature_expectations",
    "EmpiricalExpectationTask",
    "multiclass_logits",
    "check_candidate_ids",
    "LOGIT_CLIP",
]
