#!/usr/bin/env bash
# scripts/submit.sh: run a sparkmaxent job with spark-submit.
#
#   scripts/submit.sh [--master URL] [--conf K=V]... [--py-files-mode zip|wheel] \
#                     [--python-env local|archive] [--env-archive PATH] \
#                     [any other spark-submit option]... JOB [job args...]
#
# JOB is prepare | train | predict | evaluate | pipeline (jobs/JOB.py) or the
# path of a .py file. Everything after JOB goes to the job untouched, e.g.
#
#   scripts/submit.sh --master 'local[2]' train --config conf/local.toml \
#       --train out/data/train --output out/run --set train.l2=1e-3
#   scripts/submit.sh --master spark://127.0.0.1:7077 pipeline --config conf/cluster.toml
#   scripts/submit.sh --master yarn --deploy-mode client --num-executors 8 \
#       --executor-memory 6g --python-env archive pipeline --config conf/cluster.toml
#
# What it does:
# - Passes every other spark-submit option through (--deploy-mode, --name,
#   --packages, --jars, --files, --executor-memory, --num-executors,
#   --properties-file, --verbose, ...): the settings given to spark-submit
#   win over the job's TOML [spark] conf and the project's defaults
#   (sparkmaxent/backends/session.py). Its own --py-files and --archives are
#   added to the user's.
# - Ships the package to executors: a zip of sparkmaxent/ in build/
#   (build/sparkmaxent.zip, rebuilt when a source file is newer) or, with
#   --py-files-mode wheel, a wheel built by pip (renamed *.zip: PySpark only
#   puts .zip/.egg/.jar files from --py-files on the executors' sys.path),
#   passed with --py-files.
# - Makes the driver and the executors run the same Python (DESIGN.md
#   section 6): $PYTHON, else $ROOT/.venv/bin/python, exported as
#   PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON and passed as spark.pyspark.python
#   and spark.pyspark.driver.python. That needs the same environment at the
#   same path on every node (--python-env local, the default). With
#   --python-env archive it instead packs $PYTHON's virtualenv with venv-pack
#   (pip install 'sparkmaxent[cluster]') into $BUILD_DIR/env.tar.gz (rebuilt
#   when the venv changed), without pyspark and py4j, which the cluster's
#   Spark gives every Python worker (scripts/pack_env.py), and passes
#   --archives env.tar.gz#env and
#   spark.pyspark.python=./env/bin/python: the executors unpack it and run
#   it (the driver too with --deploy-mode cluster). --env-archive PATH ships
#   an archive built beforehand instead. venv-pack does not pack the base
#   interpreter the venv links to: the nodes need that Python at the same
#   path.
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
usage: scripts/submit.sh [--master URL] [--conf K=V]... [--py-files-mode zip|wheel]
                         [--python-env local|archive] [--env-archive PATH]
                         [spark-submit options]... JOB [job args...]

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
  --python-env MODE     local (default): every node has PYTHON at the same
                        path; archive: ship PYTHON's virtualenv without
                        pyspark and py4j (the cluster's Spark provides them),
                        packed with venv-pack into BUILD_DIR/env.tar.gz, as
                        --archives env.tar.gz#env (executors run ./env/bin/python)
  --env-archive PATH    ship this venv-pack archive (implies --python-env archive)
  -h, --help            this help

Any other spark-submit option goes to spark-submit as given: --deploy-mode,
--name, --packages, --exclude-packages, --repositories, --jars, --files,
--archives, --py-files (added to the package), --properties-file,
--driver-memory, --driver-cores, --driver-java-options, --driver-class-path,
--driver-library-path, --executor-memory, --executor-cores,
--total-executor-cores, --num-executors, --queue, --principal, --keytab,
--proxy-user, --supervise, --verbose. What they set wins over the job's
config ([spark] conf) and the project's defaults.

environment:
  PYTHON      Python for driver and executors (default: $ROOT/.venv/bin/python)
  SPARK_HOME  Spark installation (default: the pyspark package of PYTHON)
  BUILD_DIR   where the package zip/wheel goes (default: $ROOT/build)

examples:
  scripts/submit.sh --master 'local[2]' pipeline --config conf/local.toml
  scripts/submit.sh --master spark://127.0.0.1:7077 train --train out/data/train \\
      --output out/run --set train.backend=spark
  scripts/submit.sh --master yarn --num-executors 8 --executor-memory 6g \\
      --python-env archive pipeline --config conf/cluster.toml
EOF
}

die() {  # die MESSAGE: print an error (and a pointer to --help), exit 2
  echo "submit.sh: error: $1" >&2
  echo "run 'scripts/submit.sh --help' for usage" >&2
  exit 2
}

master="local[*]"
mode="zip"
pyenv="local"
env_archive=""
deploy_mode="client"
confs=()
passthrough=()   # spark-submit options given by the user, in order
user_py_files=""
user_archives=""
# spark-submit's options that take a value, and its switches (Spark 4's
# SparkSubmitOptionParser, less --master/--conf/--py-files/--archives, which
# are handled here, and --class/--kill/--status, which make no sense here)
VALUE_OPTS=" --deploy-mode --name --packages --exclude-packages --repositories --jars --files
  --properties-file --driver-memory --driver-cores --driver-java-options --driver-class-path
  --driver-library-path --executor-memory --executor-cores --total-executor-cores
  --num-executors --queue --principal --keytab --proxy-user "
SWITCHES=" --supervise --verbose -v "
append_list() {  # append_list LIST ITEM: comma-join
  if [ -n "$1" ]; then printf '%s,%s' "$1" "$2"; else printf '%s' "$2"; fi
}
while [ $# -gt 0 ]; do
  opt="${1%%=*}"
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --master) [ $# -ge 2 ] || die "--master needs a URL"; master="$2"; shift 2 ;;
    --master=*) master="${1#--master=}"; shift ;;
    --conf|-c) [ $# -ge 2 ] || die "--conf needs K=V"; confs+=("$2"); shift 2 ;;
    --conf=*) confs+=("${1#--conf=}"); shift ;;
    --py-files-mode) [ $# -ge 2 ] || die "--py-files-mode needs zip or wheel"; mode="$2"; shift 2 ;;
    --py-files-mode=*) mode="${1#--py-files-mode=}"; shift ;;
    --python-env) [ $# -ge 2 ] || die "--python-env needs local or archive"; pyenv="$2"; shift 2 ;;
    --python-env=*) pyenv="${1#--python-env=}"; shift ;;
    --env-archive) [ $# -ge 2 ] || die "--env-archive needs a path"; env_archive="$2"; shift 2 ;;
    --env-archive=*) env_archive="${1#--env-archive=}"; shift ;;
    --py-files) [ $# -ge 2 ] || die "--py-files needs a value"
      user_py_files="$(append_list "$user_py_files" "$2")"; shift 2 ;;
    --py-files=*) user_py_files="$(append_list "$user_py_files" "${1#--py-files=}")"; shift ;;
    --archives) [ $# -ge 2 ] || die "--archives needs a value"
      user_archives="$(append_list "$user_archives" "$2")"; shift 2 ;;
    --archives=*) user_archives="$(append_list "$user_archives" "${1#--archives=}")"; shift ;;
    --) shift; break ;;
    -*)
      if [[ "$VALUE_OPTS" == *" $opt "* ]]; then
        if [ "$opt" = "$1" ]; then
          [ $# -ge 2 ] || die "$1 needs a value"
          value="$2"; shift 2
        else
          value="${1#*=}"; shift
        fi
        [ "$opt" = --deploy-mode ] && deploy_mode="$value"
        passthrough+=("$opt" "$value")
      elif [[ "$SWITCHES" == *" $1 "* ]]; then
        passthrough+=("$1"); shift
      else
        die "unknown option '$1' (options go before JOB; job options after it)"
      fi
      ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || die "expected a JOB (${JOBS[*]} or a .py file), got none"
job="$1"; shift
case "$mode" in zip|wheel) ;; *) die "expected --py-files-mode zip or wheel, got '$mode'" ;; esac
case "$pyenv" in local|archive) ;; *) die "expected --python-env local or archive, got '$pyenv'" ;; esac
case "$deploy_mode" in client|cluster) ;; *) die "expected --deploy-mode client or cluster, got '$deploy_mode'" ;; esac
if [ -n "$env_archive" ]; then
  pyenv="archive"
  [ -f "$env_archive" ] || die "env archive '$env_archive' does not exist"
fi
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
  # in place only with what pyproject.toml's build-system asks (the 'wheel'
  # package; setuptools >= 77, which reads its SPDX license string)
  "$PYTHON" -c 'import sys, setuptools, wheel
sys.exit(int(setuptools.__version__.split(".")[0]) < 77)' 2>/dev/null && isolation=(--no-build-isolation)
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

# ---- the Python environment as an archive (--python-env archive) ---------------
build_env_archive() {  # build_env_archive OUT: venv-pack PYTHON's venv (no Spark) into OUT, atomically
  local out="$1" prefix tmp
  prefix="$("$PYTHON" -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")')"
  [ -n "$prefix" ] || die "--python-env archive packs a virtualenv, and $PYTHON is not in one"
  "$PYTHON" -c 'import venv_pack' 2>/dev/null \
    || die "venv-pack is not installed for $PYTHON: pip install 'sparkmaxent[cluster]' (or venv-pack)"
  tmp="$(mktemp "$BUILD_DIR/.env.XXXXXX.tar.gz")"
  echo "submit.sh: packing $prefix into $out (venv-pack, without pyspark and py4j)" >&2
  # the driver runs from the archive in cluster mode: pyspark's mapInArrow needs pandas there
  local keep=()
  [ "$deploy_mode" = cluster ] && keep=(--keep pandas)
  if ! "$PYTHON" "$ROOT/scripts/pack_env.py" --prefix "$prefix" --output "$tmp" ${keep[@]+"${keep[@]}"}; then
    rm -f "$tmp"; echo "submit.sh: error: venv-pack failed" >&2; exit 1
  fi
  chmod 644 "$tmp"
  mv -f "$tmp" "$out"
}

if [ "$pyenv" = archive ] && [ -z "$env_archive" ]; then
  env_archive="$BUILD_DIR/env.tar.gz"
  [ "$deploy_mode" = cluster ] && env_archive="$BUILD_DIR/env-cluster.tar.gz"  # with pandas
  # rebuilt when a package was installed or removed since (pip adds or
  # removes entries of site-packages, which changes its time)
  site="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  if [ ! -f "$env_archive" ] || [ "$site" -nt "$env_archive" ]; then
    build_env_archive "$env_archive"
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
args=(--master "$master" --py-files "$(append_list "$pyfile" "$user_py_files")")
if [ "$pyenv" = archive ]; then
  args+=(--archives "$(append_list "$env_archive#env" "$user_archives")")
  env_python="./env/bin/python"
  driver_python="$PYTHON"
  [ "$deploy_mode" = cluster ] && driver_python="$env_python"
else
  [ -n "$user_archives" ] && args+=(--archives "$user_archives")
  env_python="$PYTHON"
  driver_python="$PYTHON"
fi
if [ "$loopback" = 1 ]; then
  export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
  has_conf spark.driver.host || args+=(--conf spark.driver.host=127.0.0.1)
  has_conf spark.driver.bindAddress || args+=(--conf spark.driver.bindAddress=127.0.0.1)
fi
has_conf spark.log.level || args+=(--conf spark.log.level=WARN)
has_conf spark.pyspark.python || args+=(--conf "spark.pyspark.python=$env_python")
has_conf spark.pyspark.driver.python || args+=(--conf "spark.pyspark.driver.python=$driver_python")
for kv in ${confs[@]+"${confs[@]}"}; do args+=(--conf "$kv"); done
args+=(${passthrough[@]+"${passthrough[@]}"})

exec "$spark_submit" "${args[@]}" "$script" "$@"
