"""Objectives, penalties and optimizers over the active set (driver side)."""
from .lbfgs import ConvergenceWarning, LbfgsOptions, OptimResult, minimize_lbfgs
from .objective import Evaluation, Objective

__all__ = ["ConvergenceWarning", "LbfgsOptions", "OptimResult", "minimize_lbfgs", "Objective", "Evaluation"]
