"""Per-candidate gain statistics: IFS / SGC gains and Bayes-factor curvature.

What the kernels compute
------------------------
A candidate feature g is added to the current model p with weight (increment)
alpha, every other weight held fixed (Berger, Della Pietra & Della Pietra
1996, section 4.2; Zhou, Weng, Wu & Jiang 2003, section 2; the "mean field"
of Daume III 2004, section 3.3). For event i (DESIGN.md section 1)::

    A_Y,i(alpha) = log sum_{y in Y_i} p(y | x_i) exp(alpha g(x_i, y))
                 = log Z_{S+g,alpha}(x_i) / Z_S(x_i)
    A_C,i(alpha) = log sum_{y in C_i} p(y | x_i, C_i) exp(alpha g(x_i, y))
    S(alpha)     = sum_i c_i [A_C,i(alpha) - A_Y,i(alpha)]
    S'(alpha)    = sum_i c_i (E_{C,alpha}[g] - E_{Y,alpha}[g])
    S''(alpha)   = sum_i c_i (Var_{C,alpha}[g] - Var_{Y,alpha}[g])

with E_{Y,alpha}, Var_{Y,alpha} under the tilted distribution
p(y | x_i) e^{alpha g} / Z ratio (and likewise within C_i). S(alpha) is the
change of the conditional log-likelihood in *sum* units. For multiclass
events C_i = {y_i}, so A_C,i = alpha g(x_i, y_i), Var_C = 0 and S is concave
(S'' <= 0); with several correct candidates it need not be.

For a multiclass feature g = (p, k), g(x_i, y) = x_ip [y = k] and the ratio
is 1 + P_ik (exp(alpha x_ip) - 1): only events where p fires contribute
(with centering, see ``Scaling``, every event does; handled exactly).

Normalization (one convention, stated once)
-------------------------------------------
Kernels return sums over events, like ``loss.py``; W = sum_i c_i.

* Gain (IFS, SGC; Zhou et al. Eq. 3, Berger's G): G(alpha) = S(alpha) / W,
  the decrease of the DESIGN loss L, a mean over event weight.
  ``GainFit.gain`` is max_alpha G; ``GainFit.loglik_change`` is max S = W G.
* Bayes factor (Daume 2004): the note works with sums over the data, so the
  log posterior of the new weight mu is, in sum units,
  ``h(mu) = S(mu) - mu^2 / (2 sigma^2) - log sqrt(2 pi sigma^2)`` (the log
  likelihood ratio p(D | S+g, mu) / p(D | S) plus the log prior density),
  mu_g maximizes h (Eq. 17, by Newton), the curvature is
  ``a_g = -h''(mu_g) = -S''(mu_g) + 1 / sigma^2`` (Eq. 11 plus the prior's
  precision), and the 1-D Laplace approximation of the log Bayes factor
  log p(D | S+g) / p(D | S) = log int exp(h(mu)) dmu is
  ``h(mu_g) + log sqrt(2 pi / a_g) = S(mu_g) - mu_g^2 / (2 sigma^2) - log(sigma^2 a_g) / 2``.
  Event weights c_i count as repeated events there (the evidence is not
  invariant to rescaling the weights, unlike the gain).

Distributed design
------------------
(a) ``GainDerivativesTask``: one pass per Newton iteration returns, for a
    batch of candidates at given alphas, the mergeable sums S, S', S'' (exact).
    ``newton_gains`` runs a safeguarded (bracketed) Newton over the batch,
    evaluating only the candidates not yet converged. The work per pass is
    O(nnz of the batch's predicate columns): the batch's columns are sliced
    once, expanded to (event, candidate) pairs via the CSC structure and
    reduced with bincount, with no per-candidate Python loop.
(b) ``GainSketchTask``: one pass returns, per candidate, a sparse histogram
    of the logits t = log q - log(1 - q) of the model mass q on the
    candidates where g fires (multiclass: q = P_ik), in bins of width
    ``bin_width``, keeping per bin the sums (c, c t, c t^2). For a feature
    with one value v where it fires (binary features), each event's term is
    ``phi(t, alpha v) = softplus(t + alpha v) - softplus(t)`` and
    d^2 phi / dt^2 = sigma'(t + alpha v) - sigma'(t) lies in [-1/4, 1/4] for
    every alpha; so replacing the events of a bin by their weighted mean logit
    errs by at most V / 8 (V = within-bin sum of c (t - mean)^2), uniformly in
    alpha, hence also on the gain max_alpha S. With the second-order term
    V phi_tt / 2 added the bound becomes 0.0321 * bin_width * V. Newton then
    runs on the driver at no pass; ``fit_gains(method="sketch")`` adds one
    exact pass at the sketch's alphas (the "polish"), so the reported
    S(alpha) is exact and the gain error is second order in the alpha error.
    Real-valued features (several values where they fire) are not
    compressible this way; the sketch marks them (``GainSketch.valid``) and
    ``fit_gains`` fits them with (a). Multiclass centering (``Scaling.mean``)
    makes a candidate non-zero on every event; (a) then adds a dense
    O(events x centered candidates) term per pass, (b) one histogram of all
    events per label, shared by the batch.

Measured with ``fit_gains`` on a LocalBackend of 8 blocks of
``data.synthetic.generate(SyntheticSpec(n_events=100_000,
n_predicates=20_000, n_labels=5, active_per_event=15, n_support=200,
seed=3))``, the current model holding half the planted support, the batch
2,097 candidates (all labels of 400 random predicates seen >= 5 times, and
the inactive planted features); gains in mean units, best 2.5e-2, 100th best
5.4e-5:

    method                          passes  max |gain error|  top-100 rel. error
    (a) exact, to convergence          9        --                --
    (a) stopped after 3 passes         3      3.5e-4            1.4e-1
    (a) stopped after 5 passes         5      3.5e-6            1.1e-2
    (b) width 0.25, order 2            1      1.9e-8 (bound 1.7e-6)  4.2e-5
    (b) width 0.25, order 2, polish    2      5.3e-14           4.2e-10
    (b) width 1.0, order 1             1      2.0e-4            1.3e-1

The sketch held 17.8k rows (0.64 MB) for the batch and one sketch pass cost
about one exact pass (0.06 s here). Candidate sets (20k events, 1,000
candidates, several correct): (a) 5 passes; (b) 0.25/2 errs 1.3e-8 in one
pass, 2.2e-13 polished. Standardized (centered) predicates, 300 candidates:
(a) 11 passes of 1.3 s (the dense term), (b) 2 passes of 0.25 s, 2.8e-13.
Hence ``fit_gains`` defaults to (b) with polish: 2 passes per batch, exact
likelihood change at alphas within the sketch's error of the optimum. Under
a constant P (SGC's uniform start) every bin holds one value and (b) is
exact.

Also here: ``uniform_initial_gains`` (SGC's closed-form initial gains,
Zhou et al. section 3) and ``EmpiricalExpectationTask`` (E~[g] of every
candidate feature, value-weighted and counted).

The driver-side solver (``newton_gains``, ``fit_gains``) takes any backend
with ``run(task)`` (backends/base.py); it lives next to the kernels it
drives and imports no backend.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np
from scipy.special import expit

from .blocks import Block, CandidateBlock, MulticlassBlock
from .loss import candidate_scores, multiclass_scores
from .params import Scaling, Space, Weights

#: Logits are clipped to +-LOGIT_CLIP, which stands for P = 1 or 0 (a
#: probability underflowed to 0, or K = 1): phi(+-LOGIT_CLIP, beta) equals its
#: limit (beta or 0) exactly for |beta| < LOGIT_CLIP - 40. Finite logits are
#: kept as they are (computed from score differences, they never underflow).
LOGIT_CLIP = 1e6
#: Default cap on |alpha|: a feature firing only with one label has alpha* = inf.
DEFAULT_MAX_ALPHA = 30.0
#: Largest change of any event's logit in one Newton step (trust region).
_TRUST_LOGIT = 4.0
#: max |sigma''| = 1 / (6 sqrt 3): gives the second-order sketch error bound.
_MAX_SIGMA2 = 1.0 / (6.0 * math.sqrt(3.0))
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


def _check_ids(space: Space, candidate_ids) -> np.ndarray:
    ids = np.asarray(candidate_ids, dtype=np.int64).ravel()
    if ids.size and (ids.min() < 0 or ids.max() >= space.n_features):
        raise ValueError(f"expected candidate feature ids in [0, {space.n_features}), "
                         f"got values in [{ids.min()}, {ids.max()}]")
    return ids


def _expand(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
            cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
class GainDerivatives:
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
    value_range: np.ndarray

    def merge(self, other: "GainDerivatives") -> "GainDerivatives":
        return GainDerivatives(self.loglik + other.loglik, self.grad + other.grad,
                               self.curv + other.curv, self.weight + other.weight,
                               np.maximum(self.value_range, other.value_range))


def _single_entry_sums(owner: np.ndarray, n: int, t: np.ndarray, v: np.ndarray,
                       alpha: np.ndarray, yk: np.ndarray, cw: np.ndarray):
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


def _dense_sums(t: np.ndarray, yk: np.ndarray, c: np.ndarray, v0: np.ndarray,
                alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
        H[j] = -v0[j] ** 2 * (c @ (pi * qi))
    return S, G, H


@dataclass
class _MulticlassBatch:
    """The (event, candidate) pairs of one block where each candidate's
    predicate fires, plus what the centering term needs."""

    T: np.ndarray          # (m, K) logits of the current model
    y: np.ndarray          # (m,)
    c: np.ndarray          # (m,)
    k: np.ndarray          # (n,) label of each candidate
    v0: np.ndarray         # (n,) feature value where the predicate does not fire
    owner: np.ndarray      # (n_pairs,) candidate position, nondecreasing
    t: np.ndarray          # (n_pairs,) logit of P_ik
    v: np.ndarray          # (n_pairs,) feature value
    yk: np.ndarray         # (n_pairs,) float, [y_i = k]
    cw: np.ndarray         # (n_pairs,) c_i


def _multiclass_batch(block: MulticlassBlock, space: Space, weights: Weights,
                      scaling: Scaling | None, ids: np.ndarray) -> _MulticlassBatch:
    if np.any(block.y < 0):
        raise ValueError("cannot compute gains on events whose label was not seen in "
                         "training (label -1)")
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
    return _MulticlassBatch(T, block.y, block.c, k, v0, owner, T[event, kk], v,
                            (block.y[event] == kk).astype(np.float64), block.c[event])


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
            s2, g2, h2 = _dense_sums(b.T[:, label], (b.y == label).astype(np.float64), b.c,
                                     b.v0[j], alpha[j])
            S[j] += s2
            G[j] += g2
            H[j] += h2
    return S, G, H


@dataclass
class _Side:
    """(event, candidate) pairs of candidate-set events over one side (all
    candidates Y_i, or the correct ones C_i); entries are the candidates
    y of the event on which the feature fires, grouped by pair."""

    cand: np.ndarray       # (n_pairs,) candidate position
    c: np.ndarray          # (n_pairs,) event weight
    lr: np.ndarray         # (n_pairs,) log of the side's mass where g does not fire
    ptr: np.ndarray        # (n_pairs + 1,) entries of pair q: ptr[q]:ptr[q + 1]
    lq: np.ndarray         # (n_entries,) log p(y | x_i, side)
    v: np.ndarray          # (n_entries,) g(x_i, y)

    @property
    def pair_of_entry(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.cand)), np.diff(self.ptr))


def _side(s: np.ndarray, ptr: np.ndarray, event_of_row: np.ndarray, c: np.ndarray,
          rows: np.ndarray, owner: np.ndarray, v: np.ndarray) -> _Side:
    """Build a side from scores ``s`` (-inf on rows outside the side) and the
    firing entries (rows, owner, v), sorted by owner then row."""
    starts = ptr[:-1]
    mx = np.maximum.reduceat(s, starts)
    if not np.all(np.isfinite(mx)):
        raise ValueError("cannot compute gains on candidate-set events without a correct "
                         "candidate")
    E = np.exp(s - mx[event_of_row])
    at_max = np.flatnonzero(s == mx[event_of_row])
    _, first = np.unique(event_of_row[at_max], return_index=True)
    top = at_max[first]                      # (m,) one top-scoring row per event
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
    var = (w0 * m1 ** 2 + np.add.reduceat(w * (side.v - m1[pair]) ** 2, starts)) / tot
    return (_sum_by(side.cand, side.c * A, n), _sum_by(side.cand, side.c * m1, n),
            _sum_by(side.cand, side.c * var, n))


@dataclass
class _CandidateBatch:
    all: _Side
    correct: _Side
    n: int


def _candidate_batch(block: CandidateBlock, space: Space, weights: Weights,
                     scaling: Scaling | None, ids: np.ndarray) -> _CandidateBatch:
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


def gain_derivatives(block: Block, space: Space, weights: Weights, scaling: Scaling | None,
                     candidate_ids: np.ndarray, alphas: np.ndarray) -> GainDerivatives:
    """S, S', S'' of one block for candidates ``candidate_ids`` at ``alphas``.

    Parameters
    ----------
    candidate_ids : ndarray of int64, shape (n,)
        Feature ids (``j = p * K + k`` for multiclass); repeats are allowed
        and evaluated independently (e.g. one feature at several alphas).
        An id already in ``weights`` is scored for an increment of its weight.
    alphas : ndarray, shape (n,)
    """
    ids = _check_ids(space, candidate_ids)
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
        return gain_derivatives(block, self.space, self.weights, self.scaling,
                                self.candidate_ids, self.alphas)


# ---------------------------------------------------------------------------
# (b) one-pass logit-histogram sketch

def _n_bins(bin_width: float) -> int:
    return 2 * int(math.ceil(LOGIT_CLIP / bin_width)) + 2


def _aggregate(keys: np.ndarray, c: np.ndarray, t: np.ndarray, bin_width: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """Unique keys (sorted) and per-key sums (c, c t, c t^2), shape (R, 3).

    Keys are ``group * n_bins + bin`` (``_bin_keys``). The bins in use are
    few (logits of a few tens at most, plus the two of +-LOGIT_CLIP) while
    n_bins is millions, so the bins are renumbered densely, order kept, and
    summed by bincount: a linear pass instead of np.unique's sort, which
    dominated a sketch pass over a large batch. np.unique remains for the
    rare block whose dense range would be large.
    """
    nb = _n_bins(bin_width)
    clip_lo, clip_hi = (int(x) for x in _bin_of(np.array([-LOGIT_CLIP, LOGIT_CLIP]), bin_width))
    group, b = np.divmod(keys, nb)
    inner = (b != clip_lo) & (b != clip_hi)
    lo, hi = (int(b[inner].min()), int(b[inner].max())) if np.any(inner) else (0, -1)
    width = hi - lo + 3  # dense bins: 0 is clip_lo, 1 + (lo .. hi), then clip_hi
    size = (int(group.max()) + 1) * width if len(keys) else 0
    if size > 4 * len(keys) + (1 << 20):
        uk, inv = np.unique(keys, return_inverse=True)
    else:
        dense = group * width + np.where(b == clip_lo, 0, np.where(b == clip_hi, width - 1,
                                                                   b - lo + 1))
        present = np.flatnonzero(np.bincount(dense, minlength=size))
        g, d = np.divmod(present, width)
        uk = g * nb + np.where(d == 0, clip_lo, np.where(d == width - 1, clip_hi, d - 1 + lo))
        inv = np.searchsorted(present, dense)
    R = len(uk)
    sums = np.stack([_sum_by(inv, c, R), _sum_by(inv, c * t, R), _sum_by(inv, c * t * t, R)],
                    axis=1)
    return uk, sums


def _minmax_by(owner: np.ndarray, vals: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-owner min and max of vals (owner nondecreasing); +inf / -inf if none."""
    lo, hi = np.full(n, np.inf), np.full(n, -np.inf)
    if len(owner):
        start = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        lo[owner[start]] = np.minimum.reduceat(vals, start)
        hi[owner[start]] = np.maximum.reduceat(vals, start)
    return lo, hi


@dataclass
class GainSketch:
    """Mergeable one-pass summary of a candidate batch (method (b)).

    Rows are keyed by ``(slot * 2 + side) * n_bins + bin``: slot < n is a
    candidate (its firing events), slot n + k collects all events for label
    k (multiclass centering only); side 1 is the correct side (C_i), side 0
    all candidates (Y_i); bin = floor(t / bin_width) shifted to >= 0.

    Attributes
    ----------
    bin_width : float
        Width of a logit bin.
    keys : ndarray of int64, shape (R,)
        Sorted row keys.
    sums : ndarray, shape (R, 3)
        Per row: sum c, sum c t, sum c t^2 over the events (pairs) in it.
    v_lo, v_hi : ndarray, shape (n,)
        Smallest and largest feature value where each candidate fires
        (+inf / -inf if it never fires).
    v0 : ndarray, shape (n,)
        Feature value on events where the predicate does not fire (non-zero
        only with multiclass centering).
    labels : ndarray of int64, shape (n,)
        Label of each multiclass candidate (-1 for candidate sets).
    weight : float
        W = sum_i c_i.
    """

    bin_width: float
    keys: np.ndarray
    sums: np.ndarray
    v_lo: np.ndarray
    v_hi: np.ndarray
    v0: np.ndarray
    labels: np.ndarray
    weight: float
    _rows: dict | None = field(default=None, repr=False, compare=False)

    @property
    def n_candidates(self) -> int:
        return len(self.v0)

    @property
    def nbytes(self) -> int:
        """Size of the arrays shipped to the driver."""
        return int(self.keys.nbytes + self.sums.nbytes + 4 * self.v0.nbytes)

    def merge(self, other: "GainSketch") -> "GainSketch":
        if other.bin_width != self.bin_width or other.n_candidates != self.n_candidates:
            raise ValueError("cannot merge sketches of different batches or bin widths")
        uk, inv = np.unique(np.concatenate([self.keys, other.keys]), return_inverse=True)
        both = np.concatenate([self.sums, other.sums])
        sums = np.stack([_sum_by(inv, both[:, j], len(uk)) for j in range(3)], axis=1)
        return GainSketch(self.bin_width, uk, sums, np.minimum(self.v_lo, other.v_lo),
                          np.maximum(self.v_hi, other.v_hi), self.v0, self.labels,
                          self.weight + other.weight)

    @property
    def valid(self) -> np.ndarray:
        """bool (n,): the candidate has one value where it fires (or never
        fires), so the sketch represents it; others need method (a)."""
        fires = np.isfinite(self.v_lo)
        same = np.abs(self.v_hi - self.v_lo) <= 1e-12 * np.maximum(1.0, np.abs(self.v_lo))
        return ~fires | same

    def rows(self) -> dict:
        """Rows ready for evaluation (computed once): candidate, side sign
        (+1 correct, -1 all), weight C, mean logit, within-bin V, value v."""
        if self._rows is not None:
            return self._rows
        n, nb = self.n_candidates, _n_bins(self.bin_width)
        slot, rem = np.divmod(self.keys, 2 * nb)
        side, b = np.divmod(rem, nb)
        fire = slot < n
        v_fire = np.where(self.valid & np.isfinite(self.v_lo), self.v_lo, 0.0)
        cand = [slot[fire]]
        sd = [side[fire]]
        sums = [self.sums[fire]]
        vals = [v_fire[slot[fire]]]
        centered = np.flatnonzero(self.v0 != 0)
        if centered.size:
            # events where p does not fire = all events of label k minus the
            # firing ones, bin by bin (sums over disjoint sets subtract exactly)
            lab = slot[~fire] - n
            lab_keys = side[~fire] * nb + b[~fire]
            lab_sums = self.sums[~fire]
            lab_ptr = np.searchsorted(lab, np.arange(self.labels.max() + 2))
            o, r, _ = _expand(lab_ptr, np.arange(len(lab)), np.zeros(len(lab)),
                              self.labels[centered])
            o = centered[o]
            sel = np.isin(slot, centered) & fire
            keys2 = np.concatenate([o * 2 * nb + lab_keys[r],
                                    slot[sel] * 2 * nb + side[sel] * nb + b[sel]])
            s2 = np.concatenate([lab_sums[r], -self.sums[sel]])
            uk, inv = np.unique(keys2, return_inverse=True)
            s2 = np.stack([_sum_by(inv, s2[:, j], len(uk)) for j in range(3)], axis=1)
            keep = s2[:, 0] > 1e-12 * max(self.weight, 1.0)  # drop rows that cancelled
            uk, s2 = uk[keep], s2[keep]
            cs, rm = np.divmod(uk, 2 * nb)
            cand.append(cs)
            sd.append(rm // nb)
            sums.append(s2)
            vals.append(self.v0[cs])
        cand, sd, sums, vals = (np.concatenate(a) for a in (cand, sd, sums, vals))
        order = np.argsort(cand, kind="stable")
        cand, sd, sums, vals = cand[order], sd[order], sums[order], vals[order]
        C = sums[:, 0]
        tbar = np.clip(sums[:, 1] / C, -LOGIT_CLIP, LOGIT_CLIP)
        V = sums[:, 2] - sums[:, 1] ** 2 / C
        V = np.where(V > 1e-12 * np.abs(sums[:, 2]), V, 0.0)  # single-value bins: exactly 0
        self._rows = dict(cand=cand, sign=np.where(sd == 1, 1.0, -1.0), C=C, tbar=tbar, V=V,
                          v=vals, ptr=np.searchsorted(cand, np.arange(n + 1)))
        return self._rows

    def derivatives(self, alphas: np.ndarray, index: np.ndarray | None = None,
                    order: int = 2) -> GainDerivatives:
        """S, S', S'' from the sketch (no pass), for candidates ``index``
        (positions in the batch; default all) at ``alphas``.

        ``order=1`` uses the bin means only; ``order=2`` adds the within-bin
        variance term V phi_tt / 2 (see ``error_bound``).
        """
        if order not in (1, 2):
            raise ValueError(f"expected order 1 or 2, got {order}")
        n = self.n_candidates
        index = np.arange(n) if index is None else np.asarray(index, dtype=np.int64)
        alphas = np.asarray(alphas, dtype=np.float64)
        r = self.rows()
        # the rows of every requested candidate (repeats allowed), by query position
        q, sel, _ = _expand(r["ptr"], np.arange(len(r["cand"])), r["cand"], index)
        sign, C, tbar, V, v = (r[k][sel] for k in ("sign", "C", "tbar", "V", "v"))
        beta = alphas[q] * v
        phi, s1, q1 = _tilt(tbar, beta)
        d1 = s1 * q1
        term, g, h = C * phi, C * v * s1, C * v * v * d1
        if order == 2:
            term = term + 0.5 * V * (d1 - _dsigma(tbar))
            g = g + 0.5 * V * v * d1 * (1.0 - 2.0 * s1)
            h = h + 0.5 * V * v * v * d1 * (1.0 - 6.0 * s1 + 6.0 * s1 * s1)
        out = [_sum_by(q, sign * a, len(index)) for a in (term, g, h)]
        vr = np.maximum(np.abs(self.v0), _abs_range(self.v_lo, self.v_hi))[index]
        return GainDerivatives(out[0], out[1], out[2], self.weight, vr)

    def error_bound(self, order: int = 2) -> np.ndarray:
        """Bound on |S_sketch(alpha) - S(alpha)| valid for every alpha (and
        so on the gain), per candidate, sum units, shape (n,).

        Order 1: |phi_tt| <= 1/4 gives sum V / 8. Order 2: the remainder is
        phi_ttt (t - tbar)^3 / 6 with |phi_ttt| <= 2 max|sigma''| and
        |t - tbar| <= bin_width, giving 0.0321 * bin_width * sum V.
        Meaningful for valid candidates only.
        """
        r = self.rows()
        const = 0.125 if order == 1 else (2.0 * _MAX_SIGMA2 / 6.0) * self.bin_width
        return const * _sum_by(r["cand"], r["V"], self.n_candidates)


def _bin_keys(slot: np.ndarray, side: int | np.ndarray, t: np.ndarray, bin_width: float
              ) -> np.ndarray:
    nb = _n_bins(bin_width)
    if len(slot) and (2 * float(slot.max()) + 2) * nb >= 2.0 ** 62:
        raise ValueError(f"bin_width {bin_width} is too small for int64 sketch keys")
    return (slot * 2 + side) * nb + _bin_of(t, bin_width)


def _bin_of(t: np.ndarray, bin_width: float) -> np.ndarray:
    return np.floor(t / bin_width).astype(np.int64) + _n_bins(bin_width) // 2


def gain_sketch(block: Block, space: Space, weights: Weights, scaling: Scaling | None,
                candidate_ids: np.ndarray, bin_width: float = 0.25) -> GainSketch:
    """One block's logit histograms for a batch of candidates (method (b))."""
    if not bin_width > 0:
        raise ValueError(f"expected bin_width > 0, got {bin_width}")
    ids = _check_ids(space, candidate_ids)
    n = len(ids)
    if isinstance(block, MulticlassBlock):
        b = _multiclass_batch(block, space, weights, scaling, ids)
        v_lo, v_hi = _minmax_by(b.owner, b.v, n)
        cor = b.yk > 0
        parts = [(_bin_keys(b.owner, 0, b.t, bin_width), b.cw, b.t),
                 # correct side of a multiclass event: deterministic, t = +inf
                 (_bin_keys(b.owner[cor], 1, np.full(cor.sum(), LOGIT_CLIP), bin_width),
                  b.cw[cor], np.full(cor.sum(), LOGIT_CLIP))]
        for label in np.unique(b.k[b.v0 != 0]):
            t = b.T[:, label]
            yes = b.y == label
            parts.append((_bin_keys(np.full(len(t), n + label), 0, t, bin_width), b.c, t))
            parts.append((_bin_keys(np.full(yes.sum(), n + label), 1,
                                    np.full(yes.sum(), LOGIT_CLIP), bin_width),
                          b.c[yes], np.full(yes.sum(), LOGIT_CLIP)))
        labels, v0 = b.k, b.v0
    else:
        cb = _candidate_batch(block, space, weights, scaling, ids)
        v_lo, v_hi = np.full(n, np.inf), np.full(n, -np.inf)
        parts = []
        for side_id, sd in ((0, cb.all), (1, cb.correct)):
            if len(sd.cand) == 0:
                continue
            pair = sd.pair_of_entry
            lo, hi = _minmax_by(sd.cand[pair], sd.v, n)
            v_lo, v_hi = np.minimum(v_lo, lo), np.maximum(v_hi, hi)
            # a single-valued feature fires with total mass q = sum of entries
            starts = sd.ptr[:-1]
            mx = np.maximum.reduceat(sd.lq, starts)
            lq = mx + np.log(np.add.reduceat(np.exp(sd.lq - mx[pair]), starts))
            with np.errstate(invalid="ignore"):
                t = np.clip(np.nan_to_num(lq - sd.lr, nan=-LOGIT_CLIP), -LOGIT_CLIP, LOGIT_CLIP)
            parts.append((_bin_keys(sd.cand, side_id, t, bin_width), sd.c, t))
        labels, v0 = np.full(n, -1, dtype=np.int64), np.zeros(n)
    if parts:
        keys, c, t = (np.concatenate(a) for a in zip(*parts))
    else:
        keys, c, t = np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    uk, sums = _aggregate(keys, c, t, bin_width)
    return GainSketch(float(bin_width), uk, sums, v_lo, v_hi, v0, labels, float(block.c.sum()))


@dataclass(frozen=True)
class GainSketchTask:
    """A picklable pass: the logit-histogram sketch of a candidate batch."""

    space: Space
    weights: Weights
    scaling: Scaling | None
    candidate_ids: np.ndarray
    bin_width: float = 0.25

    def __call__(self, block: Block) -> GainSketch:
        return gain_sketch(block, self.space, self.weights, self.scaling, self.candidate_ids,
                           self.bin_width)


# ---------------------------------------------------------------------------
# driver side: safeguarded 1-D Newton over a batch

class _Runs(Protocol):
    space: Space

    def run(self, task): ...


@dataclass
class GainFit:
    """Fitted 1-D weights of a candidate batch.

    Attributes
    ----------
    candidate_ids : ndarray of int64, shape (n,)
    alpha : ndarray, shape (n,)
        alpha* (gain) or mu_g (with a prior), capped at +-max_alpha.
    loglik_change : ndarray, shape (n,)
        S(alpha): change of the conditional log-likelihood, sum units;
        evaluated, or extrapolated along a last Newton step shorter than
        sqrt(xtol) (1 + |alpha|) (error O(step^3)).
    gain : ndarray, shape (n,)
        S(alpha) / W: the approximate gain (Zhou et al. Eq. 3), mean units
        (with a prior: at mu_g, which is not the maximizer of S).
    grad : ndarray, shape (n,)
        S'(alpha) (0 at an interior optimum without prior, alpha / sigma^2
        with one).
    curvature : ndarray, shape (n,)
        -S'' + 1 / sigma^2: a_g of Daume (Eq. 11 plus prior precision), from
        the last evaluated point (within sqrt(xtol) (1 + |alpha|) of alpha).
    at_cap : ndarray of bool, shape (n,)
        alpha hit +-max_alpha with the likelihood still rising (alpha* = inf).
    converged : ndarray of bool, shape (n,)
    iterations : ndarray of int64, shape (n,)
        Passes (evaluations) in which the candidate took part.
    passes : int
        Passes over the data (backend.run calls).
    weight : float
        W = sum_i c_i.
    prior_variance : float or None
    log_evidence : ndarray, shape (n,), or None
        1-D Laplace approximation of log p(D | S+g) / p(D | S) (with a prior).
    error_bound : ndarray, shape (n,), or None
        Sketch method: bound on |S_sketch - S| (sum units) before polishing.
    """

    candidate_ids: np.ndarray
    alpha: np.ndarray
    loglik_change: np.ndarray
    gain: np.ndarray
    grad: np.ndarray
    curvature: np.ndarray
    at_cap: np.ndarray
    converged: np.ndarray
    iterations: np.ndarray
    passes: int
    weight: float
    prior_variance: float | None = None
    log_evidence: np.ndarray | None = None
    error_bound: np.ndarray | None = None


def laplace_log_evidence(loglik_change: np.ndarray, mu: np.ndarray, curvature: np.ndarray,
                         prior_variance: float) -> np.ndarray:
    """1-D Laplace approximation of the log Bayes factor (Daume 2004, 3.4):

        log int exp(S(m)) N(m; 0, sigma^2) dm
          ~ S(mu) - mu^2 / (2 sigma^2) - log(sigma^2 a) / 2,   a = -h''(mu).
    """
    return (np.asarray(loglik_change) - np.asarray(mu) ** 2 / (2.0 * prior_variance)
            - 0.5 * np.log(prior_variance * np.asarray(curvature)))


def newton_gains(evaluate: Callable[[np.ndarray, np.ndarray], GainDerivatives], n: int, *,
                 prior_variance: float | None = None, alpha0: np.ndarray | None = None,
                 max_alpha: float = DEFAULT_MAX_ALPHA, xtol: float = 1e-9,
                 max_iter: int = 60) -> tuple[GainFit, int]:
    """Maximize F(alpha) = S(alpha) - alpha^2 / (2 sigma^2) for n candidates at once.

    Safeguarded Newton on F' (in the spirit of rtsafe, Numerical Recipes
    9.4), vectorized over the batch; each evaluation is one pass (method (a))
    or free (a sketch). Per candidate:

    * every evaluated point narrows a bracket [lo, hi] around the root of F'
      (F' decreases where F is concave), starting from the caps +-max_alpha;
    * the next point is the Newton step if it stays inside the bracket and
      (once bracketed) steps at least halve; else regula falsi between the
      bracket ends (Illinois), bisection if that fails, or the cap on a side
      not yet tried; while the bracket is open on the step's side and Newton
      steps do not shrink (F saturates: a feature firing with one label only
      has F' ~ e^-alpha and Newton steps near 1), steps grow 4-fold;
    * a second point per pass hedges the Newton step: the same step clipped
      to a trust region where no event's logit moves by more than
      _TRUST_LOGIT (alpha * GainDerivatives.value_range). A feature with a
      large value on a few events (a rare standardized predicate) has an
      F' with a sharp kink that a single Newton step overshoots by far; the
      two points cost one pass and about twice the arithmetic;
    * the better of the points (smaller |F'|) becomes the current one. A
      candidate stops when its Newton step is below xtol (1 + |alpha|) (or
      below sqrt(xtol) (1 + |alpha|) in the quadratic regime: the step is then
      taken without a pass and S, S' extrapolated along it), when its bracket
      collapses, or at a cap with F' still pointing outward (``at_cap``).

    Parameters
    ----------
    evaluate : callable (index, alphas) -> GainDerivatives
        Sums for the candidates at positions ``index`` (shape (r,), repeats
        allowed) at ``alphas`` (shape (r,)).
    n : int
        Batch size.

    Returns
    -------
    (GainFit, evaluations): GainFit.passes is left 0 for the caller to set.
    """
    lam = 0.0 if prior_variance is None else 1.0 / prior_variance
    if prior_variance is not None and not prior_variance > 0:
        raise ValueError(f"expected prior_variance > 0, got {prior_variance}")
    start = np.zeros(n) if alpha0 is None else np.clip(np.asarray(alpha0, float), -max_alpha,
                                                       max_alpha)
    alpha, S, G, H = start.copy(), np.zeros(n), np.zeros(n), np.zeros(n)
    F1c, F2c = np.zeros(n), np.zeros(n)        # F', F'' at the current point
    lo, hi = np.full(n, -max_alpha), np.full(n, max_alpha)
    lo_ev, hi_ev = np.zeros(n, bool), np.zeros(n, bool)
    flo, fhi = np.zeros(n), np.zeros(n)        # F' at lo and hi (Illinois-scaled)
    last = np.zeros(n, np.int8)                # bracket end moved last: 1 lo, -1 hi
    prev, prev_newton = np.zeros(n), np.zeros(n)
    trust = np.full(n, np.inf)
    done, at_cap = np.zeros(n, bool), np.zeros(n, bool)
    iters = np.zeros(n, np.int64)
    weight, evaluations = float("nan"), 0
    plan = [(np.arange(n), start.copy())]  # groups of points: a candidate at most once each
    for _ in range(max_iter):
        plan_idx = np.concatenate([q for q, _ in plan])
        if plan_idx.size == 0:
            break
        plan_a = np.concatenate([a for _, a in plan])
        d = evaluate(plan_idx, plan_a)
        evaluations += 1
        weight = d.weight
        F1, F2 = d.grad - lam * plan_a, d.curv - lam
        with np.errstate(divide="ignore"):
            trust[plan_idx] = _TRUST_LOGIT / d.value_range
        # apply the groups in order (bracket, Illinois, best point); the
        # first group holds every active candidate
        bounds = np.cumsum([0] + [len(q) for q, _ in plan])
        best = np.full(n, np.inf)
        for b0, b1 in zip(bounds[:-1], bounds[1:]):
            grp = slice(b0, b1)
            q, a, f1 = plan_idx[grp], plan_a[grp], F1[grp]
            for side, upd, ends, fends, other in ((1, f1 > 0, lo, flo, fhi),
                                                  (-1, f1 < 0, hi, fhi, flo)):
                u = q[upd]
                other[u[last[u] == side]] *= 0.5  # Illinois: same end moved twice
                last[u] = side
                ends[u], fends[u] = a[upd], f1[upd]
            lo_ev[q[f1 > 0]] = True
            hi_ev[q[f1 < 0]] = True
            better = np.abs(f1) < best[q]
            b = q[better]
            best[b] = np.abs(f1[better])
            alpha[b], S[b], G[b], H[b] = a[better], d.loglik[grp][better], \
                d.grad[grp][better], d.curv[grp][better]
            F1c[b], F2c[b] = f1[better], F2[grp][better]
        idx = plan[0][0]
        iters[idx] += 1
        a, f1, f2 = alpha[idx], F1c[idx], F2c[idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(f2 < 0, -f1 / f2, np.sign(f1) * np.inf)
        tol = xtol * (1.0 + np.abs(a))
        conv = (f1 == 0) | (np.abs(step) <= tol)
        capped = ((a >= max_alpha) & (f1 > 0)) | ((a <= -max_alpha) & (f1 < 0))
        collapsed = lo_ev[idx] & hi_ev[idx] & (hi[idx] - lo[idx] <= tol)
        # quadratic regime, step below sqrt(xtol): the next step would be
        # below xtol, so take this one without a pass and extrapolate S, S'
        # along it (error O(step^3) in S, O(step^2) in S')
        with np.errstate(invalid="ignore"):
            finish = (~conv & ~capped & ~collapsed & (f2 < 0)
                      & (np.abs(step) <= math.sqrt(xtol) * (1.0 + np.abs(a)))
                      & (a + step > lo[idx]) & (a + step < hi[idx]))
        if np.any(finish):
            f, st = idx[finish], step[finish]
            alpha[f] = a[finish] + st
            S[f] += G[f] * st + 0.5 * H[f] * st * st
            G[f] += H[f] * st
        fin = conv | capped | collapsed | finish
        done[idx[fin]] = True
        at_cap[idx[capped & ~conv]] = True
        # plan the next points of the rest
        r = idx[~fin]
        a, st = a[~fin], step[~fin]
        p, pn = prev[r], prev_newton[r]
        prev_newton[r] = st
        lo_r, hi_r = lo[r], hi[r]
        bracketed = lo_ev[r] & hi_ev[r]
        open_side = np.where(st > 0, ~hi_ev[r], ~lo_ev[r])
        grow = (np.sign(st) == np.sign(pn)) & (np.sign(st) == np.sign(p)) & open_side \
            & (np.abs(st) > 0.5 * np.abs(pn))
        big = np.where(grow, np.sign(st) * np.maximum(np.abs(st), 4.0 * np.abs(p)), st)
        target = a + big
        newton = (target > lo_r) & (target < hi_r) \
            & ~(bracketed & (np.abs(big) > 0.5 * np.abs(p)) & (p != 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            secant = lo_r + flo[r] * (hi_r - lo_r) / (flo[r] - fhi[r])
        secant_ok = bracketed & (secant > lo_r) & (secant < hi_r)
        fallback = np.where(secant_ok, secant, 0.5 * (lo_r + hi_r))
        cap = np.where(st > 0, hi_r, lo_r)
        target = np.where(newton, target, np.where(~newton & open_side, cap, fallback))
        prev[r] = target - a
        with np.errstate(invalid="ignore"):
            small = a + np.clip(st, -trust[r], trust[r])
            hedge = (small > lo_r) & (small < hi_r) \
                & (np.abs(small - target) > xtol * (1.0 + np.abs(a)))
        plan = [(r, target), (r[hedge], small[hedge])]
    curvature = -H + lam
    fit = GainFit(np.arange(n), alpha, S, S / weight if n else S, G, curvature, at_cap, done,
                  iters, 0, weight, prior_variance,
                  None if prior_variance is None
                  else laplace_log_evidence(S, alpha, curvature, prior_variance))
    return fit, evaluations


def _fit_exact(backend: _Runs, weights: Weights, ids: np.ndarray, scaling: Scaling | None,
               opts: dict) -> GainFit:
    space = backend.space

    def evaluate(index, alphas):
        return backend.run(GainDerivativesTask(space, weights, scaling, ids[index], alphas))

    fit, evaluations = newton_gains(evaluate, len(ids), **opts)
    fit.passes = evaluations
    return fit


def _fit_sketch(backend: _Runs, weights: Weights, ids: np.ndarray, scaling: Scaling | None,
                opts: dict, bin_width: float = 0.25, order: int = 2,
                polish: bool = True) -> GainFit:
    if ids.size == 0:
        return _fit_exact(backend, weights, ids, scaling, opts)  # no pass
    space = backend.space
    sketch = backend.run(GainSketchTask(space, weights, scaling, ids, bin_width))
    passes = 1
    fit, _ = newton_gains(lambda index, alphas: sketch.derivatives(alphas, index, order),
                          len(ids), **opts)
    fit.error_bound = sketch.error_bound(order)
    invalid = np.flatnonzero(~sketch.valid)
    if invalid.size:  # real-valued features: exact Newton, a pass per iteration
        sub = _fit_exact(backend, weights, ids[invalid], scaling, opts)
        passes += sub.passes
        for name in ("alpha", "loglik_change", "grad", "curvature", "at_cap", "converged",
                     "iterations"):
            getattr(fit, name)[invalid] = getattr(sub, name)
        fit.error_bound[invalid] = 0.0
    if polish:
        # exact S, S', S'' at the sketch's alphas: the reported likelihood
        # change is exact at alpha, and short of the optimum by ~ F'^2 / 2a
        good = np.flatnonzero(sketch.valid)
        if good.size:
            d = backend.run(GainDerivativesTask(space, weights, scaling, ids[good],
                                                fit.alpha[good]))
            passes += 1
            lam = 0.0 if fit.prior_variance is None else 1.0 / fit.prior_variance
            fit.loglik_change[good], fit.grad[good] = d.loglik, d.grad
            fit.curvature[good] = -d.curv + lam
    fit.gain = fit.loglik_change / fit.weight
    if fit.prior_variance is not None:
        fit.log_evidence = laplace_log_evidence(fit.loglik_change, fit.alpha, fit.curvature,
                                                fit.prior_variance)
    fit.passes = passes
    return fit


#: Methods of ``fit_gains``: name -> fitter(backend, weights, ids, scaling, opts, **kw).
GAIN_METHODS: dict[str, Callable[..., GainFit]] = {"exact": _fit_exact, "sketch": _fit_sketch}


def fit_gains(backend: _Runs, weights: Weights, candidate_ids: np.ndarray,
              scaling: Scaling | None = None, *, method: str = "sketch",
              prior_variance: float | None = None, alpha0: np.ndarray | None = None,
              max_alpha: float = DEFAULT_MAX_ALPHA, xtol: float = 1e-9, max_iter: int = 60,
              **method_options) -> GainFit:
    """Gains (IFS/SGC) or Bayes-factor statistics of a batch of candidates.

    Parameters
    ----------
    backend : object with ``space`` and ``run(task)`` (backends.Backend)
    weights : Weights
        The current model, held fixed.
    candidate_ids : ndarray of int64, shape (n,)
    method : {"sketch", "exact"}
        "sketch" (default): one sketch pass, Newton on the driver, one exact
        polish pass: 2 passes per batch (method (b); options ``bin_width``
        (0.25), ``order`` (2), ``polish`` (True)); real-valued candidates
        fall back to "exact". "exact": Newton with one pass per iteration
        (method (a)), typically 5-9 passes per batch, more with centering.
    prior_variance : float or None
        sigma^2 of the Gaussian prior on the new weight: fit mu_g and the
        Laplace log evidence (Daume 2004); None fits the plain gain.
    alpha0 : ndarray, shape (n,), or None
        Starting alphas (e.g. last round's); default 0.
    """
    if method not in GAIN_METHODS:
        raise ValueError(f"expected method in {sorted(GAIN_METHODS)}, got {method!r}")
    ids = _check_ids(backend.space, candidate_ids)
    opts = dict(prior_variance=prior_variance, alpha0=alpha0, max_alpha=max_alpha, xtol=xtol,
                max_iter=max_iter)
    fit = GAIN_METHODS[method](backend, weights, ids, scaling, opts, **method_options)
    fit.candidate_ids = ids
    return fit


# ---------------------------------------------------------------------------
# SGC's closed-form initial gains (Zhou et al. 2003, section 3)

@dataclass
class UniformGains:
    """Closed-form 1-D optima under a model with P(k | x) = pi_k for all x.

    Attributes
    ----------
    alpha : ndarray, shape (n_features,)
    gain : ndarray, shape (n_features,)
        Mean units (S / W).
    curvature : ndarray, shape (n_features,)
        -S''(alpha) = N pi_a (1 - pi_a), pi_a the new P(k | x) (sum units).
    at_cap : ndarray of bool, shape (n_features,)
    """

    alpha: np.ndarray
    gain: np.ndarray
    curvature: np.ndarray
    at_cap: np.ndarray


def uniform_initial_gains(counts: np.ndarray, weight: float, n_labels: int,
                          label_probs: np.ndarray | None = None,
                          max_alpha: float = DEFAULT_MAX_ALPHA) -> UniformGains:
    """Gains of every binary (predicate, label) feature under the uniform
    model, in closed form: SGC's initial g(j, 0) and alpha(j, 0) (Zhou et al.
    2003, section 3), with no pass beyond the feature counts.

    Derivation. Let N = weight of events where p fires, n = weight of those
    with label k (``counts[p * K + k]``), q = n / N, and pi = P(k | x) the
    same for every event (1 / K for the uniform model; softmax(b)_k for a
    bias-only model). Then W G(alpha) = n alpha - N log(1 - pi + pi e^alpha),
    W G'(alpha) = n - N pi e^alpha / (1 - pi + pi e^alpha) = 0 solves exactly::

        alpha* = log(q (1 - pi) / ((1 - q) pi))      [= log(n (K - 1) / (N - n)), uniform]
        G*     = (N / W) KL(Bernoulli(q) || Bernoulli(pi))
               = (N / W) [q log(q / pi) + (1 - q) log((1 - q) / (1 - pi))].

    In words: N / W is the empirical probability that the predicate fires
    and n / W = E~[f]; the gain is the firing mass times the divergence of
    the empirical label distribution where p fires from the model's. The
    curvature there is -W G''(alpha*) = N q (1 - q). If n = 0 or n = N,
    alpha* is infinite: alpha is capped at -+max_alpha and G is reported
    there. With a scale-only Scaling the gains are unchanged and alpha is
    divided by inv_scale; centering breaks the closed form (use fit_gains).

    Parameters
    ----------
    counts : ndarray, shape (n_predicates * n_labels,)
        ``stats.FeatureCounts.counts`` of multiclass events with binary
        predicates (every training label known, no scaling).
    weight : float
        W = sum_i c_i.
    n_labels : int
    label_probs : ndarray, shape (n_labels,), or None
        pi; default uniform 1 / K.
    """
    counts = np.asarray(counts, dtype=np.float64)
    K = int(n_labels)
    if counts.size % K:
        raise ValueError(f"expected counts of length n_predicates * {K}, got {counts.size}")
    pi = np.full(K, 1.0 / K) if label_probs is None else np.asarray(label_probs, float)
    if pi.shape != (K,) or np.any(pi <= 0) or abs(pi.sum() - 1) > 1e-9:
        raise ValueError(f"expected {K} positive label probabilities summing to 1, got {pi}")
    C = counts.reshape(-1, K)
    N = np.broadcast_to(C.sum(axis=1, keepdims=True), C.shape)
    P = np.broadcast_to(pi, C.shape)
    n_ = C
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = np.log(n_) + np.log1p(-P) - np.log(N - n_) - np.log(P)
    alpha = np.where(N > 0, alpha, 0.0)
    at_cap = (N > 0) & (np.abs(alpha) >= max_alpha)
    alpha = np.clip(alpha, -max_alpha, max_alpha)
    # G at alpha (exact formula: also right at the cap)
    log_ratio = np.logaddexp(np.log1p(-P), np.log(P) + alpha)  # log(1 - pi + pi e^alpha)
    gain = (n_ * alpha - N * log_ratio) / weight
    pi_a = np.exp(np.log(P) + alpha - log_ratio)
    curvature = N * pi_a * np.exp(np.log1p(-P) - log_ratio)
    return UniformGains(alpha.ravel(), gain.ravel(), curvature.ravel(), at_cap.ravel())


# ---------------------------------------------------------------------------
# empirical expectations

@dataclass
class FeatureExpectations:
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

    def merge(self, other: "FeatureExpectations") -> "FeatureExpectations":
        return FeatureExpectations(self.value + other.value, self.count + other.count,
                                   self.weight + other.weight)


def feature_expectations(block: Block, space: Space,
                         scaling: Scaling | None = None) -> FeatureExpectations:
    if isinstance(block, MulticlassBlock):
        if np.any(block.y < 0):
            raise ValueError("cannot count features of events whose label was not seen in "
                             "training (label -1)")
        Y = np.zeros((block.n_events, space.n_labels))
        Y[np.arange(block.n_events), block.y] = block.c
        nz = block.X.copy()
        nz.data = np.ones_like(nz.data)
        value = np.asarray(block.X.T @ Y)
        if scaling is not None:
            value = scaling.inv_scale[:, None] * (value - scaling.mean[:, None] * Y.sum(axis=0))
        return FeatureExpectations(value.ravel(), np.asarray(nz.T @ Y).ravel(),
                                   float(block.c.sum()))
    sizes = np.add.reduceat(block.correct.astype(np.float64), block.event_ptr[:-1])
    w = np.where(block.correct, np.repeat(block.c / np.maximum(sizes, 1), np.diff(block.event_ptr)),
                 0.0)
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


__all__ = ["GainDerivatives", "GainDerivativesTask", "gain_derivatives", "GainSketch",
           "GainSketchTask", "gain_sketch", "GainFit", "newton_gains", "fit_gains",
           "GAIN_METHODS", "laplace_log_evidence", "UniformGains", "uniform_initial_gains",
           "FeatureExpectations", "feature_expectations", "EmpiricalExpectationTask",
           "multiclass_logits", "LOGIT_CLIP", "DEFAULT_MAX_ALPHA"]
