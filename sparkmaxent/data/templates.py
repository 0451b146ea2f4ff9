"""Feature templates: from tokens and their context to predicate strings.

Shared by the readers (training data) and by predictors (new text), so a
model sees the same feature strings at training and at prediction time.
A string is the template name, ``=``, then the values it saw
(``t-1,t0=DT,NN``); ``,`` and ``\\`` inside a conjunction's values are
escaped, so two value tuples never give one string. Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence

# Padding outside a sentence. One symbol per side: the offset is already part
# of the template name, so "w-2=__BOS__" and "w-1=__BOS__" stay distinct.
BOS = "__BOS__"
EOS = "__EOS__"

# A template is a tuple of (column, offset) parts; column "w" is the word,
# "t" the POS tag, offset relative to the current token.
Template = tuple[tuple[str, int], ...]

# The 17 chunking templates (words and POS tags in a +-2 window and their
# bigrams), as in Koeling (2000) / Zhou et al. (2003) for Base-NP chunking:
#   5 word unigrams      w-2 w-1 w0 w+1 w+2
#   5 tag unigrams       t-2 t-1 t0 t+1 t+2
#   4 tag bigrams        t-2,t-1  t-1,t0  t0,t+1  t+1,t+2
#   2 word bigrams       w-1,w0  w0,w+1
#   1 tag skip-bigram    t-1,t+1
# The 17th was chosen among the natural candidates by the predicate count it
# gives on CoNLL-2000 train.txt with cutoff 2 (the README's reference: 102,343
# predicates, ~3.4M non-zeros): t-1,t+1 gives 100,276 and 3.39M; a third word
# bigram (w-2,w-1 or w+1,w+2) would give ~122k; w0,t0 ~109k.
CHUNK_TEMPLATES: tuple[Template, ...] = (
    (("w", -2),),
    (("w", -1),),
    (("w", 0),),
    (("w", 1),),
    (("w", 2),),
    (("t", -2),),
    (("t", -1),),
    (("t", 0),),
    (("t", 1),),
    (("t", 2),),
    (("t", -2), ("t", -1)),
    (("t", -1), ("t", 0)),
    (("t", 0), ("t", 1)),
    (("t", 1), ("t", 2)),
    (("w", -1), ("w", 0)),
    (("w", 0), ("w", 1)),
    (("t", -1), ("t", 1)),
)

# PP-attachment templates over the tuple (v, n1, p, n2): the four head words,
# plus every sub-tuple that holds the preposition (Ratnaparkhi 1994; Collins
# and Brooks 1995 back off through exactly these tuples: the preposition is
# the most informative word, so every conjunction keeps it).
PP_FIELDS = ("v", "n1", "p", "n2")
PP_TEMPLATES: tuple[tuple[str, ...], ...] = (
    ("v",),
    ("n1",),
    ("p",),
    ("n2",),
    ("v", "p"),
    ("n1", "p"),
    ("p", "n2"),
    ("v", "n1", "p"),
    ("v", "p", "n2"),
    ("n1", "p", "n2"),
    ("v", "n1", "p", "n2"),
)


def _offset(o: int) -> str:
    return f"+{o}" if o > 0 else str(o)


def template_name(template: Template) -> str:
    """``(("t", -1), ("t", 0))`` -> ``"t-1,t0"``."""
    return ",".join(f"{col}{_offset(o)}" for col, o in template)


def _escape(value: str) -> str:
    if "," in value or "\\" in value:
        return value.replace("\\", "\\\\").replace(",", "\\,")
    return value


def join_values(values: Sequence[str]) -> str:
    """The value part of a feature string: one value as is, several joined by
    ``,`` with ``,`` and ``\\`` escaped."""
    if len(values) == 1:
        return values[0]
    return ",".join(_escape(v) for v in values)


def sentence_features(
    words: Sequence[str],
    tags: Sequence[str],
    templates: Sequence[Template] = CHUNK_TEMPLATES,
    lowercase: bool = False,
) -> list[list[str]]:
    """Feature strings of every token of one sentence.

    Parameters
    ----------
    words, tags : sequences of str, length n
        The sentence's words and POS tags.
    templates : sequence of Template
        Default ``CHUNK_TEMPLATES``.
    lowercase : bool
        Lowercase the words (not the tags, not the padding).

    Returns
    -------
    list of n lists of str
        ``result[i][k]`` is template k's feature at token i; positions outside
        the sentence read ``BOS`` (before) or ``EOS`` (after).
    """
    n = len(words)
    if len(tags) != n:
        raise ValueError(f"expected as many tags as words, got {len(tags)} tags for {n} words")
    reach = max((abs(o) for t in templates for _, o in t), default=0)
    pad_l, pad_r = [BOS] * reach, [EOS] * reach
    ws = [w.lower() for w in words] if lowercase else list(words)
    columns = {"w": pad_l + ws + pad_r, "t": pad_l + list(tags) + pad_r}
    compiled = []
    for t in templates:
        for col, _ in t:
            if col not in columns:
                raise ValueError(
                    f"expected template columns 'w' or 't', got {col!r} in {template_name(t)}"
                )
        compiled.append((template_name(t) + "=", [(columns[col], o + reach) for col, o in t]))
    out = []
    for i in range(n):
        feats = []
        for prefix, parts in compiled:
            if len(parts) == 1:
                column, offset = parts[0]
                feats.append(prefix + column[i + offset])
            else:
                feats.append(prefix + ",".join(_escape(col[i + o]) for col, o in parts))
        out.append(feats)
    return out


def pp_features(
    verb: str,
    noun1: str,
    prep: str,
    noun2: str,
    templates: Sequence[tuple[str, ...]] = PP_TEMPLATES,
    lowercase: bool = True,
) -> list[str]:
    """Feature strings of one PP-attachment tuple.

    Parameters
    ----------
    verb, noun1, prep, noun2 : str
        The tuple's head words.
    templates : sequence of tuples of field names
        Fields among ``PP_FIELDS``; default ``PP_TEMPLATES``.
    lowercase : bool
        Lowercase the words first (default True: sentence-initial capitals
        carry no attachment information).

    Returns
    -------
    list of str, one per template, e.g. ``["v=join", ..., "v,p=join,as", ...]``.
    """
    vals = dict(zip(PP_FIELDS, (verb, noun1, prep, noun2)))
    if lowercase:
        vals = {k: v.lower() for k, v in vals.items()}
    out = []
    for t in templates:
        try:
            out.append(",".join(t) + "=" + join_values([vals[f] for f in t]))
        except KeyError as e:
            raise ValueError(
                f"expected PP template fields among {PP_FIELDS}, got {e.args[0]!r} in {t}"
            ) from None
    return out
