#!/usr/bin/env bash
# Creates (or reuses) .venv, then executes every notebook in order with papermill on the
# local default (no keys needed). Executed copies land in runs/notebooks/. Extra arguments go to
# every notebook, e.g. `-p max_steps 2`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
mkdir -p runs/notebooks
for nb in notebooks/[0-9][0-9]_*.ipynb; do
  echo "notebooks: executing $nb"
  .venv/bin/python -m helpers.local.notebook_runner "$nb" "runs/notebooks/$(basename "$nb")" "$@"
done
echo "notebooks: done; executed copies are in runs/notebooks/"
