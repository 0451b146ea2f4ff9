#!/usr/bin/env bash
# Install, then run the main job: prepare + train + evaluate on the built-in
# synthetic data in Spark local mode. Extra arguments go to jobs/pipeline.py.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
exec "$VENV/bin/python" jobs/pipeline.py --config conf/local.toml "$@"
