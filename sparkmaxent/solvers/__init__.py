"""Optimizers (driver side): L-BFGS(-B), box-constrained Newton, the
registry of a round's box solvers, and the 1-D gain solvers."""

from .box_qp import SOLVERS, choose_solver
from .gain_fits import GAIN_METHODS, GainFit, fit_gains, uniform_initial_gains
from .lbfgs import ConvergenceWarning, OptimResult, minimize_lbfgs
from .newton import BoxResult, minimize_box_newton
from .options import SolverOptions

__all__ = [
    "SOLVERS",
    "choose_solver",
    "ConvergenceWarning",
    "OptimResult",
    "minimize_lbfgs",
    "BoxResult",
    "minimize_box_newton",
    "SolverOptions",
    "GAIN_METHODS",
    "GainFit",
    "fit_gains",
    "uniform_initial_gains",
]
