"""A backend over one fold of another's events, or over all but that fold
(k-fold choice, choice/folds.py): every pass runs on the base backend's
blocks, each cut to the fold's events inside the task (kernels/infold.py),
so nothing is re-read or re-cached."""

from __future__ import annotations

import functools

import numpy as np

from ..kernels.infold import InFold, in_fold
from .base import Backend, WrappingBackend


class FoldBackend(WrappingBackend):
    """``base`` restricted to the events of ``groups`` (``inside``) or to
    the others; passes count on ``base``."""

    def __init__(self, base: Backend, groups: np.ndarray, inside: bool):
        super().__init__(base, base.space)
        self.groups = np.asarray(groups)
        self.inside = inside

    def wrap(self, task):
        return InFold(task, self.groups, self.inside)

    def change(self):
        return functools.partial(in_fold, groups=self.groups, inside=self.inside)
