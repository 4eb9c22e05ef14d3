#!/usr/bin/env bash
# Adds what a workshop hub needs to the course's .venv (after scripts/setup_env.sh): JupyterHub and its
# idle culler and authenticator (exact pins in workshop/requirements-hub.txt, installed with the
# course's own pins as constraints, so none of them moves), and JupyterHub's proxy from npm
# (workshop/proxy/package-lock.json) into .venv/hub-proxy. Safe to re-run: it does nothing when
# nothing changed. Learners' servers run from this .venv as their own Unix users, so the course folder
# and the Python the venv was made from must be readable by them: it checks that and stops if not. It never
# opens a folder for them (a chmod o+x of /root would let every learner into root's home): install the
# course where everyone may read it, e.g. /opt/course with PYTHON=/usr/bin/python3.11 (INSTRUCTOR_GUIDE.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh

root=$(pwd)
python_home=$(.venv/bin/python -c 'import sys; print(sys.base_prefix)')
closed=()
for dir in "$root" "$python_home"; do
  while [ "$dir" != / ]; do
    [ "$(( 0$(stat -c %a "$dir") & 1 ))" -eq 1 ] || closed+=("$dir")
    dir=$(dirname "$dir")
  done
done
if [ "${#closed[@]}" -gt 0 ]; then
  echo "setup_hub: learners' servers run as their own users and cannot reach the course ($root) or its" \
    "Python ($python_home): ${closed[*]} cannot be passed by others. Install both where every user may read" \
    "them, without opening anyone's home: e.g. \`git clone <the course> /opt/course\` and, there," \
    "\`PYTHON=/usr/bin/python3.11 bash scripts/setup_hub.sh\` (INSTRUCTOR_GUIDE.md: the room)." >&2
  exit 1
fi

command -v npm >/dev/null || {
  echo "setup_hub: npm is missing (JupyterHub's proxy is a Node.js program): install Node.js 20 or newer," \
    "e.g. \`apt-get install nodejs npm\`." >&2
  exit 1
}
stamp=".venv/.hub-installed-$(cat workshop/requirements-hub.txt workshop/proxy/package-lock.json | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ -x .venv/hub-proxy/node_modules/.bin/configurable-http-proxy ]; then
  echo "setup_hub: the hub is up to date"
else
  start=$(date +%s)
  echo "setup_hub: installing JupyterHub into .venv (workshop/requirements-hub.txt; the course's pins stay)"
  .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off -q \
    -r workshop/requirements-hub.txt -c requirements.txt
  echo "setup_hub: installing JupyterHub's proxy (npm: configurable-http-proxy) into .venv/hub-proxy"
  rm -rf .venv/hub-proxy
  mkdir -p .venv/hub-proxy
  cp workshop/proxy/package.json workshop/proxy/package-lock.json .venv/hub-proxy/
  npm ci --prefix .venv/hub-proxy --omit=dev --no-audit --no-fund --loglevel=error
  rm -f .venv/.hub-installed-*
  touch "$stamp"
  echo "setup_hub: installed in $(( $(date +%s) - start )) s"
fi
# The instructor's account gets its password now (COURSE_HUB_ADMIN_PASSWORD, or typed at a terminal), never
# at a first login, where whoever came first would become the room's admin.
.venv/bin/python workshop/admin_password.py
echo "setup_hub: start the hub with \`.venv/bin/jupyterhub -f workshop/jupyterhub_config.py\` (INSTRUCTOR_GUIDE.md: the room)"
