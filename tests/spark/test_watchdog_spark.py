"""The watchdog on a real (local) Spark context: a cancelled pass raises
StalledError promptly, its tasks stop, and the backend runs the next pass;
the cost of watching a trivial pass."""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

from sparkmaxent.backends.spark import ClusterStatus, SparkBackend
from sparkmaxent.data.load import write_events
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.errors import StalledError
from sparkmaxent.kernels import MULTICLASS
from sparkmaxent.kernels.stats import Count, CountTask

from ..unit.helpers import random_multiclass


class SleepTask:
    """Counts the block after sleeping ``seconds``."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, block):
        time.sleep(self.seconds)
        return CountTask()(block)


class NoExecutors:
    """A cluster that lost every executor; tasks still finish (on the driver)."""

    def executors(self):
        return 0

    def progress(self):
        return ()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    block = random_multiclass(np.random.default_rng(5), m=60, P=8, K=3)
    d = tmp_path_factory.mktemp("watchdog")
    info = DatasetInfo(MULTICLASS, block.n_predicates, [f"y{k}" for k in range(block.n_labels)])
    write_events(block, str(d), info, n_files=2)
    return str(d), info


@pytest.mark.parametrize(
    "limits, reason",
    [
        (
            dict(pass_timeout_s=1.0),
            "it ran longer than spark.pass_timeout_s = 1 s (0 executor(s) now)",
        ),
        (dict(no_executor_timeout_s=1.0), "no executors for "),
    ],
)
def test_a_stalled_pass_is_cancelled_and_the_next_one_runs(
    spark, dataset, monkeypatch, limits, reason
):
    directory, info = dataset
    monkeypatch.setattr(SparkBackend, "watchdog_poll_s", 0.1)
    with SparkBackend(spark, directory, info, partitions=2, name="wd", **limits) as backend:
        local_status = backend.status
        # executors counted as on a cluster (none but the driver), or faked away
        backend.status = (
            NoExecutors() if "no_executor_timeout_s" in limits else ClusterStatus(backend.sc)
        )
        backend.status.local = False
        t0 = time.monotonic()
        with pytest.raises(StalledError) as err:
            backend.run(SleepTask(60.0))
        took = time.monotonic() - t0
        assert took < 20.0, took  # cancelled, not waited out
        message = str(err.value)
        assert message.startswith(f"wd: pass 1 (SleepTask) cancelled: {reason}"), message
        assert "--resume" in message
        assert backend.live_broadcasts == 0
        # the job group was cancelled, not the backend: the next pass runs (and counts)
        backend.status = local_status
        backend.pass_timeout_s = backend.no_executor_timeout_s = 0.0
        t0 = time.monotonic()
        count = backend.run(CountTask())
        assert isinstance(count, Count) and count.events == backend.n_events
        assert backend.passes == 2
        print(f"cancelled after {took:.1f} s, next pass {time.monotonic() - t0:.1f} s")
        assert time.monotonic() - t0 < 30.0  # the cancelled tasks were killed


def test_watching_costs_a_trivial_pass_next_to_nothing(spark, dataset, capsys):
    """Median time of a trivial pass with the watchdog on and off (printed);
    the difference is the thread's start and stop, well under 5 ms."""
    directory, info = dataset
    with SparkBackend(spark, directory, info, partitions=2, name="wd-cost") as backend:
        backend.run(CountTask())
        times = {True: [], False: []}
        for _ in range(8):
            for on in (True, False):
                backend.no_executor_timeout_s = 600.0 if on else 0.0
                t0 = time.perf_counter()
                backend.run(CountTask())
                times[on].append(time.perf_counter() - t0)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    with capsys.disabled():
        print(f"\ntrivial pass: {on * 1e3:.1f} ms watched, {off * 1e3:.1f} ms unwatched")
    assert on - off < 0.005 + 0.5 * off


def test_the_executor_list_reads_on_a_real_context(spark):
    """ClusterStatus.lost_executors through py4j (Spark's status store): on a
    running context nothing is lost and the driver is never counted (local
    mode, read as if it were a cluster)."""
    status = ClusterStatus(spark.sparkContext)
    assert status.lost_executors() == []  # local mode: none to lose
    status.local = False
    assert status.lost_executors() == []


def test_the_automatic_limit_cancels_a_pass_far_slower_than_the_ones_measured(
    spark, dataset, monkeypatch
):
    """issue 40: with spark.pass_timeout_s = 0 a pass is limited to
    pass_timeout_factor times the slowest pass so far (the caching counted),
    at least pass_timeout_floor_s: a pass hung far past that is cancelled
    (exit 6's StalledError, naming the keys); the passes measured set it."""
    directory, info = dataset
    monkeypatch.setattr(SparkBackend, "watchdog_poll_s", 0.1)
    limits = dict(pass_timeout_factor=2.0, pass_timeout_floor_s=0.5)
    with SparkBackend(spark, directory, info, partitions=2, name="auto", **limits) as backend:
        assert backend.pass_limit.slowest_s > 0  # the caching, measured
        backend.run(CountTask())
        limit, rule = backend.pass_limit.next()
        assert limit == max(0.5, 2.0 * backend.pass_limit.slowest_s)
        t0 = time.monotonic()
        with pytest.raises(StalledError) as err:
            backend.run(SleepTask(120.0))
        took = time.monotonic() - t0
        assert limit <= took < limit + 20.0, (limit, took)
        message = str(err.value)
        assert message.startswith(f"auto: pass 2 (SleepTask) cancelled: it ran longer than {rule}")
        assert "spark.pass_timeout_factor = 2 times the slowest pass so far" in message, message
        assert backend.pass_limit.slowest_s < limit  # a cancelled pass is not a measure
