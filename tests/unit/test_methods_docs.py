"""docs/methods/*.md describe methods, not runs: a measured figure lives in
benchmarks/results/<benchmark>.json and the generated docs/benchmarks.md, and a
methods page links to its section there instead of quoting it (a quoted
figure goes stale when the benchmark is rerun; issue 38).

What counts as a measured figure (narrow on purpose: it flags what a run
prints, not the numbers a method is defined by). In prose, in tables and in
example log lines, outside fenced blocks of commands or configuration
(```bash, ```toml, ...), `inline code` and link targets:

1. a time: a number followed by s, ms, seconds, minutes or hours;
2. a share or a speed ratio: a number followed by %, or by x with no space
   ("3.1x"), or by "times faster/slower";
3. an approximate count: a number after ~, about, roughly, nearly, around;
4. a decimal number that is not a literal of the package's source (config
   defaults, their grids and an algorithm's constants are literals in
   sparkmaxent/, so "default 0.3" passes and "0.31 of its time" does not),
   nor a section, equation, figure or version number.

Whole numbers without a unit (label counts, corpus sizes, a paper's
sections, a formula evaluated at a size) are not flagged. Example log lines
show the line's form with placeholders instead of one run's values.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
METHODS = ROOT / "docs" / "methods"
#: fenced blocks whose numbers are input (commands, configuration, code)
INPUT_FENCES = {"bash", "sh", "toml", "python", "json", "yaml", "ini"}
APPROXIMATE = r"(?:~ ?|\b(?:about|roughly|nearly|around) )\d(?:[\d,.]*\d)?"
NUMBER = r"(?<![\w.^/])\d[\d,]*(?:\.\d+)?"
RULES = (
    ("a time", re.compile(NUMBER + r" ?(?:s|ms|seconds?|minutes?|hours?)(?![\w])")),
    ("a share or ratio", re.compile(NUMBER + r"(?: ?%|x(?![\w])| times (?:faster|slower))")),
    ("an approximate count", re.compile(APPROXIMATE)),
    ("a decimal", re.compile(r"(?<![\w.^/])\d*\.\d+(?![\w.])")),
)
#: a decimal right after these words is a reference, not a figure
REFERENCE = re.compile(
    r"(?:sections?|Eqs?\.|Figure|Table|Algorithm|Appendix|Python|Java|Spark|version)"
    r"[\s\d.,\-and]*$",
    re.I,
)


def source_literals() -> set[float]:
    """Every float literal of the package (config defaults, grids, constants)."""
    found = set()
    for path in (ROOT / "sparkmaxent").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, float):
                found.add(node.value)
    return found


def measured_figures(text: str, literals: set[float]) -> list[tuple[int, str, str]]:
    """(line, rule, figure) for each measured figure in a markdown page."""
    hits, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else (stripped[3:].strip().lower() or "plain")
            continue
        if fence in INPUT_FENCES:
            continue
        body = re.sub(r"`[^`]*`", "``", line)
        body = re.sub(r"\]\([^)]*\)", "]()", body)
        for rule, pattern in RULES:
            for m in pattern.finditer(body):
                if REFERENCE.search(body[: m.start()]):
                    continue
                if rule == "a decimal" and float(m.group(0)) in literals:
                    continue
                hits.append((number, rule, m.group(0).strip()))
    return hits


def test_methods_pages_quote_no_measured_figure():
    literals = source_literals()
    found = [
        f"docs/methods/{page.name}:{line}: {rule} {figure!r}"
        for page in sorted(METHODS.glob("*.md"))
        for line, rule, figure in measured_figures(page.read_text(), literals)
    ]
    assert not found, (
        "measured figures in docs/methods (link to docs/benchmarks.md instead):\n"
        + "\n".join(found)
    )


def test_the_figure_rule_sees_each_kind_and_passes_what_defines_a_method():
    literals = {0.3, 0.5}
    page = "\n".join(
        [
            "The default was 0.1 until 0.3 took 0.31 of its time.",  # 1: 0.1 and 0.31
            "Its rounds ran 3.2x faster, 41% of the passes, in 668 s.",  # 2: three
            "With S = 100: ~150 passes per round, about 15 gradient passes.",  # 3: two
            "Eq. 13 and section 3.6 (Daume III 2004); `max_seconds = 2.5`.",  # 4: none
            "    round 7: 65 active, objective 1.464015409, 51 passes, 1.4s",  # 5: two
            "```bash",
            "sparkmaxent train --set train.l2=0.25 --set max_seconds=60",  # input
            "```",
            "    round <r>: <n> active, objective <C(w)>, <passes> passes, <t>s",  # form
            "A default of 0.5 and [a link](../benchmarks.md#round_tol_0.7).",  # none
        ]
    )
    got = sorted((line, figure) for line, _, figure in measured_figures(page, literals))
    assert got == [
        (1, "0.1"),
        (1, "0.31"),
        (2, "3.2x"),
        (2, "41%"),
        (2, "668 s"),
        (3, "about 15"),
        (3, "~150"),
        (5, "1.464015409"),
        (5, "1.4s"),
    ], got


def test_methods_pages_link_to_existing_benchmark_sections():
    """A link ``benchmarks.md#name`` from a methods page names a section of
    the generated page (a benchmark renamed or dropped breaks no link)."""
    headings = re.findall(r"^## (.+)$", (ROOT / "docs" / "benchmarks.md").read_text(), re.M)
    sections = {re.sub(r"[^\w-]", "", h.strip().lower().replace(" ", "-")) for h in headings}
    broken = [
        f"{page.name}: #{anchor}"
        for page in sorted(METHODS.glob("*.md"))
        for anchor in re.findall(r"benchmarks\.md#([\w-]+)", page.read_text())
        if anchor not in sections
    ]
    assert sections and not broken, broken
