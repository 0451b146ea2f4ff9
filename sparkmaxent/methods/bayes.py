"""Approximate Bayes-factor feature selection (Daume III 2004, sections
3.3-3.7 and Figure 1): grow the model while some proposed feature makes the
data more probable *as a model*, with no threshold to tune.

Each round: propose the features of misclassified events (section 3.6,
``kernels/proposals.py``); fit each proposal's weight mu_g and curvature a_g
with every other weight fixed (mean field, Eq. 17 and Eq. 11;
``solvers/gain_fits.fit_gains``); score it by its log Bayes factor plus the log
prior odds of the models (Eq. 12-13, ``bayes_factor_score``; the Laplace
sign by default, the note's printed sign selectable); take up to
``per_round`` picks, rescoring against the grown model between them (Eq. 14,
bounded, with disjoint picks taken without rescoring); then refit the MAP
weights of the active set (OptMAP, section 3.5) by a grafting round's
solver. Stop when no proposal beats beta_0. While the misclassified events
weigh less than ``train.bayes.margin_fraction`` of the events, the correct
events of smallest margin propose too, a share doubled until a feature is
outside the model (an extension, see the docs). The uniform (Eq. 13),
beta-binomial (Scott & Berger 2010) and empirical-Bayes (George & Foster
2000) model priors are here too.

The sign question, the prior variance, the model priors and the rescoring
assumptions are explained in docs/methods/bayes-factor.md.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable

import numpy as np

from ..choice.heldout import best_stage, refit_stage
from ..choice.sections import StageRefit
from ..config.method_sections import BayesConfig
from ..errors import ConfigError
from ..kernels import MULTICLASS, Weights
from ..kernels.gains import GainDerivativesTask
from ..kernels.loss import LossGradTask
from ..kernels.proposals import EventSignatureTask, ProposalTask
from ..problem import Objective
from ..problem.objective import checked_pass
from ..selection.base import FitResult, LoopState, RoundOutcome, TrainingContext
from ..selection.checkpoint import has_checkpoint
from ..selection.loop import add_features, best_of, run_rounds
from ..selection.reporting import FeatureNamer
from ..selection.stops import Stop, StopReason, stop
from ..solvers.gain_fits import fit_gains
from .baselines import refit_active
from .bayes_heldout import beyond_rule, past_rule, picks_per_rescoring, round_plan, start_from
from .bayes_scores import (
    bayes_factor_score,
    empirical_inclusion_probability,
    log_model_prior_odds,
    log_posterior_gain,
)
from .round_details import BayesPick, BayesRound

log = logging.getLogger(__name__)


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
        return checked_pass(
            self.ctx.backend.run(
                LossGradTask(self.space, weights, self.ctx.scaling, np.zeros(0, dtype=np.int64))
            ),
            "loss pass",
        )

    def mean_loss(self, weights: Weights) -> float:
        """The mean training loss L of ``weights`` (one pass)."""
        return self.loss_grad(weights).loss / self.weight

    def fit(
        self,
        weights: Weights,
        ids: np.ndarray,
        alpha0: np.ndarray | None = None,
        pool: int | None = None,
    ):
        """mu_g, a_g and the log Bayes factor of each id against ``weights``
        (mean field; the model prior's odds are the caller's). ``pool``:
        only the ``pool`` largest log posterior gains are needed (past the
        rule), so with the sketch only they get its exact polish pass."""
        polish = (
            {"polish_top": pool}
            if pool and self.ctx.config.selection.gain_method == "sketch"
            else {}
        )
        f = fit_gains(
            self.ctx.backend,
            weights,
            ids,
            self.ctx.scaling,
            method=self.ctx.config.selection.gain_method,
            prior_variance=self.sigma2,
            alpha0=alpha0,
            **polish,
        )
        return f, bayes_factor_score(f.loglik_change, f.alpha, f.curvature, self.sigma2, self.sign)

    def rescore(
        self, model: Weights, ids: np.ndarray, mu: np.ndarray, by_gain: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """The log Bayes factors (``by_gain``: log posterior gains) of ``ids``
        against ``model`` (the picks fixed, Eq. 14) and their mu_g.
        ``train.bayes.rescore_mu = fixed``:
        each mu_g stays the round's (Figure 1 fits mu_g once, against
        lambda0) and S(mu_g) and a_g are evaluated given the picks, one pass
        (a correlated proposal's likelihood falls, as section 3.5 intends);
        ``refit``: mu_g fitted again given the picks (a gain fit, warm-started)."""
        if self.ctx.config.bayes.rescore_mu == "refit":
            f, s = self.fit(model, ids, alpha0=mu)
            return (
                log_posterior_gain(f.loglik_change, f.alpha, self.sigma2) if by_gain else s
            ), f.alpha
        d = self.ctx.backend.run(GainDerivativesTask(self.space, model, self.ctx.scaling, ids, mu))
        if by_gain:
            return log_posterior_gain(d.loglik, mu, self.sigma2), mu
        curvature = -d.curv + 1.0 / self.sigma2
        return bayes_factor_score(d.loglik, mu, curvature, self.sigma2, self.sign), mu

    def model_prior(
        self, log_bf: np.ndarray, k_active: int | None = None
    ) -> tuple[Callable[[int], float], float | None]:
        """This round's log prior odds of a pick added to a model of k
        features, as a function of k, and the empirical-Bayes inclusion
        probability behind them (fitted to the round's log Bayes factors
        ``log_bf`` and the ``k_active`` features in the model; None under
        the other model priors)."""
        kind, K = self.ctx.config.bayes.model_prior, self.space.n_features
        active = k_active if k_active is not None else 0
        p = empirical_inclusion_probability(log_bf, active) if kind == "empirical-bayes" else None
        return (lambda k: log_model_prior_odds(kind, k, K, 0.5 if p is None else p)), p

    def optmap(self, weights: Weights) -> tuple[Weights, dict]:
        """MAP weights of the active set of ``weights`` (and the bias),
        warm-started (OptMAP, section 3.5; ``baselines.refit_active``)."""
        return refit_active(self.ctx, weights, self.l2)

    def start(self) -> Weights:
        """OptMAP of the bias features alone (section 3.5); all-zero without a bias."""
        weights = Weights.zeros(self.space)
        if not self.space.bias:
            return weights
        return self.optmap(weights)[0]

    # -- one round ------------------------------------------------------------

    def round(self, state: LoopState) -> RoundOutcome:
        cfg = self.ctx.config
        size, back_to = round_plan(self.ctx, state)
        weights, loss = start_from(self.ctx, state, back_to, self.mean_loss)
        active = weights.active_ids()
        # beta_0 = log pi(M_0) + log p(D | lambda0); log pi(M_0) is left out
        # (the scores carry the log prior odds)
        beta0 = -self.weight * loss

        def stopping(best: float, why: Stop) -> RoundOutcome:
            return _stop(weights, best, why)

        cap = cfg.selection.max_features
        room = cap - len(active) if cap else size
        if room <= 0:
            return stopping(
                float("nan"), stop(StopReason.MAX_FEATURES, limit=cfg.selection.max_features)
            )
        prop, ids, below, share = self.propose(weights)
        if not len(ids):
            return stopping(float("nan"), _nothing_proposed(prop, below))
        limit, past = min(size, room), past_rule(state)
        fit, log_bf = self.fit(weights, ids, pool=2 * limit if past else None)
        odds, inclusion = self.model_prior(log_bf, len(active))
        beta = log_bf + odds(len(active)) if inclusion != 0.0 else np.full(len(ids), -np.inf)
        best = float(beta.max())
        rule = _rule_stop(len(ids), inclusion, best)
        grow = beyond_rule(self.ctx)
        if rule is not None and not grow:
            return stopping(float("nan") if inclusion == 0.0 else best, rule)
        floor, beyond = 0.0, rule is not None or past
        if beyond:
            # past the rule (held-out data decide how far): the proposals that most
            # raise OptMAP's log posterior, not the largest log Bayes factors (docs)
            odds, inclusion = (lambda k: 0.0), None
            beta = log_posterior_gain(fit.loglik_change, fit.alpha, self.sigma2)
            best, floor = float(beta.max()), _pool_floor(beta, 2 * limit)
        # picks taken together after each rescoring (docs "What a round costs")
        take = picks_per_rescoring(cfg.bayes, limit, grow)
        picks, rescored = self.select(
            weights, ids, beta, fit.alpha, limit, odds, floor, take, by_gain=beyond
        )
        new, report = self.optmap(with_picks(weights, picks))
        objective, new_loss = float(report["objective"]), float(report["loss"])
        detail = BayesRound(
            beyond_rule=bool(beyond),
            ranked_by="log_posterior_gain" if beyond else "log_bayes_factor",
            round_size=limit,
            proposals=int(len(ids)),
            misclassified_events=prop.misclassified_events,
            misclassified_weight=prop.misclassified,
            margin_below=None if below is None else math.tanh(below),
            margin_share=share,
            proposing_events=prop.proposing_events,
            beta_0=beta0,
            positive_proposals=int(np.count_nonzero(log_bf + odds(len(active)) > 0)),
            rescored=rescored,
            inclusion_probability=inclusion,
            log_prior_odds=odds(len(active)),
            selected=tuple(BayesPick.of(p, self.namer(p["feature"])) for p in picks),
            loss=new_loss,
            log_likelihood=-self.weight * new_loss,
            optmap_solver=report["solver"],
            optmap_evaluations=int(report["evaluations"]),
            optmap_converged=bool(report["converged"]),
            rule_stop=rule.message if rule is not None and not past else None,
            from_round=back_to,
        )
        return RoundOutcome(
            None,
            new,
            added=len(picks),
            objective=objective,
            score=best,
            detail=detail,
            note=detail.note(),
        )

    def propose(self, weights: Weights):
        """The round's proposals: the features outside the active set of the
        misclassified training events (section 3.6) and, while those weigh
        less than ``train.bayes.margin_fraction`` of the event weight, of the
        correct events of smallest margin up to that share, doubled until
        some feature is outside the model (an extension: docs "Proposals from
        low-margin events"). Returns the pass's Proposals, the ids, the
        margin scale the events were taken below and the share of the event
        weight it stands for (None, None: mistakes only)."""
        task = ProposalTask(self.space, weights, self.ctx.scaling)
        prop = first = self.ctx.backend.run(task)
        active = weights.active_ids()
        ids = np.setdiff1d(prop.ids, active, assume_unique=True)
        share = self.ctx.config.bayes.margin_fraction
        if not share or (len(ids) and first.misclassified >= share * first.weight):
            return prop, ids, None, None
        while True:
            below = first.margin_below(share)
            prop = self.ctx.backend.run(dataclasses.replace(task, margin_below=below))
            ids = np.setdiff1d(prop.ids, active, assume_unique=True)
            log.info(
                "proposing from the %d events of margin below %.6g (%d misclassified, "
                "weighing %.3g of the events < margin_fraction share %g): %d new features",
                prop.proposing_events,
                math.tanh(below),
                first.misclassified_events,
                first.misclassified / first.weight,
                share,
                len(ids),
            )
            if len(ids) or share >= 1.0:
                return prop, ids, below, share
            share = min(1.0, 2.0 * share)

    def select(
        self,
        weights: Weights,
        ids: np.ndarray,
        beta: np.ndarray,
        mu: np.ndarray,
        limit: int,
        odds: Callable[[int], float],
        floor: float = 0.0,
        take: int = 1,
        by_gain: bool = False,
    ) -> tuple[list[dict], int]:
        """Up to ``limit`` proposals, greedily, each scored with the earlier
        picks fixed at their mu (Eq. 14); see "Bounded rescoring" and
        "Disjoint picks". ``odds(k)``: the log prior odds of a pick added to
        a model of k features. A proposal takes part while its score is
        above ``floor`` (0: it beats beta_0; below 0 beyond the rule).
        Each rescoring (of ``train.bayes.rescore`` proposals, at least
        2 x ``take``) is followed by the ``take`` best picks together.
        ``by_gain``: past the rule, the scores are log posterior gains (a
        pick's ``gain`` instead of its ``beta``) and a rescored proposal
        stays while it still raises the log posterior.

        Returns the picks ({feature, beta, mu}) and the number of proposal
        scores recomputed (``bf_rescore`` at most per rescoring)."""
        cfg = self.ctx.config
        score, mu, key = beta.copy(), mu.copy(), "gain" if by_gain else "beta"
        live = score > floor  # only proposals that beat beta_0 against lambda0 take part
        signatures = None  # event bitmaps of the live proposals, row sig_row[i] for ids[i]
        if cfg.bayes.signature_bits and limit > 1:
            sig_row = np.cumsum(live) - 1
            signatures = self.ctx.backend.run(
                EventSignatureTask(self.space, ids[live], cfg.bayes.signature_bits)
            ).bits
        picks: list[dict] = []
        model, rescored = weights, 0
        fresh = np.flatnonzero(live)  # scored against ``model`` as it is now
        # a group's picks of one predicate fire on the same events, the most similar
        # of section 3.5's "top S at once": one a group, the others rescored (Eq. 14)
        K = self.space.n_labels if self.space.shape == MULTICLASS else 0
        K = K if cfg.bayes.one_label_per_group and take > 1 else 0
        while True:
            # take the best fresh proposal while it fires on no event of the
            # picks taken since its score was computed: its score given them
            # is the score it has
            batch = np.zeros(cfg.bayes.signature_bits // 8, dtype=np.uint8)  # their events
            taken, group = 0, np.zeros(0, dtype=np.int64)  # the group's predicates
            while len(picks) < limit:
                cand = fresh[live[fresh]]
                if K and len(group):  # another predicate's while the rescored hold one
                    other = cand[~np.isin(ids[cand] // K, group)]
                    cand = other if len(other) else cand
                if not len(cand):
                    break
                b = cand[best_of(score[cand], ids[cand])]
                if taken >= take and (signatures is None or np.any(signatures[sig_row[b]] & batch)):
                    break
                picks.append({"feature": int(ids[b]), key: float(score[b]), "mu": float(mu[b])})
                live[b] = False
                if K:
                    group = np.append(group, ids[b] // K)
                if signatures is not None:
                    batch |= signatures[sig_row[b]]
                taken += 1
            if len(picks) >= limit or not np.any(live):
                return picks, rescored
            # rescore the best remaining ones against the model with the picks
            model = with_picks(weights, picks)
            pos = np.flatnonzero(live)
            order = np.lexsort((ids[pos], -score[pos]))  # best latest score first, then id
            fresh = pos[order[: max(cfg.bayes.rescore, 2 * take)]]
            s, mu[fresh] = self.rescore(model, ids[fresh], mu[fresh], by_gain)
            s += odds(len(model.values))
            rescored += len(fresh)
            score[fresh] = s
            # no longer beats beta_0 (or raises the log posterior) given the picks: out
            live[fresh] = s > (0.0 if by_gain else floor)


def with_picks(weights: Weights, picks: list[dict]) -> Weights:
    """``weights`` with the picks added at their mu (Eq. 14's fixed model)."""
    return add_features(weights, [p["feature"] for p in picks], [p["mu"] for p in picks])


def _stop(weights: Weights, best: float, why: Stop) -> RoundOutcome:
    return RoundOutcome(
        why, weights, objective=float("nan"), score=best, note=f"stopped: {why.message}"
    )


def evidence_grid(cfg: BayesConfig) -> list[float]:
    """The sigma^2 values ``train.bayes.variance = "evidence"`` chooses
    among: geometric from ``evidence_min`` to ``evidence_max``."""
    grid = np.geomspace(cfg.evidence_min, cfg.evidence_max, cfg.evidence_points)
    return [float(s2) for s2 in grid]


def laplace_evidence(ctx: TrainingContext, weights: Weights, sigma2: float) -> float:
    """log p(D | M, sigma^2) of the model ``weights`` (its active features
    M, at their MAP values under the prior N(0, sigma^2 I)) by the Laplace
    approximation (MacKay 1992; Daume 2004, Eq. 11-12 for a whole model):

        log p(D | w) - |w|^2 / (2 sigma^2) - k/2 log sigma^2 - 1/2 log det(H + I / sigma^2)

    with H the Hessian of the summed negative log-likelihood over the k
    weights (the bias held at its value, its flat prior left out). One
    curvature pass."""
    ids = weights.active_ids()
    obj = Objective(ctx.backend, ids, l2=0.0, scaling=ctx.scaling)
    ev = obj.at(obj.theta(weights), hessian=True)
    assert ev.hess is not None, "asked for the Hessian"
    W, k, w = float(ev.lossgrad.weight), len(ids), weights.values
    A = W * ev.hess[:k, :k] + np.eye(k) / sigma2
    sign, logdet = np.linalg.slogdet(A)
    if sign <= 0:
        return -math.inf
    return float(-W * ev.value - w @ w / (2 * sigma2) - 0.5 * k * math.log(sigma2) - 0.5 * logdet)


def fit_by_evidence(ctx: TrainingContext) -> FitResult:
    """``train.bayes.variance = "evidence"`` / ``"heldout"``: a run per
    sigma^2 of ``evidence_grid`` (each with an equal share of the time left),
    the one kept whose model has the largest Laplace evidence (empirical
    Bayes, type-II maximum likelihood) or, ``heldout``, whose chosen stage
    has the best held-out score (``train.choice.criterion``), then refitted."""
    by_heldout = ctx.config.bayes.variance == "heldout"
    if by_heldout and (ctx.heldout is None or not ctx.config.choice.best_stage):
        raise ConfigError("train.bayes.variance = heldout: needs held-out data and best_stage")
    scores, results, grid = [], [], evidence_grid(ctx.config.bayes)
    no_refit = dataclasses.replace(ctx.config.choice, refit=False)  # the chosen run's, below
    for n, s2 in enumerate(grid):
        bayes = dataclasses.replace(ctx.config.bayes, prior_variance=s2, variance="fixed")
        # the last run's loop keeps time for that refit (refit_reserve_s), every run's
        # for its laplace_evidence pass (after_passes)
        kept = ctx.config.choice if n == len(grid) - 1 else no_refit
        config = dataclasses.replace(ctx.config, bayes=bayes, choice=kept)
        part = ctx.deadline.part(1 / (len(grid) - n))
        run_ctx = dataclasses.replace(ctx, config=config, output_dir=None, deadline=part)
        run_ctx = dataclasses.replace(run_ctx, resume=False)
        results.append(fit_bayes_factor(run_ctx, after_passes=0 if by_heldout else 1, refit=False))
        choice = results[-1].report["choice"]
        held = choice.heldout_score if choice is not None else -math.inf
        scores.append(held if by_heldout else laplace_evidence(run_ctx, results[-1].weights, s2))
        log.info("sigma^2 %g: %d features, score %.6g", s2, results[-1].weights.nnz, scores[-1])
    i = int(np.argmax(scores))
    kind = "heldout_score" if by_heldout else "log_evidence"
    results[i].report["evidence"] = {"grid": grid, kind: scores, "chosen": i}
    log.info("chose sigma^2 %g by the %s", grid[i], kind)
    bayes = dataclasses.replace(ctx.config.bayes, prior_variance=grid[i], variance="fixed")
    at = dataclasses.replace(ctx, config=dataclasses.replace(ctx.config, bayes=bayes))
    return refit_chosen_stage(at, results[i])


def fit_bayes_factor(ctx: TrainingContext, after_passes: int = 0, refit: bool = True) -> FitResult:
    """Run Bayes-factor selection through the shared round loop; report it.
    ``after_passes``: the caller's passes after it (the grid's evidence pass);
    ``refit`` False: the caller refits (``train.choice.refit``), not this run."""
    cfg = ctx.config
    if cfg.bayes.variance != "fixed":
        return fit_by_evidence(ctx)
    method = BayesFactor(ctx)
    log.info(
        "bayes-factor: sigma^2 %g (OptMAP gamma2 %.4g), sign %s, %s model prior, up to %d "
        "per round (rescoring %d), fits by %s",
        method.sigma2,
        method.l2,
        method.sign,
        cfg.bayes.model_prior,
        cfg.bayes.per_round,
        cfg.bayes.rescore,
        cfg.selection.gain_method,
    )
    start = None if ctx.resume and has_checkpoint(ctx.output_dir) else method.start()
    after = after_passes + 1  # and the report's loss pass of the kept stage, below
    names = ("bayes-factor", "beta", "beta - beta_0")
    state = run_rounds(
        ctx, method, *names, start=start, stage_choice=True, after_passes=after, detail=BayesRound
    )
    weights, choice = best_stage(ctx, state)
    lg = method.loss_grad(weights)
    loss = lg.loss / lg.weight
    theta = weights.values
    selected = [p for r in state.trace for p in r.detail_as(BayesRound).selected]
    report = {
        "objective": loss + 0.5 * method.l2 * float(theta @ theta),
        "loss": loss,
        "train_accuracy": lg.correct / lg.weight,
        "prior_variance": method.sigma2,
        "l2": method.l2,
        "bf_sign": method.sign,
        "bf_model_prior": cfg.bayes.model_prior,
        "bf_per_round": cfg.bayes.per_round,
        "bf_rescore": cfg.bayes.rescore,
        "active_features": int(len(weights.values)),
        "selected": [p.feature for p in selected],
        "selected_names": [p.feature_name for p in selected],
        "rounds_run": state.round,
        "choice": choice,
        "stopped_by_rule": state.stop is not None and state.stop.reason is StopReason.BAYES_RULE,
        "rule_stop": next(
            (
                {"round": r.round - 1, "why": r.detail_as(BayesRound).rule_stop}
                for r in state.trace
                if r.detail_as(BayesRound).rule_stop is not None
            ),
            None,
        ),
        "proposals_scored": int(sum(r.detail_as(BayesRound).proposals for r in state.trace)),
        "selection_passes": state.passes,
        "selection_elapsed_s": state.elapsed_s,
        "rounds": state.trace,
    }
    result = FitResult(weights, report, stop=state.stop)
    return refit_chosen_stage(ctx, result) if refit else result


def refit_chosen_stage(ctx: TrainingContext, result: FitResult) -> FitResult:
    """``result`` with its chosen stage refitted on the training and
    held-out events (``choice.heldout.refit_stage``) under the same prior sigma^2
    (sum units; 0: the union's weight W), OptMAP's gamma2 1 / (sigma^2 W)
    on the union's W: the refit's objective and loss in the report, the
    chosen stage's (on the training events) and its training accuracy
    under ``refit.chosen_fit``."""
    sigma2 = float(ctx.config.bayes.prior_variance)

    def penalty(weight: float) -> float:
        return 1.0 / ((sigma2 or weight) * weight)

    rep = result.report
    weights, refit = refit_stage(ctx, result.weights, rep["choice"], rep["rounds"], penalty)
    if isinstance(refit, StageRefit):
        chosen = refit.chosen_fit
        chosen.objective, chosen.loss = rep["objective"], rep["loss"]
        chosen.train_accuracy = rep.pop("train_accuracy")
        rep.update(objective=refit.objective, loss=refit.loss, l2=refit.l2)
    if refit is not None:
        rep["refit"] = refit
    result.weights = weights.sparse()
    return result


def _rule_stop(scored: int, inclusion, best: float) -> Stop | None:
    """Why Daume III's rule (sec. 4) stops here: no proposal's beta beats
    beta_0 (always so when the empirical-Bayes inclusion probability is 0 and
    the prior odds are -inf); None while one does."""
    if inclusion == 0.0 or not best > 0.0:
        return stop(StopReason.BAYES_RULE, scored=scored, inclusion_zero=bool(inclusion == 0.0))
    return None


def _nothing_proposed(prop, below: float | None) -> Stop:
    """Why a round has no proposal outside the model (``BayesFactor.propose``)."""
    why = StopReason.NO_MISCLASSIFIED if not prop.misclassified_events else StopReason.NO_PROPOSAL
    return stop(why) if below is None else stop(why, margin_events=int(prop.proposing_events))


def _pool_floor(gain: np.ndarray, pool: int) -> float:
    """A floor just below the ``pool``-th largest log posterior gain (and at
    least 0), so that ``select`` takes from the ``pool`` best past the rule."""
    kth = float(np.sort(gain)[::-1][min(pool, len(gain)) - 1])
    return max(0.0, float(np.nextafter(kth, -np.inf)))
