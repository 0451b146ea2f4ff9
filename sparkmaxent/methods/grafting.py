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
``dense_test_max`` candidates the test is block-wise (``kernels/topk.py``);
the test's implementations are in ``gradient_test.py``.

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
from ..kernels import Weights
from ..problem import Certificate, Objective, Penalty
from ..selection.base import FitResult, LoopState, RoundOutcome, RoundSolve, TrainingContext
from ..selection.loop import run_rounds
from ..selection.stops import StopReason, stop
from ..solvers import SOLVERS, ConvergenceWarning, SolverOptions, choose_solver
from .gradient_test import GradientTest, TestResult, make_gradient_test, same_weights

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Variant:
    """A grafting-family method: its name and its penalty (gamma1, gamma2,
    and for mle-ifs and l2-ifs the gradient test's grad_threshold in
    gamma1's place as the zero-weight bound)."""

    name: str
    penalty: Penalty


def variant(name: str, cfg: TrainConfig) -> Variant:
    """The Variant of method ``name`` under ``cfg`` (its ranges are checked
    by the config schema): the one place where the configuration's
    ``train.grafting.l1`` becomes ``Penalty.gamma1`` (problem/penalty.py)."""
    if name == "grafting":
        return Variant(name, Penalty(gamma1=cfg.grafting.l1, l2=cfg.grafting.elastic_l2))
    if name in ("mle-ifs", "l2-ifs"):
        l2 = cfg.l2 if name == "l2-ifs" else 0.0
        return Variant(name, Penalty(gamma1=0.0, l2=l2, grad_threshold=cfg.grafting.grad_threshold))
    raise ValueError(f"unknown grafting variant {name!r}: expected grafting, mle-ifs or l2-ifs")


def finished(state: LoopState) -> bool:
    """Whether the last round only finished the active set (nothing added)
    and its solve was not cut by a path point's pass budget (``converged``
    None): then a test that still fails certifies nothing better. A
    finishing round cut by the budget runs again once the budget is lifted
    (``keep_going``), so a point that goes on ends certified as a full fit."""
    if not state.trace or state.trace[-1].added:
        return False
    solve = state.trace[-1].solve
    return solve is None or solve.converged is not None


class Grafting:
    """The round method of grafting, mle-ifs and l2-ifs (selection/loop.py),
    on a pass ``budget`` from now (a path point's cut, choice/path.py;
    None: no budget). When the budget is spent, ``keep_going(weights)``
    decides whether the run goes on from there: False (or None: no
    ``keep_going``) stops it, True lifts the budget, a number of passes
    renews it."""

    def __init__(
        self,
        ctx: TrainingContext,
        spec: Variant,
        budget: int | None = None,
        keep_going: Callable[[Weights], bool | int] | None = None,
    ):
        self.ctx = ctx
        self.spec = spec
        self.penalty = spec.penalty
        cfg = ctx.config
        # the gradient test and the certificate, chosen once (methods/gradient_test.py)
        self.gradient_test: GradientTest = make_gradient_test(ctx, self.penalty)
        self.options = SolverOptions(
            tol=self.penalty.solver_tol(cfg.gtol, cfg.grafting.kkt_tol),
            max_iter=cfg.max_iter,
            memory=cfg.memory,
            ftol=cfg.ftol,
            full_gradient=self.gradient_test.full_gradient,
            # new weights start at 0 and are log-odds: an unbounded first step
            # overshoots by orders of magnitude; the region bounds the weights only
            # (a common shift of the unpenalized biases changes no probability)
            radius=cfg.grafting.round_radius or np.inf,
            global_cg=cfg.grafting.round_global_cg,
            crawl_cg=cfg.grafting.round_crawl_cg,
        )
        self.evaluations = 0
        self.iterations = 0
        self.solver_use: dict[str, int] = {}
        # the backend's pass count at which a path point's budget is spent
        # (choice/path.py); None: no budget
        self.pass_limit = None if budget is None else ctx.backend.passes + budget
        # asked with the weights when the budget is spent: go on without it?
        self.keep_going = keep_going
        # the pass count (of this run) at which the budget ran out and the run went on
        self.continued_after: int | None = None

    def objective(self, ids: np.ndarray) -> Objective:
        return self.gradient_test.objective(ids)

    def round_objective(self, ids: np.ndarray) -> Objective:
        """The Objective of a round's solver (``GradientTest.round_objective``)."""
        return self.gradient_test.round_objective(ids)

    def penalized(self, value: float, weights: Weights) -> float:
        """C with the l1 term, from the smooth part's ``value``."""
        return value + self.penalty.l1_value(weights.values)

    def round_tol(self, test: TestResult) -> float:
        """A round's projected-gradient tolerance: ``round_tol_ratio`` times
        the test's excess (how far the best candidate violates optimality),
        never below the final tolerance. An active set that is about to grow
        needs no more accuracy than the violation the next test will find
        anyway (the inexact subproblems of working-set methods: Johnson &
        Guestrin 2015, Blitz). The best new weight's projected gradient at 0
        is the excess itself, so every round moves at least it."""
        excess = test.best - self.gradient_test.gamma1_tested
        return max(self.options.tol, self.ctx.config.grafting.round_tol_ratio * excess)

    def round(self, state: LoopState) -> RoundOutcome:
        weights = state.weights
        if self.budget_left() == 0:
            go = self.keep_going(weights) if self.keep_going is not None else False
            if not go:
                return RoundOutcome(stop(StopReason.BUDGET_SPENT), weights)
            # go on from here (weights, active set, the test known at them):
            # no pass of the budget is paid again; True: without a budget, a
            # number: on that many more passes
            if self.continued_after is None:
                self.continued_after = state.passes
            self.pass_limit = None if go is True else self.ctx.backend.passes + int(go)
        test = self.gradient_test.test(weights)
        if len(test.new):
            return self.grow(weights, test)
        if test.kkt.passed or finished(state):
            # certified, or the finishing round below ran and could not certify
            return RoundOutcome(
                stop(StopReason.NO_CANDIDATE_PASSES),
                weights,
                objective=self.penalized(test.value, weights),
                score=test.best,
                certificate=test.kkt,
            )
        # no candidate passes, but the active set was solved only to a
        # round's tolerance: finish it to the final one (no features added)
        return self.grow(weights, test, finish=True)

    def budget_left(self) -> int | None:
        """Passes left of the pass budget (None: no budget)."""
        if self.pass_limit is None:
            return None
        return max(0, self.pass_limit - self.ctx.backend.passes)

    def solve(self, solver, obj, theta0, box, options, capped: bool, first=None):
        """The round's box problem by ``solver`` from ``first``, the
        evaluation at ``theta0`` when known (None: its own pass); ``capped``: the
        iterations are cut by a path point's pass budget (no warning when
        it stops them). The run's time budget (``ctx.deadline``) ends a long
        round between its iterations (``minimize_box_newton``'s ``time_left``)."""
        deadline = self.ctx.deadline
        with warnings.catch_warnings():
            if capped:
                warnings.simplefilter("ignore", ConvergenceWarning)
            time_left = deadline.remaining if deadline.bounded else None
            return SOLVERS[solver](obj, theta0, box, options, first, time_left)

    def grow(self, weights: Weights, test: TestResult, finish: bool = False) -> RoundOutcome:
        """One round: add ``test.new`` (from any test over this run's
        candidates: combination rounds add their conjunctions), re-optimize
        the active set to ``round_tol`` (``finish``: the final tolerance,
        nothing added), prune weights driven to 0."""
        tol = self.options.tol if finish else self.round_tol(test)
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
        obj = self.round_objective(ids)
        theta0 = np.concatenate([values, weights.bias if weights.bias is not None else []])
        selection = self.ctx.config.selection
        solver = choose_solver(selection.solver, len(theta0), selection.newton_max_active)
        left = self.budget_left()
        options = dataclasses.replace(
            self.options,
            tol=tol,
            region=len(ids),  # the weights: the biases stay outside the trust region
            # an iteration is about a pass, after the start's: a budget bounds the round
            max_iter=self.options.max_iter
            if left is None
            else max(1, min(left - 1, self.options.max_iter)),
        )
        capped = options.max_iter < self.options.max_iter
        # the test ran at these weights: the Hessian-free solver starts from it
        first = self.gradient_test.round_start(weights, test, ids)
        res = self.solve(solver, obj, theta0, box, options, capped, first)
        self.evaluations += res.evaluations
        self.iterations += res.iterations
        self.solver_use[solver] = self.solver_use.get(solver, 0) + 1
        n = len(ids)
        w, bias = res.theta[:n], (res.theta[n:].copy() if space.bias else None)
        # prune weights driven to exactly 0 (footnote 2; with l1 only)
        keep = w != 0 if penalty.prunes else np.ones(n, dtype=bool)
        out = Weights(ids[keep], w[keep].copy(), bias)
        if res.last is not None:
            self.gradient_test.remember(out, res.last)
        if len(new) and same_weights(out, weights) and not res.timed_out:
            # every new weight stayed at 0: the solver could not move it, and
            # the same test would pick it again. Stop instead of cycling (a round
            # timed out before its first step is kept: max_seconds stops next).
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
                certificate=self.gradient_test.certify(weights),
            )
        return RoundOutcome(
            None,
            out,
            added=len(new),
            removed=int(n - keep.sum()),
            objective=res.value,
            score=test.best,
            note="" if len(new) else "finished to the final tolerance",
            solve=RoundSolve(
                solver,
                res.iterations,
                res.evaluations,
                tol,
                res.violation,
                # stopped by a path point's pass budget or the time budget:
                # not a failure of the solver (a point that goes on is
                # certified at its end; a run out of time reports its
                # certificate's verdict)
                None if (capped or res.timed_out) and not res.converged else res.converged,
            ),
        )


def fit_grafting_family(
    ctx: TrainingContext,
    name: str,
    start: Weights | None = None,
    budget: int | None = None,
    keep_going: Callable[[Weights], bool | int] | None = None,
) -> FitResult:
    """Run a grafting-family method through the shared round loop, from
    ``start`` (a path's previous point; default all-zero), on a pass
    ``budget`` (a path's cut; default: none). When the budget is spent,
    ``keep_going(weights)`` decides whether the run goes on from there
    (``Grafting``; default: it stops)."""
    spec = variant(name, ctx.config)
    penalty = spec.penalty
    method = Grafting(ctx, spec, budget, keep_going if budget is not None else None)
    path = method.gradient_test.describe()
    log.info(
        "%s: l1 %g, l2 %g, threshold %g, %d best per round, solver %s, %s gradient test "
        "over %d candidates",
        name,
        penalty.gamma1,
        penalty.l2,
        penalty.gamma1_kkt,
        ctx.config.grafting.n_best,
        ctx.config.selection.solver,
        path["path"],
        ctx.backend.space.n_features,
    )
    # after_passes: time for the certificate pass below, when a cap ends the rounds
    state = run_rounds(
        ctx, method, name, "max_gradient", "candidate |gradient|", start=start, after_passes=1
    )
    cert = state.certificate
    if cert is None:  # stopped by a cap: certify what there is (one more pass)
        cert = method.gradient_test.certify(state.weights)
    report = grafting_report(ctx, name, method, state, cert)
    return FitResult(state.weights.sparse(), report, stop=state.stop)


def grafting_report(
    ctx: TrainingContext, name: str, method: Grafting, state: LoopState, cert: Certificate
) -> dict:
    """The run report of a grafting-family run that ended in ``state`` with
    certificate ``cert`` (warned about when it failed)."""
    penalty, weights = method.penalty, state.weights
    test = method.gradient_test.test(weights)  # known by now: no pass
    lg = test.lossgrad
    spent = state.stop is not None and state.stop.reason is StopReason.BUDGET_SPENT
    if not cert.passed and not spent:
        log.warning(
            "%s: KKT certificate failed: max zero-weight |gradient| %.4g (bound %.4g), "
            "max active violation %.3g (tol %.3g)",
            name,
            cert.max_zero_gradient,
            cert.bound,
            cert.max_active_violation,
            cert.tol,
        )
    return {
        "objective": method.penalized(test.value, weights),
        "l1": penalty.gamma1,
        "l2": penalty.l2,
        "threshold": penalty.gamma1_kkt,
        "n_best": ctx.config.grafting.n_best,
        "active_features": int(len(weights.values)),
        "loss": lg.loss / lg.weight,
        "train_accuracy": lg.correct / lg.weight,
        "rounds_run": state.round,
        "budget_spent": spent,
        "continued_after": method.continued_after,
        "converged": bool(state.done and cert.passed),
        "kkt": cert,
        "iterations": method.iterations,
        "evaluations": method.evaluations,
        "solvers": method.solver_use,
        "gradient_test": method.gradient_test.describe(),
        "selection_passes": state.passes,
        "selection_elapsed_s": state.elapsed_s,
        "rounds": state.trace,
    }


def fit_grafting(ctx: TrainingContext) -> FitResult:
    """``grafting`` over the atomic features, from ``ctx.start`` (a warm
    start); with combination features the registry names
    ``methods/combination.py``'s fit instead."""
    return fit_grafting_family(ctx, "grafting", ctx.start)


def fit_mle_ifs(ctx: TrainingContext) -> FitResult:
    return fit_grafting_family(ctx, "mle-ifs")


def fit_l2_ifs(ctx: TrainingContext) -> FitResult:
    return fit_grafting_family(ctx, "l2-ifs")
