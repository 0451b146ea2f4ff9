# Sourced by the other scripts: a virtualenv with the project installed, and
# Spark kept on loopback. VENV overrides the location (default .venv).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON_BIN="${PYTHON_BIN:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON_BIN" -m venv "$VENV"
fi
# install (or refresh) the project and its test, benchmark, lint and cluster extras quietly
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[test,bench,dev,cluster]"
export SPARK_LOCAL_IP=127.0.0.1
export PYSPARK_PYTHON="$VENV/bin/python"
export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
command -v java >/dev/null || { echo "error: Java 17 is required (java not on PATH)" >&2; exit 2; }
