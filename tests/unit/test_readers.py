"""Text readers: exact events from small inline files, one ParseError per
malformed record (right line, parsing goes on), and counts on the real corpora."""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from sparkmaxent.data.readers import (
    FORMATS,
    InputError,
    ParseError,
    RawCandidateEvent,
    RawEvent,
    format_spec,
    parse_conll,
    parse_maxent,
    parse_ppattach,
    parse_svmlight,
    parse_tadm,
)
from sparkmaxent.data.templates import (
    BOS,
    CHUNK_TEMPLATES,
    EOS,
    PP_TEMPLATES,
    join_values,
    pp_features,
    sentence_features,
    template_name,
)
from sparkmaxent.kernels import CANDIDATES, MULTICLASS


def run(parser, text: str, **options) -> list:
    return list(parser("f.txt", text.splitlines(keepends=True), options))


def errors(out: list) -> list[tuple[int, str]]:
    return [(e.line, e.reason) for e in out if isinstance(e, ParseError)]


def events(out: list) -> list:
    return [e for e in out if not isinstance(e, ParseError)]


# ----------------------------------------------------------------- registry


def test_registry_shapes_and_lookup():
    assert {k: v.shape for k, v in FORMATS.items()} == {
        "maxent": MULTICLASS,
        "svmlight": MULTICLASS,
        "tadm": CANDIDATES,
        "conll": MULTICLASS,
        "ppattach": MULTICLASS,
    }
    assert format_spec("conll").parser is parse_conll
    assert format_spec("conll").options == {
        "mode": "chunk",
        "lowercase": False,
        "templates": "chunk",
    }
    assert format_spec("ppattach").options == {"lowercase": True}
    with pytest.raises(InputError, match=r"unknown input format 'svm'.*'svmlight'"):
        format_spec("svm")


# ------------------------------------------------------------------- maxent


def test_maxent_values_colons_and_bad_values():
    out = run(parse_maxent, "# header\nA w=http://x a:b:2 plain\n\nB x:nan\nB y:inf\nC z:-1.5e0\n")
    assert errors(out) == [
        (4, "expected a finite feature value, got 'x:nan'"),
        (5, "expected a finite feature value, got 'y:inf'"),
    ]
    a, c = events(out)
    assert (a.label, a.features, a.values) == ("A", ["w=http://x", "a:b", "plain"], [1.0, 2.0, 1.0])
    # ids count rejected records too: an id names the same line whatever came before
    assert (c.label, c.features, c.values, c.event_id, c.group) == ("C", ["z"], [-1.5], 3, 3)
    assert out[1].text == "B x:nan"


# ----------------------------------------------------------------- svmlight


def test_svmlight_valid_records():
    out = run(
        parse_svmlight, "+1 qid:3 1:0.5 007:2 # a comment: 9:9\n# comment line\n\n3 10:-1e-3\n-1\n"
    )
    assert errors(out) == []
    a, b, c = out
    assert (a.label, a.features, a.values, a.event_id) == ("+1", ["1", "7"], [0.5, 2.0], 0)
    assert (b.label, b.features, b.values, b.event_id) == ("3", ["10"], [-0.001], 1)
    assert (c.label, c.features, c.values, c.event_id) == ("-1", [], [], 2)


@pytest.mark.parametrize(
    "bad, reason",
    [
        ("1 a:1", "expected a non-negative integer index, got 'a' in 'a:1'"),
        ("1 -3:1", "expected a non-negative integer index, got '-3' in '-3:1'"),
        ("1 3:", "expected index:value, got '3:' (missing value)"),
        ("1 3", "expected index:value, got '3' (missing value)"),
        ("1 3:x", "expected a finite number as the value, got 'x' in '3:x'"),
        ("1 3:nan", "expected a finite number as the value, got 'nan' in '3:nan'"),
        ("1 3:-inf", "expected a finite number as the value, got '-inf' in '3:-inf'"),
        ("1 3:1e999", "expected a finite number as the value, got '1e999' in '3:1e999'"),
        ("3:1 4:1", "expected a label as the first token, got '3:1' (label missing?)"),
    ],
)
def test_svmlight_malformed_line(bad, reason):
    out = run(parse_svmlight, f"0 1:1\n\n{bad}\n2 5:2\n")
    assert errors(out) == [(3, reason)]
    assert [(e.label, e.features, e.values, e.event_id) for e in events(out)] == [
        ("0", ["1"], [1.0], 0),
        ("2", ["5"], [2.0], 2),
    ]


# --------------------------------------------------------------------- TADM

TADM_OK = """2
1 2 3 1.0 4 2.5
0 0

3
0 1 7 1
0.5 2 7 1 8 -1
2 1 9 0.25
1
0 1 3 1
"""


def test_tadm_valid_events():
    out = run(parse_tadm, TADM_OK)
    assert errors(out) == []
    a, b, c = out
    assert isinstance(a, RawCandidateEvent)
    assert (a.correct, a.cand_nnz, a.features, a.values) == (
        [True, False],
        [2, 0],
        ["3", "4"],
        [1.0, 2.5],
    )
    # several correct candidates (fractional score counts as correct)
    assert (b.correct, b.cand_nnz, b.features, b.values) == (
        [False, True, True],
        [1, 2, 1],
        ["7", "7", "8", "9"],
        [1.0, 1.0, -1.0, 0.25],
    )
    # no correct candidate: kept as it is, prepare decides
    assert (c.correct, c.cand_nnz, c.features) == ([False], [1], ["3"])
    assert [(e.event_id, e.group, e.weight) for e in out] == [(0, 0, 1.0), (1, 1, 1.0), (2, 2, 1.0)]


GOOD_EVENT = "1\n1 1 5 1\n"


# each malformed event sits on lines 3.. between two good events
@pytest.mark.parametrize(
    "bad, line, reason",
    [
        (
            "0\n1 1 3 1\n",
            3,
            "expected a candidate count (a positive integer alone on its line), got '0'",
        ),
        (
            "two\n1 1 3 1\n0 0\n",
            3,
            "expected a candidate count (a positive integer alone on its line), got 'two'",
        ),
        (
            "2\n1 2 3 1\n0 0\n",
            4,
            "expected 6 tokens (score, nfeat=2, then 2 feature-value pairs), got 4 "
            "(candidate 1 of 2, event at line 3)",
        ),
        (
            "2\n1 0\n0 1 3 1 4 1\n",
            5,
            "expected 4 tokens (score, nfeat=1, then 1 feature-value pairs), got 6 "
            "(candidate 2 of 2, event at line 3)",
        ),
        (
            "1\nnan 1 3 1\n",
            4,
            "expected a finite score as the first token, got 'nan' "
            "(candidate 1 of 1, event at line 3)",
        ),
        (
            "1\n1 1 3 inf\n",
            4,
            "expected a finite value for feature 3, got 'inf' (candidate 1 of 1, event at line 3)",
        ),
        (
            "1\n1 1 x 1\n",
            4,
            "expected an integer feature id, got 'x' (candidate 1 of 1, event at line 3)",
        ),
        (
            "1\n1 z 3 1\n",
            4,
            "expected a feature count (non-negative integer) as the second "
            "token, got 'z' (candidate 1 of 1, event at line 3)",
        ),
        (
            "3\n1 1 3 1\n",
            3,
            "expected 3 candidates, got 1: line 5 holds the single token '1', "
            "not a candidate (event cut short)",
        ),
    ],
)
def test_tadm_malformed_event_then_recovers(bad, line, reason):
    out = run(parse_tadm, GOOD_EVENT + bad + GOOD_EVENT)
    assert errors(out) == [(line, reason)]
    good = events(out)
    assert [(e.correct, e.features, e.values) for e in good] == [([True], ["5"], [1.0])] * 2
    assert [e.event_id for e in good] == [0, 2]


def test_tadm_extra_candidate_line_is_a_bad_count_line():
    out = run(parse_tadm, "1\n1 1 3 1\n0 1 4 1\n0 1 5 1\n1\n1 0\n")
    assert errors(out) == [
        (3, "expected a candidate count (a positive integer alone on its line), got '0 1 4 1'")
    ]
    assert [e.event_id for e in events(out)] == [0, 2]


def test_tadm_truncated_at_end_of_file():
    out = run(parse_tadm, GOOD_EVENT + "3\n1 1 3 1\n0 0\n")
    assert errors(out) == [
        (3, "expected 3 candidates, got 2 before the end of the file (event truncated)")
    ]
    assert out[-1].text == "3"
    assert len(events(out)) == 1


# -------------------------------------------------------------------- CoNLL

SENTENCES = """He PRP B-NP
reckons VBZ B-VP
the DT B-NP
deficit NN I-NP
. . O

Rockwell NNP B-NP
said VBD B-VP
"""


def test_conll_features_padding_and_ids():
    out = run(parse_conll, SENTENCES)
    assert errors(out) == []
    assert [(e.label, e.event_id, e.group) for e in out] == [
        ("B-NP", 0, 0),
        ("B-VP", 1, 0),
        ("B-NP", 2, 0),
        ("I-NP", 3, 0),
        ("O", 4, 0),
        ("B-NP", 5, 1),
        ("B-VP", 6, 1),
    ]
    the = out[2]
    assert the.features == [
        "w-2=He",
        "w-1=reckons",
        "w0=the",
        "w+1=deficit",
        "w+2=.",
        "t-2=PRP",
        "t-1=VBZ",
        "t0=DT",
        "t+1=NN",
        "t+2=.",
        "t-2,t-1=PRP,VBZ",
        "t-1,t0=VBZ,DT",
        "t0,t+1=DT,NN",
        "t+1,t+2=NN,.",
        "w-1,w0=reckons,the",
        "w0,w+1=the,deficit",
        "t-1,t+1=VBZ,NN",
    ]
    assert the.values == [1.0] * 17
    # sentence edges read padding, never the neighbouring sentence
    first, last = out[0].features, out[4].features
    assert first[:2] == [f"w-2={BOS}", f"w-1={BOS}"] and first[5:7] == [f"t-2={BOS}", f"t-1={BOS}"]
    assert f"t-2,t-1={BOS},{BOS}" in first and f"t-1,t+1={BOS},VBZ" in first
    assert last[3:5] == [f"w+1={EOS}", f"w+2={EOS}"] and f"w0,w+1=.,{EOS}" in last
    said = out[6].features  # second sentence, no trailing blank line at end of file
    assert said[:5] == [f"w-2={BOS}", "w-1=Rockwell", "w0=said", f"w+1={EOS}", f"w+2={EOS}"]
    assert out[5].features[1] == f"w-1={BOS}"  # not "w-1=." from the previous sentence


def test_conll_basenp_maps_other_tags_to_o_and_lowercase():
    out = run(parse_conll, SENTENCES, mode="basenp", lowercase=True)
    assert [e.label for e in out] == ["B-NP", "O", "B-NP", "I-NP", "O", "B-NP", "O"]
    assert out[0].features[2] == "w0=he" and out[0].features[7] == "t0=PRP"
    assert out[0].features[0] == f"w-2={BOS}"  # padding is not lowercased
    chunk = run(parse_conll, SENTENCES, mode="chunk")
    assert chunk[0].features[2] == "w0=He" and chunk[1].label == "B-VP"
    with pytest.raises(InputError, match=r"f.txt: expected conll option mode .*got 'np'"):
        run(parse_conll, SENTENCES, mode="np")


def test_conll_unigram_templates_only():
    full = run(parse_conll, SENTENCES)
    uni = run(parse_conll, SENTENCES, templates="unigrams")
    assert [e.features for e in uni] == [e.features[:10] for e in full]
    assert all("," not in f.split("=")[0] for e in uni for f in e.features)
    with pytest.raises(InputError, match=r"expected conll option templates .*got 'bigrams'"):
        run(parse_conll, SENTENCES, templates="bigrams")


def test_conll_malformed_line_skips_its_sentence_once():
    text = (
        "A DT B-NP\n\n"
        "bad line\n"  # line 3
        "x y z w\n"  # line 4: same sentence, no second error
        "ok NN I-NP\n\n\n"
        "last NN B-NP\n"
    )  # line 8
    out = run(parse_conll, text)
    assert errors(out) == [
        (3, "expected 3 columns 'word POS chunk-tag', got 2 (sentence 1 skipped)")
    ]
    assert [(e.features[2], e.event_id, e.group) for e in events(out)] == [
        ("w0=A", 0, 0),
        ("w0=last", 4, 2),
    ]


def test_conll_commas_in_conjunctions_are_escaped():
    out = run(parse_conll, "1,000 CD B-NP\n, , O\n")
    assert "w0,w+1=1\\,000,\\," in out[0].features
    assert "w0=1,000" in out[0].features  # single values are not escaped
    assert "t-1,t0=CD,\\," in out[1].features


# ------------------------------------------------------------ PP attachment


def test_ppattach_features_and_errors():
    out = run(
        parse_ppattach,
        "0 Join board as director V\n"
        "1 is chairman of N.V. N\n"
        "2 a b c\n"
        "3 a b c d X\n"
        "\n"
        "4 named director of conglomerate N\n",
    )
    assert errors(out) == [
        (3, "expected 6 columns 'sentence-id verb noun1 prep noun2 attachment', got 4"),
        (4, "expected attachment V or N, got 'X'"),
    ]
    a, b, c = events(out)
    assert a.label == "V" and a.values == [1.0] * 11
    assert a.features == [
        "v=join",
        "n1=board",
        "p=as",
        "n2=director",
        "v,p=join,as",
        "n1,p=board,as",
        "p,n2=as,director",
        "v,n1,p=join,board,as",
        "v,p,n2=join,as,director",
        "n1,p,n2=board,as,director",
        "v,n1,p,n2=join,board,as,director",
    ]
    assert b.features[3] == "n2=n.v." and b.label == "N"
    assert [(e.event_id, e.group) for e in (a, b, c)] == [(0, 0), (1, 1), (4, 4)]
    kept = run(parse_ppattach, "0 Join board as director V\n", lowercase=False)
    assert kept[0].features[0] == "v=Join"


# ---------------------------------------------------------------- templates


def test_templates_are_distinct_and_reusable():
    names = [template_name(t) for t in CHUNK_TEMPLATES]
    assert len(names) == 17 == len(set(names))
    assert names[-1] == "t-1,t+1"
    assert len(PP_TEMPLATES) == 11
    assert all("p" in t for t in PP_TEMPLATES if len(t) > 1)
    feats = sentence_features(["a", "b"], ["X", "Y"])
    assert len(feats) == 2 and all(len(f) == 17 for f in feats)
    assert pp_features("V", "N", "P", "M")[4] == "v,p=v,p"
    with pytest.raises(ValueError, match="expected as many tags as words, got 1 tags for 2"):
        sentence_features(["a", "b"], ["X"])
    # escaping keeps different value tuples apart
    assert join_values(["a,b", "c"]) != join_values(["a", "b,c"])
    assert join_values(["a\\", ",b"]) != join_values(["a\\,", "b"])


# ------------------------------------------------------ never raise on junk


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_parsers_never_raise_on_junk(name):
    rng = random.Random(7)
    alphabet = [
        "1",
        "0",
        "-1",
        "2",
        "a",
        "x:1",
        "3:nan",
        "B-NP",
        "NN",
        "V",
        "N",
        "1.5",
        "inf",
        ":",
        "::",
        "#",
        "qid:1",
        "7:2",
    ]
    lines = [
        " ".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7))) + "\n" for _ in range(400)
    ]
    out = list(FORMATS[name].parser("junk", lines, {}))
    assert all(isinstance(e, (RawEvent, RawCandidateEvent, ParseError)) for e in out)
    assert all(1 <= e.line <= len(lines) for e in out if isinstance(e, ParseError))
    assert any(isinstance(e, ParseError) for e in out)


# ------------------------------------------------------------- real corpora


def test_real_corpora_counts_and_predicates(shared_data):
    path = os.path.join(shared_data, "conll2000", "train.txt")
    with open(path) as f:
        out = list(parse_conll(path, f, {}))
    assert errors(out) == []
    assert len(out) == 211_727
    assert len({e.group for e in out}) == 8_936 and out[-1].group == 8_935
    assert out[-1].event_id == 211_726
    assert len({e.label for e in out}) == 22
    counts = Counter(f for e in out for f in e.features)
    predicates = sum(1 for c in counts.values() if c >= 2)
    print(f"conll2000 train: {predicates} predicates seen at least twice (reference 102,343)")
    assert abs(predicates - 102_343) <= 0.25 * 102_343

    path = os.path.join(shared_data, "ppattach", "training")
    with open(path) as f:
        out = list(parse_ppattach(path, f, {}))
    assert errors(out) == []
    assert len(out) == 20_801
    assert Counter(e.label for e in out) == {"N": 10_865, "V": 9_936}


# ------------------------------------------------------ the value bound (issue 23)


def test_values_over_the_bound_are_malformed_in_every_format():
    """|value| > MAX_ABS_VALUE (1e12) would overflow the solvers' squares:
    a malformed record in every format that carries values; the bound itself
    is accepted."""
    from sparkmaxent.data.readers import MAX_ABS_VALUE

    assert MAX_ABS_VALUE == 1e12
    out = run(parse_maxent, "A x:1e12 y:-1e12\nB x:1e300\nC y:-1.000001e12\n")
    bound = "expected a feature value with |value| <= 1e+12, got"
    assert errors(out) == [(2, f"{bound} 'x:1e300'"), (3, f"{bound} 'y:-1.000001e12'")]
    assert [e.values for e in events(out)] == [[1e12, -1e12]]
    out = run(parse_svmlight, "0 1:1e12\n1 3:2e12\n")
    assert errors(out) == [(2, "expected a value with |value| <= 1e+12, got '2e12' in '3:2e12'")]
    assert [e.values for e in events(out)] == [[1e12]]
    # a TADM score is only compared with 0: a huge one is no value
    out = run(parse_tadm, "1\n1e300 1 5 -1e12\n1\n1 1 3 1e300\n")
    assert errors(out) == [
        (
            4,
            "expected a value with |value| <= 1e+12 for feature 3, got '1e300' "
            "(candidate 1 of 1, event at line 3)",
        )
    ]
    assert [e.values for e in events(out)] == [[-1e12]]
