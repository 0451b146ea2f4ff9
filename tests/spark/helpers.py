"""Test data shared by the Spark-backend tests."""

from __future__ import annotations

from dataclasses import dataclass

from sparkmaxent.data import synthetic
from sparkmaxent.data.load import write_events
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.kernels import MULTICLASS, MulticlassBlock, Space


@dataclass
class WrittenProblem:
    """Synthetic multiclass events, in memory and written as a dataset."""

    directory: str
    info: DatasetInfo
    block: MulticlassBlock
    space: Space
    label_names: list[str]


def written_multiclass(
    directory: str,
    n_predicates: int,
    active_per_event: int,
    n_copies: int = 0,
    n_files: int = 2,
    n_labels: int = 3,
) -> WrittenProblem:
    """1,500 generated events (6 true predicates, seed 9) written to
    ``directory`` in ``n_files`` files; the space has a bias."""
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=1500,
            n_predicates=n_predicates,
            n_labels=n_labels,
            active_per_event=active_per_event,
            n_support=6,
            n_copies=n_copies,
            n_conjunctions=0,
            min_support_count=60,
            seed=9,
        )
    )
    block = data.block()
    info = write_events(
        block, directory, DatasetInfo(MULTICLASS, n_predicates, data.label_names), n_files=n_files
    )
    return WrittenProblem(
        directory,
        info,
        block,
        Space(MULTICLASS, n_predicates, n_labels, bias=True),
        list(data.label_names),
    )
