#!/usr/bin/env bash
# Install, then run the default test suite (slow tests excluded; run them
# with: scripts/test.sh -m slow). Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
exec "$VENV/bin/python" -m pytest "$@"
