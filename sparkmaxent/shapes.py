"""The two event shapes (dependency-free, so pure-Python readers can import it)."""

MULTICLASS = "multiclass"
CANDIDATES = "candidates"
SHAPES = (MULTICLASS, CANDIDATES)
