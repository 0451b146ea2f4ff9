"""Sparse multiclass events drawn from a planted conditional maxent model.

The built-in dataset of the README and of the tests. Because the model that
generated the labels is known, so is its support, and feature-selection
methods can be scored by how much of it they recover (``support_recovery``).
``planted`` holds the spec and the planted truth, ``generator`` draws events,
``splits`` writes them as text files, ``recovery`` scores a selection.
"""

from .generator import generate, zipf_rates
from .planted import (
    CONJUNCTION_SEP,
    PlantedTruth,
    SyntheticData,
    SyntheticSpec,
    conjunction_name,
    feature_name,
)
from .recovery import support_recovery
from .splits import (
    SPLIT_NAMES,
    TRUTH_FILE,
    split,
    train_test_split,
    write_maxent_text,
    write_splits,
)

__all__ = [
    "CONJUNCTION_SEP",
    "SPLIT_NAMES",
    "TRUTH_FILE",
    "PlantedTruth",
    "SyntheticData",
    "SyntheticSpec",
    "conjunction_name",
    "feature_name",
    "generate",
    "split",
    "support_recovery",
    "train_test_split",
    "write_maxent_text",
    "write_splits",
    "zipf_rates",
]
