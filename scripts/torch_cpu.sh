# Sourced by scripts/setup_env.sh and scripts/download_wheels.sh (from the repository root): torch's
# CPU build as requirements.lock pins it (torch==<version>+cpu, with its hashes), and TORCH_INDEX_URL,
# the opt-in index to take it from (PyTorch's CPU index, below, where the default index is PyPI).
CPU_INDEX=https://download.pytorch.org/whl/cpu

# torch_entry <file>: writes requirements.lock's torch pin with its hashes into <file> (a pip -r file)
# and prints the pin.
torch_entry() {
  awk '/^torch==/ {on = 1} on && !/^ *#/ {print; if (!/\\$/) exit}' requirements.lock > "$1"
  head -n 1 "$1" | cut -d' ' -f1
}

# shown <url>: the URL as it may be printed, a user:password in it hidden (as pip does).
shown() { sed -E 's#://[^/@]*@#://****@#' <<< "$1"; }

# pip options that take torch from TORCH_INDEX_URL instead of the default index, and give up in about a
# minute where it cannot be reached (pip's defaults retry 5 times, each try waiting 15 s or longer).
torch_index_options=(--no-deps --require-hashes --retries 2 --timeout 30 --index-url "${TORCH_INDEX_URL:-}")
