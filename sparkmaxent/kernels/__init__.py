"""Pure numpy/scipy kernels: never import pyspark here."""
from .blocks import Block, CandidateBlock, MulticlassBlock
from .gains import (EmpiricalExpectationTask, GainDerivativesTask, GainFit, GainSketchTask,
                    fit_gains, uniform_initial_gains)
from .loss import LossGrad, LossGradTask, loss_grad
from .params import CANDIDATES, MULTICLASS, Scaling, Space, Weights
from .stats import Moments, MomentsTask

__all__ = ["Block", "CandidateBlock", "MulticlassBlock", "LossGrad", "LossGradTask",
           "loss_grad", "CANDIDATES", "MULTICLASS", "Scaling", "Space", "Weights",
           "Moments", "MomentsTask", "EmpiricalExpectationTask", "GainDerivativesTask",
           "GainFit", "GainSketchTask", "fit_gains", "uniform_initial_gains"]
