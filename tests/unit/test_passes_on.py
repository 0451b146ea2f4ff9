"""A wrapper's pass counter is its wrapped backend's, by one piece of logic
(backends/base.py ``PassesOn``): the wrappers over a base (conjunctions,
folds, the held-out events widened by a run's conjunctions) and the unions
of training and held-out events."""

from __future__ import annotations

import ast
import inspect
import types
from pathlib import Path

import pytest

import sparkmaxent
from sparkmaxent.backends.base import PassesOn, PassesOnFirst, WrappingBackend
from sparkmaxent.backends.expanded import ExpandedBackend
from sparkmaxent.backends.spark_union import SparkUnion
from sparkmaxent.backends.subset import FoldBackend
from sparkmaxent.backends.union import InProcessUnion, UnionBackend
from sparkmaxent.methods.combination import HeldoutWithConjunctions

WRAPPERS = {
    WrappingBackend: "base",
    ExpandedBackend: "base",
    FoldBackend: "base",
    HeldoutWithConjunctions: "base",
    PassesOnFirst: "first",
    UnionBackend: "first",
    InProcessUnion: "first",
    SparkUnion: "first",
}


@pytest.mark.parametrize("cls", list(WRAPPERS), ids=lambda c: c.__name__)
def test_every_wrapper_counts_its_passes_on_what_it_wraps(cls):
    passes = inspect.getattr_static(cls, "passes")
    assert isinstance(passes, PassesOn)
    assert passes.owner == WRAPPERS[cls]
    wrapper = object.__new__(cls)
    inner = types.SimpleNamespace(passes=3)
    setattr(wrapper, WRAPPERS[cls], inner)
    assert wrapper.passes == 3
    wrapper.passes += 2
    assert inner.passes == 5 and wrapper.passes == 5
    assert "passes" not in vars(wrapper)


def test_no_module_writes_out_a_passes_property_of_its_own():
    root = Path(sparkmaxent.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "passes":
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []
