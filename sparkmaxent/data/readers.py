"""Readers of text formats into raw events (feature strings, label strings).

A parser reads the lines of one file and yields raw events, or a ParseError
per malformed record and carries on (``prepare`` stops at the first or
quarantines them); it raises InputError only for a bad option. Parsers never
import pyspark: ``prepare`` runs them on the executors. Registry: ``FORMATS``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from ..errors import InputError
from ..shapes import CANDIDATES, MULTICLASS
from .templates import CHUNK_TEMPLATES, pp_features, sentence_features


@dataclass
class RawEvent:
    """A multiclass event before feature indexing.

    ``event_id`` is the event's 0-based position in its file, malformed
    records counted (so an id names the same record whether or not earlier
    ones were rejected); ``group`` ties events of one sentence together
    (CoNLL) and equals ``event_id`` otherwise.
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


Parsed = RawEvent | RawCandidateEvent | ParseError
Parser = Callable[[str, Iterable[str], dict], Iterator[Parsed]]


@dataclass(frozen=True)
class FormatSpec:
    """A registered input format.

    ``shape`` is MULTICLASS or CANDIDATES; ``options`` holds the options the
    parser understands, with their defaults.
    """

    name: str
    shape: str
    parser: Parser
    description: str
    options: dict = field(default_factory=dict)


# Strict forms: int() would also take "1_000", " 7" or Unicode digits.
_UINT = re.compile(r"[0-9]+")


#: Largest |feature value| ``prepare`` accepts (every format, and tables). Logits
#: sum weight x value and the solvers' Hessians sum value^2 over events in float64:
#: |value| <= 1e12 keeps value^2 <= 1e24, so even sums over 1e15 events stay below
#: 1e40, far from overflow (1.8e308), where 1e300 overflows at its first square.
MAX_ABS_VALUE = 1e12


def value_too_large(value: float) -> bool:
    """Whether a finite feature value exceeds MAX_ABS_VALUE in magnitude."""
    return abs(value) > MAX_ABS_VALUE


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
    colons, e.g. ``w=http://x``); a number that is NaN or inf is an error (None).
    A name that ends in ``:<number>`` must therefore be written ``name:<number>:1``."""
    name, sep, tail = token.rpartition(":")
    if not sep or not name:
        return token, 1.0
    try:
        v = float(tail)
    except ValueError:
        return token, 1.0
    return (name, v) if math.isfinite(v) else None


def _options(defaults: dict, options: dict | None) -> dict:
    return {**defaults, **(options or {})}


# --------------------------------------------------------------------- maxent


def parse_maxent(path: str, lines: Iterable[str], options: dict) -> Iterator[Parsed]:
    """Implicit multiclass text: ``label feat feat:value ...`` one event per
    line (MEGAM's implicit format, OpenNLP, Zhang Le's maxent). Blank lines and
    lines starting with ``#`` are skipped.

    Parameters
    ----------
    path : str
        File name, for error messages.
    lines : iterable of str
        The file's lines.
    options : dict
        None used.

    Yields
    ------
    RawEvent or ParseError
        One per non-blank, non-comment line.
    """
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
                bad = f"expected a finite feature value, got {tok!r}"
                break
            if value_too_large(fv[1]):
                bad = f"expected a feature value with |value| <= {MAX_ABS_VALUE:g}, got {tok!r}"
                break
            features.append(fv[0])
            values.append(fv[1])
        if bad:
            yield ParseError(path, line_no, bad, line.rstrip("\n"))
        else:
            yield RawEvent(tokens[0], features, values, 1.0, n, n)
        n += 1


# ------------------------------------------------------------------- svmlight


def _svmlight_record(tokens: list[str]) -> tuple[list[str], list[float]] | str:
    """(features, values) of one line's tokens after the label, or the reason
    it is malformed."""
    features, values = [], []
    for tok in tokens:
        idx, sep, val = tok.partition(":")
        if idx == "qid":  # query ids group ranking data; a classifier ignores them
            continue
        if not sep or not val:
            return f"expected index:value, got {tok!r} (missing value)"
        if not _UINT.fullmatch(idx):
            return f"expected a non-negative integer index, got {idx!r} in {tok!r}"
        v = parse_value(val)
        if v is None:
            return f"expected a finite number as the value, got {val!r} in {tok!r}"
        if value_too_large(v):
            return f"expected a value with |value| <= {MAX_ABS_VALUE:g}, got {val!r} in {tok!r}"
        features.append(str(int(idx)))  # "007" and "7" are one feature
        values.append(v)
    return features, values


def parse_svmlight(path: str, lines: Iterable[str], options: dict) -> Iterator[Parsed]:
    """svmlight / libsvm text: ``label idx:value ... [# comment]``.

    ``qid:N`` tokens are ignored. Feature names are the indices as decimal
    strings (leading zeros dropped); the label is the first token as written
    (``+1`` and ``1`` are different labels). Blank and comment-only lines are
    skipped. A line that holds only a label is an event with no features.

    Parameters
    ----------
    path : str
        File name, for error messages.
    lines : iterable of str
        The file's lines.
    options : dict
        None used.

    Yields
    ------
    RawEvent or ParseError
        ParseError for a non-integer index, a missing value, a NaN/inf or
        non-numeric value, or a line whose first token is ``idx:value``
        (no label).
    """
    n = 0
    for line_no, line in enumerate(lines, start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        tokens = text.split()
        label = tokens[0]
        head, sep, _ = label.partition(":")
        if sep and (_UINT.fullmatch(head) or head == "qid"):
            rec: tuple[list[str], list[float]] | str = (
                f"expected a label as the first token, got {label!r} (label missing?)"
            )
        else:
            rec = _svmlight_record(tokens[1:])
        if isinstance(rec, str):
            yield ParseError(path, line_no, rec, line.rstrip("\n"))
        else:
            yield RawEvent(label, rec[0], rec[1], 1.0, n, n)
        n += 1


# ----------------------------------------------------------------------- TADM


def _tadm_candidate(tokens: list[str]) -> tuple[bool, list[str], list[float]] | str:
    """(correct, features, values) of one candidate line, or why it is malformed."""
    score = parse_value(tokens[0])
    if score is None:
        return f"expected a finite score as the first token, got {tokens[0]!r}"
    if not _UINT.fullmatch(tokens[1]):
        return (
            f"expected a feature count (non-negative integer) as the second token, "
            f"got {tokens[1]!r}"
        )
    nfeat = int(tokens[1])
    if len(tokens) != 2 + 2 * nfeat:
        return (
            f"expected {2 + 2 * nfeat} tokens (score, nfeat={nfeat}, then {nfeat} "
            f"feature-value pairs), got {len(tokens)}"
        )
    features, values = [], []
    for k in range(2, len(tokens), 2):
        f, val = tokens[k], tokens[k + 1]
        if not _UINT.fullmatch(f):
            return f"expected an integer feature id, got {f!r}"
        v = parse_value(val)
        if v is None:
            return f"expected a finite value for feature {f}, got {val!r}"
        if value_too_large(v):
            return (
                f"expected a value with |value| <= {MAX_ABS_VALUE:g} for feature {f}, got {val!r}"
            )
        features.append(str(int(f)))
        values.append(v)
    return score > 0, features, values


def parse_tadm(path: str, lines: Iterable[str], options: dict) -> Iterator[Parsed]:
    """Candidate sets in the TADM event format (TinyEst, featuresqueeze).

    An event is a count line n, then n candidate lines ``score nfeat f v f v
    ...``; score > 0 marks a correct candidate (several may be). Feature ids
    are named by their decimal string; blank lines are skipped; the weight is
    1.0. An event with no correct candidate is returned as it is (valid for
    prediction data; ``prepare`` decides). ``path`` names the file in
    errors; option ``weight_from_score`` is accepted and not used yet.

    Yields
    ------
    RawCandidateEvent or ParseError
        One ParseError per malformed event: a count line that is not a
        positive integer (the lines up to the next count line are skipped),
        a malformed candidate line (the rest of the event is skipped), or an
        event cut short by a count line or the end of the file (reported at
        its count line). A count line has one token and a candidate line at
        least two: that is how the parser finds the next event.
    """
    event = 0  # id of the next event
    start = 0  # line of the open event's count line; 0 = no open event
    start_text = ""
    n_cands = seen = 0  # candidates declared / candidate lines read so far
    correct: list[bool] = []
    cand_nnz: list[int] = []
    features: list[str] = []
    values: list[float] = []
    failed = False  # the open event already has its ParseError
    skipping = False  # after a bad count line: skip to the next count line
    for line_no, line in enumerate(lines, start=1):
        tokens = line.split()
        if not tokens:
            continue
        if start and len(tokens) == 1:
            # a count line while candidates were still due: the event is short
            if not failed:
                yield ParseError(
                    path,
                    start,
                    f"expected {n_cands} candidates, got {seen}: line {line_no} "
                    f"holds the single token {tokens[0]!r}, not a candidate "
                    f"(event cut short)",
                    start_text,
                )
            start = 0
            event += 1
        if not start:
            if skipping and len(tokens) > 1:
                continue
            skipping = False
            if len(tokens) == 1 and _UINT.fullmatch(tokens[0]) and int(tokens[0]) > 0:
                start, n_cands, seen, failed = line_no, int(tokens[0]), 0, False
                start_text = line.rstrip("\n")
                correct, cand_nnz, features, values = [], [], [], []
            else:
                yield ParseError(
                    path,
                    line_no,
                    f"expected a candidate count (a positive integer alone on "
                    f"its line), got {line.strip()!r}",
                    line.rstrip("\n"),
                )
                skipping = True
                event += 1
            continue
        seen += 1
        if not failed:
            cand = _tadm_candidate(tokens)
            if isinstance(cand, str):
                yield ParseError(
                    path,
                    line_no,
                    f"{cand} (candidate {seen} of {n_cands}, event at line {start})",
                    line.rstrip("\n"),
                )
                failed = True
            else:
                correct.append(cand[0])
                cand_nnz.append(len(cand[1]))
                features.extend(cand[1])
                values.extend(cand[2])
        if seen == n_cands:
            if not failed:
                yield RawCandidateEvent(correct, cand_nnz, features, values, 1.0, event, event)
            start = 0
            event += 1
    if start and not failed:
        yield ParseError(
            path,
            start,
            f"expected {n_cands} candidates, got {seen} before the "
            f"end of the file (event truncated)",
            start_text,
        )


# ---------------------------------------------------------------------- CoNLL

CONLL_MODES = ("chunk", "basenp")
CONLL_OPTIONS = {"mode": "chunk", "lowercase": False, "templates": "chunk"}
#: the conll option ``templates``: the 17 chunking templates, or only their
#: 10 unigrams (w-2..w+2, t-2..t+2: atoms for combination features)
CONLL_TEMPLATES = {"chunk": CHUNK_TEMPLATES, "unigrams": CHUNK_TEMPLATES[:10]}
BASENP_TAGS = frozenset({"B-NP", "I-NP"})


def parse_conll(path: str, lines: Iterable[str], options: dict) -> Iterator[Parsed]:
    """CoNLL-2000 chunking columns ``word POS chunk-tag``, one token per
    line, a blank line between sentences; one event per token.

    Features come from ``templates.CHUNK_TEMPLATES`` over the sentence
    (``templates.sentence_features``), each with value 1.0.

    Parameters
    ----------
    path : str
        File name, for error messages.
    lines : iterable of str
        The file's lines.
    options : dict
        ``mode``: ``"chunk"`` (default: every IOB2 chunk tag is a label) or
        ``"basenp"`` (B-NP and I-NP kept, every other tag mapped to ``O``);
        ``lowercase``: lowercase the words (default False); ``templates``:
        ``"chunk"`` (default, the 17) or ``"unigrams"`` (their first 10).

    Yields
    ------
    RawEvent or ParseError
        RawEvent per token: label = chunk tag, ``group`` = sentence index in
        the file, ``event_id`` = token index in the file (both 0-based,
        skipped sentences counted). A sentence with a line that does not
        hold exactly 3 columns is skipped with one ParseError, at its first
        such line.

    Raises
    ------
    InputError
        For an unknown ``mode``.
    """
    opts = _options(CONLL_OPTIONS, options)
    mode, lowercase = opts["mode"], bool(opts["lowercase"])
    if mode not in CONLL_MODES:
        raise InputError(f"{path}: expected conll option mode in {CONLL_MODES}, got {mode!r}")
    if opts["templates"] not in CONLL_TEMPLATES:
        raise InputError(
            f"{path}: expected conll option templates in {tuple(CONLL_TEMPLATES)}, "
            f"got {opts['templates']!r}"
        )
    templates = CONLL_TEMPLATES[opts["templates"]]
    basenp = mode == "basenp"
    sentence = 0  # index of the open (or next) sentence
    first_token = 0  # event_id of the open sentence's first token
    rows: list[list[str]] = []
    error: ParseError | None = None

    def close() -> Iterator[Parsed]:
        if error is not None:
            yield error
            return
        words = [r[0] for r in rows]
        feats = sentence_features(words, [r[1] for r in rows], templates, lowercase=lowercase)
        for i, (row, fs) in enumerate(zip(rows, feats)):
            label = row[2]
            if basenp and label not in BASENP_TAGS:
                label = "O"
            yield RawEvent(label, fs, [1.0] * len(fs), 1.0, first_token + i, sentence)

    for line_no, line in enumerate(lines, start=1):
        cols = line.split()
        if not cols:
            if rows:
                yield from close()
                sentence += 1
                first_token += len(rows)
                rows, error = [], None
            continue
        if len(cols) != 3 and error is None:
            error = ParseError(
                path,
                line_no,
                f"expected 3 columns 'word POS chunk-tag', got {len(cols)} "
                f"(sentence {sentence} skipped)",
                line.rstrip("\n"),
            )
        rows.append(cols)
    if rows:
        yield from close()


# ---------------------------------------------------------------- PP attachment

PPATTACH_OPTIONS = {"lowercase": True}
PP_LABELS = ("V", "N")


def parse_ppattach(path: str, lines: Iterable[str], options: dict) -> Iterator[Parsed]:
    """Ratnaparkhi's PP-attachment tuples ``sentence-id verb noun1 prep noun2
    attachment``, one event per line, label ``V`` or ``N``.

    Features come from ``templates.PP_TEMPLATES`` (``templates.pp_features``):
    the four head words and every sub-tuple holding the preposition, each
    with value 1.0. The sentence id is not used.

    Parameters
    ----------
    path : str
        File name, for error messages.
    lines : iterable of str
        The file's lines.
    options : dict
        ``lowercase``: lowercase the words (default True).

    Yields
    ------
    RawEvent or ParseError
        ParseError for a line without exactly 6 columns or with an
        attachment other than V or N. Blank lines are skipped.
    """
    lowercase = bool(_options(PPATTACH_OPTIONS, options)["lowercase"])
    n = 0
    for line_no, line in enumerate(lines, start=1):
        cols = line.split()
        if not cols:
            continue
        if len(cols) != 6:
            yield ParseError(
                path,
                line_no,
                f"expected 6 columns 'sentence-id verb noun1 prep "
                f"noun2 attachment', got {len(cols)}",
                line.rstrip("\n"),
            )
        elif cols[5] not in PP_LABELS:
            yield ParseError(
                path, line_no, f"expected attachment V or N, got {cols[5]!r}", line.rstrip("\n")
            )
        else:
            feats = pp_features(cols[1], cols[2], cols[3], cols[4], lowercase=lowercase)
            yield RawEvent(cols[5], feats, [1.0] * len(feats), 1.0, n, n)
        n += 1


FORMATS: dict[str, FormatSpec] = {
    "maxent": FormatSpec(
        "maxent",
        MULTICLASS,
        parse_maxent,
        "label feat feat:value ... (MEGAM implicit, OpenNLP, Zhang Le maxent)",
    ),
    "svmlight": FormatSpec(
        "svmlight",
        MULTICLASS,
        parse_svmlight,
        "label idx:value ... [qid:N] [# comment] (svmlight, libsvm)",
    ),
    "tadm": FormatSpec(
        "tadm",
        CANDIDATES,
        parse_tadm,
        "candidate sets: count line, then 'score nfeat f v ...' per candidate "
        "(TADM, TinyEst, featuresqueeze)",
        {"weight_from_score": False},
    ),
    "conll": FormatSpec(
        "conll",
        MULTICLASS,
        parse_conll,
        "CoNLL-2000 'word POS chunk-tag' columns, one event per token, 17 window templates",
        dict(CONLL_OPTIONS),
    ),
    "ppattach": FormatSpec(
        "ppattach",
        MULTICLASS,
        parse_ppattach,
        "Ratnaparkhi PP attachment 'id verb noun1 prep noun2 V|N'",
        dict(PPATTACH_OPTIONS),
    ),
}


def format_spec(name: str) -> FormatSpec:
    """The registered format ``name``.

    Raises
    ------
    InputError
        If no format has that name.
    """
    if name not in FORMATS:
        raise InputError(f"unknown input format {name!r}: expected one of {sorted(FORMATS)}")
    return FORMATS[name]
