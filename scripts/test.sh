#!/usr/bin/env bash
# Creates (or reuses) .venv, then runs the whole test suite: unit tests, static notebook
# checks, and every notebook under papermill with its small CI parameters.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
echo "test: running pytest (notebook tests execute the real local stack; allow ~20 minutes on 2 cores)"
exec .venv/bin/python -m pytest "$@"
