"""Per-block executor kernels: pure numpy/scipy, never import pyspark or
anything outside ``sparkmaxent.kernels``."""

from ..shapes import CANDIDATES, MULTICLASS
from .blocks import Block, CandidateBlock, MulticlassBlock
from .gain_sketch import GainSketchTask
from .gains import EmpiricalExpectationTask, GainDerivativesTask
from .loss import LossGrad, LossGradTask, loss_grad
from .params import Scaling, Space, Weights
from .stats import Moments, MomentsTask

__all__ = [
    "Block",
    "CandidateBlock",
    "MulticlassBlock",
    "LossGrad",
    "LossGradTask",
    "loss_grad",
    "CANDIDATES",
    "MULTICLASS",
    "Scaling",
    "Space",
    "Weights",
    "Moments",
    "MomentsTask",
    "EmpiricalExpectationTask",
    "GainDerivativesTask",
    "GainSketchTask",
]
