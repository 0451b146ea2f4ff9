"""The sentence boundary data builder: running text from Brown's tags,
candidates and labels, the lexicon, the fixed splits."""

from __future__ import annotations

import pytest

from sparkmaxent.data import sbd
from sparkmaxent.errors import InputError


def test_brown_running_text_attaches_punctuation_and_keeps_one_period():
    line = "``/`` Mr./np Pye/np met/vbd Allen/np Jr./np ./."
    assert sbd.brown_sentence(line, "x:1") == ["``Mr.", "Pye", "met", "Allen", "Jr."]
    assert sbd.brown_sentence("Yes/rb ,/, he/pps did/dod ?/. ''/''", "x:2") == [
        "Yes,",
        "he",
        "did?''",
    ]
    with pytest.raises(InputError, match="x:3: expected word/tag"):
        sbd.brown_sentence("bad", "x:3")


def test_candidates_labels_and_atoms():
    train = [[["Mr.", "Smith", "left."], ["He", "saw", "the", "U.S.", "Army."]]]
    lex = sbd.Lexicon.learn(train)
    assert "mr" in lex.abbreviations and "left" not in lex.abbreviations
    events = sbd.events(train, lex)
    assert [label for label, _ in events] == ["no", "yes", "no", "yes"]
    _, atoms = events[0]
    assert {"punct=.", "prev=mr", "prev_shape=upper", "prev_lex=abbr", "next=smith"} <= set(atoms)
    assert "prev_inner_period" in events[2][1] and "next=<end>" in events[3][1]
    # a closing quote after the period still makes a candidate
    quoted = sbd.events([[["He", "said", '"no."'], ["Then", "left."]]], lex)
    assert quoted[0][0] == "yes" and "closer" in quoted[0][1]


def test_wsj_documents_and_fixed_splits(tmp_path):
    (tmp_path / "wsj_0001").write_text(".START \n\nA b. \nC d.\n")
    (tmp_path / "wsj_0150").write_text("no start\n")
    assert sbd.read_wsj(str(tmp_path / "wsj_0001")) == [[["A", "b."], ["C", "d."]]]
    with pytest.raises(InputError, match="wsj_0150:1: a sentence before the first .START"):
        sbd.read_wsj(str(tmp_path / "wsj_0150"))
    parts = sbd.splits(str(tmp_path), "")
    assert parts["wsj"] == {"train": ["wsj_0001"], "heldout": ["wsj_0150"], "test": []}


def test_wsj_sentences_come_from_the_treebank_trees(tmp_path):
    """A raw line may hold several sentences; the trees say where they end,
    including an abbreviation that ends one (the trees add a '.' the raw
    text lacks), text the two spell differently, and a trailer no tree
    covers (left out)."""
    raw = tmp_path / "raw"
    trees = tmp_path / "combined"
    raw.mkdir()
    trees.mkdir()
    (raw / "wsj_0001").write_text(
        '.START \n\nHe said "no." Then he left the U.S. \n'
        "Sales of IBC/Donoghue's fund fell 3.5%. Prices rose.\n(See related story.)\n"
    )
    (trees / "wsj_0001.mrg").write_text(
        "( (S (NP (PRP He)) (VP (VBD said) (`` ``) (NP (DT no)) (. .) ('' ''))))\n"
        "( (S (RB Then) (NP (PRP he)) (VP (VBD left) (NP (DT the) (NNP U.S.))) (. .)))\n"
        "( (S (NP (NNS Sales) (PP (IN of) (NP (NNP IBC) (POS 's) (NN fund)))) "
        "(VP (VBD fell) (NP (CD 3.5) (NN %))) (-NONE- *T*) (. .)))\n"
        "( (S (NNS Prices) (VBD rose) (. .)))\n"
    )
    docs = sbd.read_corpus("wsj", str(raw), ["wsj_0001"])
    assert docs == [
        [
            ["He", "said", '"no."'],
            ["Then", "he", "left", "the", "U.S."],
            ["Sales", "of", "IBC/Donoghue's", "fund", "fell", "3.5%."],
            ["Prices", "rose."],
        ]
    ]
    labels = [label for label, _ in sbd.events(docs, sbd.Lexicon.learn(docs))]
    assert labels == ["yes", "yes", "yes", "yes"]  # '3.5%.' is one candidate; 'U.S.' ends one
    # without the trees: one sentence per line, so the line's inner ends are lost
    lines = sbd.read_wsj(str(raw / "wsj_0001"))
    assert [label for label, _ in sbd.events(lines, sbd.Lexicon.learn(lines))][:2] == ["no", "yes"]


def test_tree_leaves_undo_escapes_and_skip_empty_elements():
    text = "( (S (-LRB- -LRB-) (NN a\\/b) (-NONE- *-1) (-RRB- -RRB-)) )\n( (X (NN c)) )"
    assert sbd.tree_leaves(text) == [["(", "a/b", ")"], ["c"]]
