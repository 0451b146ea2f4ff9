#!/usr/bin/env bash
# Install, then lint (ruff), check formatting (ruff format) and type-check
# (mypy) the project; `scripts/lint.sh --fix` rewrites what ruff can fix.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
if [ "${1:-}" = "--fix" ]; then
  "$VENV/bin/ruff" check --fix .
  exec "$VENV/bin/ruff" format .
fi
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/mypy"
"$VENV/bin/python" -m sparkmaxent.config.reference --check
"$VENV/bin/python" -m benchmarks.report --check
