"""data.min_partition_events: small data in fewer partitions (blocks) than
asked, so that a Hessian-free round's averaged step is one block's Newton
step (backends/spark.py ``event_partitions``; the in-process backend follows
the same rule for its blocks)."""

from __future__ import annotations

import numpy as np
import pytest

from sparkmaxent.backends import make_backend
from sparkmaxent.config import train_config
from sparkmaxent.data.load import write_events
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.kernels import MULTICLASS
from sparkmaxent.train import train

from .helpers import random_multiclass

P, K, M = 12, 3, 90


@pytest.fixture(scope="module")
def directory(tmp_path_factory) -> str:
    block = random_multiclass(np.random.default_rng(4), m=M, P=P, K=K)
    path = str(tmp_path_factory.mktemp("rule") / "events")
    write_events(block, path, DatasetInfo(MULTICLASS, P, [f"y{k}" for k in range(K)]), n_files=2)
    return path


@pytest.mark.parametrize(
    "partitions, min_events, blocks",
    [(4, 0, 4), (4, 30, 3), (4, 45, 2), (4, 46, 1), (4, 1000, 1), (2, 10, 2), (None, 10, 1)],
)
def test_blocks_hold_at_least_min_partition_events(directory, partitions, min_events, blocks):
    """At most n_events // min_events blocks (at least one), never more
    than asked; 0 turns the rule off."""
    backend = make_backend(
        "local", directory, bias=True, partitions=partitions, min_partition_events=min_events
    )
    assert len(backend.blocks) == blocks
    assert sum(b.n_events for b in backend.blocks) == M


def test_the_rule_keeps_the_one_block_optimum(directory):
    """With the rule, four asked blocks of small data are one: the
    Hessian-free solver takes one block's steps, pass for pass."""
    config = train_config(method="grafting", l1=2e-3, n_best=3, gtol=1e-10, solver="newton-cg")
    one = train(make_backend("local", directory, bias=True), config)
    ruled = train(
        make_backend("local", directory, bias=True, partitions=4, min_partition_events=50), config
    )
    four = train(make_backend("local", directory, bias=True, partitions=4), config)
    assert ruled.report.objective == one.report.objective
    assert [r.passes for r in ruled.report.rounds] == [r.passes for r in one.report.rounds]
    assert ruled.report.certificate.passed and four.report.certificate.passed
    assert four.report.objective == pytest.approx(one.report.objective, rel=1e-8)
