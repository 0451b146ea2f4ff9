"""The Spark backend's watchdog against a fake status source and a fake
SparkContext (no Spark started): when it trips, that it cancels the job
group, and the exit code and message the command line gives."""

from __future__ import annotations

import json
import os
import threading
import time
from types import SimpleNamespace

import pytest

from sparkmaxent import cli
from sparkmaxent.backends.spark import SparkBackend, Watchdog
from sparkmaxent.backends.watchdog import PassLimit
from sparkmaxent.errors import StalledError

GROUP = "test-group-1234"


class FakeContext:
    """Records cancelJobGroup calls."""

    def __init__(self):
        self.cancelled: list[str] = []
        self.event = threading.Event()

    def cancelJobGroup(self, group):  # noqa: N802 (pyspark's name)
        self.cancelled.append(group)
        self.event.set()


class FakeStatus:
    """``executors`` executors; ``progress()`` returns ``token``."""

    def __init__(self, executors=0, token=()):
        self.n, self.token = executors, token

    def executors(self):
        return self.n

    def progress(self):
        return self.token


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _dog(status, no_executor_s=20.0, pass_s=0.0, poll_s=1.0, clock=None):
    return Watchdog(
        FakeContext(),
        GROUP,
        "pass 3 (LossGradTask)",
        status,
        no_executor_s,
        pass_s,
        poll_s,
        clock or time.monotonic,
    )


# ---- one poll at a time, on a fake clock ------------------------------------------


def test_trips_after_the_timeout_without_executors_and_progress():
    clock, status = Clock(), FakeStatus(executors=1)
    dog = _dog(status, no_executor_s=20.0, clock=clock)
    assert dog.check(clock.now) is None
    status.n = 0  # the only worker died
    for t in (1, 2, 20):
        clock.now += 1 if t < 20 else 18
        assert dog.check(clock.now) is None, t  # idle from t=1: 19 s so far
    clock.now += 1
    reason = dog.check(clock.now)
    assert reason == ("no executors for 20 s (all 1 were lost; spark.no_executor_timeout_s = 20)")


def test_progress_or_an_executor_resets_the_idle_time():
    clock, status = Clock(), FakeStatus(executors=0, token=((1, 0, 0),))
    dog = _dog(status, no_executor_s=10.0, clock=clock)
    for step in range(30):  # tasks keep completing (e.g. on the driver): never stalled
        clock.now += 1
        status.token = ((1, 0, step),)
        assert dog.check(clock.now) is None
    clock.now += 9
    assert dog.check(clock.now) is None
    status.n = 2  # a new worker: the clock starts over
    clock.now += 5
    assert dog.check(clock.now) is None
    status.n = 0
    clock.now += 1
    assert dog.check(clock.now) is None
    clock.now += 9.5
    assert dog.check(clock.now) is None
    clock.now += 0.5
    assert "all 2 were lost" in dog.check(clock.now)


def test_local_mode_never_stalls_for_want_of_executors():
    clock = Clock()
    dog = _dog(FakeStatus(executors=None), no_executor_s=1.0, clock=clock)
    for _ in range(10):
        clock.now += 5
        assert dog.check(clock.now) is None


def test_pass_timeout_trips_whatever_the_executors():
    clock = Clock()
    dog = _dog(FakeStatus(executors=4, token=object()), no_executor_s=0.0, pass_s=30.0, clock=clock)
    clock.now += 29.9
    assert dog.check(clock.now) is None
    clock.now += 0.1
    assert dog.check(clock.now) == (
        "it ran longer than spark.pass_timeout_s = 30 s (4 executor(s) now)"
    )


def test_pass_timeout_in_local_mode():
    clock = Clock()
    dog = _dog(FakeStatus(executors=None), no_executor_s=600.0, pass_s=5.0, clock=clock)
    clock.now += 5
    assert dog.check(clock.now) == "it ran longer than spark.pass_timeout_s = 5 s (local mode)"


def test_no_executor_timeout_zero_disables_the_check():
    clock = Clock()
    dog = _dog(FakeStatus(executors=0), no_executor_s=0.0, clock=clock)
    clock.now += 1e6
    assert dog.check(clock.now) is None


# ---- the thread ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "status, limits, reason",
    [
        (FakeStatus(executors=0), dict(no_executor_s=0.1), "no executors for"),
        (
            FakeStatus(executors=1),
            dict(no_executor_s=0.0, pass_s=0.1),
            "it ran longer than spark.pass_timeout_s = 0.1 s (1 executor(s) now), after 0.",
        ),
    ],
)
def test_the_thread_cancels_the_job_group(status, limits, reason):
    dog = _dog(status, poll_s=0.01, **limits)
    t0 = time.monotonic()
    with dog:
        assert dog.sc.event.wait(10.0), "the watchdog did not cancel the job group"
    assert time.monotonic() - t0 < 5.0
    assert dog.sc.cancelled == [GROUP]
    assert dog.tripped.startswith(reason), dog.tripped


def test_a_pass_that_ends_in_time_is_not_cancelled():
    dog = _dog(FakeStatus(executors=0), no_executor_s=0.3, poll_s=0.01)
    with dog:
        time.sleep(0.05)
    time.sleep(0.5)
    assert dog.sc.cancelled == [] and dog.tripped is None
    assert not dog._thread.is_alive()


def test_no_thread_without_limits():
    dog = _dog(FakeStatus(executors=0), no_executor_s=0.0, pass_s=0.0)
    with dog:
        pass
    assert dog._thread is None


def test_a_failing_status_source_does_not_fail_the_pass():
    class Broken(FakeStatus):
        def executors(self):
            raise RuntimeError("SparkContext stopped")

    dog = _dog(Broken(), no_executor_s=0.05, poll_s=0.01)
    with dog:
        time.sleep(0.2)
    assert dog.sc.cancelled == [] and dog.tripped is None


# ---- the backend's pass: the error raised -----------------------------------------


def _fake_backend(status, no_executor_s=0.1, max_losses=0):
    return SimpleNamespace(
        sc=FakeContext(),
        job_group=GROUP,
        name="run-x",
        status=status,
        no_executor_timeout_s=no_executor_s,
        watchdog_poll_s=0.01,
        max_executor_losses=max_losses,
    )


def test_a_cancelled_pass_raises_stalled_error_saying_what_was_lost():
    backend = _fake_backend(FakeStatus(executors=0))
    with pytest.raises(StalledError) as info:
        with SparkBackend._watched(backend, "pass 7 (GradientTestTask)", 0.0):
            assert backend.sc.event.wait(10.0)
            raise RuntimeError("Job 12 cancelled part of cancelled job group")  # as Spark does
    message = str(info.value)
    assert message.startswith("run-x: pass 7 (GradientTestTask) cancelled: no executors for ")
    assert "none registered since the pass started" in message
    assert "last checkpoint in its output directory" in message and "--resume" in message
    assert isinstance(info.value.__cause__, RuntimeError)


def test_other_errors_pass_through_untouched():
    backend = _fake_backend(FakeStatus(executors=1), no_executor_s=60.0)
    with pytest.raises(ValueError, match="bad block"):
        with SparkBackend._watched(backend, "pass 1 (CountTask)", 0.0):
            raise ValueError("bad block")
    assert backend.sc.cancelled == []


# ---- the command line ---------------------------------------------------------------


@pytest.mark.parametrize("checkpointed", [True, False])
def test_cli_exits_6_with_the_message_and_the_checkpoint(
    monkeypatch, tmp_path, capsys, checkpointed
):
    out = tmp_path / "run"
    if checkpointed:
        (out / "checkpoint").mkdir(parents=True)
        (out / "checkpoint" / "state.json").write_text(json.dumps({"round": 3}))

    def stalled(*args, **kwargs):
        raise StalledError("run-x: pass 40 (LossGradTask) cancelled: no executors for 20 s")

    monkeypatch.setattr(cli.api, "session", lambda cfg, job="": None)
    monkeypatch.setattr(cli.api, "fit", stalled)
    code = cli.main(["train", "--train", str(tmp_path / "data"), "--output", str(out)])
    assert code == cli.EXIT_STALLED == 6
    err = capsys.readouterr().err
    assert "error: run-x: pass 40 (LossGradTask) cancelled: no executors for 20 s" in err
    directory = os.path.join(str(out), "checkpoint")
    if checkpointed:
        assert f"last checkpoint: {directory} after round 3" in err
        assert "sparkmaxent train --resume" in err
    else:
        assert f"no checkpoint in {directory}" in err


# ---- executors that register and die at start-up (issue 40 item 1) ----------------


class DyingStatus(FakeStatus):
    """Executors that keep being replaced: one alive at each poll, and the
    removed ones with their reasons."""

    def __init__(self, token=()):
        super().__init__(executors=1, token=token)
        self.lost: list[tuple[str, str]] = []

    def lose(self, reason="Unable to create executor due to No space left on device"):
        self.lost.append((str(len(self.lost)), reason))

    def lost_executors(self):
        return list(self.lost)


def test_repeated_executor_losses_without_progress_trip_naming_the_last_reason():
    clock, status = Clock(), DyingStatus()
    status.lose("an earlier pass's loss")  # before this pass: not counted
    dog = Watchdog(FakeContext(), GROUP, "pass 3", status, 600.0, 0.0, 1.0, clock, max_losses=4)
    assert dog.check(clock.now) is None
    for _ in range(3):  # registration resets no_executor_timeout_s; losses do not
        clock.now += 10
        status.lose()
        assert dog.check(clock.now) is None
    clock.now += 10
    status.lose()
    reason = dog.check(clock.now)
    assert reason == (
        "4 executors were lost since the pass started and it made no progress "
        "(spark.max_executor_losses = 4); the last one's reason: Unable to create "
        "executor due to No space left on device"
    )


def test_losses_with_progress_between_them_do_not_trip_and_0_turns_it_off():
    clock, status = Clock(), DyingStatus(token=((1, 0, 0),))
    dog = Watchdog(FakeContext(), GROUP, "pass 3", status, 600.0, 0.0, 1.0, clock, max_losses=2)
    assert dog.check(clock.now) is None
    for step in range(1, 10):  # a flaky cluster that still finishes tasks
        clock.now += 10
        status.lose()
        status.token = ((1, 0, step),)
        assert dog.check(clock.now) is None
    off = Watchdog(FakeContext(), GROUP, "pass 4", status, 600.0, 0.0, 1.0, clock, max_losses=0)
    assert off.check(clock.now) is None
    for _ in range(20):
        status.lose()
        assert off.check(clock.now) is None


def test_repeated_losses_end_the_pass_with_a_stalled_error_naming_the_cause():
    """Through the backend: StalledError (exit 6 at the command line, with the
    checkpoint note: test_cli_exits_6_with_the_message_and_the_checkpoint)."""
    status = DyingStatus()
    backend = _fake_backend(status, no_executor_s=600.0, max_losses=3)
    with pytest.raises(StalledError, match="No space left on device") as caught:
        with SparkBackend._watched(backend, "pass 1 (LossGradTask)", 0.0):
            for _ in range(3):
                time.sleep(0.05)
                status.lose()
            assert backend.sc.event.wait(10.0)
            raise RuntimeError("Job 3 cancelled part of cancelled job group")
    assert "spark.max_executor_losses = 3" in str(caught.value)
    assert "--resume" in str(caught.value)


def test_the_pass_limit_is_a_multiple_of_the_slowest_pass_at_least_the_floor():
    """issue 40: spark.pass_timeout_s = 0 no longer means no limit: the
    limit is pass_timeout_factor times the slowest pass so far, at least
    pass_timeout_floor_s; a fixed pass_timeout_s wins; factor 0: none."""
    limit = PassLimit(0.0, 20.0, 3600.0)
    assert limit.next()[0] == 3600.0  # nothing measured yet: the floor
    limit.seen(100.0)
    limit.seen(400.0)
    limit.seen(50.0)
    seconds, rule = limit.next()
    assert seconds == 8000.0 and limit.slowest_s == 400.0
    assert "spark.pass_timeout_factor = 20 times the slowest pass so far, 400.0 s" in rule
    assert "spark.pass_timeout_floor_s = 3600 s" in rule
    limit.fixed_s = 30.0
    assert limit.next() == (30.0, "spark.pass_timeout_s = 30 s")
    assert PassLimit(0.0, 0.0, 3600.0).next() == (0.0, "")
    dog = Watchdog(FakeContext(), GROUP, "pass 3", FakeStatus(2), pass_s=seconds, pass_rule=rule)
    assert dog.check(dog.start + seconds + 1e-3) == f"it ran longer than {rule} (2 executor(s) now)"
    assert dog.check(dog.start + seconds - 1) is None
