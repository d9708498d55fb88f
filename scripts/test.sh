#!/usr/bin/env bash
# Installs everything the suite needs (venv, the project with its dev extra, Debian's Chromium) and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[dev]'

# Debian's Chromium for the page's tests, Debian's OpenSSH server for the execution-environment tests.
MISSING=()
[ -x /usr/bin/chromium ] || MISSING+=(chromium)
[ -x /usr/sbin/sshd ] || MISSING+=(openssh-server)
if [ "${#MISSING[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${MISSING[@]}" >/dev/null
fi

# Static checks first (quick; any finding fails the run): lint and formatting, types, the import contracts,
# and the page's lint and unit tests (node is on the machine; ESLint comes from the npm registry, pinned by
# the lockfile).
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache
if ! command -v node >/dev/null; then
  echo "node is needed for the page's lint and tests" >&2
  exit 1
fi
npm ci --no-audit --no-fund --loglevel=error
npx --no-install eslint static/js static/sw.js tests/js eslint.config.js
node --test tests/js/

SEED=../shared/seed/test_manual_compress_recovery.py
TARGETS=(tests)
[ -f "$SEED" ] && TARGETS+=("$SEED")

# The test support is a plugin of this repository, not of the installed package: load it by name so
# the seed (outside tests/, hence outside tests/conftest.py) gets its fixtures and isolation too.
# Two workers (the machines have two cores; much of a test is waiting on a server, a browser or a deadline),
# each taking whole files so a module's server is started once.
exec .venv/bin/python -m pytest -q -n 2 --dist loadfile -p talaria_testing.plugin "${TARGETS[@]}" "$@"
