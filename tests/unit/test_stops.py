"""Stop reasons are typed (sparkmaxent/selection/stops.py): how each reads,
its JSON round trip, and a source rule that no other module of the package
decides on a stop's text."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from sparkmaxent.selection.stops import _MESSAGES, Stop, StopReason, reason_of_message, stop

PACKAGE = Path(__file__).resolve().parents[2] / "sparkmaxent"
STOPS_MODULE = PACKAGE / "selection" / "stops.py"
#: report keys holding a stop's text or code: written by train.py from a Stop, never read back
STOP_KEYS = {"stopped", "stop_reason"}


def test_every_reason_reads_and_round_trips():
    assert set(_MESSAGES) == set(StopReason)
    assert stop(StopReason.MAX_ROUNDS, limit=3).message == "max_rounds = 3"
    assert stop(StopReason.MAX_SECONDS, limit=1e-6).message == "max_seconds = 1e-06"
    assert (
        stop(StopReason.GAIN_THRESHOLD, gain=0.012345, threshold=0.05).message
        == "best gain 0.01235 <= gain_threshold 0.05"
    )
    assert stop(StopReason.BAYES_RULE, scored=7, inclusion_zero=True).message == (
        "no proposal beats beta_0 (7 scored; empirical-Bayes inclusion probability 0)"
    )
    for reason in StopReason:
        made = Stop(reason, {p: 2 for p in inspect.signature(_MESSAGES[reason]).parameters})
        assert Stop.from_json(made.to_json()) == made
        assert made.to_json()["reason"] == reason.value


@pytest.mark.parametrize("value", [0, 3, 12345])
def test_every_reasons_message_reads_back_as_that_reason(value):
    for reason in StopReason:
        params = inspect.signature(_MESSAGES[reason]).parameters
        made = Stop(reason, {p: value for p in params})
        assert reason_of_message(made.message) is reason, made.message
        required = [p for p, v in params.items() if v.default is inspect.Parameter.empty]
        if len(required) < len(params):  # the message without its optional fields too
            bare = Stop(reason, {p: value for p in required})
            assert reason_of_message(bare.message) is reason, bare.message
    unchanged = stop(StopReason.BAYES_RULE, scored=3, inclusion_zero=False).message
    assert reason_of_message(unchanged) is StopReason.BAYES_RULE


def test_a_text_no_reason_reads_as_has_no_reason():
    # a note around a reason's text, an older wording shared by two reasons, nothing
    assert reason_of_message("finished (its l1-Orig start hit max_seconds = 1200)") is None
    assert reason_of_message("held-out stop rule: 4 points without a better held-out score") is None
    assert reason_of_message("") is None and reason_of_message(None) is None
    assert reason_of_message("max_seconds = 1200 (time cap)") is StopReason.MAX_SECONDS


def test_a_stop_with_the_wrong_fields_is_refused_where_it_is_made():
    with pytest.raises(TypeError):
        stop(StopReason.MAX_ROUNDS)
    with pytest.raises(TypeError):
        stop(StopReason.NO_CANDIDATE_PASSES, limit=1)


def stop_texts() -> tuple[set[str], set[str]]:
    """Each reason's code, and the fixed start of its text (up to its first
    field), e.g. ``max_rounds`` and ``max_rounds =``."""
    codes, heads = set(), set()
    for reason in StopReason:
        params = inspect.signature(_MESSAGES[reason]).parameters
        text = Stop(reason, {p: 1 for p in params}).message
        head = text.split("1")[0].strip() if params else text
        codes.add(reason.value)
        heads.update({head, head.split(" =")[0]})
    return codes, heads


def _is_stop_text(value: object, texts: tuple[set[str], set[str]]) -> bool:
    """A code or more, or a start of a text of at least 4 characters."""
    if not isinstance(value, str) or len(value.strip()) < 4:
        return False
    v, (codes, heads) = value.strip(), texts
    return any(v.startswith(c) for c in codes) or any(
        h.startswith(v) or v.startswith(h) for h in heads
    )


def stop_text_uses(source: str, texts: tuple[set[str], set[str]]) -> list[tuple[int, str]]:
    """(line, text) of each place ``source`` decides on a stop's text: a
    string like a stop reason compared (``==``, ``!=``, ``in``) or matched
    (``startswith``/``endswith``), and any use of the report's stop keys."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and _is_stop_text(side.value, texts):
                    found.append((node.lineno, side.value))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith")
        ):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and _is_stop_text(arg.value, texts):
                    found.append((node.lineno, arg.value))
        elif isinstance(node, ast.Constant) and node.value in STOP_KEYS:
            found.append((node.lineno, node.value))
    return sorted(found)


def test_no_module_decides_on_a_stop_reasons_text():
    """Code compares ``stop.reason`` with a StopReason member; the text is
    made in stops.py and written to the report by train.py only."""
    texts = stop_texts()
    stray = [
        f"{path.relative_to(PACKAGE.parent)}:{line} {text!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != STOPS_MODULE
        for line, text in stop_text_uses(path.read_text(), texts)
    ]
    assert not stray, (
        "stop reasons compared as strings (use stop.reason is StopReason.X, "
        "sparkmaxent/selection/stops.py):\n" + "\n".join(stray)
    )


def test_the_stop_text_rule_sees_each_kind_of_comparison():
    source = (
        'if stopped.startswith("max_rounds"): pass\n'
        'done = report.get("stopped") == "no candidate passes the test"\n'
        'capped = "max_seconds =" in text\n'
        'x = s.endswith("pass budget spent")\n'
        'ok = cfg.method == "grafting" and name.startswith("round-")\n'
    )
    found = stop_text_uses(source, stop_texts())
    assert found == [
        (1, "max_rounds"),
        (2, "no candidate passes the test"),
        (2, "stopped"),
        (3, "max_seconds ="),
        (4, "pass budget spent"),
    ]


def test_no_benchmark_decides_on_a_stop_text():
    """Benchmarks (the page generator benchmarks/report.py included) read a
    stored row's reason as a StopReason (its ``stop_reason``, or
    ``reason_of_message`` of its ``stopped`` text), never compare the text:
    a reworded message must not silently change a page or a target."""
    texts = stop_texts()
    stray = [
        f"{path.relative_to(PACKAGE.parent)}:{line} {text!r}"
        for path in sorted((PACKAGE.parent / "benchmarks").glob("*.py"))
        for line, text in stop_text_uses(path.read_text(), texts)
        if text not in STOP_KEYS  # rows carry them; reading them is not deciding on text
    ]
    assert not stray, "stop texts compared in benchmarks:\n" + "\n".join(stray)
    old_filter = 'keep = lambda row: "max_seconds" not in str(row.get("stopped"))'
    assert stop_text_uses(old_filter, texts)[0] == (1, "max_seconds")
