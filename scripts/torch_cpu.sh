# Sourced by scripts/setup_env.sh and scripts/download_wheels.sh (from the repository root): torch's
# CPU build as requirements.lock pins it (torch==<version>+cpu, with its hashes), which build the package
# index offers, and TORCH_INDEX_URL, the opt-in index to take it from (PyTorch's CPU index, below, where
# the default index is PyPI).
CPU_INDEX=https://download.pytorch.org/whl/cpu

# torch_entry <file>: writes requirements.lock's torch pin with its hashes into <file> (a pip -r file)
# and prints the pin.
torch_entry() {
  awk '/^torch==/ {on = 1} on && !/^ *#/ {print; if (!/\\$/) exit}' requirements.lock > "$1"
  head -n 1 "$1" | cut -d' ' -f1
}

# shown <url>: the URL as it may be printed, a user:password (up to the last '@', as pip reads it) and
# query values hidden: scripts/url_shown.py is the one place that hides them.
shown() { "${PY:-python3}" scripts/url_shown.py "$1"; }
# hiding <command...>: runs it with its output (stderr joined to stdout) passed through the same hiding:
# pip prints the index's query string (a token) in its retry warnings. Its status is the command's.
hiding() {
  "$@" 2>&1 | "${PY:-python3}" scripts/url_shown.py --filter
  return "${PIPESTATUS[0]}"
}

# pip options that take torch from TORCH_INDEX_URL instead of the default index, and give up in under
# 2 minutes where it never answers (3 tries of 30 s; pip's defaults: 6 tries of 15 s, here 180 s).
torch_index_options=(--no-deps --require-hashes --retries 2 --timeout 30 --index-url "${TORCH_INDEX_URL:-}")

# torch_pip_takes <python> <version>: which torch==<version> pip would install with its configuration:
# <version>+cpu (the CPU build, as on this project's machines or with PyTorch's CPU index as an extra
# index) or <version> (PyPI's: the CUDA build on Linux). Where pip cannot tell (no network, no torch on
# the index), its own message is shown and the status is not 0: a failed look-up never picks a build.
torch_pip_takes() {
  local report
  report=$("$1" -m pip --disable-pip-version-check install --dry-run --quiet --no-deps --ignore-installed \
    --report - "torch==$2") || return 1
  "$1" -c 'import json, sys; print(json.load(sys.stdin)["install"][0]["metadata"]["version"])' <<< "$report"
}
