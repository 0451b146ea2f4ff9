"""Grafting's gradient test behind one interface (Perkins, Lacker & Theiler
2003; Riezler & Vasserman 2004, Figure 1): ``test(weights)`` names the
``n_best`` inactive candidates with |dC/dw_j| > gamma1_tested, the best
first; ``certify(weights)`` is the KKT certificate over every candidate
(``problem.kkt``). Both read one value, ``gamma1_tested``: gamma1, or the
thresholded variants' ``grad_threshold``, plus the zero-weight margin
(``Penalty.gamma1_tested``), so a run that stops is certified.

Three implementations, chosen once by ``make_gradient_test``:

- ``DenseTest``: one pass bringing dC/dw_j for every candidate to the
  driver (up to ``train.grafting.dense_test_max`` candidates);
- ``ThresholdedTest``: the same answer from thresholded partials
  (``kernels/thresholded.py``, ``partial_cut`` > 0), decided on the driver
  by ``methods/partials.py``, with a second pass where needed;
- ``BlockwiseTest``: per feature block a summary (``kernels/topk.py``),
  never a dense n_features vector on the driver.

Each gives the dense test's answer bit for bit (tested); see
docs/methods/grafting.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..config import TrainConfig
from ..errors import check_finite
from ..kernels import LossGrad, Space, Weights
from ..kernels.keyed import Keyed
from ..kernels.thresholded import ExactSumsTask, ThresholdedGradient, ThresholdedTestTask
from ..kernels.topk import GradientSummary, GradientTestTask, top_candidates
from ..problem import Certificate, Evaluation, Objective, Penalty, kkt_certificate, kkt_from_parts
from ..problem.objective import PartialCut, checked_pass
from ..selection.base import TrainingContext
from .partials import Decided, resolve


def select_candidates(
    full_grad: np.ndarray, active: np.ndarray, gamma1_tested: float, n_best: int
) -> tuple[np.ndarray, float]:
    """The dense test: inactive features with |dC/dw_j| > gamma1_tested, the
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
    ids = top_candidates(score, np.arange(len(score)), gamma1_tested, n_best)
    return ids, best


@dataclass(frozen=True)
class TestResult:
    """The gradient test at some weights, by any implementation.

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
    kkt : Certificate
        The KKT certificate at the weights (``problem.kkt.kkt_certificate``).
    open : int
        Inactive features the thresholded test left undecided: its count
        over the bound is then a lower bound (``certify`` decides them).
    active_grad : ndarray or None
        dC/dw_j at the weights' active features, in ``active_ids()`` order
        (what the certificate reads); None where a caller built the result
        without it (then a round starts with a pass of its own).
    """

    __test__ = False  # not a pytest class

    value: float
    lossgrad: LossGrad
    new: np.ndarray
    new_grad: np.ndarray
    best: float
    kkt: Certificate
    open: int = 0
    active_grad: np.ndarray | None = None


class GradientTest:
    """The interface: ``test(weights)`` and ``certify(weights)``, each a
    pass unless the test at those weights is known (``remember``: a
    solver's last pass that brought the full gradient).

    ``full_gradient``: whether a solver's pass may bring dC/dw_j of every
    candidate to the driver (``SolverOptions.full_gradient``)."""

    __test__ = False  # not a pytest class
    full_gradient = True

    def __init__(self, ctx: TrainingContext, penalty: Penalty):
        cfg = ctx.config.grafting
        self.ctx = ctx
        self.penalty = penalty
        self.kkt_tol = cfg.kkt_tol
        self.n_best = cfg.n_best
        #: the certificate's margin at zero weights (Penalty.zero_margin)
        self.margin = penalty.zero_margin(ctx.config.gtol, cfg.kkt_tol)
        #: gamma1 plus the margin, the one bound of the test (|dC/dw_j| >
        #: gamma1_tested passes: Riezler & Vasserman, Figure 1) and of the certificate
        self.gamma1_tested = penalty.gamma1_tested(ctx.config.gtol, cfg.kkt_tol)
        self._known: tuple[Weights, TestResult] | None = None

    def test(self, weights: Weights) -> TestResult:
        """The test at ``weights`` over every candidate."""
        if self._known is not None and same_weights(self._known[0], weights):
            return self._known[1]
        result = self._run(weights, self.objective(weights.active_ids()))
        self._known = (weights, result)
        return result

    def certify(self, weights: Weights) -> Certificate:
        """The KKT certificate at ``weights`` over every candidate."""
        return self.test(weights).kkt

    def round_start(self, weights: Weights, test: TestResult, ids: np.ndarray) -> Evaluation | None:
        """C and its gradient over ``ids`` (the active features of
        ``weights`` and ``test.new``, sorted) and the biases at the round's
        start, read off ``test``, the test at ``weights``, with no pass: the new
        weights enter at 0, so C there is the test's C, and the gradient is
        the test's at the active features and at the new ones (Riezler &
        Vasserman's Figure 1 re-optimizes from the weights the test ran at).
        The Hessian-free solver then starts without a pass of its own; None
        when ``test`` does not carry its active gradient (a combination
        round's merged test)."""
        if test.active_grad is None:
            return None
        grad = np.zeros(len(ids))
        grad[np.searchsorted(ids, weights.active_ids())] = test.active_grad
        grad[np.searchsorted(ids, test.new)] = test.new_grad
        bias = grad_bias(test.lossgrad)
        if bias is not None:
            grad = np.concatenate([grad, bias])
        return Evaluation(test.value, grad, None, None, test.lossgrad)

    def remember(self, weights: Weights, ev: Evaluation) -> None:
        """Keep the test from ``ev``, a solver's pass at ``weights``, when it
        brought the full gradient (or the thresholded test's partials): the
        next test there costs no pass (or only its fetch pass)."""
        if ev.full_grad is not None:
            self._known = (weights, self._from_full(weights, ev))

    def round_objective(self, ids: np.ndarray) -> Objective:
        """The Objective a round's solver runs on: its full-gradient passes
        bring what ``remember`` keeps."""
        return self.objective(ids)

    def forget(self) -> None:
        """Drop the known test (the next one runs its pass)."""
        self._known = None

    def describe(self) -> dict:
        """How the test runs, for logs and reports."""
        return {"path": "dense"}

    def objective(self, ids: np.ndarray) -> Objective:
        return Objective(self.ctx.backend, ids, l2=self.penalty.l2, scaling=self.ctx.scaling)

    def _run(self, weights: Weights, obj: Objective) -> TestResult:
        raise NotImplementedError

    def _from_full(self, weights: Weights, ev: Evaluation) -> TestResult:
        """The test from an evaluation that carries the full gradient."""
        assert ev.full_grad is not None, "callers pass an evaluation with the full gradient"
        new, best = select_candidates(
            ev.full_grad, weights.active_ids(), self.gamma1_tested, self.n_best
        )
        # the bias gradient from the raw sums (ev.grad may span pruned ids too)
        kkt = kkt_certificate(
            ev.full_grad, weights, grad_bias(ev.lossgrad), self.penalty, self.kkt_tol,
            margin=self.margin,
        )  # fmt: skip
        active = ev.full_grad[weights.active_ids()]
        return TestResult(ev.value, ev.lossgrad, new, ev.full_grad[new], best, kkt, 0, active)

    def _from_parts(self, active_grad, weights, best, n_over, lg: LossGrad) -> Certificate:
        """The certificate from what a test keeps: ``gamma1_tested`` is the
        certificate's bound too, so the count over it is the certificate's."""
        n = self.ctx.backend.space.n_features
        return kkt_from_parts(
            active_grad, weights, best, n_over, n, grad_bias(lg), self.penalty, self.kkt_tol,
            margin=self.margin,
        )  # fmt: skip


class DenseTest(GradientTest):
    """One pass bringing dC/dw_j of every candidate to the driver."""

    def _run(self, weights: Weights, obj: Objective) -> TestResult:
        return self._from_full(weights, obj.at(theta(weights), full_gradient=True, hessian=False))


class ThresholdedTest(GradientTest):
    """The dense test from thresholded partials (kernels/thresholded.py),
    equal to it: one pass, a second where the bounds leave the n best or
    the maximum open. ``cut``: a block ships the entries over cut * gamma1_tested;
    ``keep``: at most this many of them (None: all)."""

    def __init__(self, ctx: TrainingContext, penalty: Penalty, cut: float, keep: int | None):
        super().__init__(ctx, penalty)
        self.cut = cut
        self.keep = keep
        # thresholded tests run, and those that needed a second pass
        self.tests = 0
        self.fetch_passes = 0

    def describe(self) -> dict:
        return {
            "path": "dense",
            "partials": "thresholded",
            "partial_cut": self.cut,
            "partial_keep": self.keep,
            "tests": self.tests,
            "fetch_passes": self.fetch_passes,
        }

    def round_objective(self, ids: np.ndarray) -> Objective:
        """Its full-gradient passes ship this test's partials, never the
        dense gradient."""
        obj = self.objective(ids)
        obj.partials = PartialCut(self.cut * self.gamma1_tested, self.keep, self.penalty.prunes)
        return obj

    def remember(self, weights: Weights, ev: Evaluation) -> None:
        """The test from a solver's pass that shipped this test's partials
        at ``weights`` (bit for bit this test's own first pass there)."""
        if ev.partial is None:
            super().remember(weights, ev)
            return
        self.tests += 1
        lg = checked_pass(ev.partial.scalars(), "gradient-test pass")
        obj = self.objective(weights.active_ids())
        value = obj.value(lg, weights.values)
        self._known = (weights, self._decide(weights, obj, value, lg, ev.partial, False))

    def certify(self, weights: Weights) -> Certificate:
        """With the count over the bound left open, the test again with
        every feature decided (blocks then ship uncapped)."""
        result = self.test(weights)
        if result.open:
            result = self._run(weights, self.objective(weights.active_ids()), exact_count=True)
            self._known = (weights, result)
        return result.kkt

    def _run(self, weights: Weights, obj: Objective, exact_count: bool = False) -> TestResult:
        """The certificate's count over the bound is exact when
        ``exact_count`` or when nothing passes (``TestResult.open``)."""
        self.tests += 1
        keep = None if exact_count else self.keep
        value, lg, part = self._partials(obj, theta(weights), keep)
        return self._decide(weights, obj, value, lg, part, exact_count)

    def _decide(
        self,
        weights: Weights,
        obj: Objective,
        value: float,
        lg: LossGrad,
        part: ThresholdedGradient,
        exact_count: bool,
    ) -> TestResult:
        """The test from the merged partials ``part``, with the fetch pass
        where they leave it open."""
        th = theta(weights)
        out = resolve(part, weights, self.penalty.l2, self.gamma1_tested, self.n_best, exact_count)
        if not isinstance(out, Decided):
            self.fetch_passes += 1
            part = part.with_exact(out, self._exact_sums(obj, th, out))
            out = resolve(
                part, weights, self.penalty.l2, self.gamma1_tested, self.n_best, exact_count
            )
        if not isinstance(out, Decided):
            raise RuntimeError("the thresholded gradient test stayed open after its fetch pass")
        kkt = self._from_parts(out.active_grad, weights, out.best, out.n_over, lg)
        return TestResult(
            value, lg, out.new, out.new_grad, out.best, kkt, out.n_undecided, out.active_grad
        )

    def _partials(
        self, obj: Objective, th: np.ndarray, keep: int | None
    ) -> tuple[float, LossGrad, ThresholdedGradient]:
        """One pass: C(theta), the pass's scalar sums, and the merged
        partials (exact at the active features, elsewhere the entries over
        cut * gamma1_tested per unit of event weight, at most ``keep`` a block)."""
        obj.require_ids("a gradient test")
        obj.evaluations += 1
        weights = obj.weights(th)
        task = ThresholdedTestTask(
            obj.space, weights, obj.scaling, self.cut * self.gamma1_tested, keep
        )
        part = obj.backend.run(task)
        lg = checked_pass(part.scalars(), "gradient-test pass")
        check_finite("gradient-test pass", active_gradient=part.active, gradient=part.sums)
        return obj.value(lg, weights.values), lg, part

    def _exact_sums(self, obj: Objective, th: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """One pass: the gradient sums at features ``ids`` computed as the
        dense test computes them, merged in the same order."""
        obj.evaluations += 1
        task = ExactSumsTask(obj.space, obj.weights(th), obj.scaling, ids)
        return checked_pass(obj.backend.run(task), "gradient-test fetch pass").grad


class BlockwiseTest(GradientTest):
    """Per feature block of ``block_size`` features a summary
    (kernels/topk.py, the backend's keyed pass): no dense
    n_features vector on the driver, so no solver pass brings one either."""

    full_gradient = False

    def __init__(self, ctx: TrainingContext, penalty: Penalty, block_size: int):
        super().__init__(ctx, penalty)
        self.block_size = block_size

    def describe(self) -> dict:
        n = self.ctx.backend.space.n_features
        return {
            "path": "block-wise",
            "block_size": self.block_size,
            "blocks": -(-n // self.block_size),
        }

    def _run(self, weights: Weights, obj: Objective) -> TestResult:
        value, summary = blockwise_summary(
            obj, theta(weights), self.gamma1_tested, self.n_best, self.block_size
        )
        lg = summary.lg
        assert lg is not None, "blockwise_summary() returns a finished summary"
        kkt = self._from_parts(
            summary.active_grad, weights, summary.max_inactive, summary.n_over, lg
        )
        return TestResult(
            value, lg, summary.top_ids, summary.top_grad, summary.max_inactive, kkt, 0,
            summary.active_grad,
        )  # fmt: skip


def blockwise_summary(
    obj: Objective, th: np.ndarray, gamma1_tested: float, n_best: int, block_size: int
) -> tuple[float, GradientSummary]:
    """One block-wise pass (a keyed pass, ``backend.run(Keyed(task))``): C(theta) and
    what the test keeps of the gradient over every candidate, its active
    features sorted as ``obj.ids``."""
    ids = obj.require_ids("a gradient test")
    obj.evaluations += 1
    weights = obj.weights(th)
    task = GradientTestTask(
        obj.space, weights, obj.scaling, obj.l2, gamma1_tested, n_best, block_size
    )
    summary = finished(obj.backend.run(Keyed(task)), obj.space, ids)
    lg = summary.lg
    assert lg is not None, "finished() raises when the loss sums are missing"
    checked_pass(lg, "gradient-test pass")
    check_finite(
        "gradient-test pass",
        active_gradient=summary.active_grad,
        max_inactive_gradient=summary.max_inactive,
    )
    return obj.value(lg, weights.values), summary


def make_gradient_test(ctx: TrainingContext, penalty: Penalty) -> GradientTest:
    """The test of a run, chosen once: block-wise above ``dense_test_max``
    candidates, else thresholded partials when ``partial_cut`` > 0, else
    the dense test."""
    cfg: TrainConfig = ctx.config
    g = cfg.grafting
    if ctx.backend.space.n_features > g.dense_test_max:
        return BlockwiseTest(ctx, penalty, g.test_block_size)
    if g.partial_cut > 0:
        keep = g.partial_keep * g.n_best if g.partial_keep else None
        return ThresholdedTest(ctx, penalty, g.partial_cut, keep)
    return DenseTest(ctx, penalty)


def finished(summary: GradientSummary, space: Space, active: np.ndarray) -> GradientSummary:
    """``summary`` of a block-wise pass once every feature was covered once,
    its active features sorted as ``active`` (the weights' ids)."""
    n_features = space.n_features
    if summary.n_features != n_features:
        raise RuntimeError(
            f"the block-wise gradient test covered {summary.n_features} features, "
            f"expected all {n_features}"
        )
    if summary.lg is None:
        raise RuntimeError("the block-wise gradient test lost its loss and weight sums")
    order = np.argsort(summary.active_ids, kind="stable")
    ids = summary.active_ids[order]
    if not np.array_equal(ids, active):
        raise RuntimeError(
            f"the block-wise gradient test returned {len(ids)} active features, "
            f"expected the {len(active)} of the weights"
        )
    return dataclasses.replace(summary, active_ids=ids, active_grad=summary.active_grad[order])


def theta(weights: Weights) -> np.ndarray:
    """The parameter vector of an Objective over ``weights.active_ids()``."""
    return np.concatenate([weights.values, weights.bias if weights.bias is not None else []])


def grad_bias(lg: LossGrad) -> np.ndarray | None:
    """dL/db per unit of event weight (None without biases)."""
    return lg.grad_bias / lg.weight if lg.grad_bias is not None else None


def same_weights(a: Weights, b: Weights) -> bool:
    """Bitwise the same active ids, values and biases."""
    return (
        np.array_equal(a.active_ids(), b.active_ids())
        and np.array_equal(a.values, b.values)
        and (a.bias is None) == (b.bias is None)
        and (a.bias is None or b.bias is not None and np.array_equal(a.bias, b.bias))
    )


__all__ = [
    "BlockwiseTest",
    "blockwise_summary",
    "DenseTest",
    "GradientTest",
    "TestResult",
    "ThresholdedTest",
    "make_gradient_test",
    "select_candidates",
]
