#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for tests/test_browser.py (Playwright's own
# browser download does not work offline, so the test drives /usr/bin/chromium instead).
# Safe to re-run: it does nothing when Chromium is already there. Needs root and apt.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
if [ -x "$CHROMIUM" ]; then
  echo "install_browser: $CHROMIUM is already installed ($("$CHROMIUM" --version 2>/dev/null || echo 'version unknown'))"
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
echo "install_browser: $CHROMIUM is missing; running apt-get update"
apt-get update || fail "apt-get update failed"
echo "install_browser: running apt-get install -y --no-install-recommends chromium"
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium \
  || fail "apt-get install chromium failed"
[ -x "$CHROMIUM" ] || fail "chromium was installed but $CHROMIUM does not exist"
echo "install_browser: installed $("$CHROMIUM" --version) in $(( $(date +%s) - start )) s"
