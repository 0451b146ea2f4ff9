"""Readers of text formats into raw events (feature strings, label strings).

A parser reads the lines of one file and yields raw events, or a ParseError
for each malformed record; the caller (``prepare``) either stops at the first
error, naming file and line, or quarantines the rejected records when asked.
Parsers are pure Python and never import pyspark: ``prepare`` runs them
inside a vectorised Spark UDF, one file per task, so line numbers are exact.

Registry: ``FORMATS[name] -> FormatSpec``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from ..kernels import CANDIDATES, MULTICLASS


@dataclass
class RawEvent:
    """A multiclass event before feature indexing.

    ``event_id`` is the event's 0-based position in its file; ``group`` ties
    events of one sentence together (CoNLL) and equals ``event_id`` otherwise.
    """

    label: str
    features: list[str]
    values: list[float]
    weight: float = 1.0
    event_id: int = 0
    group: int = 0


@dataclass
class RawCandidateEvent:
    """A candidate-set event before feature indexing: candidates' features
    concatenated, ``cand_nnz[c]`` of them for candidate c."""

    correct: list[bool]
    cand_nnz: list[int]
    features: list[str]
    values: list[float]
    weight: float = 1.0
    event_id: int = 0
    group: int = 0


@dataclass
class ParseError:
    """A malformed record: where, why, and its text."""

    path: str
    line: int  # 1-based
    reason: str
    text: str = ""

    def message(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


class InputError(ValueError):
    """Bad input; the message names the file and line (or column)."""


Parsed = RawEvent | RawCandidateEvent | ParseError
Parser = Callable[[str, Iterable[str], dict], Iterator[Parsed]]


@dataclass(frozen=True)
class FormatSpec:
    name: str
    shape: str
    parser: Parser
    description: str
    options: dict = field(default_factory=dict)


def parse_value(token: str) -> float | None:
    """A finite float, or None if ``token`` is not one (NaN and inf included)."""
    try:
        v = float(token)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def split_feature(token: str) -> tuple[str, float] | None:
    """``name`` or ``name:value`` -> (name, value). A suffix after the last
    colon that is not a number belongs to the name (feature strings may hold
    colons, e.g. ``w=http://x``); a number that is NaN or inf is an error (None)."""
    name, sep, tail = token.rpartition(":")
    if not sep or not name:
        return token, 1.0
    try:
        v = float(tail)
    except ValueError:
        return token, 1.0
    return (name, v) if math.isfinite(v) else None


def parse_maxent(path: str, lines: Iterable[str], options: dict) -> Iterator[Parsed]:
    """Implicit multiclass text: ``label feat feat:value ...`` one event per
    line (MEGAM's implicit format, OpenNLP, Zhang Le's maxent). Blank lines and
    lines starting with ``#`` are skipped."""
    n = 0
    for line_no, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        tokens = text.split()
        features, values = [], []
        bad = None
        for tok in tokens[1:]:
            fv = split_feature(tok)
            if fv is None:
                bad = f"expected a finite feature value in {tok!r}"
                break
            features.append(fv[0])
            values.append(fv[1])
        if bad:
            yield ParseError(path, line_no, bad, line)
            continue
        yield RawEvent(tokens[0], features, values, 1.0, n, n)
        n += 1


FORMATS: dict[str, FormatSpec] = {
    "maxent": FormatSpec("maxent", MULTICLASS, parse_maxent,
                         "label feat feat:value ... (MEGAM implicit, OpenNLP, Zhang Le maxent)"),
}


def format_spec(name: str) -> FormatSpec:
    if name not in FORMATS:
        raise InputError(f"unknown input format {name!r}: expected one of {sorted(FORMATS)}")
    return FORMATS[name]
