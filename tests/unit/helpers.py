"""Small random blocks for kernel tests (no Spark)."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from sparkmaxent.kernels import CandidateBlock, MulticlassBlock


def random_multiclass(rng: np.random.Generator, m=40, P=12, K=4, density=0.3) -> MulticlassBlock:
    X = sp.random(m, P, density=density, format="csr", random_state=rng,
                  data_rvs=lambda n: rng.normal(size=n))
    return MulticlassBlock(X=X, y=rng.integers(0, K, size=m), c=rng.uniform(0.5, 3, size=m),
                           n_labels=K)


def random_candidates(rng: np.random.Generator, m=15, D=10, max_cands=5, density=0.4) -> CandidateBlock:
    sizes = rng.integers(1, max_cands + 1, size=m)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    n = ptr[-1]
    F = sp.random(n, D, density=density, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.normal(size=k))
    correct = np.zeros(n, dtype=bool)
    for i in range(m):  # one or more correct candidates per event
        k = rng.integers(1, sizes[i] + 1)
        correct[ptr[i] + rng.choice(sizes[i], size=k, replace=False)] = True
    return CandidateBlock(F=F, event_ptr=ptr, correct=correct, c=rng.uniform(0.5, 3, size=m))
