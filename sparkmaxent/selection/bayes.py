"""Approximate Bayes-factor feature selection (Daume III 2004, sections
3.3-3.7 and Figure 1): grow the model while some proposed feature makes the
data more probable *as a model*, with no threshold to tune.

Each round, from the current active set and its MAP weights lambda0:

1. **Proposals** (section 3.6; one pass, ``kernels/proposals.py``): the
   features of misclassified training events; for a multiclass event, every
   (predicate, gold label) and (predicate, predicted label) pair of its
   firing predicates; for a candidate-set event, the features of its
   correct candidates and of the wrongly preferred ones.
2. **Mean-field fit** (sections 3.3-3.4; ``solvers/gains.fit_gains``, 2
   passes with the sketch): for each proposal g, every other weight fixed
   at lambda0, mu_g maximizes the 1-D log posterior
   h(mu) = S(mu) + log pi(mu) (Eq. 17, by safeguarded Newton on its first
   and second derivatives), S(mu) = log p(D | lambda0, mu) - log p(D | lambda0)
   in sum units, pi = N(0, sigma^2), and a_g = -h''(mu_g) = -S''(mu_g) +
   1 / sigma^2 (Eq. 11 plus the prior's precision).
3. **Score** (Eq. 12, 13; ``bayes_factor_score``): beta_g - beta_0, the
   log Bayes factor plus the log prior odds of the models, 0 under the
   default uniform prior over models (``bf_model_prior``; see "Model
   prior"). beta_0 = log pi(M_0) +
   log p(D | lambda0); progress lines show log p(D | lambda0) and every
   score relative to beta_0.
4. **Select up to S = ``bf_per_round``** (section 3.7, Eq. 14): take the
   best proposal, add it at its mu to a model held fixed, rescore the
   best remaining proposals against that model (so a correlated twin of a
   chosen feature loses its score: the chosen one already explains the
   data it would), take the best again, and so on while some rescored
   proposal beats beta_0.
5. **OptMAP** (section 3.5): the MAP weights of the grown active set under
   the same Gaussian prior, minimizing L(w) + gamma2/2 ||w||^2 with
   gamma2 = 1 / (sigma^2 W) (the loss L is a mean over event weight W, the
   prior is on the sum), warm-started, by the solver of a grafting round
   (``train.solver``): Newton while the active set is small (with the weak
   default prior L-BFGS needs hundreds of passes per round), L-BFGS-B
   without bounds beyond ``newton_max_active``. The first
   round starts from the bias features alone (their MAP fit, the bias
   being unpenalized).

Stop when no proposal beats beta_0 (or none is left, or ``max_rounds``,
``max_features``).

The sign question
-----------------
The 1-D Laplace approximation of log int p(D | lambda0, mu) pi(mu) dmu is
h(mu_g) + 1/2 log 2 pi - 1/2 log a_g: the curvature term *penalizes* a
sharply determined weight, which is where the Occam factor of the Bayes
factor comes from. The note prints + 1/2 log a_g (Eq. 12), and MEGAM's
code follows the print. The two differ by log a_g; with the printed sign

    beta_g - beta_0 = [S(mu_g) - mu_g^2 / (2 sigma^2)] + 1/2 log(a_g / sigma^2)

where the bracket is >= 0 (mu_g maximizes it, and it is 0 at mu = 0). The
curvature term then *rewards* a sharply determined weight (a frequent
feature) instead of charging for it. With sigma^2 <= 1, a_g >= 1/sigma^2
>= sigma^2 for multiclass events, so every proposal beats beta_0 and the
printed rule never stops by itself (only ``max_rounds`` / ``max_features``
end it); with sigma^2 = W it stops, later than the correct sign and
preferring frequent features. ``bf_sign = "laplace"`` (default) is the
correct sign, ``"printed"`` the note's.

Bounded rescoring (Eq. 14)
--------------------------
Rescoring every proposal after every pick would cost S fits of all of
them. Only proposals that beat beta_0 against lambda0 take part (the model
only grows within the round, and a feature that did not help lambda0 is
left to the next round's proposals); before each pick after the first,
the ``bf_rescore`` of them with the best latest scores are rescored
against the fixed model (one ``fit_gains`` call, 2 passes with the
sketch) and the best that still beats beta_0 is taken; one that no longer
does leaves the round. As in SGC, a proposal outside the rescored ones is
assumed not to have overtaken them.

Disjoint picks
--------------
A proposal that fires on no event of the picks fixed since it was scored
has, given them, the score it has: its 1-D posterior only sees its own
events (mean field). So after a rescoring (and from the round's first
scores) the best proposals are taken in turn without rescoring while each
fires on no event of the ones taken since; the first that may share one
ends the batch and the rescoring runs. Events are compared by bitmaps
(``kernels/proposals.event_signatures``, one pass per round,
``bf_signature_bits`` bits: event i sets bit i mod bits), which may call
two disjoint proposals overlapping but never the reverse. The assumption
this adds to the bounded rescoring: a lower-ranked proposal that does
share events with the batch would not have risen above the next disjoint
one had it been rescored (scores fall as correlated features enter, as
SGC assumes of gains; not always: in the unit test on word-like data one
score rose from 8.1 to 10.5 given the picks, and 29 of 30 picks agree with
pick-by-pick rescoring, at 200 proposals rescored instead of 1,450).
``bf_signature_bits = 0`` rescores before every pick.

Prior variance
--------------
``train.prior_variance`` = sigma^2 is the variance of the Gaussian prior on
each weight, on the log-likelihood summed over events; it is used both in
OptMAP and in the evidence, so the evidence is that of the model OptMAP
fits. The Occam factor of a proposal is -1/2 log(sigma^2 a_g): the *vaguer*
the prior, the more a new weight must explain (Lindley's paradox), and the
scale of sigma^2 is what decides how many of thousands of proposals pass by
chance. Default (``prior_variance = 0``): sigma^2 = W, the total event
weight. Then sigma^2 a_g >= W for every proposal with at least one unit of
Fisher information (a_g >= 1), so the Occam factor is at least BIC's
1/2 log W (Schwarz 1978; Kass & Wasserman 1995 relate BIC to a
unit-information prior), and the selection is consistent as W grows (a
fixed noise feature's log Bayes factor goes to -inf like -1/2 log W). It is
fixed by the data size, not fitted to any score. A positive value sets
sigma^2 directly; sigma^2 = 1 is the usual maxent convention (MEGAM's
default precision), but on a few thousand proposals its Occam factor
1/2 log(1 + a_g) lets chance associations through (README, measured).
Caveats: with sigma^2 = W OptMAP is close to maximum likelihood, so on
separable subsets of sparse data its weights grow until L-BFGS's iteration
cap; and a proposal firing only on misclassified events of one gold label
has a positive log Bayes factor under *any* sigma^2 (its predictive
probability of those events rises on average), so on sparse NLP data the
rule keeps adding such features until few training events are wrong.

Model prior
-----------
Eq. 13's uniform prior over models lets every one of K candidate features
enter on its own evidence, and nothing charges for testing 10^5 of them
(the multiple-comparisons problem; on PP attachment the uniform prior
adds features until the training data are nearly fitted, README).
``bf_model_prior = "beta-binomial"`` puts Scott & Berger's (2010)
prior on the models instead: each candidate is in the model with an
unknown probability p, p ~ Uniform(0, 1), so a model with k of the K
candidates has pi(M) = 1 / ((K + 1) C(K, k)) and adding one feature to a
model of k changes the log prior by

    log pi(M_g) - log pi(M_0) = log((k + 1) / (K - k))

(-log K for the first feature, rising towards 0 as the model grows).
It has no parameter: the charge comes from the size of the candidate
space. On PP attachment it overcorrects (63 features, 4.6 points below
l1 grafting; README). K is the
candidate space (``space.n_features``), k the model a proposal is scored
against (the active set and the round's earlier picks). Picks taken
together without a rescoring ("Disjoint picks") keep the prior odds of
the model they were scored against, lower than their own by
log((k + j + 1) / (k + 1)) for the j-th of the batch: conservative.

``bf_model_prior = "empirical-bayes"`` estimates p instead (George &
Foster 2000), once per round, from the round's proposals: under mean field
their log Bayes factors b_g are independent given lambda0, each proposal is
in with probability p, so the proposals are most probable at the p that
maximizes sum_g log(1 - p + p e^(b_g)) (concave in p;
``empirical_inclusion_probability``), and every pick of the round has prior
odds log(p / (1 - p)). p is kept in [0, 1/2]: at 1/2 this is Eq. 13's
uniform prior, so the estimate can only charge for testing many proposals,
never favour inclusion. It has no parameter either; it charges when most
proposals do not look real, so the rule stops while the uniform prior
would go on. Two caveats: the proposals are the features of mistakes,
which favours positive b_g, so p is high (1/2 on PP attachment for most
rounds at sigma^2 <= 3); and if the sum of (e^(b_g) - 1) is <= 0, p is 0
and the run stops, however large the best b_g (the empirical-Bayes
collapse that Scott & Berger 2010 point out; over the whole candidate
space it stops PP attachment at 112-300 features, which is why the
proposals are the population here).

Checkpoint and resume: a round depends only on the active weights, which
the shared loop (selection/loop.py) saves every round; a resumed run takes
the same steps.
"""
from __future__ import annotations

import logging
import math
from typing import Callable

import numpy as np
from scipy.optimize import brentq

from ..kernels import Weights
from ..kernels.loss import LossGradTask
from ..kernels.proposals import EventSignatureTask, ProposalTask
from ..problem import Objective, orthant_problem
from ..solvers import SOLVERS, SolverOptions, choose_solver
from ..solvers.gains import fit_gains
from .base import FitResult, LoopState, RoundOutcome, TrainingContext
from .checkpoint import has_checkpoint
from .loop import add_feature, best_of, limit_reached, run_rounds
from .reporting import FeatureNamer

log = logging.getLogger(__name__)

#: Curvature term sign of the score: -1 Laplace (correct), +1 as printed (Eq. 12).
SIGNS = {"laplace": -1.0, "printed": 1.0}

#: Priors over models ("Model prior" above).
MODEL_PRIORS = ("uniform", "beta-binomial", "empirical-bayes")

#: Selected features listed by name in a progress line (the trace has all).
_NOTE_FEATURES = 5


def log_model_prior_odds(kind: str, k: int, candidates: int, inclusion: float = 0.5) -> float:
    """log pi(M_g) - log pi(M_0) for adding one feature to a model of ``k``
    of ``candidates`` features ("Model prior" above); ``inclusion`` is the
    empirical-Bayes p (``empirical_inclusion_probability``)."""
    if kind == "uniform":  # Eq. 13
        return 0.0
    if kind == "beta-binomial":  # Scott & Berger 2010: C(K, k) / C(K, k + 1)
        return math.log((k + 1) / max(candidates - k, 1))
    if kind == "empirical-bayes":  # George & Foster 2000: p / (1 - p)
        return math.log(inclusion / (1.0 - inclusion)) if inclusion > 0 else -math.inf
    raise ValueError(f"expected train.bayes.model_prior in {list(MODEL_PRIORS)}, got {kind!r}")


def empirical_inclusion_probability(log_bayes_factors: np.ndarray) -> float:
    """The p in [0, 1/2] that maximizes sum_g log(1 - p + p e^(b_g)), the log
    probability of the proposals when each is in the model with probability
    p ("Model prior" above; George & Foster 2000)."""
    b = np.asarray(log_bayes_factors, dtype=np.float64)
    with np.errstate(over="ignore", divide="ignore"):
        inv = 1.0 / np.expm1(b)  # 1 / (e^b - 1): 0 for a huge b, +-inf at b = 0

    def slope(p: float) -> float:  # sum_g (e^b - 1) / (1 + p (e^b - 1)), decreasing in p
        with np.errstate(divide="ignore"):
            return float(np.sum(1.0 / (p + inv)))

    if slope(0.0) <= 0.0:
        return 0.0
    if slope(0.5) >= 0.0:
        return 0.5
    return float(brentq(slope, 0.0, 0.5, xtol=1e-15))


def bayes_factor_score(loglik_change: np.ndarray, mu: np.ndarray, curvature: np.ndarray,
                       prior_variance: float, sign: str = "laplace") -> np.ndarray:
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
    log_prior_mu = -mu * mu / (2.0 * s2) - 0.5 * math.log(2.0 * math.pi * s2)
    return (S + log_prior_mu + 0.5 * math.log(2.0 * math.pi)
            + SIGNS[sign] * 0.5 * np.log(a))


class BayesFactor:
    """The round method of Bayes-factor selection (one round of Figure 1)."""

    def __init__(self, ctx: TrainingContext):
        self.ctx = ctx
        cfg = ctx.config
        self.space = ctx.backend.space
        self.namer = FeatureNamer(ctx.backend)
        self.sign = cfg.bayes.sign
        lg = self.loss_grad(Weights.zeros(self.space))
        self.weight = float(lg.weight)  # W: events count as repeated (sum units)
        # sigma^2 = W by default: an Occam factor of at least BIC's (module docstring)
        self.sigma2 = float(cfg.bayes.prior_variance) or self.weight
        # OptMAP's gamma2 in the mean units of L: W L + ||w||^2 / (2 sigma^2) = W C
        self.l2 = 1.0 / (self.sigma2 * self.weight)

    # -- passes ---------------------------------------------------------------

    def loss_grad(self, weights: Weights):
        return self.ctx.backend.run(LossGradTask(self.space, weights, self.ctx.scaling,
                                                 np.zeros(0, dtype=np.int64)))

    def fit(self, weights: Weights, ids: np.ndarray, alpha0: np.ndarray | None = None):
        """mu_g, a_g and the log Bayes factor of each id against ``weights``
        (mean field; the model prior's odds are the caller's)."""
        f = fit_gains(self.ctx.backend, weights, ids, self.ctx.scaling,
                      method=self.ctx.config.selection.gain_method, prior_variance=self.sigma2,
                      alpha0=alpha0)
        return f, bayes_factor_score(f.loglik_change, f.alpha, f.curvature, self.sigma2,
                                     self.sign)

    def model_prior(self, log_bf: np.ndarray) -> tuple[Callable[[int], float], float | None]:
        """This round's log prior odds of a pick added to a model of k
        features, as a function of k, and the empirical-Bayes inclusion
        probability behind them (fitted to the round's log Bayes factors
        ``log_bf``; None under the other model priors)."""
        kind, K = self.ctx.config.bayes.model_prior, self.space.n_features
        p = empirical_inclusion_probability(log_bf) if kind == "empirical-bayes" else None
        return (lambda k: log_model_prior_odds(kind, k, K, 0.5 if p is None else p)), p

    def optmap(self, weights: Weights) -> tuple[Weights, dict]:
        """MAP weights of the active set of ``weights`` (and the bias),
        warm-started, by a grafting round's solver on the unbounded problem
        (``train.solver``: Newton, a curvature pass per iteration and a
        handful per round, or L-BFGS)."""
        cfg = self.ctx.config
        ids, n = weights.active_ids(), len(weights.values)
        solver = choose_solver(cfg.selection.solver, n + self.space.n_bias, cfg.selection.newton_max_active)
        obj = Objective(self.ctx.backend, ids, l2=self.l2, scaling=self.ctx.scaling)
        res = SOLVERS[solver](obj, obj.theta(weights),
                              orthant_problem(np.zeros(n), 0.0, self.space.n_bias),
                              SolverOptions(tol=cfg.gtol, max_iter=cfg.max_iter, memory=cfg.memory,
                                            ftol=cfg.ftol, full_gradient=False))
        w = res.theta[:n].copy()
        report = {"objective": res.value, "loss": res.value - 0.5 * self.l2 * float(w @ w),
                  "evaluations": res.evaluations, "converged": res.converged, "solver": solver}
        return Weights(ids.copy(), w, res.theta[n:].copy() if self.space.bias else None), report

    def start(self) -> Weights:
        """OptMAP of the bias features alone (section 3.5); all-zero without a bias."""
        weights = Weights.zeros(self.space)
        if not self.space.bias:
            return weights
        return self.optmap(weights)[0]

    # -- one round ------------------------------------------------------------

    def round(self, state: LoopState) -> RoundOutcome:
        cfg = self.ctx.config
        weights = state.weights
        active = weights.active_ids()
        loss = state.trace[-1]["loss"] if state.trace else self.loss_grad(weights).loss / self.weight
        # beta_0 = log pi(M_0) + log p(D | lambda0); log pi(M_0) is left out
        # (the scores carry the log prior odds)
        beta0 = -self.weight * loss
        room = cfg.selection.max_features - len(active) if cfg.selection.max_features else cfg.bayes.per_round
        if room <= 0:
            return _stop(weights, loss, float("nan"), f"max_features = {cfg.selection.max_features}", beta0)
        prop = self.ctx.backend.run(ProposalTask(self.space, weights, self.ctx.scaling))
        ids = np.setdiff1d(prop.ids, active, assume_unique=True)
        if not len(ids):
            why = ("no misclassified training event" if prop.misclassified_events == 0
                   else "no proposal outside the active set")
            return _stop(weights, loss, float("nan"), why, beta0)
        fit, log_bf = self.fit(weights, ids)
        odds, inclusion = self.model_prior(log_bf)
        if inclusion == 0.0:  # the prior odds are -inf: nothing can beat beta_0
            return _stop(weights, loss, float("nan"), f"no proposal beats beta_0 ({len(ids)} "
                         f"scored; empirical-Bayes inclusion probability 0)", beta0,
                         stopped_by_rule=True)
        beta = log_bf + odds(len(active))
        best = float(beta.max())
        if not best > 0.0:
            return _stop(weights, loss, best, f"no proposal beats beta_0 ({len(ids)} scored)",
                         beta0, stopped_by_rule=True)
        picks, rescored = self.select(weights, ids, beta, fit.alpha,
                                      min(cfg.bayes.per_round, room), odds)
        grown = weights
        for p in picks:
            grown = add_feature(grown, p["feature"], p["mu"])
        new, report = self.optmap(grown)
        objective, new_loss = float(report["objective"]), float(report["loss"])
        for p in picks:
            p["feature_name"] = self.namer(p["feature"])
        info = {"proposals": int(len(ids)), "misclassified_events": prop.misclassified_events,
                "misclassified_weight": prop.misclassified, "beta_0": beta0,
                "positive_proposals": int(np.count_nonzero(beta > 0)), "rescored": rescored,
                "inclusion_probability": inclusion, "log_prior_odds": odds(len(active)),
                "selected": picks, "loss": new_loss,
                "log_likelihood": -self.weight * new_loss,
                "optmap_solver": report["solver"],
                "optmap_evaluations": int(report["evaluations"]),
                "optmap_converged": bool(report["converged"])}
        shown = ", ".join(f"{p['feature_name']} beta {p['beta']:.4g} mu {p['mu']:.4g}"
                          for p in picks[:_NOTE_FEATURES])
        more = f" (+{len(picks) - _NOTE_FEATURES} more)" if len(picks) > _NOTE_FEATURES else ""
        prior = "" if inclusion is None else f", inclusion probability {inclusion:.3g}"
        note = (f"{len(ids)} proposals scored ({info['positive_proposals']} beat beta_0 "
                f"{beta0:.6g}{prior}), selected {shown}{more}")
        return RoundOutcome(False, new, added=len(picks), objective=objective, score=best,
                            info=info, note=note)

    def select(self, weights: Weights, ids: np.ndarray, beta: np.ndarray, mu: np.ndarray,
               limit: int, odds: Callable[[int], float]) -> tuple[list[dict], int]:
        """Up to ``limit`` proposals, greedily, each scored with the earlier
        picks fixed at their mu (Eq. 14); see "Bounded rescoring" and
        "Disjoint picks". ``odds(k)``: the log prior odds of a pick added to
        a model of k features.

        Returns the picks ({feature, beta, mu}) and the number of proposal
        scores recomputed (``bf_rescore`` at most per rescoring)."""
        cfg = self.ctx.config
        score, mu = beta.copy(), mu.copy()
        live = score > 0  # only proposals that beat beta_0 against lambda0 take part
        signatures = None  # event bitmaps of the live proposals, row sig_row[i] for ids[i]
        if cfg.bayes.signature_bits and limit > 1:
            sig_row = np.cumsum(live) - 1
            signatures = self.ctx.backend.run(EventSignatureTask(
                self.space, ids[live], cfg.bayes.signature_bits)).bits
        picks: list[dict] = []
        model, rescored = weights, 0
        fresh = np.flatnonzero(live)  # scored against ``model`` as it is now
        while True:
            # take the best fresh proposal while it fires on no event of the
            # picks taken since its score was computed: its score given them
            # is the score it has
            batch = np.zeros(cfg.bayes.signature_bits // 8, dtype=np.uint8)  # their events
            taken = 0
            while len(picks) < limit:
                cand = fresh[live[fresh]]
                if not len(cand):
                    break
                b = cand[best_of(score[cand], ids[cand])]
                if taken and (signatures is None or np.any(signatures[sig_row[b]] & batch)):
                    break
                picks.append({"feature": int(ids[b]), "beta": float(score[b]), "mu": float(mu[b])})
                live[b] = False
                model = add_feature(model, int(ids[b]), float(mu[b]))
                if signatures is not None:
                    batch |= signatures[sig_row[b]]
                taken += 1
            if len(picks) >= limit or not np.any(live):
                return picks, rescored
            # rescore the best remaining ones against the model with the picks
            pos = np.flatnonzero(live)
            order = np.lexsort((ids[pos], -score[pos]))  # best latest score first, then id
            fresh = pos[order[: cfg.bayes.rescore]]
            f, s = self.fit(model, ids[fresh], alpha0=mu[fresh])
            s += odds(len(model.values))
            rescored += len(fresh)
            score[fresh], mu[fresh] = s, f.alpha
            live[fresh] = s > 0  # no longer beats beta_0 given the picks: out of this round


def _stop(weights: Weights, loss: float, best: float, why: str, beta0: float,
          stopped_by_rule: bool = False) -> RoundOutcome:
    return RoundOutcome(True, weights, objective=float("nan"), score=best,
                        info={"stopped": why, "stopped_by_rule": stopped_by_rule,
                              "final_beta_0": beta0, "final_loss": loss},
                        note=f"stopped: {why}")


def fit_bayes_factor(ctx: TrainingContext) -> FitResult:
    """Run Bayes-factor selection through the shared round loop; report it."""
    cfg = ctx.config
    method = BayesFactor(ctx)
    log.info("bayes-factor: sigma^2 %g (OptMAP gamma2 %.4g), sign %s, %s model prior, up to %d "
             "per round (rescoring %d), fits by %s", method.sigma2, method.l2, method.sign,
             cfg.bayes.model_prior, cfg.bayes.per_round, cfg.bayes.rescore, cfg.selection.gain_method)
    start = None if ctx.resume and has_checkpoint(ctx.output_dir) else method.start()
    state = run_rounds(ctx, method, "bayes-factor", "beta", "beta - beta_0", start=start)
    weights = state.weights
    lg = method.loss_grad(weights)
    loss = lg.loss / lg.weight
    theta = weights.values
    selected = [p for r in state.trace for p in r["selected"]]
    report = {
        "objective": loss + 0.5 * method.l2 * float(theta @ theta), "loss": loss,
        "train_accuracy": lg.correct / lg.weight, "prior_variance": method.sigma2,
        "l2": method.l2, "bf_sign": method.sign, "bf_model_prior": cfg.bayes.model_prior,
        "bf_per_round": cfg.bayes.per_round,
        "bf_rescore": cfg.bayes.rescore, "active_features": int(len(weights.values)),
        "selected": [p["feature"] for p in selected],
        "selected_names": [p["feature_name"] for p in selected],
        "rounds_run": state.round,
        "stopped": state.info["stopped"] if state.done else limit_reached(cfg, state),
        "stopped_by_rule": bool(state.done and state.info.get("stopped_by_rule", False)),
        "proposals_scored": int(sum(r["proposals"] for r in state.trace)),
        "selection_passes": state.passes, "selection_elapsed_s": state.elapsed_s,
        "rounds": state.trace,
    }
    return FitResult(weights.sparse(), report)


