"""The number of threads of the driver's BLAS and LAPACK during a fit.

A Newton round multiplies by a dense Hessian block of up to
``train.selection.newton_max_active`` rows on the driver
(``solvers/box_cd.py``: coordinate-descent sweeps and the face steps'
conjugate gradients). A multithreaded OpenBLAS on a machine whose cores
are busy with other work (executors on the driver's machine, other jobs)
spins waiting for its threads, and these calls then take many times longer
than with one thread (docs/benchmarks.md, "BLAS threads of the Newton
solve"). ``train.selection.blas_threads`` sets the limit for the duration
of ``train``, through threadpoolctl (a dependency of the package); if it is
missing, the limit is not applied and a warning says so once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

log = logging.getLogger(__name__)
_warned = False


@contextlib.contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """Limit the BLAS/LAPACK thread pools of this process to ``n`` threads
    inside the block (``n`` = 0: leave them as they are)."""
    global _warned
    if n <= 0:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        if not _warned:
            log.warning(
                "train.selection.blas_threads = %d: threadpoolctl is not installed, "
                "BLAS keeps its default threads",
                n,
            )
            _warned = True
        yield
        return
    with threadpool_limits(limits=n, user_api="blas"):
        yield


__all__ = ["blas_threads"]
