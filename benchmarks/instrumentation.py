"""Counting Spark jobs, for the benchmarks' "passes (Spark jobs)" figures.

The backend only runs passes, each under its own Spark job group
(``SparkBackend.job_group``); counting is done here, from outside:

- ``count_jobs(spark, fn)`` counts the jobs of any code (an MLlib fit, a
  training run that builds its own backends) by a Spark job tag added to the
  calling thread for the duration of ``fn``. Job tags add to the job group
  instead of replacing it, so the passes of a SparkBackend inside ``fn``
  carry the tag although they run under the backend's group.
- ``backend_jobs(backend)`` counts the jobs of one backend (filling its
  cache, then one per pass) by its job group.

Both read Spark's status tracker, which keeps the last
``spark.ui.retainedJobs`` jobs (default 1000): counts beyond that fall short,
and ``count_jobs`` warns when it gets there. Job ids reach the tracker
through Spark's asynchronous listener bus; waiting for the bus to empty
(a private call, typically < 1 ms) makes the counts exact.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger(__name__)

R = TypeVar("R")

DEFAULT_RETAINED_JOBS = 1000


def drain_listener_bus(sc, timeout_ms: int = 10_000) -> None:
    """Wait until Spark's listener bus has delivered every event, so that the
    status tracker knows every finished job."""
    try:
        sc._jsc.sc().listenerBus().waitUntilEmpty(timeout_ms)
    except Exception as exc:  # internal API: if it moves, counts may lag
        logger.debug("could not wait for Spark's listener bus: %s", exc)


def _retained_jobs(sc) -> int:
    return int(sc.getConf().get("spark.ui.retainedJobs", str(DEFAULT_RETAINED_JOBS)))


def _check_retention(sc, n_jobs: int, what: str) -> None:
    retained = _retained_jobs(sc)
    if n_jobs >= retained:
        logger.warning(
            "%s: %d jobs counted, as many as Spark retains "
            "(spark.ui.retainedJobs = %d): the count may fall short",
            what,
            n_jobs,
            retained,
        )


def count_jobs(spark, fn: Callable[[], R]) -> tuple[R, int]:
    """Run ``fn()`` and count the Spark jobs started from this thread meanwhile.

    Passes of SparkBackends run inside ``fn`` are included (they keep their
    own job group and carry the tag). The caller's job group and tags are
    left as they were.

    Returns
    -------
    (result of fn, number of jobs)
    """
    sc = spark.sparkContext
    tag = f"sparkmaxent-count-{uuid.uuid4().hex[:12]}"
    sc.addJobTag(tag)
    try:
        result = fn()
    finally:
        sc.removeJobTag(tag)
    drain_listener_bus(sc)
    n_jobs = len(sc._jsc.sc().statusTracker().getJobIdsForTag(tag))
    _check_retention(sc, n_jobs, "count_jobs")
    return result, n_jobs


def backend_jobs(backend) -> int:
    """Spark jobs a SparkBackend has run so far: the one filling its cache
    plus one per pass (found by ``backend.job_group``)."""
    sc = backend.spark.sparkContext
    drain_listener_bus(sc)
    n_jobs = len(sc.statusTracker().getJobIdsForGroup(backend.job_group))
    _check_retention(sc, n_jobs, f"backend_jobs({backend.name})")
    return n_jobs
