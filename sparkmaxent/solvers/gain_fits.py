"""The 1-D gain solvers (driver side): fit each candidate's weight alpha with
every other weight fixed, from the per-block sums of ``kernels/gains.py``
(exact, one pass per Newton iteration) or ``kernels/gain_sketch.py`` (one
sketch pass, Newton on the driver, then one exact "polish" pass).

* Gain (IFS, SGC; Zhou et al. 2003, Eq. 3; Berger et al. 1996, section 4.2):
  G(alpha) = S(alpha) / W, mean units; ``GainFit.loglik_change`` is max S.
* Bayes factor (Daume III 2004, sections 3.3-3.4), in sum units: mu_g
  maximizes h(mu) = S(mu) + log N(mu; 0, sigma^2) (Eq. 17), the curvature is
  a_g = -S''(mu_g) + 1 / sigma^2 (Eq. 11 plus the prior's precision).

``uniform_initial_gains`` is SGC's closed form under the uniform model (Zhou
et al. 2003, section 3). The solvers take any backend with ``space`` and
``run(task)`` (backends/base.py) and import no backend. Details:
docs/methods/ifs-sgc.md ("The gain kernel", "The gain sketch").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..errors import check_finite
from ..kernels.gain_sketch import GainSketchTask
from ..kernels.gains import GainDerivatives, GainDerivativesTask, check_candidate_ids
from ..kernels.params import Scaling, Space, Weights

#: Default cap on |alpha|: a feature firing only with one label has alpha* = inf.
DEFAULT_MAX_ALPHA = 30.0
#: Largest change of any event's logit in one Newton step (trust region).
_TRUST_LOGIT = 4.0


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


def laplace_log_evidence(
    loglik_change: np.ndarray, mu: np.ndarray, curvature: np.ndarray, prior_variance: float
) -> np.ndarray:
    """1-D Laplace approximation of the log Bayes factor (Daume 2004, 3.4):

    log int exp(S(m)) N(m; 0, sigma^2) dm
      ~ S(mu) - mu^2 / (2 sigma^2) - log(sigma^2 a) / 2,   a = -h''(mu).
    """
    return (
        np.asarray(loglik_change)
        - np.asarray(mu) ** 2 / (2.0 * prior_variance)
        - 0.5 * np.log(prior_variance * np.asarray(curvature))
    )


def newton_gains(
    derivatives: Callable[[np.ndarray, np.ndarray], GainDerivatives],
    n: int,
    *,
    prior_variance: float | None = None,
    alpha0: np.ndarray | None = None,
    max_alpha: float = DEFAULT_MAX_ALPHA,
    xtol: float = 1e-9,
    max_iter: int = 60,
) -> tuple[GainFit, int]:
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
    derivatives : callable (index, alphas) -> GainDerivatives
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
    start = (
        np.zeros(n) if alpha0 is None else np.clip(np.asarray(alpha0, float), -max_alpha, max_alpha)
    )
    st = _NewtonState(n, start, max_alpha)
    weight, evaluations = float("nan"), 0
    plan = [(np.arange(n), start.copy())]  # groups of points: a candidate at most once each
    for _ in range(max_iter):
        plan_idx = np.concatenate([q for q, _ in plan])
        if plan_idx.size == 0:
            break
        plan_a = np.concatenate([a for _, a in plan])
        d = derivatives(plan_idx, plan_a)
        evaluations += 1
        weight = d.weight
        st.absorb(plan, plan_idx, plan_a, d, lam)
        idx = plan[0][0]
        st.iters[idx] += 1
        a, step, fin = st.stop(idx, xtol, max_alpha)
        plan = st.plan(idx[~fin], a[~fin], step[~fin], xtol)
    curvature = -st.H + lam
    fit = GainFit(
        np.arange(n),
        st.alpha,
        st.S,
        st.S / weight if n else st.S,
        st.G,
        curvature,
        st.at_cap,
        st.done,
        st.iters,
        0,
        weight,
        prior_variance,
        None
        if prior_variance is None
        else laplace_log_evidence(st.S, st.alpha, curvature, prior_variance),
    )
    return fit, evaluations


class _NewtonState:
    """Per-candidate state of ``newton_gains``: the current point (alpha, S,
    S', S'', F', F''), the bracket [lo, hi] with F' at its ends, the last
    steps, the trust region, and what has stopped."""

    def __init__(self, n: int, start: np.ndarray, max_alpha: float):
        self.n = n
        self.alpha, self.S, self.G, self.H = start.copy(), np.zeros(n), np.zeros(n), np.zeros(n)
        self.F1c, self.F2c = np.zeros(n), np.zeros(n)  # F', F'' at the current point
        self.lo, self.hi = np.full(n, -max_alpha), np.full(n, max_alpha)
        self.lo_ev, self.hi_ev = np.zeros(n, bool), np.zeros(n, bool)
        self.flo, self.fhi = np.zeros(n), np.zeros(n)  # F' at lo and hi (Illinois-scaled)
        self.last = np.zeros(n, np.int8)  # bracket end moved last: 1 lo, -1 hi
        self.prev, self.prev_newton = np.zeros(n), np.zeros(n)
        self.trust = np.full(n, np.inf)
        self.done, self.at_cap = np.zeros(n, bool), np.zeros(n, bool)
        self.iters = np.zeros(n, np.int64)

    def absorb(
        self, plan: list, plan_idx: np.ndarray, plan_a: np.ndarray, d: GainDerivatives, lam: float
    ) -> None:
        """Apply one pass's points group by group (bracket, Illinois, best
        point); the first group holds every active candidate."""
        F1, F2 = d.grad - lam * plan_a, d.curv - lam
        with np.errstate(divide="ignore"):
            self.trust[plan_idx] = _TRUST_LOGIT / d.value_range
        bounds = np.cumsum([0] + [len(q) for q, _ in plan])
        best = np.full(self.n, np.inf)
        for b0, b1 in zip(bounds[:-1], bounds[1:]):
            grp = slice(b0, b1)
            q, a, f1 = plan_idx[grp], plan_a[grp], F1[grp]
            for side, upd, ends, fends, other in (
                (1, f1 > 0, self.lo, self.flo, self.fhi),
                (-1, f1 < 0, self.hi, self.fhi, self.flo),
            ):
                u = q[upd]
                other[u[self.last[u] == side]] *= 0.5  # Illinois: same end moved twice
                self.last[u] = side
                ends[u], fends[u] = a[upd], f1[upd]
            self.lo_ev[q[f1 > 0]] = True
            self.hi_ev[q[f1 < 0]] = True
            better = np.abs(f1) < best[q]
            b = q[better]
            best[b] = np.abs(f1[better])
            self.alpha[b], self.S[b], self.G[b], self.H[b] = (
                a[better],
                d.loglik[grp][better],
                d.grad[grp][better],
                d.curv[grp][better],
            )
            self.F1c[b], self.F2c[b] = f1[better], F2[grp][better]

    def stop(
        self, idx: np.ndarray, xtol: float, max_alpha: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mark the candidates ``idx`` that stop (converged, capped, bracket
        collapsed, or finished by an extrapolated last step); returns their
        alpha, Newton step and the stop mask."""
        a, f1, f2 = self.alpha[idx], self.F1c[idx], self.F2c[idx]
        lo, hi = self.lo[idx], self.hi[idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(f2 < 0, -f1 / f2, np.sign(f1) * np.inf)
        tol = xtol * (1.0 + np.abs(a))
        conv = (f1 == 0) | (np.abs(step) <= tol)
        capped = ((a >= max_alpha) & (f1 > 0)) | ((a <= -max_alpha) & (f1 < 0))
        collapsed = self.lo_ev[idx] & self.hi_ev[idx] & (hi - lo <= tol)
        # quadratic regime, step below sqrt(xtol): the next step would be
        # below xtol, so take this one without a pass and extrapolate S, S'
        # along it (error O(step^3) in S, O(step^2) in S')
        with np.errstate(invalid="ignore"):
            finish = (
                ~conv
                & ~capped
                & ~collapsed
                & (f2 < 0)
                & (np.abs(step) <= math.sqrt(xtol) * (1.0 + np.abs(a)))
                & (a + step > lo)
                & (a + step < hi)
            )
        if np.any(finish):
            f, st = idx[finish], step[finish]
            self.alpha[f] = a[finish] + st
            self.S[f] += self.G[f] * st + 0.5 * self.H[f] * st * st
            self.G[f] += self.H[f] * st
        fin = conv | capped | collapsed | finish
        self.done[idx[fin]] = True
        self.at_cap[idx[capped & ~conv]] = True
        return a, step, fin

    def plan(self, r: np.ndarray, a: np.ndarray, st: np.ndarray, xtol: float) -> list:
        """The next points of the candidates ``r`` (at ``a``, Newton step
        ``st``): the safeguarded target, and the hedge clipped to the trust
        region where it differs."""
        p, pn = self.prev[r], self.prev_newton[r]
        self.prev_newton[r] = st
        lo_r, hi_r = self.lo[r], self.hi[r]
        bracketed = self.lo_ev[r] & self.hi_ev[r]
        open_side = np.where(st > 0, ~self.hi_ev[r], ~self.lo_ev[r])
        grow = (
            (np.sign(st) == np.sign(pn))
            & (np.sign(st) == np.sign(p))
            & open_side
            & (np.abs(st) > 0.5 * np.abs(pn))
        )
        big = np.where(grow, np.sign(st) * np.maximum(np.abs(st), 4.0 * np.abs(p)), st)
        target = a + big
        newton = (
            (target > lo_r)
            & (target < hi_r)
            & ~(bracketed & (np.abs(big) > 0.5 * np.abs(p)) & (p != 0))
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            secant = lo_r + self.flo[r] * (hi_r - lo_r) / (self.flo[r] - self.fhi[r])
        secant_ok = bracketed & (secant > lo_r) & (secant < hi_r)
        fallback = np.where(secant_ok, secant, 0.5 * (lo_r + hi_r))
        cap = np.where(st > 0, hi_r, lo_r)
        target = np.where(newton, target, np.where(~newton & open_side, cap, fallback))
        self.prev[r] = target - a
        with np.errstate(invalid="ignore"):
            small = a + np.clip(st, -self.trust[r], self.trust[r])
            hedge = (
                (small > lo_r)
                & (small < hi_r)
                & (np.abs(small - target) > xtol * (1.0 + np.abs(a)))
            )
        return [(r, target), (r[hedge], small[hedge])]


def _checked(d: GainDerivatives, where: str) -> GainDerivatives:
    """``d`` once its sums are finite: Newton would otherwise absorb a NaN
    as a zero gain and the selection stop there, as if converged."""
    check_finite(where, loglik=d.loglik, gradient=d.grad, curvature=d.curv)
    return d


def _fit_exact(
    backend: _Runs, weights: Weights, ids: np.ndarray, scaling: Scaling | None, opts: dict
) -> GainFit:
    space = backend.space

    def derivatives(index, alphas):
        return _checked(
            backend.run(GainDerivativesTask(space, weights, scaling, ids[index], alphas)),
            "gain pass",
        )

    fit, evaluations = newton_gains(derivatives, len(ids), **opts)
    fit.passes = evaluations
    return fit


def _fit_sketch(
    backend: _Runs,
    weights: Weights,
    ids: np.ndarray,
    scaling: Scaling | None,
    opts: dict,
    bin_width: float = 0.25,
    order: int = 2,
    polish: bool = True,
    polish_top: int | None = None,
) -> GainFit:
    if ids.size == 0:
        return _fit_exact(backend, weights, ids, scaling, opts)  # no pass
    space = backend.space
    sketch = backend.run(GainSketchTask(space, weights, scaling, ids, bin_width))
    passes = 1
    fit, _ = newton_gains(
        lambda index, alphas: _checked(
            sketch.derivatives(alphas, index, order), "gain sketch pass"
        ),
        len(ids),
        **opts,
    )
    fit.error_bound = sketch.error_bound(order)
    invalid = np.flatnonzero(~sketch.valid)
    if invalid.size:  # real-valued features: exact Newton, a pass per iteration
        sub = _fit_exact(backend, weights, ids[invalid], scaling, opts)
        passes += sub.passes
        for name in (
            "alpha",
            "loglik_change",
            "grad",
            "curvature",
            "at_cap",
            "converged",
            "iterations",
        ):
            getattr(fit, name)[invalid] = getattr(sub, name)
        fit.error_bound[invalid] = 0.0
    if polish:
        # exact S, S', S'' at the sketch's alphas: the reported likelihood
        # change is exact at alpha, and short of the optimum by ~ F'^2 / 2a
        good = np.flatnonzero(sketch.valid)
        lam = 0.0 if fit.prior_variance is None else 1.0 / fit.prior_variance
        if polish_top is not None and good.size > polish_top:
            # only the largest gains (penalized by the prior) are polished
            h = fit.loglik_change[good] - 0.5 * lam * fit.alpha[good] ** 2
            good = np.sort(good[np.argpartition(-h, polish_top - 1)[:polish_top]])
        if good.size:
            d = _checked(
                backend.run(
                    GainDerivativesTask(space, weights, scaling, ids[good], fit.alpha[good])
                ),
                "gain polish pass",
            )
            passes += 1
            fit.loglik_change[good], fit.grad[good] = d.loglik, d.grad
            fit.curvature[good] = -d.curv + lam
    fit.gain = fit.loglik_change / fit.weight
    if fit.prior_variance is not None:
        fit.log_evidence = laplace_log_evidence(
            fit.loglik_change, fit.alpha, fit.curvature, fit.prior_variance
        )
    fit.passes = passes
    return fit


#: Methods of ``fit_gains``: name -> fitter(backend, weights, ids, scaling, opts, **kw).
GAIN_METHODS: dict[str, Callable[..., GainFit]] = {"exact": _fit_exact, "sketch": _fit_sketch}


def fit_gains(
    backend: _Runs,
    weights: Weights,
    candidate_ids: np.ndarray,
    scaling: Scaling | None = None,
    *,
    method: str = "sketch",
    prior_variance: float | None = None,
    alpha0: np.ndarray | None = None,
    max_alpha: float = DEFAULT_MAX_ALPHA,
    xtol: float = 1e-9,
    max_iter: int = 60,
    **method_options,
) -> GainFit:
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
        (0.25), ``order`` (2), ``polish`` (True), ``polish_top`` (None: all;
        k: only the k largest S(alpha) - alpha^2 / (2 sigma^2) by the sketch,
        the others keep the sketch's values)); real-valued candidates
        fall back to "exact". "exact": Newton with one pass per iteration
        (method (a)), more passes per batch, more still with centering.
    prior_variance : float or None
        sigma^2 of the Gaussian prior on the new weight: fit mu_g and the
        Laplace log evidence (Daume 2004); None fits the plain gain.
    alpha0 : ndarray, shape (n,), or None
        Starting alphas (e.g. last round's); default 0.
    """
    if method not in GAIN_METHODS:
        raise ValueError(f"expected method in {sorted(GAIN_METHODS)}, got {method!r}")
    ids = check_candidate_ids(backend.space, candidate_ids)
    opts = dict(
        prior_variance=prior_variance,
        alpha0=alpha0,
        max_alpha=max_alpha,
        xtol=xtol,
        max_iter=max_iter,
    )
    fit = GAIN_METHODS[method](backend, weights, ids, scaling, opts, **method_options)
    fit.candidate_ids = ids
    # alpha is capped, so gains are finite unless a pass was not
    check_finite(f"gain fit ({method})", gain=fit.gain, alpha=fit.alpha)
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


def uniform_initial_gains(
    counts: np.ndarray,
    weight: float,
    n_labels: int,
    label_probs: np.ndarray | None = None,
    max_alpha: float = DEFAULT_MAX_ALPHA,
) -> UniformGains:
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


__all__ = [
    "GainFit",
    "laplace_log_evidence",
    "newton_gains",
    "fit_gains",
    "GAIN_METHODS",
    "UniformGains",
    "uniform_initial_gains",
    "DEFAULT_MAX_ALPHA",
]
