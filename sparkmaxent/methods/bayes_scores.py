"""The scores of Bayes-factor selection (Daume III 2004, Eq. 12-13): a
proposal's log Bayes factor from its 1-D fit (Laplace sign by default, the
note's printed sign selectable) and the log prior odds of the models it
compares under the uniform (Eq. 13), beta-binomial (Scott & Berger 2010)
and empirical-Bayes (George & Foster 2000) model priors. Pure numpy; the
rounds that use them are in ``methods/bayes.py``, the reasons in
docs/methods/bayes-factor.md ("The sign question", "The model prior").
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

#: Curvature term sign of the score: -1 Laplace (correct), +1 as printed (Eq. 12).
SIGNS = {"laplace": -1.0, "printed": 1.0}

#: Priors over models (docs "The model prior").
MODEL_PRIORS = ("uniform", "beta-binomial", "empirical-bayes")


def log_model_prior_odds(kind: str, k: int, candidates: int, inclusion: float = 0.5) -> float:
    """log pi(M_g) - log pi(M_0) for adding one feature to a model of ``k``
    of ``candidates`` features (docs "The model prior"); ``inclusion`` is the
    empirical-Bayes p (``empirical_inclusion_probability``)."""
    if kind == "uniform":  # Eq. 13
        return 0.0
    if kind == "beta-binomial":  # Scott & Berger 2010: C(K, k) / C(K, k + 1)
        return math.log((k + 1) / max(candidates - k, 1))
    if kind == "empirical-bayes":  # George & Foster 2000: p / (1 - p)
        return math.log(inclusion / (1.0 - inclusion)) if inclusion > 0 else -math.inf
    raise ValueError(f"expected train.bayes.model_prior in {list(MODEL_PRIORS)}, got {kind!r}")


def empirical_inclusion_probability(log_bayes_factors: np.ndarray, included: int = 0) -> float:
    """The p in [0, 1/2] that maximizes k log p + sum_g log(1 - p + p e^(b_g)),
    the log probability of the proposals when each is in the model with
    probability p, and of the ``included`` = k features already in it
    (docs "The model prior"; George & Foster 2000). Without the k features the
    population is what earlier rounds left, its best gone, and p fell to 0
    (no feature can enter) one round into long documents."""
    b = np.asarray(log_bayes_factors, dtype=np.float64)
    k = float(included)
    with np.errstate(over="ignore", divide="ignore"):
        inv = 1.0 / np.expm1(b)  # 1 / (e^b - 1): 0 for a huge b, +-inf at b = 0

    def slope(p: float) -> float:  # k / p + sum_g (e^b - 1) / (1 + p (e^b - 1)), decreasing
        with np.errstate(divide="ignore"):
            proposals = float(np.sum(1.0 / (p + inv)))
        if not k:
            return proposals
        return proposals + (k / p if p else math.inf)

    if slope(0.0) <= 0.0:
        return 0.0
    if slope(0.5) >= 0.0:
        return 0.5
    return float(brentq(slope, 0.0, 0.5, xtol=1e-15))


def bayes_factor_score(
    loglik_change: np.ndarray,
    mu: np.ndarray,
    curvature: np.ndarray,
    prior_variance: float,
    sign: str = "laplace",
) -> np.ndarray:
    """beta_g - beta_0 of each proposal under Eq. 13's uniform prior over
    models, i.e. its log Bayes factor (Daume 2004, Eq. 12-13), sum units;
    another model prior adds its log odds (``log_model_prior_odds``).

    Parameters
    ----------
    loglik_change : ndarray, shape (n,)
        S(mu_g) = log p(D | lambda0, mu_g) - log p(D | lambda0).
    mu : ndarray, shape (n,)
        mu_g, the 1-D MAP weight (Eq. 17).
    curvature : ndarray, shape (n,)
        a_g = -S''(mu_g) + 1 / sigma^2 (Eq. 11 plus the prior's precision).
    prior_variance : float
        sigma^2.
    sign : {"laplace", "printed"}
        -1/2 log a_g (the Laplace approximation) or +1/2 log a_g (Eq. 12 as
        printed, and MEGAM).
    """
    if sign not in SIGNS:
        raise ValueError(f"expected train.bayes.sign in {sorted(SIGNS)}, got {sign!r}")
    S, mu, a = (np.asarray(v, dtype=np.float64) for v in (loglik_change, mu, curvature))
    s2 = float(prior_variance)
    # Eq. 12: beta_g = log pi(M_g) + log pi(mu_g) + log p(D | lambda0, mu_g)
    #                  + 1/2 log 2 pi -+ 1/2 log a_g
    # Eq. 13: beta_0 = log pi(M_0) + log p(D | lambda0); with a uniform pi(M)
    # the model priors cancel; log p(D | lambda0, mu_g) - log p(D | lambda0) = S.
    occam = -0.5 * math.log(s2) + SIGNS[sign] * 0.5 * np.log(a)  # with 1/2 log 2 pi's cancelled
    return log_posterior_gain(S, mu, s2) + occam


def log_posterior_gain(loglik_change: np.ndarray, mu: np.ndarray, prior_variance: float):
    """h(mu_g) = S(mu_g) - mu_g^2 / (2 sigma^2) (Eq. 17): how much adding a
    proposal at its mu_g, the other weights fixed, raises the log posterior
    that OptMAP maximizes (sum units); the log Bayes factor without its
    Occam factor. >= 0 at the 1-D MAP mu_g (h(0) = 0)."""
    mu = np.asarray(mu, dtype=np.float64)
    return np.asarray(loglik_change, dtype=np.float64) - mu * mu / (2.0 * float(prior_variance))
