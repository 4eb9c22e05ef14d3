#!/usr/bin/env bash
# Regenerates the locks from the top-level pins, with uv's `uv pip compile --generate-hashes` (uv is only
# needed here, never to install: scripts/setup_env.sh installs the locks with pip --require-hashes):
#   requirements.lock       every package of the CPU stack (requirements.txt with torch's CPU build)
#   requirements-cuda.lock  the same with PyPI's torch, the CUDA build, and its nvidia-*/cuda-* wheels
#                           (setup_env.sh takes it where the package index has no CPU build of torch)
#   requirements-nodeps.txt the hashes of its --no-deps pin
# For Linux x86-64 and any Python 3.11.x. Run it after changing requirements.txt or requirements-nodeps.txt:
#   bash scripts/lock.sh
# torch's CPU build is looked for in TORCH_FIND_LINKS (default: PyTorch's CPU index page for torch). This
# project's machines cannot reach that page and keep the wheel on disk instead:
#   TORCH_FIND_LINKS=/opt/wheels bash scripts/lock.sh
# A lock made from /opt/wheels lists only that one CPU wheel's hash (x86-64, CPython 3.11); made from
# PyTorch's page it lists every torch-<version>+cpu file there, as it does for every other package.
set -euo pipefail
cd "$(dirname "$0")/.."
UV=uv==0.13.8
links=${TORCH_FIND_LINKS:-https://download.pytorch.org/whl/cpu/torch/}
command_line="bash scripts/lock.sh"
if [ -n "${TORCH_FIND_LINKS:-}" ]; then command_line="TORCH_FIND_LINKS=$TORCH_FIND_LINKS $command_line"; fi
torch=$(sed -n 's/^torch==//p' requirements.txt)

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "lock: installing $UV into a throwaway venv"
"$PY" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$UV"
compile=("$tmp/venv/bin/uv" pip compile --quiet --no-config --generate-hashes --no-header
         --python-version 3.11 --python-platform x86_64-manylinux_2_28)

# header <line>...: the comment block at the top of a lock: what it is, and the command that made it
header() {
  printf '# %s\n' "$@" \
    "Made from requirements.txt by \`uv pip compile --generate-hashes\` (uv ${UV#uv==}) for Linux x86-64" \
    "and Python 3.11. Do not edit: change requirements.txt, then regenerate it with" \
    "  $command_line" \
    "scripts/setup_env.sh installs it with pip in hash-checking mode (a hash for each published file)."
}

echo "lock: requirements.lock (torch $torch's CPU build from $links)"
"${compile[@]}" requirements.txt --find-links "$links" -o "$tmp/cpu.lock"
if ! grep -q "^torch==$torch+cpu " "$tmp/cpu.lock"; then
  echo "lock: $links has no torch-$torch+cpu wheel for Linux x86-64 and Python 3.11, so the lock would hold" \
    "torch's CUDA build. Point TORCH_FIND_LINKS at a folder or page that has it." >&2
  exit 1
fi
{ header "The CPU stack: every package the course installs into .venv, pinned, with its hashes."
  cat "$tmp/cpu.lock"; } > requirements.lock

echo "lock: requirements-cuda.lock (PyPI's torch $torch: the CUDA build)"
"${compile[@]}" requirements.txt -o "$tmp/cuda.lock"
{ header "The same stack with PyPI's torch, the CUDA build, and its nvidia-* and cuda-* wheels. setup_env.sh" \
    "installs it instead of requirements.lock only where the package index has no CPU build of torch."
  cat "$tmp/cuda.lock"; } > requirements-cuda.lock

echo "lock: the hashes of requirements-nodeps.txt"
"${compile[@]}" requirements-nodeps.txt --no-deps --no-annotate -o "$tmp/nodeps.lock"
{ sed -n '/^#/!q;p' requirements-nodeps.txt; cat "$tmp/nodeps.lock"; } > "$tmp/nodeps.txt"
mv "$tmp/nodeps.txt" requirements-nodeps.txt
echo "lock: done: requirements.lock ($(grep -c '^[A-Za-z0-9]' requirements.lock) packages)," \
  "requirements-cuda.lock ($(grep -c '^[A-Za-z0-9]' requirements-cuda.lock)), requirements-nodeps.txt"
