#!/usr/bin/env bash
# The GPU check of the real widths (see bench/gpu_check.py): one JSON in runs/gpu_check.json.
# On a GPU machine: bench/gpu_check.sh ; anywhere: bench/gpu_check.sh --dry-run
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
exec "$PY" bench/gpu_check.py "$@"
