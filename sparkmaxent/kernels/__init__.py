"""Pure numpy/scipy kernels: never import pyspark here."""
from .blocks import Block, CandidateBlock, MulticlassBlock
from .loss import LossGrad, LossGradTask, loss_grad
from .params import CANDIDATES, MULTICLASS, Scaling, Space, Weights
from .stats import Moments, MomentsTask

__all__ = ["Block", "CandidateBlock", "MulticlassBlock", "LossGrad", "LossGradTask",
           "loss_grad", "CANDIDATES", "MULTICLASS", "Scaling", "Space", "Weights",
           "Moments", "MomentsTask"]
