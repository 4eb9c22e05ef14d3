#!/usr/bin/env bash
# Creates (or reuses) .venv, then executes every notebook in order with papermill on the
# local default (no keys needed), notebook 04 in its own .venv-v1. Executed copies land in runs/notebooks/, each also as a standalone
# HTML page (outputs, charts and tables included) to hand out when a learner's own run fails
# (INSTRUCTOR_GUIDE.md, "When a run fails"). Extra arguments go to every notebook, e.g. `-p max_steps 2`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
bash scripts/setup_v1_env.sh  # notebook 04 runs in its own environment (verifiers 0.4)
mkdir -p runs/notebooks
for nb in notebooks/[0-9][0-9]_*.ipynb; do
  echo "notebooks: executing $nb"
  out="runs/notebooks/$(basename "$nb")"
  .venv/bin/python -m helpers.notebook_runner "$nb" "$out" "$@"
  .venv/bin/jupyter nbconvert --to html --log-level WARN "$out"
done
echo "notebooks: done; executed copies (.ipynb and .html) are in runs/notebooks/"
