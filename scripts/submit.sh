#!/usr/bin/env bash
# scripts/submit.sh: run a sparkmaxent job with spark-submit.
#
#   scripts/submit.sh [--master URL] [--conf K=V]... [--py-files-mode zip|wheel] \
#                     JOB [job args...]
#
# JOB is prepare | train | predict | evaluate | pipeline (jobs/JOB.py) or the
# path of a .py file. Everything after JOB goes to the job untouched, e.g.
#
#   scripts/submit.sh --master 'local[2]' train --config conf/local.toml \
#       --train out/data/train --output out/run --set train.l2=1e-3
#   scripts/submit.sh --master spark://127.0.0.1:7077 pipeline --config conf/cluster.toml
#
# What it does:
# - Ships the package to executors: a zip of sparkmaxent/ in build/
#   (build/sparkmaxent.zip, rebuilt when a source file is newer) or, with
#   --py-files-mode wheel, a wheel built by pip (renamed *.zip: PySpark only
#   puts .zip/.egg/.jar files from --py-files on the executors' sys.path),
#   passed with --py-files.
# - Makes the driver and the executors run the same Python (DESIGN.md
#   section 6): $PYTHON, else $ROOT/.venv/bin/python, exported as
#   PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON and passed as spark.pyspark.python
#   and spark.pyspark.driver.python.
# - Keeps local runs on loopback: when the master is local[...] (the default,
#   local[*]) or spark://127.0.0.1:... / spark://localhost:..., it exports
#   SPARK_LOCAL_IP=127.0.0.1 (unless already set) and passes
#   spark.driver.host and spark.driver.bindAddress = 127.0.0.1 (unless given
#   with --conf). Other masters get neither: executors elsewhere must reach
#   the driver.
# - Quiets Spark's own INFO logging (spark.log.level=WARN unless given with
#   --conf); the jobs' progress lines are Python logging and stay visible.
# - Finds spark-submit in $SPARK_HOME/bin, else in the pyspark package
#   installed for $PYTHON.
#
# Environment: PYTHON (interpreter), SPARK_HOME, SPARK_LOCAL_IP, BUILD_DIR
# (default $ROOT/build). Exit code: spark-submit's (the job's), or 2 on a
# usage error.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS=(prepare train predict evaluate pipeline)

usage() {
  cat <<EOF
usage: scripts/submit.sh [--master URL] [--conf K=V]... [--py-files-mode zip|wheel] JOB [job args...]

Run a sparkmaxent job with spark-submit, shipping the sparkmaxent package to
the executors and running driver and executors on the same Python.

JOB:
  prepare | train | predict | evaluate | pipeline   jobs/JOB.py
  PATH.py                                           any other PySpark script
  Everything after JOB is passed to the job; see 'scripts/submit.sh JOB --help'.

options:
  --master URL          Spark master (default local[*]); e.g. local[2],
                        spark://127.0.0.1:7077
  --conf K=V            a Spark property, repeatable (passed to spark-submit)
  --py-files-mode MODE  zip (default): a zip of sparkmaxent/ in build/;
                        wheel: a wheel built with pip
  -h, --help            this help

environment:
  PYTHON      Python for driver and executors (default: $ROOT/.venv/bin/python)
  SPARK_HOME  Spark installation (default: the pyspark package of PYTHON)
  BUILD_DIR   where the package zip/wheel goes (default: $ROOT/build)

examples:
  scripts/submit.sh --master 'local[2]' pipeline --config conf/local.toml
  scripts/submit.sh --master spark://127.0.0.1:7077 train --train out/data/train \\
      --output out/run --set train.backend=spark
EOF
}

die() {  # die MESSAGE: print an error (and a pointer to --help), exit 2
  echo "submit.sh: error: $1" >&2
  echo "run 'scripts/submit.sh --help' for usage" >&2
  exit 2
}

master="local[*]"
mode="zip"
confs=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --master) [ $# -ge 2 ] || die "--master needs a URL"; master="$2"; shift 2 ;;
    --master=*) master="${1#--master=}"; shift ;;
    --conf) [ $# -ge 2 ] || die "--conf needs K=V"; confs+=("$2"); shift 2 ;;
    --conf=*) confs+=("${1#--conf=}"); shift ;;
    --py-files-mode) [ $# -ge 2 ] || die "--py-files-mode needs zip or wheel"; mode="$2"; shift 2 ;;
    --py-files-mode=*) mode="${1#--py-files-mode=}"; shift ;;
    --) shift; break ;;
    -*) die "unknown option '$1' (options go before JOB; job options after it)" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || die "expected a JOB (${JOBS[*]} or a .py file), got none"
job="$1"; shift
case "$mode" in zip|wheel) ;; *) die "expected --py-files-mode zip or wheel, got '$mode'" ;; esac
for kv in ${confs[@]+"${confs[@]}"}; do
  case "$kv" in ?*=*) ;; *) die "expected --conf KEY=VALUE, got '$kv'" ;; esac
done

# ---- the job script -------------------------------------------------------
script=""
for name in "${JOBS[@]}"; do
  if [ "$job" = "$name" ]; then
    script="$ROOT/jobs/$name.py"
    [ -f "$script" ] || die "job '$job' maps to $script, which does not exist"
  fi
done
if [ -z "$script" ]; then
  case "$job" in
    *.py) [ -f "$job" ] || die "job script '$job' does not exist"; script="$job" ;;
    *) die "unknown JOB '$job': expected one of ${JOBS[*]} or a path to a .py file" ;;
  esac
fi

# ---- Python and Spark -------------------------------------------------------
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || die "no Python at $PYTHON: create the venv (scripts/env.sh) or set PYTHON"
if [ -n "${SPARK_HOME:-}" ]; then
  spark_submit="$SPARK_HOME/bin/spark-submit"
else
  pyspark_dir="$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null)" \
    || die "pyspark is not installed for $PYTHON and SPARK_HOME is not set"
  spark_submit="$pyspark_dir/bin/spark-submit"
fi
[ -x "$spark_submit" ] || die "expected spark-submit at $spark_submit, not found or not executable"
export PYSPARK_PYTHON="$PYTHON" PYSPARK_DRIVER_PYTHON="$PYTHON"

# ---- the package for --py-files ---------------------------------------------
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
mkdir -p "$BUILD_DIR"

newer_sources() {  # newer_sources TARGET: any package source newer than TARGET?
  [ -n "$(find "$ROOT/sparkmaxent" -name __pycache__ -prune -o -type f -newer "$1" -print -quit)" ]
}

build_zip() {  # build_zip OUT: zip sparkmaxent/ (no caches) into OUT, atomically
  local out="$1" tmp
  tmp="$(mktemp "$BUILD_DIR/.sparkmaxent.zip.XXXXXX")"
  "$PYTHON" - "$ROOT" "$tmp" <<'PY'
import os, sys, zipfile
root, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for d, dirs, files in os.walk(os.path.join(root, "sparkmaxent")):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if not f.endswith((".pyc", ".pyo")):
                path = os.path.join(d, f)
                z.write(path, os.path.relpath(path, root))
PY
  chmod 644 "$tmp"
  mv -f "$tmp" "$out"
}

build_wheel() {  # build_wheel OUT: pip wheel of the project, copied to OUT
  local out="$1" dir whl
  dir="$(mktemp -d "$BUILD_DIR/.wheel.XXXXXX")"
  local isolation=()
  # without the 'wheel' package, old setuptools cannot build wheels in place
  "$PYTHON" -c 'import setuptools, wheel' 2>/dev/null && isolation=(--no-build-isolation)
  if ! "$PYTHON" -m pip wheel --quiet --disable-pip-version-check --no-deps \
       ${isolation[@]+"${isolation[@]}"} -w "$dir" "$ROOT" >&2; then
    rm -rf "$dir"; echo "submit.sh: error: building the wheel failed" >&2; exit 1
  fi
  whl="$(ls "$dir"/sparkmaxent-*.whl | head -n 1)"
  mv -f "$whl" "$out"; rm -rf "$dir"
  # setuptools builds in $ROOT/build/{lib,bdist.*}; a stale copy there of a
  # since-deleted module would go into the next wheel
  rm -rf "$ROOT/build/lib" "$ROOT"/build/bdist.*
}

if [ "$mode" = zip ]; then
  pyfile="$BUILD_DIR/sparkmaxent.zip"
  if [ ! -f "$pyfile" ] || newer_sources "$pyfile"; then build_zip "$pyfile"; fi
else
  pyfile="$BUILD_DIR/sparkmaxent-wheel.zip"
  if [ ! -f "$pyfile" ] || newer_sources "$pyfile" || [ "$ROOT/pyproject.toml" -nt "$pyfile" ]; then
    build_wheel "$pyfile"
  fi
fi

# ---- loopback for local runs --------------------------------------------------
has_conf() {  # has_conf KEY: was KEY given with --conf?
  local kv
  for kv in ${confs[@]+"${confs[@]}"}; do [ "${kv%%=*}" = "$1" ] && return 0; done
  return 1
}
case "$master" in
  local|local\[*|spark://127.0.0.1:*|spark://localhost:*) loopback=1 ;;
  *) loopback=0 ;;
esac
args=(--master "$master" --py-files "$pyfile")
if [ "$loopback" = 1 ]; then
  export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
  has_conf spark.driver.host || args+=(--conf spark.driver.host=127.0.0.1)
  has_conf spark.driver.bindAddress || args+=(--conf spark.driver.bindAddress=127.0.0.1)
fi
has_conf spark.log.level || args+=(--conf spark.log.level=WARN)
has_conf spark.pyspark.python || args+=(--conf "spark.pyspark.python=$PYTHON")
has_conf spark.pyspark.driver.python || args+=(--conf "spark.pyspark.driver.python=$PYTHON")
for kv in ${confs[@]+"${confs[@]}"}; do args+=(--conf "$kv"); done

exec "$spark_submit" "${args[@]}" "$script" "$@"
