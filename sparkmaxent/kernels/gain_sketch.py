"""The one-pass logit-histogram sketch of a candidate batch (method (b) of
the gain statistics, ``gains.py``), per block (executor side).

``GainSketchTask``: one pass returns, per candidate, a sparse histogram of
the logits of the model mass on the candidates where g fires, in bins of
width ``bin_width``, keeping per bin the sums (c, c t, c t^2). For binary
features the bin-mean approximation errs by at most V / 8 (V the within-bin
variance sum), uniformly in alpha, so the 1-D Newton can run on the driver
at no pass (``solvers/gain_fits.py``). Multiclass features with several values
(counts, tf-idf) get one histogram per (candidate, value): the same bound
holds row by row, so they need no exact passes either. Real-valued
candidate-set features are marked (``GainSketch.valid``) and fitted
exactly. The bound and its second-order refinement: docs/methods/ifs-sgc.md,
"The gain sketch".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .blocks import Block, MulticlassBlock
from .gains import (
    LOGIT_CLIP,
    GainDerivatives,
    _abs_range,
    _candidate_batch,
    _dsigma,
    _expand,
    _minmax_by,
    _multiclass_batch,
    _sum_by,
    _tilt,
    check_candidate_ids,
)
from .params import Scaling, Space, Weights

#: max |sigma''| = 1 / (6 sqrt 3): gives the second-order sketch error bound.
_MAX_SIGMA2 = 1.0 / (6.0 * math.sqrt(3.0))


def _n_bins(bin_width: float) -> int:
    return 2 * int(math.ceil(LOGIT_CLIP / bin_width)) + 2


def _aggregate_values(
    keys: np.ndarray, c: np.ndarray, t: np.ndarray, v: np.ndarray, bin_width: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique (key, value) rows, ordered by key then value, with per-row
    sums (c, c t, c t^2) and the row values: ``_aggregate`` with each
    distinct value folded into the key's group, so rows of different
    feature values never mix."""
    uv, code = np.unique(v, return_inverse=True)
    nv = max(len(uv), 1)
    if nv == 1:
        uk, sums = _aggregate(keys, c, t, bin_width)
        return uk, sums, np.full(len(uk), uv[0] if len(uv) else 0.0)
    nb = _n_bins(bin_width)
    group, b = np.divmod(keys, nb)
    if (float(group.max()) + 1) * nv * nb >= 2.0**62:
        raise ValueError("too many distinct feature values in one sketch block for int64 keys")
    folded, sums = _aggregate((group * nv + code) * nb + b, c, t, bin_width)
    g, b = np.divmod(folded, nb)
    g, vc = np.divmod(g, nv)
    uk, vals = g * nb + b, uv[vc]
    order = np.lexsort((vals, uk))
    return uk[order], sums[order], vals[order]


def _merge_rows(
    keys: np.ndarray, vals: np.ndarray, sums: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows with equal (key, value) summed, ordered by key then value."""
    if not len(keys):
        return keys, vals, sums
    order = np.lexsort((vals, keys))
    k, v, s = keys[order], vals[order], sums[order]
    start = np.flatnonzero(np.r_[True, (k[1:] != k[:-1]) | (v[1:] != v[:-1])])
    return k[start], v[start], np.add.reduceat(s, start, axis=0)


def _aggregate(
    keys: np.ndarray, c: np.ndarray, t: np.ndarray, bin_width: float
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
        dense = group * width + np.where(
            b == clip_lo, 0, np.where(b == clip_hi, width - 1, b - lo + 1)
        )
        present = np.flatnonzero(np.bincount(dense, minlength=size))
        g, d = np.divmod(present, width)
        uk = g * nb + np.where(d == 0, clip_lo, np.where(d == width - 1, clip_hi, d - 1 + lo))
        inv = np.searchsorted(present, dense)
    R = len(uk)
    sums = np.stack(
        [_sum_by(inv, c, R), _sum_by(inv, c * t, R), _sum_by(inv, c * t * t, R)], axis=1
    )
    return uk, sums


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
        Row keys, sorted (a key repeats once per feature value).
    sums : ndarray, shape (R, 3)
        Per row: sum c, sum c t, sum c t^2 over the events (pairs) in it.
    vals : ndarray, shape (R,)
        Per row: the feature value of its events (multiclass candidates;
        0 for candidate sets and the centering rows, whose value is
        ``v_lo`` or ``v0``).
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
    vals: np.ndarray = field(default_factory=lambda: np.zeros(0))
    _rows: dict | None = field(default=None, repr=False, compare=False)

    @property
    def n_candidates(self) -> int:
        return len(self.v0)

    @property
    def nbytes(self) -> int:
        """Size of the arrays shipped to the driver."""
        return int(self.keys.nbytes + self.sums.nbytes + self.vals.nbytes + 4 * self.v0.nbytes)

    def merge(self, other: GainSketch) -> GainSketch:
        if other.bin_width != self.bin_width or other.n_candidates != self.n_candidates:
            raise ValueError("cannot merge sketches of different batches or bin widths")
        uk, vals, sums = _merge_rows(
            np.concatenate([self.keys, other.keys]),
            np.concatenate([self.vals, other.vals]),
            np.concatenate([self.sums, other.sums]),
        )
        return GainSketch(
            self.bin_width,
            uk,
            sums,
            np.minimum(self.v_lo, other.v_lo),
            np.maximum(self.v_hi, other.v_hi),
            self.v0,
            self.labels,
            self.weight + other.weight,
            vals,
        )

    @property
    def valid(self) -> np.ndarray:
        """bool (n,): the sketch represents the candidate: a multiclass one
        (its rows carry their values), or one with a single value where it
        fires (or that never fires); others need method (a)."""
        fires = np.isfinite(self.v_lo)
        same = np.abs(self.v_hi - self.v_lo) <= 1e-12 * np.maximum(1.0, np.abs(self.v_lo))
        return (self.labels >= 0) | ~fires | same

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
        cand_list = [slot[fire]]
        sd_list = [side[fire]]
        sums_list = [self.sums[fire]]
        own = self.labels[slot[fire]] >= 0  # multiclass rows carry their value
        vals_list = [np.where(own, self.vals[fire], v_fire[slot[fire]])]
        centered = np.flatnonzero(self.v0 != 0)
        if centered.size:
            # events where p does not fire = all events of label k minus the
            # firing ones, bin by bin (sums over disjoint sets subtract exactly)
            lab = slot[~fire] - n
            lab_keys = side[~fire] * nb + b[~fire]
            lab_sums = self.sums[~fire]
            lab_ptr = np.searchsorted(lab, np.arange(self.labels.max() + 2))
            o, r, _ = _expand(
                lab_ptr, np.arange(len(lab)), np.zeros(len(lab)), self.labels[centered]
            )
            o = centered[o]
            sel = np.isin(slot, centered) & fire
            keys2 = np.concatenate(
                [o * 2 * nb + lab_keys[r], slot[sel] * 2 * nb + side[sel] * nb + b[sel]]
            )
            s2 = np.concatenate([lab_sums[r], -self.sums[sel]])
            uk, inv = np.unique(keys2, return_inverse=True)
            s2 = np.stack([_sum_by(inv, s2[:, j], len(uk)) for j in range(3)], axis=1)
            keep = s2[:, 0] > 1e-12 * max(self.weight, 1.0)  # drop rows that cancelled
            uk, s2 = uk[keep], s2[keep]
            cs, rm = np.divmod(uk, 2 * nb)
            cand_list.append(cs)
            sd_list.append(rm // nb)
            sums_list.append(s2)
            vals_list.append(self.v0[cs])
        cand, sd, sums, vals = (
            np.concatenate(a) for a in (cand_list, sd_list, sums_list, vals_list)
        )
        order = np.argsort(cand, kind="stable")
        cand, sd, sums, vals = cand[order], sd[order], sums[order], vals[order]
        C = sums[:, 0]
        tbar = np.clip(sums[:, 1] / C, -LOGIT_CLIP, LOGIT_CLIP)
        V = sums[:, 2] - sums[:, 1] ** 2 / C
        V = np.where(V > 1e-12 * np.abs(sums[:, 2]), V, 0.0)  # single-value bins: exactly 0
        self._rows = dict(
            cand=cand,
            sign=np.where(sd == 1, 1.0, -1.0),
            C=C,
            tbar=tbar,
            V=V,
            v=vals,
            ptr=np.searchsorted(cand, np.arange(n + 1)),
        )
        return self._rows

    def derivatives(
        self, alphas: np.ndarray, index: np.ndarray | None = None, order: int = 2
    ) -> GainDerivatives:
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


def _bin_keys(
    slot: np.ndarray, side: int | np.ndarray, t: np.ndarray, bin_width: float
) -> np.ndarray:
    nb = _n_bins(bin_width)
    if len(slot) and (2 * float(slot.max()) + 2) * nb >= 2.0**62:
        raise ValueError(f"bin_width {bin_width} is too small for int64 sketch keys")
    return (slot * 2 + side) * nb + _bin_of(t, bin_width)


def _bin_of(t: np.ndarray, bin_width: float) -> np.ndarray:
    return np.floor(t / bin_width).astype(np.int64) + _n_bins(bin_width) // 2


def gain_sketch(
    block: Block,
    space: Space,
    weights: Weights,
    scaling: Scaling | None,
    candidate_ids: np.ndarray,
    bin_width: float = 0.25,
) -> GainSketch:
    """One block's logit histograms for a batch of candidates (method (b))."""
    if not bin_width > 0:
        raise ValueError(f"expected bin_width > 0, got {bin_width}")
    ids = check_candidate_ids(space, candidate_ids)
    n = len(ids)
    if isinstance(block, MulticlassBlock):
        b = _multiclass_batch(block, space, weights, scaling, ids)
        v_lo, v_hi = _minmax_by(b.owner, b.v, n)
        cor = b.yk > 0
        parts = [
            (_bin_keys(b.owner, 0, b.t, bin_width), b.cw, b.t, b.v),
            # correct side of a multiclass event: deterministic, t = +inf
            (
                _bin_keys(b.owner[cor], 1, np.full(cor.sum(), LOGIT_CLIP), bin_width),
                b.cw[cor],
                np.full(cor.sum(), LOGIT_CLIP),
                b.v[cor],
            ),
        ]
        for label in np.unique(b.k[b.v0 != 0]):
            t = b.T[:, label]
            yes = b.y == label
            parts.append(
                (_bin_keys(np.full(len(t), n + label), 0, t, bin_width), b.c, t, np.zeros(len(t)))
            )
            parts.append(
                (
                    _bin_keys(
                        np.full(yes.sum(), n + label), 1, np.full(yes.sum(), LOGIT_CLIP), bin_width
                    ),
                    b.c[yes],
                    np.full(yes.sum(), LOGIT_CLIP),
                    np.zeros(yes.sum()),
                )
            )
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
            parts.append((_bin_keys(sd.cand, side_id, t, bin_width), sd.c, t, np.zeros(len(t))))
        labels, v0 = np.full(n, -1, dtype=np.int64), np.zeros(n)
    if parts:
        keys, c, t, v = (np.concatenate(a) for a in zip(*parts))
    else:
        keys, c, t, v = np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0)
    uk, sums, vals = _aggregate_values(keys, c, t, v, bin_width)
    return GainSketch(
        float(bin_width), uk, sums, v_lo, v_hi, v0, labels, float(block.c.sum()), vals
    )


@dataclass(frozen=True)
class GainSketchTask:
    """A picklable pass: the logit-histogram sketch of a candidate batch."""

    space: Space
    weights: Weights
    scaling: Scaling | None
    candidate_ids: np.ndarray
    bin_width: float = 0.25

    def __call__(self, block: Block) -> GainSketch:
        return gain_sketch(
            block, self.space, self.weights, self.scaling, self.candidate_ids, self.bin_width
        )


__all__ = ["GainSketch", "GainSketchTask", "gain_sketch"]
