"""One pool of Python workers for a Spark backend (backends/release.py's
``share_worker_pool``): the workers that build the cached blocks
(``mapInArrow``, Spark's SQL runner) are the ones that run the passes (RDD
tasks), so a local JVM forks one Python daemon, not one per runner."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    from benchmarks.common import proc_stat
    from sparkmaxent.backends.session import spark_session
    from sparkmaxent.backends.spark import SparkBackend
    from sparkmaxent.data.load import write_events
    from sparkmaxent.data.schema import DatasetInfo
    from sparkmaxent.kernels import MULTICLASS
    from sparkmaxent.kernels.stats import CountTask
    from tests.unit.helpers import random_multiclass

    block = random_multiclass(np.random.default_rng(3), m=120, P=10, K=3)
    info = DatasetInfo(MULTICLASS, block.n_predicates, ["a", "b", "c"])
    info = write_events(block, sys.argv[1], info, n_files=2)
    spark = spark_session("local[2]", "worker-pool", {"spark.ui.enabled": "false"})
    with SparkBackend(spark, sys.argv[1], info, partitions=2) as backend:
        for _ in range(3):
            backend.run(CountTask())
        jvm = spark.sparkContext._jvm.ProcessHandle.current().pid()
        children = [
            p for p in map(int, filter(str.isdigit, os.listdir("/proc")))
            if (fields := proc_stat(p)) is not None and int(fields[1]) == jvm
        ]  # fmt: skip
        commands = [open(f"/proc/{p}/cmdline", "rb").read() for p in children]
        daemons = sum(b"pyspark.daemon" in c for c in commands)
    print("daemons", daemons)
    spark.stop()
    """
)


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_blocks_are_built_and_passed_over_by_one_pool_of_workers(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": root}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "data")],
        capture_output=True, text=True, env=env, cwd=root, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-2:] == ["daemons", "1"], out.stdout
