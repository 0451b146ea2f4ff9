"""docs/reliability.md names the test of every case: each named test file
and function exists (``file::function``, or ``::function`` of the last file
named on the same line)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMED = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`|`::(\w+)`")


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def test_every_test_the_reliability_doc_names_exists():
    missing, named = [], 0
    for number, line in enumerate((ROOT / "docs" / "reliability.md").read_text().splitlines(), 1):
        current = None
        for m in NAMED.finditer(line):
            if m.group(1):
                current = ROOT / m.group(1)
                if not current.is_file():
                    missing.append(f"line {number}: {m.group(1)}")
                    current = None
                    continue
            name = m.group(2) or m.group(3)
            if not name:
                continue
            named += 1
            if current is None or name not in _functions(current):
                missing.append(f"line {number}: {current and current.relative_to(ROOT)}::{name}")
    assert named > 100 and not missing, missing
