"""The configuration reference, generated from the schema: conf/defaults.toml
(every key at its default, with its meaning as a comment) and
docs/configuration.md. A test fails when either drifts from the code.

    python -m sparkmaxent.config.reference          # rewrite both files
    python -m sparkmaxent.config.reference --check  # exit 1 if they differ
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from dataclasses import fields

from .load import SECTIONS
from .rules import default_of, rule_of

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULTS_TOML = os.path.join("conf", "defaults.toml")
REFERENCE_MD = os.path.join("docs", "configuration.md")


def _keys(cls: type):
    for f in fields(cls):
        rule = rule_of(f)
        if rule is not None:
            default = default_of(f)
            yield f.name, default, rule


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return json.dumps(value) if isinstance(value, str) else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"


def defaults_toml() -> str:
    lines = [
        "# sparkmaxent defaults: every key at its default value. Generated from",
        "# sparkmaxent/config/schema.py by `python -m sparkmaxent.config.reference`;",
        "# do not edit by hand. Copy what you change into your own file, or override",
        "# one value on the command line: --set train.grafting.l1=1e-5",
    ]
    for path, cls in SECTIONS.items():
        lines += ["", f"[{path}]"]
        for name, default, rule in _keys(cls):
            allowed = rule.describe()
            doc = rule.doc + (f" ({allowed})" if allowed else "")
            lines += ["# " + line for line in textwrap.wrap(doc, 86, break_on_hyphens=False)]
            lines.append(f"{name} = {toml_value(default)}")
    return "\n".join(lines) + "\n"


def reference_markdown() -> str:
    out = [
        "# Configuration reference",
        "",
        "Generated from `sparkmaxent/config/schema.py` by "
        "`python -m sparkmaxent.config.reference`; do not edit by hand.",
        "",
        "A configuration is a TOML file (`--config FILE`) plus `--set SECTION.KEY=VALUE` "
        "overrides (the value is parsed as TOML; a bare word is a string). Every value is "
        "checked when the configuration is loaded, before Spark starts: an unknown key, a "
        "wrong type, a value out of range or a non-finite number is refused with a message "
        "naming the key (exit code 3). `conf/defaults.toml` lists every key at its default.",
        "",
    ]
    for path, cls in SECTIONS.items():
        out += [
            f"## `[{path}]`",
            "",
            (cls.__doc__ or "").strip().replace("\n    ", " "),
            "",
            "| key | default | allowed | meaning |",
            "|---|---|---|---|",
        ]
        for name, default, rule in _keys(cls):
            out.append(
                f"| `{name}` | `{toml_value(default)}` | {rule.describe() or 'any'} | "
                f"{rule.doc.replace('|', '/')} |"
            )
        out.append("")
    return "\n".join(out)


GENERATED = {DEFAULTS_TOML: defaults_toml, REFERENCE_MD: reference_markdown}


def stale(root: str = ROOT) -> list[str]:
    """The generated files whose content differs from the schema's."""
    bad = []
    for rel, make in GENERATED.items():
        path = os.path.join(root, rel)
        if not os.path.exists(path) or open(path).read() != make():
            bad.append(rel)
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a file is out of date")
    args = ap.parse_args(argv)
    if args.check:
        bad = stale()
        for rel in bad:
            print(
                f"{rel} is out of date: run python -m sparkmaxent.config.reference", file=sys.stderr
            )
        return 1 if bad else 0
    for rel, make in GENERATED.items():
        os.makedirs(os.path.dirname(os.path.join(ROOT, rel)), exist_ok=True)
        with open(os.path.join(ROOT, rel), "w") as f:
            f.write(make())
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
