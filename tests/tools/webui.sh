#!/usr/bin/env bash
# The web UI in headless Chromium against llama-server on the demo model (tests/webui). Installs the
# test's npm dependency first if needed (tests/webui/setup.sh); Debian's chromium comes from
# scripts/setup.sh. Usage: webui.sh <build>/bin <shared dir>
set -u

BIN="$(cd "${1:?usage: webui.sh <build>/bin <shared dir>}" && pwd)"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TESTS="$HERE/webui"
CHROMIUM="${KILN_CHROMIUM:-/usr/bin/chromium}"

[ -x "$BIN/llama-server" ] || { echo "FAIL: $BIN/llama-server not built"; exit 1; }
command -v node >/dev/null || { echo "FAIL: node is missing (scripts/setup.sh installs it)"; exit 1; }
[ -x "$CHROMIUM" ] || { echo "FAIL: $CHROMIUM is missing (scripts/setup.sh installs Debian's chromium)"; exit 1; }

bash "$TESTS/setup.sh" || { echo "FAIL: npm ci in $TESTS failed"; exit 1; }

source "$(dirname "${BASH_SOURCE[0]}")/lib/server-pids.sh"   # $PIDFILE

cd "$TESTS" || exit 1
KILN_BIN="$BIN" KILN_CHROMIUM="$CHROMIUM" KILN_SERVER_PIDFILE="$PIDFILE" \
    timeout -k 10 300 node --test --test-concurrency=1 --test-timeout=120000 --test-reporter=spec webui.test.js
rc=$?
if [ $rc -eq 0 ]; then echo "PASS: web UI tests"; else echo "FAIL: web UI tests (exit $rc)"; fi
exit $rc
