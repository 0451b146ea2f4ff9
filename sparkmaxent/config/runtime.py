"""The run's surroundings: the Spark session (``spark.*``) and where results
go (``output.*``); sections of the schema (config/schema.py) kept apart from
the data and method sections."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .rules import Section, key


@dataclass(frozen=True)
class SparkConfig(Section):
    """Spark session settings."""

    PATH: ClassVar[str] = "spark"
    master: str = key(
        "", 'Spark master; "" leaves it to spark-submit (or local[*] under plain python).'
    )
    remote: str = key(
        "",
        "Spark Connect server, e.g. sc://127.0.0.1:15002 (CLI --remote); "
        '"" uses the SPARK_REMOTE environment variable if set, else a classic '
        "session on spark.master. See docs/connect.md.",
    )
    app_name: str = key("sparkmaxent", "Spark application name.")
    conf: dict = key({}, 'Spark settings, e.g. { "spark.driver.memory" = "4g" }.')
    no_executor_timeout_s: float = key(
        600.0,
        "Cancel a training pass and stop with exit code 6 when the cluster has had no "
        "executor (and the pass no progress) for this many seconds, e.g. after its only "
        "worker died; long enough for dynamic allocation to get executors back. 0: wait "
        "forever, as Spark does.",
        ge=0,
    )
    pass_timeout_s: float = key(
        0.0,
        "Cancel a training pass and stop with exit code 6 when it has run this many "
        "seconds; 0: the limit pass_timeout_factor and pass_timeout_floor_s derive from "
        "the passes measured so far (a pass's length depends on the data).",
        ge=0,
    )
    pass_timeout_factor: float = key(
        20.0,
        "With pass_timeout_s = 0: cancel a training pass (exit code 6) when it has run "
        "this many times as long as the slowest pass of the run so far (the caching of "
        "the data counted) and at least pass_timeout_floor_s, so a task hung on a live "
        "executor ends the run; no_executor_timeout_s and max_executor_losses end the "
        "others. 0: no limit, as Spark does (a hung task waits for good).",
        ge=0,
    )
    pass_timeout_floor_s: float = key(
        3600.0,
        "The least limit pass_timeout_factor gives a pass (seconds): short passes "
        "slowed by a busy cluster are not cancelled.",
        ge=0,
    )
    max_executor_losses: int = key(
        10,
        "Cancel a training pass and stop with exit code 6 when this many executors "
        "were lost since it started with no progress of the pass since the first of "
        "them (executors that register and die at start-up, e.g. no space to unpack "
        "the Python archive, each replaced by the cluster manager, so "
        "no_executor_timeout_s never runs out); the message gives the last one's "
        "reason as Spark reports it. 0: no limit.",
        ge=0,
    )


@dataclass(frozen=True)
class OutputConfig(Section):
    """Where results go: the model directory and the run report."""

    PATH: ClassVar[str] = "output"
    dir: str = key(
        "out/run",
        "Output directory: model/, the report JSON, checkpoint/, plots/. A local "
        "path or a Hadoop URI (hdfs://, s3a://, abfss://, file://).",
    )
    overwrite: bool = key(True, "Replace an existing model in the output directory.")
    allow_unconverged: bool = key(
        False,
        "train and pipeline exit 0, not 4, when the run stopped without meeting its "
        "own criterion (the model is saved either way); also --allow-unconverged.",
    )
    scratch_dir: str = key(
        "",
        "Where predict and evaluate prepare text input for the model (removed "
        "afterwards; a killed run's sparkmaxent-scratch-<host>-<pid>-* is removed "
        'at the next start on that host); one the executors can reach on a cluster. "": a hidden '
        "sibling of the output (evaluate without --report: the driver's temporary "
        "directory, for a local master only).",
    )
    lock_stale_s: float = key(
        600.0,
        "A lock (.<output>.lock) not refreshed for this many seconds is stale and "
        "taken over with a warning, e.g. after a driver on another host died. A "
        "live run refreshes its lock every min(60 s, lock_stale_s / 4), so 600 "
        "allows ten missed refreshes (a long GC pause, a file system hiccup) and "
        "minutes of clock skew between hosts; give every run on an output the "
        "same value. 0: never by age, only a lock whose process on this host is "
        "gone is stale.",
        ge=0,
    )
