#!/usr/bin/env bash
# Checks a learner's machine for the course in under a minute: one table of check / ok / found / fix.
# Exit code 0 when every check passes. Needs the course's .venv (bash scripts/setup_env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  echo "preflight: there is no .venv here yet. Create it first: bash scripts/setup_env.sh" >&2
  exit 1
fi
exec .venv/bin/python scripts/preflight.py "$@"
