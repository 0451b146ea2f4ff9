"""l1 n-best grafting (Riezler & Vasserman 2004, section 5 and Figure 1;
Perkins, Lacker & Theiler 2003) and the thresholded variants it is compared
with there (``mle-ifs``, ``l2-ifs``), each a ``problem.Penalty``:

    C(w) = L(w) + gamma1 ||w||_1 + gamma2/2 ||w||_2^2

Each round: a gradient test adds the ``n_best`` inactive candidates with
|dC/dw_j| above gamma1 (the subdifferential of gamma1 |w_j| at 0); C is
re-optimized over the active set, warm-started, each weight held in its
orthant (Newton or L-BFGS-B, ``solvers/``); weights driven to exactly 0 are
pruned (footnote 2). The run stops when no candidate passes the test, which
is then the KKT certificate over all candidates (``problem.kkt``). Above
``dense_test_max`` candidates the test is block-wise (``kernels/topk.py``).

Inexact rounds, the round solvers and the block-wise test are explained in
docs/methods/grafting.md.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..config import TrainConfig
from ..kernels import LossGrad, Weights
from ..kernels.thresholded import Decided, resolve
from ..kernels.topk import top_candidates
from ..problem import Evaluation, Objective, Penalty, kkt_certificate, kkt_from_parts
from ..solvers import SOLVERS, ConvergenceWarning, SolverOptions, choose_solver
from .base import FitResult, LoopState, RoundOutcome, TrainingContext
from .loop import run_rounds
from .stops import StopReason, stop

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Variant:
    """A grafting-family method: its name and its penalty (gamma1, gamma2,
    and the gradient test's threshold as the zero-weight bound)."""

    name: str
    penalty: Penalty


def variant(name: str, cfg: TrainConfig) -> Variant:
    """The Variant of method ``name`` under ``cfg`` (its ranges are checked
    by the config schema)."""
    if name == "grafting":
        return Variant(name, Penalty(l1=cfg.grafting.l1, l2=cfg.grafting.elastic_l2))
    if name in ("mle-ifs", "l2-ifs"):
        l2 = cfg.l2 if name == "l2-ifs" else 0.0
        return Variant(name, Penalty(l1=0.0, l2=l2, threshold=cfg.grafting.grad_threshold))
    raise ValueError(f"unknown grafting variant {name!r}: expected grafting, mle-ifs or l2-ifs")


def select_candidates(
    full_grad: np.ndarray, active: np.ndarray, threshold: float, n_best: int
) -> tuple[np.ndarray, float]:
    """The gradient test: inactive features with |dC/dw_j| > threshold, the
    ``n_best`` largest first (ties: the smaller id first, also at the cut).

    Parameters
    ----------
    full_grad : ndarray, shape (n_features,)
    active : ndarray of int64
        Features already in the active set (never selected again).

    Returns
    -------
    (ids sorted by decreasing |gradient|, max |gradient| over inactive features)
    """
    score = np.abs(full_grad)
    score[active] = -1.0
    best = float(score.max(initial=0.0))
    ids = top_candidates(score, np.arange(len(score)), threshold, n_best)
    return ids, best


@dataclass(frozen=True)
class GradientTest:
    """The gradient test at some weights, by either path.

    Attributes
    ----------
    value : float
        C of the smooth part (no l1 term) at the weights.
    lossgrad : LossGrad
        Sums of the pass (loss, weight, correct, bias gradient).
    new : ndarray of int64
        Selected candidates, the best first.
    new_grad : ndarray
        dC/dw_j of the selected candidates.
    best : float
        max |dC/dw_j| over inactive features.
    kkt : dict
        The KKT certificate at the weights (``problem.kkt.kkt_certificate``).
    open : int
        Inactive features the thresholded test left undecided (kernels/
        thresholded.py): its count over the bound is then a lower bound
        (``Grafting._certificate`` decides them).
    """

    value: float
    lossgrad: LossGrad
    new: np.ndarray
    new_grad: np.ndarray
    best: float
    kkt: dict
    open: int = 0


class Grafting:
    """The round method of grafting, mle-ifs and l2-ifs (selection/loop.py),
    on a pass ``budget`` from now (a path point's cut, selection/path.py;
    None: no budget). When the budget is spent, ``keep_going(weights)``
    decides whether the run goes on from there without it (None: it stops)."""

    def __init__(
        self,
        ctx: TrainingContext,
        spec: Variant,
        budget: int | None = None,
        keep_going: Callable[[Weights], bool] | None = None,
    ):
        self.ctx = ctx
        self.spec = spec
        self.penalty = spec.penalty
        cfg = ctx.config
        # the certificate's own bound (Penalty.test_bound, Penalty.solver_tol)
        self.test_bound = self.penalty.test_bound(cfg.grafting.kkt_tol)
        # features per block of the block-wise test; None: the dense test
        self.block_size = (
            cfg.grafting.test_block_size
            if ctx.backend.space.n_features > cfg.grafting.dense_test_max
            else None
        )
        # the dense test's partials thresholded at this fraction of the
        # test's bound (kernels/thresholded.py); 0: dense partials
        self.partial_cut = cfg.grafting.partial_cut
        # entries above the cut a block ships in a test that needs only the
        # n best (kernels/thresholded.py); None: all
        self.partial_keep = (
            cfg.grafting.partial_keep * cfg.grafting.n_best if cfg.grafting.partial_keep else None
        )
        # thresholded tests run, and those that needed a second pass
        self.thresholded_tests = 0
        self.fetch_passes = 0
        self.options = SolverOptions(
            tol=self.penalty.solver_tol(cfg.gtol, cfg.grafting.kkt_tol),
            max_iter=cfg.max_iter,
            memory=cfg.memory,
            ftol=cfg.ftol,
            full_gradient=self.block_size is None,
            # new weights start at 0 and are log-odds: an unbounded first step
            # overshoots by orders of magnitude; the region bounds the weights only
            # (a common shift of the unpenalized biases changes no probability)
            radius=cfg.grafting.round_radius or np.inf,
        )
        # the test already known at some weights (from a solver's last pass)
        self._known: tuple[Weights, GradientTest] | None = None
        self.evaluations = 0
        self.iterations = 0
        self.solver_use: dict[str, int] = {}
        # the backend's pass count at which a path point's budget is spent
        # (selection/path.py); None: no budget
        self.pass_limit = None if budget is None else ctx.backend.passes + budget
        # asked with the weights when the budget is spent: go on without it?
        self.keep_going = keep_going
        # the pass count (of this run) at which the budget ran out and the run went on
        self.continued_after: int | None = None

    def objective(self, ids: np.ndarray) -> Objective:
        return Objective(self.ctx.backend, ids, l2=self.penalty.l2, scaling=self.ctx.scaling)

    def gradient_test(self, weights: Weights) -> GradientTest:
        """The gradient test at ``weights`` over every candidate (one pass,
        unless the last solver pass already brought the full gradient)."""
        if self._known is not None and _same(self._known[0], weights):
            return self._known[1]
        obj = self.objective(weights.active_ids())
        theta = _theta(weights)
        if self.block_size is None and self.partial_cut > 0:
            test = self._thresholded_test(weights, obj, theta)
        elif self.block_size is None:
            test = self._dense_test(weights, obj.evaluate(theta, full_gradient=True, hessian=False))
        else:
            value, summary = obj.gradient_summary(
                theta, self.test_bound, self.ctx.config.grafting.n_best, self.block_size
            )
            lg = summary.lg
            assert lg is not None, "gradient_summary() returns a finished summary"
            # test_bound = threshold (1 + kkt_tol) is the certificate's bound
            # too, so the summary's count over it is the certificate's count
            kkt = kkt_from_parts(
                summary.active_grad,
                weights,
                summary.max_inactive,
                summary.n_over,
                summary.n_features,
                _grad_bias(lg),
                self.penalty,
                self.ctx.config.grafting.kkt_tol,
            )
            test = GradientTest(
                value, lg, summary.top_ids, summary.top_grad, summary.max_inactive, kkt
            )
        self._known = (weights, test)
        return test

    def _dense_test(self, weights: Weights, ev: Evaluation) -> GradientTest:
        """The test from an evaluation that carries the full gradient."""
        assert ev.full_grad is not None, "callers pass an evaluation with the full gradient"
        new, best = select_candidates(
            ev.full_grad, weights.active_ids(), self.test_bound, self.ctx.config.grafting.n_best
        )
        # the bias gradient from the raw sums (ev.grad may span pruned ids too)
        kkt = kkt_certificate(
            ev.full_grad,
            weights,
            _grad_bias(ev.lossgrad),
            self.penalty,
            self.ctx.config.grafting.kkt_tol,
        )
        return GradientTest(ev.value, ev.lossgrad, new, ev.full_grad[new], best, kkt)

    def _thresholded_test(
        self, weights: Weights, obj: Objective, theta: np.ndarray, exact_count: bool = False
    ) -> GradientTest:
        """The dense test from thresholded partials (kernels/thresholded.py),
        equal to it: one pass, a second where the bounds leave the n best or
        the maximum open. The certificate's count over the bound is exact
        when ``exact_count`` (the blocks then ship uncapped) or when nothing
        passes (``GradientTest.open``)."""
        n_best = self.ctx.config.grafting.n_best
        self.thresholded_tests += 1
        keep = None if exact_count else self.partial_keep
        value, lg, part = obj.thresholded_partials(theta, self.partial_cut * self.test_bound, keep)
        out = resolve(part, weights, self.penalty.l2, self.test_bound, n_best, exact_count)
        if not isinstance(out, Decided):
            self.fetch_passes += 1
            part = part.with_exact(out, obj.exact_sums(theta, out))
            out = resolve(part, weights, self.penalty.l2, self.test_bound, n_best, exact_count)
        if not isinstance(out, Decided):
            raise RuntimeError("the thresholded gradient test stayed open after its fetch pass")
        # test_bound is the certificate's bound (1 + kkt_tol) too: the count
        # over it is the certificate's count
        kkt = kkt_from_parts(
            out.active_grad,
            weights,
            out.best,
            out.n_over,
            self.ctx.backend.space.n_features,
            _grad_bias(lg),
            self.penalty,
            self.ctx.config.grafting.kkt_tol,
        )
        return GradientTest(value, lg, out.new, out.new_grad, out.best, kkt, out.n_undecided)

    def _certificate(self, weights: Weights) -> dict:
        """KKT certificate at ``weights`` over all candidates (a pass unless
        the test there is known; with its count left open, the thresholded
        test again with every feature decided)."""
        test = self.gradient_test(weights)
        if test.open:
            obj = self.objective(weights.active_ids())
            test = self._thresholded_test(weights, obj, _theta(weights), exact_count=True)
            self._known = (weights, test)
        return test.kkt

    def penalized(self, value: float, weights: Weights) -> float:
        """C with the l1 term, from the smooth part's ``value``."""
        return value + self.penalty.l1_value(weights.values)

    def round_tol(self, test: GradientTest) -> float:
        """A round's projected-gradient tolerance: ``round_tol_ratio`` times
        the test's excess (how far the best candidate violates optimality),
        never below the final tolerance. An active set that is about to grow
        needs no more accuracy than the violation the next test will find
        anyway (the inexact subproblems of working-set methods: Johnson &
        Guestrin 2015, Blitz). The best new weight's projected gradient at 0
        is the excess itself, so every round moves at least it."""
        excess = test.best - self.test_bound
        return max(self.options.tol, self.ctx.config.grafting.round_tol_ratio * excess)

    def round(self, state: LoopState) -> RoundOutcome:
        weights = state.weights
        if self.budget_left() == 0:
            if self.keep_going is None or not self.keep_going(weights):
                return RoundOutcome(stop(StopReason.BUDGET_SPENT), weights)
            # go on from here (weights, active set, the test known at them):
            # no pass of the budget is paid again
            self.continued_after = state.passes
            self.pass_limit = None
        test = self.gradient_test(weights)
        if len(test.new):
            return self._optimize(weights, test, self.round_tol(test))
        last = state.trace[-1] if state.trace else {}
        if test.kkt["passed"] or last.get("added", 1) == 0:
            # certified, or the finishing round below ran and could not certify
            return RoundOutcome(
                stop(StopReason.NO_CANDIDATE_PASSES),
                weights,
                objective=self.penalized(test.value, weights),
                score=test.best,
                info={"kkt": test.kkt},
            )
        # no candidate passes, but the active set was solved only to a
        # round's tolerance: finish it to the final one (no features added)
        return self._optimize(weights, test, self.options.tol)

    def budget_left(self) -> int | None:
        """Passes left of the pass budget (None: no budget)."""
        if self.pass_limit is None:
            return None
        return max(0, self.pass_limit - self.ctx.backend.passes)

    def _optimize(self, weights: Weights, test: GradientTest, tol: float) -> RoundOutcome:
        """Add the test's candidates (none in a finishing round), re-optimize
        the active set to projected gradient ``tol``, prune zeros."""
        spec, penalty, space = self.spec, self.penalty, self.ctx.backend.space
        active, new = weights.active_ids(), test.new
        ids = np.union1d(active, new)
        pos = np.searchsorted(ids, active)
        values = np.zeros(len(ids))
        values[pos] = weights.values
        signs = np.sign(values)
        new_pos = np.searchsorted(ids, new)
        # a new weight enters on the side where C decreases: -sign(dC/dw_j)
        signs[new_pos] = -np.sign(test.new_grad)
        box = penalty.box(signs, space.n_bias)
        obj = self.objective(ids)
        theta0 = np.concatenate([values, weights.bias if weights.bias is not None else []])
        solver = choose_solver(
            self.ctx.config.selection.solver,
            len(theta0),
            self.ctx.config.selection.newton_max_active,
        )
        left = self.budget_left()
        options = dataclasses.replace(
            self.options,
            tol=tol,
            region=len(ids),  # the weights: the biases stay outside the trust region
            # a solver pass is about an iteration: a budget bounds the round too
            max_iter=self.options.max_iter
            if left is None
            else max(1, min(left, self.options.max_iter)),
        )
        capped = options.max_iter < self.options.max_iter
        with warnings.catch_warnings():
            if capped:  # stopped by the budget: no warning
                warnings.simplefilter("ignore", ConvergenceWarning)
            res = SOLVERS[solver](obj, theta0, box, options, None)
        self.evaluations += res.evaluations
        self.iterations += res.iterations
        self.solver_use[solver] = self.solver_use.get(solver, 0) + 1
        n = len(ids)
        w, bias = res.theta[:n], (res.theta[n:].copy() if space.bias else None)
        # prune weights driven to exactly 0 (footnote 2); without l1 the
        # selected features stay
        keep = w != 0 if penalty.prunes else np.ones(n, dtype=bool)
        out = Weights(ids[keep], w[keep].copy(), bias)
        if res.last is not None and res.last.full_grad is not None:
            self._known = (out, self._dense_test(out, res.last))
        if len(new) and _same(out, weights):
            # every new weight stayed at 0: the solver could not move it, and
            # the same test would pick it again. Stop instead of cycling.
            log.warning(
                "%s: round added %d features and pruned them all without changing the "
                "weights (solver tolerance %.3g too loose for the test?); stopping",
                spec.name,
                len(new),
                tol,
            )
            return RoundOutcome(
                stop(StopReason.NO_PROGRESS, added=len(new)),
                weights,
                objective=res.value,
                score=test.best,
                info={"kkt": self._certificate(weights)},
            )
        return RoundOutcome(
            None,
            out,
            added=len(new),
            removed=int(n - keep.sum()),
            objective=res.value,
            score=test.best,
            note="" if len(new) else "finished to the final tolerance",
            info={
                "solver": solver,
                "iterations": res.iterations,
                "evaluations": res.evaluations,
                "tol": tol,
                "violation": res.violation,
                # stopped by a path point's pass budget: not a failure of
                # the solver (a point that goes on is certified at its end)
                "converged": None if capped and not res.converged else res.converged,
            },
        )


def _theta(weights: Weights) -> np.ndarray:
    """The parameter vector of an Objective over ``weights.active_ids()``."""
    return np.concatenate([weights.values, weights.bias if weights.bias is not None else []])


def _grad_bias(lg: LossGrad) -> np.ndarray | None:
    return lg.grad_bias / lg.weight if lg.grad_bias is not None else None


def _same(a: Weights, b: Weights) -> bool:
    return (
        np.array_equal(a.active_ids(), b.active_ids())
        and np.array_equal(a.values, b.values)
        and (a.bias is None) == (b.bias is None)
        and (a.bias is None or b.bias is not None and np.array_equal(a.bias, b.bias))
    )


def test_path(method: Grafting) -> dict:
    """How ``method``'s gradient test runs (dense or block-wise), for logs and reports."""
    n = method.ctx.backend.space.n_features
    if method.block_size is None and method.partial_cut > 0:
        return {
            "path": "dense",
            "partials": "thresholded",
            "partial_cut": method.partial_cut,
            "partial_keep": method.partial_keep,
            "tests": method.thresholded_tests,
            "fetch_passes": method.fetch_passes,
        }
    if method.block_size is None:
        return {"path": "dense"}
    return {
        "path": "block-wise",
        "block_size": method.block_size,
        "blocks": -(-n // method.block_size),
    }


def fit_grafting_family(
    ctx: TrainingContext,
    name: str,
    start: Weights | None = None,
    budget: int | None = None,
    keep_going: Callable[[Weights], bool] | None = None,
) -> FitResult:
    """Run a grafting-family method through the shared round loop, from
    ``start`` (a path's previous point; default all-zero), on a pass
    ``budget`` (a path's cut; default: none). When the budget is spent,
    ``keep_going(weights)`` decides whether the run goes on from there
    without it (default: it stops)."""
    spec = variant(name, ctx.config)
    penalty = spec.penalty
    method = Grafting(ctx, spec, budget, keep_going if budget is not None else None)
    path = test_path(method)
    log.info(
        "%s: l1 %g, l2 %g, threshold %g, %d best per round, solver %s, %s gradient test "
        "over %d candidates",
        name,
        penalty.l1,
        penalty.l2,
        penalty.bound,
        ctx.config.grafting.n_best,
        ctx.config.selection.solver,
        path["path"],
        ctx.backend.space.n_features,
    )
    state = run_rounds(ctx, method, name, "max_gradient", "candidate |gradient|", start=start)
    # stopped by a cap: certify what there is (one more pass)
    cert = state.info["kkt"] if "kkt" in state.info else method._certificate(state.weights)
    report = grafting_report(ctx, name, method, state, cert)
    return FitResult(state.weights.sparse(), report, stop=state.stop)


def grafting_report(
    ctx: TrainingContext, name: str, method: Grafting, state: LoopState, cert: dict
) -> dict:
    """The run report of a grafting-family run that ended in ``state`` with
    certificate ``cert`` (warned about when it failed)."""
    penalty, weights = method.penalty, state.weights
    test = method.gradient_test(weights)  # known by now: no pass
    lg = test.lossgrad
    spent = state.stop is not None and state.stop.reason is StopReason.BUDGET_SPENT
    if not cert["passed"] and not spent:
        log.warning(
            "%s: KKT certificate failed: max zero-weight |gradient| %.4g (bound %.4g), "
            "max active violation %.3g (tol %.3g)",
            name,
            cert["max_zero_gradient"],
            cert["bound"],
            cert["max_active_violation"],
            cert["tol"],
        )
    return {
        "objective": method.penalized(test.value, weights),
        "l1": penalty.l1,
        "l2": penalty.l2,
        "threshold": penalty.bound,
        "n_best": ctx.config.grafting.n_best,
        "active_features": int(len(weights.values)),
        "loss": lg.loss / lg.weight,
        "train_accuracy": lg.correct / lg.weight,
        "rounds_run": state.round,
        "budget_spent": spent,
        "continued_after": method.continued_after,
        "converged": bool(state.done and cert["passed"]),
        "kkt": cert,
        "iterations": method.iterations,
        "evaluations": method.evaluations,
        "solvers": method.solver_use,
        "gradient_test": test_path(method),
        "selection_passes": state.passes,
        "selection_elapsed_s": state.elapsed_s,
        "rounds": state.trace,
    }


def fit_mle_ifs(ctx: TrainingContext) -> FitResult:
    return fit_grafting_family(ctx, "mle-ifs")


def fit_l2_ifs(ctx: TrainingContext) -> FitResult:
    return fit_grafting_family(ctx, "l2-ifs")
