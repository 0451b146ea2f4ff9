"""docs/python-api.md's complete example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def example() -> str:
    text = DOC.read_text()
    at = text.index("## A complete example")
    block = re.search(r"```python\n(.*?)```", text[at:], re.S)
    assert block, "no python block after the example's heading"
    return block.group(1)


def test_the_complete_example_runs(spark, capsys):
    code = example()
    for step in (
        "Tokenizer",
        'l1="auto"',
        "chosenRegularization",
        "Pipeline(",
        ".fit(",
        ".transform(",
        "Evaluator",
        ".save(",
        ".load(",
    ):
        assert step in code, step
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    assert namespace["accuracy"] == 1.0
    assert "accuracy 1.0" in capsys.readouterr().out
