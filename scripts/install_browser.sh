#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for tests/test_browser.py (Playwright's own
# browser download does not work offline, so the test drives /usr/bin/chromium instead).
# Safe to re-run: it does nothing when Chromium is already there. Needs root and apt.
set -euo pipefail
cd "$(dirname "$0")/.."

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}  # overridable for the tests
# Debian's wrapper script prints "[: ...: unexpected operator" from its /dev/shm size check on some
# machines; it does not matter for --version (or for the tests), so only the version is shown.
chromium_version() { "$CHROMIUM" --version 2>/dev/null || echo 'version unknown'; }
if [ -x "$CHROMIUM" ]; then
  echo "install_browser: $CHROMIUM is already installed ($(chromium_version))"
  exit 0
fi

fail() {
  echo "install_browser: ERROR: $*" >&2
  echo "install_browser: tests/test_browser.py will be skipped without $CHROMIUM." >&2
  exit 1
}

command -v apt-get >/dev/null || fail "apt-get not found; install Chromium at $CHROMIUM by hand"
[ "$(id -u)" = 0 ] || fail "must run as root to apt-get install chromium (try: sudo bash $0)"

start=$(date +%s)
mkdir -p runs/logs
log=runs/logs/install_browser.log  # apt's own output: hundreds of lines, shown only on failure
echo "install_browser: $CHROMIUM is missing; installing Debian's chromium with apt-get (log: $log)"
apt_failed() { tail -n 20 "$log" >&2; fail "$1 failed (the last lines of $log are above)"; }
apt-get update >"$log" 2>&1 || apt_failed "apt-get update"
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >>"$log" 2>&1 \
  || apt_failed "apt-get install chromium"
[ -x "$CHROMIUM" ] || fail "chromium was installed but $CHROMIUM does not exist"
echo "install_browser: installed $(chromium_version) in $(( $(date +%s) - start )) s"
