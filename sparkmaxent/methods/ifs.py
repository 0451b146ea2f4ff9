"""Incremental feature selection (IFS) and Selective Gain Computation (SGC).

IFS (Berger, Della Pietra & Della Pietra 1996, section 4.2; Zhou, Weng, Wu &
Jiang 2003, section 2 and Figure 1): each stage adds the candidate f with
the largest approximate gain g(f) = max_alpha G_S,f(alpha), all other
weights fixed (Zhou et al. Eq. 3, in mean units: the decrease of the loss L;
``solvers/gain_fits.fit_gains``), at its alpha; no other weight changes.

SGC (Zhou et al. 2003, section 3 and Figure 2) takes a stale gain as an upper
bound and recomputes the best stale gains, a batch at a time (``batch``,
growing by ``batch_growth``), until the best fresh gain beats every stale
one; with look-ahead it also refreshes the next ``lookahead`` candidates
after each selection. Optional
re-estimation (``reestimate_every``) refits all selected weights. Stages run
in the shared round loop (selection/loop.py); SGC's stale gains are saved
with each checkpoint, so a resumed run selects what an uninterrupted one
does.

Details (initial gains, ties, departures from Figure 2): docs/methods/ifs-sgc.md.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import softmax

from ..choice.heldout import best_stage, refit_follows, refit_stage
from ..choice.sections import StageRefit
from ..errors import InputError
from ..kernels import MULTICLASS, Weights
from ..kernels.loss import LossGradTask
from ..kernels.stats import FeatureCountTask, MomentsTask
from ..problem.objective import checked_pass
from ..selection.base import FitResult, LoopState, RoundOutcome, TrainingContext
from ..selection.checkpoint import has_checkpoint
from ..selection.loop import TIE_RTOL, add_feature, best_of, run_rounds
from ..selection.reporting import FeatureNamer
from ..selection.stops import Stop, StopReason, stop
from ..solvers.gain_fits import GainFit, fit_gains, uniform_initial_gains
from .baselines import fit_smooth, fit_smooth_within, refit_active
from .round_details import GainPick, IfsStage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Variant:
    """One registered incremental method.

    Attributes
    ----------
    name : str
    selective : bool
        SGC (stale gains as upper bounds) rather than IFS.
    lookahead : int
        Candidates recomputed after each selection (SGC only; 0: none).
    """

    name: str
    selective: bool
    lookahead: int = 0


class Incremental:
    """The round method of IFS and SGC (one stage per round)."""

    def __init__(self, ctx: TrainingContext, spec: Variant):
        self.ctx = ctx
        self.spec = spec
        self.space = ctx.backend.space
        self.namer = FeatureNamer(ctx.backend)
        counts = ctx.backend.run(FeatureCountTask()).counts
        # candidates: features observed in training (multiclass: (p, k) seen
        # with label k, Berger's and Zhou's candidate set); candidate sets:
        # features firing on some candidate
        self.candidates = np.flatnonzero(counts > 0).astype(np.int64)
        self.counts = counts
        self.gain_evaluations = 0
        # penalized gains (train.ifs.gain_prior_variance, sum units as in
        # fit_gains): gamma2 = 1 / (sigma^2 W) in the mean units of L
        s2 = float(ctx.config.ifs.gain_prior_variance)
        self.prior_variance = s2 if s2 > 0 else None
        self.gain_l2 = (
            1.0 / (s2 * self.initial_loss_pass(Weights.zeros(self.space)).weight) if s2 > 0 else 0.0
        )
        log.info("%s: %d candidate features", spec.name, len(self.candidates))

    # -- gains --------------------------------------------------------------

    def fit(self, weights: Weights, ids: np.ndarray) -> GainFit:
        """Gains of ``ids`` against ``weights``; with a prior
        (``gain_prior_variance``) the penalized gain max_alpha G(alpha) -
        gamma2 alpha^2 / 2, gamma2 = 1 / (sigma^2 W): the new weight's MAP
        under a Gaussian prior (as in Daume 2004's mean-field fits)."""
        fit = fit_gains(
            self.ctx.backend,
            weights,
            ids,
            self.ctx.scaling,
            method=self.ctx.config.selection.gain_method,
            prior_variance=self.prior_variance,
        )
        if self.prior_variance is not None:
            fit.gain = fit.gain - 0.5 * self.gain_l2 * fit.alpha**2
        self.gain_evaluations += len(ids)
        return fit

    def loss_decrease(self, gain: float, alpha: float) -> float:
        """The decrease of the loss L when a feature of (penalized) ``gain``
        is added at ``alpha``: the gain itself unless it is penalized."""
        return gain + 0.5 * self.gain_l2 * alpha * alpha if self.prior_variance else gain

    def stage_penalty(self, weight: float) -> float:
        """gamma2 of the stages' refits on events of total weight ``weight``
        (``choice.heldout.refit_stage``): re-estimation's ``train.l2`` when
        ``reestimate_every`` is set, else that of a multi-feature stage's
        refit, the gain prior's 1 / (sigma^2 W) (``train.l2`` without one)."""
        cfg = self.ctx.config
        if cfg.ifs.reestimate_every or self.prior_variance is None:
            return cfg.l2
        return 1.0 / (self.prior_variance * weight)

    def initial_loss_pass(self, weights: Weights):
        return checked_pass(
            self.ctx.backend.run(
                LossGradTask(self.space, weights, self.ctx.scaling, np.zeros(0, dtype=np.int64))
            ),
            "loss pass",
        )

    def initial_loss(self, weights: Weights) -> float:
        lg = self.initial_loss_pass(weights)
        return lg.loss / lg.weight

    def _sgc_initial(self, weights: Weights) -> dict:
        """Stale gains of every candidate under the starting model, stage 1
        (they are exact there): closed form if the model is uniform
        (Zhou et al. section 3), else one fit of every candidate."""
        n = self.space.n_features
        gain, alpha = np.full(n, -np.inf), np.zeros(n)
        at = np.zeros(n, dtype=np.int64)  # stage at which gain[j] was computed
        ids = self.candidates
        closed = (
            self.space.shape == MULTICLASS
            and self.ctx.scaling is None
            and len(weights.values) == 0
            and self.prior_variance is None  # the closed form is of unpenalized gains
        )
        if closed:
            m = self.ctx.backend.run(MomentsTask())
            # binary predicates: sum c (x - 1)^2 over firing entries is 0
            closed = bool(
                np.all(
                    np.abs(m.total_sq - 2 * m.total + m.count) <= 1e-9 * np.maximum(m.count, 1.0)
                )
            )
            if closed:
                probs = None if weights.bias is None else softmax(weights.bias)
                u = uniform_initial_gains(self.counts, m.weight, self.space.n_labels, probs)
                gain[ids], alpha[ids] = u.gain[ids], u.alpha[ids]
                log.info(
                    "%s: initial gains of %d candidates in closed form (%s model)",
                    self.spec.name,
                    len(ids),
                    "uniform" if probs is None else "bias-only",
                )
        if not closed:
            fit = self.fit(weights, ids)
            gain[ids], alpha[ids] = fit.gain, fit.alpha
        at[ids] = 1
        return {"gain": gain, "alpha": alpha, "at": at}

    # -- one stage ------------------------------------------------------------

    def start(self) -> Weights:
        """The model the stages start from: uniform (the paper), or with a
        bias (``train.bias``) the maximum-likelihood bias-only model
        b_k = log(W_k / W), W_k the weight of label k (one pass)."""
        weights = Weights.zeros(self.space)
        if weights.bias is None:
            return weights
        lg = checked_pass(
            self.ctx.backend.run(
                LossGradTask(self.space, weights, self.ctx.scaling, np.zeros(0, dtype=np.int64))
            ),
            "bias pass",
        )
        assert lg.grad_bias is not None, "a space with a bias has bias gradients"
        # at b = 0: dL/db_k = sum_i c_i (1/K - [y_i = k]) = W / K - W_k
        label_weight = lg.weight / self.space.n_labels - lg.grad_bias
        if np.any(label_weight <= 0):
            raise InputError(
                f"expected every label to occur in training, got label weights "
                f"{label_weight.tolist()}"
            )
        return Weights(weights.ids, weights.values, np.log(label_weight / lg.weight))

    def stage_size(self, state: LoopState) -> int:
        """Features this stage adds at most (``train.ifs.stage_features``;
        0: adaptive). Adaptive: 1 at the first stage, then twice the last
        stage's size after a stage that improved the best held-out score
        (``choice.keep_if_best``), or without held-out data one whose refit
        gained at least half the sum of its features' gains (they were
        mostly complementary); else half of it, but at least
        ``stage_features_min_share`` of the active set (and 1): a flat
        held-out score would otherwise leave one-feature stages among
        thousands of features, each too small to move the score past
        the stop rule's noise."""
        cfg = self.ctx.config.ifs
        if cfg.stage_features:
            return cfg.stage_features
        if not state.trace or "stage_size" not in state.arrays:
            return 1
        last = int(state.arrays["stage_size"][0])
        if self.ctx.heldout is not None:
            improved = state.best is not None and state.best.round == state.round
        else:
            ratio = state.trace[-1].detail_as(IfsStage).refit_ratio
            improved = ratio is None or ratio >= 0.5
        size = last * 2 if improved else last // 2
        floor = math.ceil(cfg.stage_features_min_share * len(state.weights.values))
        return int(min(max(size, floor, 1), cfg.stage_features_max))

    def _pick(self, state: LoopState, stage: int, want: int):
        """The stage's candidates: (arrays, [(feature, gain, alpha)] best first,
        gain batches); SGC's lazily recomputed gains (Zhou et al. 2003, sec. 3)
        or IFS's gains over every unselected candidate (Berger et al. 1996)."""
        weights = state.weights
        if self.spec.selective:
            arrays = dict(state.arrays) if "gain" in state.arrays else self._sgc_initial(weights)
            arrays = {k: v.copy() for k, v in arrays.items()}
            picks, batches = self._sgc_select(arrays, weights, stage, want)
            return arrays, picks, batches
        arrays = {k: v.copy() for k, v in state.arrays.items()}
        ids = np.setdiff1d(self.candidates, weights.active_ids(), assume_unique=True)
        if not len(ids):
            return arrays, [], 1
        fit = self.fit(weights, ids)
        order = [best_of(fit.gain, ids)] if want == 1 else top_gains(fit.gain, ids, want)
        return arrays, [(int(ids[b]), float(fit.gain[b]), float(fit.alpha[b])) for b in order], 1

    def _gain_pick(self, pick: tuple[int, float, float]) -> GainPick:
        feature, gain, alpha = pick
        return GainPick(feature, self.namer(feature), gain, alpha)

    def round(self, state: LoopState) -> RoundOutcome:
        cfg = self.ctx.config
        weights = state.weights
        stage = state.round + 1
        evals0, passes0 = self.gain_evaluations, self.ctx.backend.passes
        objective = state.trace[-1].objective if state.trace else self.initial_loss(weights)
        selected = weights.active_ids()
        if cfg.selection.max_features and len(selected) >= cfg.selection.max_features:
            why = stop(StopReason.MAX_FEATURES, limit=cfg.selection.max_features)
            return _stop(weights, objective, float("nan"), why)
        want = self.stage_size(state)
        if cfg.selection.max_features:
            want = min(want, cfg.selection.max_features - len(selected))
        arrays, picks, batches = self._pick(state, stage, want)
        if not picks:
            return _stop(weights, objective, float("nan"), stop(StopReason.NO_CANDIDATE_LEFT))
        j, g, a = picks[0]
        if not g > cfg.ifs.gain_threshold:
            why = stop(StopReason.GAIN_THRESHOLD, gain=g, threshold=cfg.ifs.gain_threshold)
            return _stop(weights, objective, g, why)
        picks = [p for p in picks if p[1] > cfg.ifs.gain_threshold]
        arrays["stage_size"] = np.array([want], dtype=np.int64)
        new = weights
        for f, _, alpha in picks:
            new = add_feature(new, f, alpha)
        expected = sum(self.loss_decrease(gain, alpha) for _, gain, alpha in picks)
        reestimated = refit_ratio = refit_cost = None
        if len(picks) == 1:
            objective = objective - expected  # exact at alpha: L(S + f) = L(S) - G
            due = cfg.ifs.reestimate_every and stage % cfg.ifs.reestimate_every == 0
            if due:
                new, objective = self.reestimate(new)
            reestimated = bool(due)
        else:
            # the features' alphas were fitted each alone: refit them together
            # (mirror features (p, 0) and (p, 1) would otherwise count twice)
            refit_from = (self.ctx.backend.passes, self.ctx.deadline.elapsed())
            new, report = refit_active(
                self.ctx, new, self.gain_l2 or cfg.l2, tol=cfg.ifs.stage_refit_gtol
            )
            refit_cost = (
                self.ctx.backend.passes - refit_from[0],
                round(self.ctx.deadline.elapsed() - refit_from[1], 3),
            )
            before, objective = objective, float(report["loss"])
            refit_ratio = (before - objective) / expected if expected > 0 else 1.0
        if self.spec.selective:
            for f, _, _ in picks:  # selected: no longer candidates
                arrays["gain"][f], arrays["at"][f] = -np.inf, -1
            if self.spec.lookahead:
                self._refresh(arrays, new, stage + 1, self.spec.lookahead)
        evals = self.gain_evaluations - evals0
        name = self.namer(j)
        refit_passes, refit_s = refit_cost if refit_cost is not None else (None, None)
        detail = IfsStage(
            self._gain_pick(picks[0]),
            evals,
            self.ctx.backend.passes - passes0,
            batches,
            want,
            tuple(self._gain_pick(p) for p in picks[1:]),
            bool(reestimated),
            refit_ratio,
            refit_passes,
            refit_s,
        )
        more = f" (+{len(picks) - 1} more, refitted)" if len(picks) > 1 else ""
        note = f"selected {name} gain {g:.6g} alpha {a:.4g}{more}, {evals} gain evaluations" + (
            ", re-estimated" if reestimated else ""
        )
        return RoundOutcome(
            None,
            new,
            added=len(picks),
            objective=objective,
            score=g,
            detail=detail,
            arrays=arrays,
            note=note,
        )

    def _refresh(self, arrays: dict, weights: Weights, stage: int, count: int) -> int:
        """Recompute the gains of the ``count`` best stale candidates under
        ``weights`` (marked computed at ``stage``); returns how many."""
        gain, at = arrays["gain"], arrays["at"]
        stale = np.flatnonzero((at > 0) & (at != stage))
        if not len(stale):
            return 0
        if len(stale) > count:
            stale = stale[np.argpartition(-gain[stale], count - 1)[:count]]
        ids = stale[np.lexsort((stale, -gain[stale]))]
        fit = self.fit(weights, ids)
        gain[ids], arrays["alpha"][ids], at[ids] = fit.gain, fit.alpha, stage
        return len(ids)

    def _sgc_select(
        self, arrays: dict, weights: Weights, stage: int, want: int = 1
    ) -> tuple[list[tuple[int, float, float]], int]:
        """Zhou et al. Figure 2 with batches: recompute the best stale gains
        until the best fresh gain (with ``want`` > 1: the ``want`` best) is
        at least every stale gain left. Returns the picks (feature, gain,
        alpha), best first ([] if none is left), and the batches.

        Each batch costs the same passes whatever its size (2 with the
        sketch), so a stage that needs k batches of a fixed size pays k
        times that. Once the training loss is small (long documents: a
        selected word shifts the gains of the many words it co-occurs with)
        k grows; each further batch is therefore ``batch_growth`` times the
        last (log k batches instead of k, at most ``batch_growth`` times
        the gains recomputed), and the next stage starts from the size that
        settled this one (``arrays["batch_size"]``, kept in checkpoints),
        halved after a stage that one batch settled; a stage of ``want``
        features recomputes at least ``want`` gains a batch."""
        cfg = self.ctx.config.ifs
        gain, alpha, at = arrays["gain"], arrays["alpha"], arrays["at"]
        size = int(arrays["batch_size"][0]) if "batch_size" in arrays else cfg.batch
        size = max(size, want)
        batches = 0
        while True:
            live = at > 0
            fresh = np.flatnonzero(live & (at == stage))
            stale = live & (at != stage)
            top_stale = float(gain[stale].max()) if np.any(stale) else -np.inf
            if len(fresh) and want == 1:
                b = fresh[best_of(gain[fresh], fresh)]
                if gain[b] >= top_stale:
                    picks = [b]
                    break
            elif len(fresh):
                ranked = fresh[top_gains(gain[fresh], fresh, len(fresh))]
                settled = ranked[gain[ranked] >= top_stale]
                if len(settled) >= want or not np.any(stale):
                    picks = list(settled[:want])
                    break
            elif not np.any(stale):
                return [], batches
            if batches:
                size *= cfg.batch_growth
            self._refresh(arrays, weights, stage, size)
            batches += 1
        if batches <= 1:
            size //= cfg.batch_growth
        arrays["batch_size"] = np.array([max(cfg.batch, size)], dtype=np.int64)
        return [(int(b), float(gain[b]), float(alpha[b])) for b in picks], batches

    def reestimate(self, weights: Weights) -> tuple[Weights, float]:
        """Re-fit all selected weights and the bias (L-BFGS over the selected
        ids, warm-started); returns the weights and the loss L there."""
        return self._reestimated(
            weights, fit_smooth(self.ctx, weights.active_ids(), self.ctx.config.l2, start=weights)
        )

    def reestimate_within(self, weights: Weights, objective: float) -> tuple[Weights, float, bool]:
        """The final re-estimation within ``train.selection.max_seconds``
        (``baselines.fit_smooth_within``, its pass timed by a loss pass at
        ``weights``): the weights, their loss and whether it ran (no time
        left: ``weights`` and ``objective`` unchanged)."""
        t0 = self.ctx.deadline.elapsed()
        self.initial_loss_pass(weights)
        pass_s = self.ctx.deadline.elapsed() - t0
        fit = fit_smooth_within(self.ctx, weights.active_ids(), self.ctx.config.l2, weights, pass_s)
        if fit is None:
            log.warning("%s: no final re-estimation: max_seconds is spent", self.spec.name)
            return weights, objective, False
        return (*self._reestimated(weights, fit), True)

    def _reestimated(self, weights: Weights, res: FitResult) -> tuple[Weights, float]:
        """A re-estimation's weights over the selected ids and its loss."""
        ids = weights.active_ids()
        theta = res.weights.to_dense(self.space)
        # a weight the fit sets to exactly 0 stays selected (at 0)
        out = Weights(ids.copy(), theta[ids], res.weights.bias)
        log.info(
            "%s: re-estimated %d weights: loss %.10g (%d evaluations)",
            self.spec.name,
            len(ids),
            res.report["loss"],
            res.report["evaluations"],
        )
        return out, float(res.report["loss"])


def top_gains(gains: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest gains, largest first (ties: lowest id)."""
    return np.lexsort((ids, -gains))[:k]


def _stop(weights: Weights, objective: float, best: float, why: Stop) -> RoundOutcome:
    return RoundOutcome(
        why, weights, objective=objective, score=best, note=f"stopped: {why.message}"
    )


def fit_incremental(ctx: TrainingContext, spec: Variant) -> FitResult:
    """Run IFS or SGC through the shared round loop; report the selection."""
    method = Incremental(ctx, spec)
    cfg = ctx.config
    log.info(
        "%s: max_features %d, gain_threshold %g%s, gains by %s",
        spec.name,
        cfg.selection.max_features,
        cfg.ifs.gain_threshold,
        f", batch {cfg.ifs.batch}, lookahead {spec.lookahead}" if spec.selective else "",
        cfg.selection.gain_method,
    )
    start = None if ctx.resume and has_checkpoint(ctx.output_dir) else method.start()
    # the final re-estimation, unless the chosen stage's refit on the training and
    # held-out events (the same features and penalty, more data) replaces it;
    # max_seconds keeps time for its passes (as for the refit: refit_reserve_s)
    final = bool(cfg.ifs.reestimate_every) and not refit_follows(ctx)
    after = cfg.choice.refit_reserve_passes if final else 0
    names = (spec.name, "gain", "gain")
    state = run_rounds(
        ctx, method, *names, start=start, stage_choice=True, after_passes=after, detail=IfsStage
    )
    weights, choice = best_stage(ctx, state)
    kept = [state.trace[choice.chosen_round - 1]] if choice else state.trace[-1:]
    objective = kept[0].objective if kept else method.initial_loss(weights)
    final_reestimate = False
    if final and len(weights.values):
        weights, objective, final_reestimate = method.reestimate_within(weights, objective)
    weights, refit = refit_stage(ctx, weights, choice, state.trace, method.stage_penalty)
    if isinstance(refit, StageRefit):
        objective = refit.loss
    trace = state.trace
    evals = [r.detail_as(IfsStage).gain_evaluations for r in trace]
    picks = [p for r in trace for p in r.detail_as(IfsStage).picks]
    report = {
        "objective": objective,
        "loss": objective,
        "selected": [p.feature for p in picks],
        "selected_names": [p.feature_name for p in picks],
        "active_features": int(len(weights.values)),
        "candidates": int(len(method.candidates)),
        "stages": state.round,
        "choice": choice,
        "gain_evaluations": int(sum(evals)),
        "mean_gain_evaluations_per_stage": float(np.mean(evals)) if evals else 0.0,
        "final_reestimate": final_reestimate,
        "selection_passes": state.passes,
        "selection_elapsed_s": state.elapsed_s,
        "rounds": trace,
    }
    if refit is not None:
        report["refit"] = refit
    return FitResult(weights.sparse(), report, stop=state.stop)


@dataclass(frozen=True)
class Difference:
    """Where two selection traces first part.

    Attributes
    ----------
    stage : int
        1-based stage of the first different feature (0: none differ).
    agree : int
        Stages selecting the same feature before it (ties included).
    ties : list of int
        Stages where the features differ but the gains are equal within
        TIE_RTOL (not a difference; the traces are compared no further than
        the first tie, as the models part there).
    features, gains : tuple
        The two selected features and their gains at ``stage`` (or at the
        tie), None if they agree throughout.
    """

    stage: int
    agree: int
    ties: list
    features: tuple | None = None
    gains: tuple | None = None


def compare_selections(a: list[dict], b: list[dict], rtol: float = TIE_RTOL) -> Difference:
    """Compare two stage traces (``report["rounds"]`` of ifs / sgc runs):
    the first stage where the selected features differ, and whether that is
    a tie (gains within ``rtol`` relative) rather than a difference."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x["feature"] != y["feature"]:
            gx, gy = x["gain"], y["gain"]
            pair = ((x["feature"], y["feature"]), (gx, gy))
            if abs(gx - gy) <= rtol * max(abs(gx), abs(gy)):
                return Difference(0, i, [i + 1], *pair)
            return Difference(i + 1, i, [], *pair)
    return Difference(0, min(len(a), len(b)), [])


VARIANTS = {
    "ifs": lambda cfg: Variant("ifs", False),
    "sgc": lambda cfg: Variant("sgc", True),
    "sgc-lookahead": lambda cfg: Variant("sgc-lookahead", True, cfg.ifs.lookahead),
}


def fit_ifs(ctx: TrainingContext) -> FitResult:
    return fit_incremental(ctx, VARIANTS["ifs"](ctx.config))


def fit_sgc(ctx: TrainingContext) -> FitResult:
    return fit_incremental(ctx, VARIANTS["sgc"](ctx.config))


def fit_sgc_lookahead(ctx: TrainingContext) -> FitResult:
    return fit_incremental(ctx, VARIANTS["sgc-lookahead"](ctx.config))
