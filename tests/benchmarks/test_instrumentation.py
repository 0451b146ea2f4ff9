"""Job counting of benchmarks/instrumentation.py: exact counts of a
SparkBackend's jobs and of any code's, the caller's job group left alone."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.instrumentation import backend_jobs, count_jobs
from sparkmaxent.backends.spark import SparkBackend
from sparkmaxent.data.load import write_events
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.kernels import MULTICLASS
from sparkmaxent.kernels.stats import CountTask

from ..unit.helpers import random_multiclass


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    block = random_multiclass(np.random.default_rng(11), m=150, P=14, K=4)
    directory = tmp_path_factory.mktemp(MULTICLASS)
    info = DatasetInfo(MULTICLASS, block.n_predicates, [f"y{k}" for k in range(block.n_labels)])
    return str(directory), write_events(block, str(directory), info, n_files=3)


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_passes_and_spark_jobs_are_counted(spark, dataset):
    sc = spark.sparkContext
    directory, info = dataset
    # 7 partitions: the tree reduction has a shuffle level, still one job
    with SparkBackend(spark, directory, info, partitions=7) as backend:
        at_start = backend_jobs(backend)
        assert at_start >= 1  # filling the cache
        for _ in range(3):
            backend.run(CountTask())
        assert backend.passes == 3
        assert backend_jobs(backend) == at_start + 3
        sc.setJobGroup("caller-group", "outer")
        try:
            (result, n_jobs) = count_jobs(
                spark, lambda: (backend.run(CountTask()), sc.parallelize(range(4), 2).count())
            )
            # the caller's job group is restored after a pass and after count_jobs
            assert sc.getLocalProperty("spark.jobGroup.id") == "caller-group"
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        assert result[1] == 4
        assert n_jobs == 2  # one pass, one count
        assert backend.passes == 4 and backend_jobs(backend) == at_start + 4
        assert len(sc.getJobTags()) == 0  # count_jobs removed its tag
    _, none = count_jobs(spark, lambda: 42)
    assert none == 0


def test_a_backend_built_inside_count_jobs_is_counted(spark, dataset):
    directory, info = dataset

    def build_and_run():
        with SparkBackend(spark, directory, info, partitions=2) as backend:
            at_start = backend_jobs(backend)  # filling the cache
            backend.run(CountTask())
            backend.run(CountTask())
            return at_start, backend_jobs(backend)

    (at_start, own), n_jobs = count_jobs(spark, build_and_run)
    assert at_start >= 1 and own == at_start + 2
    assert n_jobs == own  # all its jobs, none else
