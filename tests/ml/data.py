"""Tiny DataFrames for the pyspark.ml tests."""

from __future__ import annotations

import random


def events(n: int = 240, n_labels: int = 3, seed: int = 0) -> list[tuple[int, int, list[str]]]:
    """(id, class, feature names): a cue feature ``c<class>`` (right 80% of
    the time) among three noise words."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        y = rng.randrange(n_labels)
        cue = y if rng.random() < 0.8 else rng.randrange(n_labels)
        words = [f"w{rng.randrange(10)}" for _ in range(3)]
        out.append((i, y, [*words, f"c{cue}"]))
    return out


def frame(spark, n: int = 240, n_labels: int = 3, seed: int = 0, string_labels: bool = False):
    """A DataFrame (id, label, features, note): label double (or string
    ``L<class>``), features ``array<string>``, ``note`` an untouched extra column."""
    rows = [
        (i, f"L{y}" if string_labels else float(y), feats, f"row {i}")
        for i, y, feats in events(n, n_labels, seed)
    ]
    label_type = "string" if string_labels else "double"
    return spark.createDataFrame(
        rows, f"id long, label {label_type}, features array<string>, note string"
    )
