"""Sentence boundary disambiguation data (Mikheev 1998, section 5; Palmer &
Hearst 1997; Reynar & Ratnaparkhi 1997) from the WSJ sample of the Penn
Treebank (``treebank/raw``: a ``.START`` line opens a document, then
paragraph lines that may hold several sentences, so the gold sentences are
the parse trees of ``treebank/combined``, aligned to the raw text) and the
Brown corpus (tagged, one sentence per line:
running text is rebuilt by dropping the tags and attaching punctuation to
the word before it).

A *candidate* is every whitespace token whose text, closing quotes and
brackets left out, ends in ``.``, ``?`` or ``!``, including an
abbreviation that ends a sentence (Brown's ``Jr. .`` becomes ``Jr.``);
its label is ``yes`` when a sentence ends there. Events are written in the
maxent text format (``label atom atom ...``) with binary atoms in the
paper's spirit: the punctuation, the words before and after it (lower
case), their capitalization, shape and length, and lexicon categories of
both words learned from the training text only (``Lexicon``).

Fixed splits by file (``SPLITS``): WSJ wsj_0001-0139 train, 0140-0159
held-out, 0160-0199 test; Brown, in file order (ca01 ...), every tenth file
from the 9th on held-out, from the 10th on test, the rest train.

    python -m sparkmaxent.data.sbd --wsj ../shared/data/treebank/raw \\
        --brown ../shared/data/brown --output work/sbd
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from .. import storage
from ..errors import InputError

log = logging.getLogger(__name__)

ENDS = (".", "?", "!")
CLOSERS = "\"')]}"
# Brown punctuation tags attached to the word before them
ATTACH = {".", ",", ":", "''", ")", "'", "--"}
OPENERS = {"``", "("}

Document = list[list[str]]  # sentences, each a list of whitespace tokens


def wsj_files(root: str) -> list[str]:
    return sorted(f for f in storage.listdir(root) if re.fullmatch(r"wsj_\d{4}", f))


def brown_files(root: str) -> list[str]:
    return sorted(f for f in storage.listdir(root) if re.fullmatch(r"c[a-r]\d\d", f))


def splits(wsj_root: str, brown_root: str) -> dict[str, dict[str, list[str]]]:
    """The fixed splits: {corpus: {split: file names}}."""
    wsj = wsj_files(wsj_root) if wsj_root else []
    number = {f: int(f[4:]) for f in wsj}
    brown = brown_files(brown_root) if brown_root else []
    return {
        "wsj": {
            "train": [f for f in wsj if number[f] <= 139],
            "heldout": [f for f in wsj if 140 <= number[f] <= 159],
            "test": [f for f in wsj if number[f] >= 160],
        },
        "brown": {
            "train": [f for i, f in enumerate(brown) if i % 10 < 8],
            "heldout": [f for i, f in enumerate(brown) if i % 10 == 8],
            "test": [f for i, f in enumerate(brown) if i % 10 == 9],
        },
    }


def _lines(path: str) -> list[str]:
    """The lines of a corpus file (Latin-1), read through storage."""
    return storage.read_bytes(path).decode("latin-1").splitlines()


def read_wsj(path: str, trees: str | None = None) -> list[Document]:
    """Documents of a treebank/raw file: ``.START`` opens one. A raw line
    may hold several sentences (and a sentence never spans lines only by
    chance), so with ``trees`` (the file's ``combined/*.mrg``) the sentences
    are the treebank's parse trees, aligned to the raw tokens
    (``wsj_sentence_ends``); without it, one sentence per non-empty line."""
    docs: list[list[tuple[str, int]]] = []
    lines: list[list[str]] = []
    for n, line in enumerate(_lines(path), 1):
        text = line.strip()
        if text == ".START":
            docs.append([])
            lines.append([])
        elif text:
            if not docs:
                raise InputError(f"{path}:{n}: a sentence before the first .START line")
            docs[-1] += [(t, n) for t in text.split()]
            lines[-1].append(text)
    if trees is None:
        return [[line.split() for line in doc] for doc in lines if doc]
    tokens = [tok for doc in docs for tok in doc]
    ends = wsj_sentence_ends(tokens, tree_leaves("\n".join(_lines(trees))), path)
    out: list[Document] = []
    i = 0
    for doc in docs:
        sents: Document = [[]]
        for tok, _ in doc:
            if ends[i] is not None:
                sents[-1].append(tok)
                if ends[i]:
                    sents.append([])
            i += 1
        sents = [s for s in sents if s]
        if sents:
            out.append(sents)
    return out


LEAF = re.compile(r"\(([^\s()]+) ([^\s()]+)\)")
ESCAPED = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]"}
QUOTES = "\"'`"


def tree_leaves(text: str) -> list[list[str]]:
    """The words of each top-level parse tree of a treebank ``.mrg`` text,
    empty elements (``-NONE-``) left out and bracket escapes undone."""
    out: list[list[str]] = []
    depth, start = 0, 0
    for i, c in enumerate(text):
        if c == "(":
            start = i if depth == 0 else start
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                words = [w for tag, w in LEAF.findall(text[start : i + 1]) if tag != "-NONE-"]
                out.append(
                    [ESCAPED.get(w, w).replace("\\/", "/").replace("\\*", "*") for w in words]
                )
    return out


def wsj_sentence_ends(
    tokens: list[tuple[str, int]], sentences: list[list[str]], where: str
) -> list[bool | None]:
    """For each raw (token, line): whether a treebank sentence ends in it;
    None past the text the trees cover (trailers such as "(See related
    story ...)"). Raw and tree characters are aligned with quotes left out
    (the treebank writes `` and '') by difflib, since the two texts differ
    in places (the trees' ``IBC 's`` for the raw ``IBC/Donoghue's``); a
    tree's final "." that the raw text lacks (an abbreviation ending the
    sentence, ``U.S.``) falls in an insertion and maps to the raw token
    before it."""
    owner = [k for k, (tok, _) in enumerate(tokens) for c in tok if c not in QUOTES]
    raw = "".join(c for tok, _ in tokens for c in tok if c not in QUOTES)
    tree, tree_ends = "", []
    for sent in sentences:
        tree += "".join(c for w in sent for c in w if c not in QUOTES)
        tree_ends.append(len(tree))
    if not raw or not tree:
        raise InputError(f"{where}: no text to align with the treebank trees")
    blocks = difflib.SequenceMatcher(None, raw, tree, autojunk=False).get_opcodes()
    ends: list[bool | None] = [False] * len(tokens)
    b = 0
    last = 0
    for e in tree_ends:
        while blocks[b][4] < e:
            b += 1
        op, i1, i2, j1, _ = blocks[b]
        at = i1 + (e - j1) if op == "equal" else i2
        if at:
            ends[owner[at - 1]] = True
            last = owner[at - 1]
    for k in range(last + 1, len(tokens)):
        ends[k] = None
    return ends


def brown_sentence(line: str, where: str) -> list[str]:
    """Running-text tokens of one tagged Brown sentence."""
    out: list[str] = []
    glue = False
    for item in line.split():
        word, slash, tag = item.rpartition("/")
        if not slash or not word:
            raise InputError(f"{where}: expected word/tag, got {item!r}")
        if tag in ATTACH and out and not glue:
            if word == "." and out[-1].endswith("."):
                continue  # an abbreviation ends the sentence: one period
            out[-1] += word
        elif glue:
            out[-1] += word
        else:
            out.append(word)
        glue = word in OPENERS
    return out


def read_brown(path: str) -> list[Document]:
    """One document per Brown file, one sentence per non-empty line."""
    doc: Document = []
    for n, line in enumerate(_lines(path), 1):
        if line.strip():
            doc.append(brown_sentence(line, f"{path}:{n}"))
    return [doc] if doc else []


def core(token: str) -> str:
    """The token without closing quotes and brackets at its end."""
    t = token
    while t and t[-1] in CLOSERS:
        t = t[:-1]
    while t.endswith("''"):
        t = t[:-2].rstrip(CLOSERS)
    return t


def stream(doc: Document) -> list[tuple[str, bool]]:
    """(token, a sentence ends after it) over a document."""
    return [(t, i == len(s) - 1) for s in doc for i, t in enumerate(s)]


def strip_word(token: str) -> str:
    """A word's letters for the lexicon: openers and closers and the final
    punctuation left out, lower case."""
    w = core(token).lstrip("`\"'([{")
    while w and w[-1] in ".?!,;:":
        w = w[:-1]
    return w.lower()


@dataclass
class Lexicon:
    """Word categories learned from training text (with its sentence
    boundaries): likely abbreviations (seen with a final period inside a
    sentence more often than without one), likely proper nouns (capitalized
    in at least 90% of their mid-sentence uses), frequent lower-case words
    (the 200 most frequent words always lower case mid-sentence)."""

    abbreviations: frozenset[str]
    proper: frozenset[str]
    frequent_lower: frozenset[str]
    known: frozenset[str]

    @staticmethod
    def learn(docs: Iterable[Document]) -> Lexicon:
        dotted: Counter[str] = Counter()
        plain: Counter[str] = Counter()
        cap: Counter[str] = Counter()
        lower: Counter[str] = Counter()
        for doc in docs:
            for sent in doc:
                for i, tok in enumerate(sent):
                    w = strip_word(tok)
                    if not w:
                        continue
                    last = i == len(sent) - 1
                    (dotted if core(tok).endswith(".") and not last else plain)[w] += 1
                    if i > 0:
                        letters = core(tok).lstrip("`\"'([{")
                        (cap if letters[:1].isupper() else lower)[w] += 1
        abbr = {w for w in dotted if dotted[w] > plain[w]}
        proper = {w for w in cap if cap[w] >= 2 and cap[w] >= 9 * lower[w]}
        lower_only = [w for w, _ in lower.most_common() if cap[w] == 0 and w.isalpha()]
        return Lexicon(
            frozenset(abbr),
            frozenset(proper),
            frozenset(lower_only[:200]),
            frozenset(dotted) | frozenset(plain),
        )

    def categories(self, word: str) -> list[str]:
        out = [
            name
            for name, words in (
                ("abbr", self.abbreviations),
                ("proper", self.proper),
                ("freqlower", self.frequent_lower),
            )
            if word in words
        ]
        return out or (["known"] if word in self.known else ["unknown"])


def shape(token: str) -> str:
    """Capitalization and shape of a token's letters: upper, lower, number,
    allcaps, other (quotes and brackets at its start left out)."""
    t = core(token).lstrip("`\"'([{")
    if not t:
        return "punct"
    if t[0].isdigit():
        return "number"
    if t[0].isupper():
        letters = [c for c in t if c.isalpha()]
        return "allcaps" if len(letters) > 1 and all(c.isupper() for c in letters) else "upper"
    return "lower" if t[0].islower() else "other"


def candidate_atoms(tok: str, nxt: str | None, lex: Lexicon) -> list[str]:
    """The atomic features of a candidate token ``tok`` followed by ``nxt``
    (None at the end of a document)."""
    c = core(tok)
    prev = strip_word(tok)
    atoms = [f"punct={c[-1]}", f"prev={prev or '<none>'}", f"prev_shape={shape(tok)}"]
    atoms.append(f"prev_len={min(len(prev), 4)}")
    if "." in c[:-1]:
        atoms.append("prev_inner_period")
    if c != tok:
        atoms.append("closer")
    atoms += [f"prev_lex={x}" for x in lexicon_of(prev, lex)]
    if nxt is None:
        return atoms + ["next=<end>"]
    nw = strip_word(nxt)
    atoms += [f"next={nw or '<punct>'}", f"next_shape={shape(nxt)}"]
    if nxt[:1] in "`\"'([{":
        atoms.append("next_opener")
    atoms += [f"next_lex={x}" for x in lexicon_of(nw, lex)]
    return atoms


def lexicon_of(word: str, lex: Lexicon) -> list[str]:
    return lex.categories(word) if word else ["none"]


def events(docs: Iterable[Document], lex: Lexicon) -> list[tuple[str, list[str]]]:
    """(label, atoms) of every candidate of the documents."""
    out = []
    for doc in docs:
        toks = stream(doc)
        for i, (tok, end) in enumerate(toks):
            if core(tok).endswith(ENDS):
                nxt = toks[i + 1][0] if i + 1 < len(toks) else None
                out.append(("yes" if end else "no", candidate_atoms(tok, nxt, lex)))
    return out


def escape(atom: str) -> str:
    """An atom as one maxent-format token (no spaces; ':' would read as a value)."""
    return atom.replace(":", "%3A").replace(" ", "_")


def trees_root(wsj_root: str) -> str | None:
    """The treebank's ``combined`` directory beside ``raw`` (the gold
    sentences), or None when there is none (then one sentence per line)."""
    parent = wsj_root.rstrip("/").rpartition("/")[0]
    trees = storage.join(parent, "combined") if parent else "combined"
    if storage.exists(trees):
        return trees
    log.warning("no %s: WSJ sentences are taken as one per raw line", trees)
    return None


def read_corpus(corpus: str, root: str, files: list[str]) -> list[Document]:
    if corpus == "brown":
        return [d for f in files for d in read_brown(storage.join(root, f))]
    trees = trees_root(root)
    return [
        d
        for f in files
        for d in read_wsj(storage.join(root, f), storage.join(trees, f + ".mrg") if trees else None)
    ]


def build(wsj_root: str, brown_root: str, output: str) -> dict:
    """Write ``<output>/<corpus>-<split>.txt`` (maxent format) for both
    corpora and splits, the lexicon learned from both training splits, and
    ``<output>/sbd.json`` (splits, candidate counts). Returns that summary."""
    parts = splits(wsj_root, brown_root)
    roots = {"wsj": wsj_root, "brown": brown_root}
    docs = {
        (c, s): read_corpus(c, roots[c], files) if roots[c] else []
        for c, by_split in parts.items()
        for s, files in by_split.items()
    }
    lex = Lexicon.learn(docs[("wsj", "train")] + docs[("brown", "train")])
    storage.mkdirs(output)
    summary: dict = {"splits": parts, "candidates": {}, "sentence_ends": {}}
    for (c, s), d in docs.items():
        evs = events(d, lex)
        lines = (label + " " + " ".join(escape(a) for a in atoms) + "\n" for label, atoms in evs)
        storage.write_text(storage.join(output, f"{c}-{s}.txt"), "".join(lines))
        summary["candidates"][f"{c}-{s}"] = len(evs)
        summary["sentence_ends"][f"{c}-{s}"] = sum(label == "yes" for label, _ in evs)
    storage.write_json(storage.join(output, "sbd.json"), summary)
    return summary


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--wsj", default="", help="treebank/raw directory")
    p.add_argument("--brown", default="", help="brown directory")
    p.add_argument("--output", required=True)
    a = p.parse_args(argv)
    s = build(a.wsj, a.brown, a.output)
    print(json.dumps({"candidates": s["candidates"], "sentence_ends": s["sentence_ends"]}))


if __name__ == "__main__":
    main()
