#!/usr/bin/env bash
# llama-server end to end: the node tests in tests/server/ (official openai and anthropic clients, plain
# HTTP) against servers on stories260K and the synthetic Qwen3 model. Installs the tests' npm
# dependencies first if needed (tests/server/setup.sh). Usage: server.sh <build>/bin <shared dir>
set -u

BIN="$(cd "${1:?usage: server.sh <build>/bin <shared dir>}" && pwd)"
SHARED="$(cd "${2:?usage: server.sh <build>/bin <shared dir>}" && pwd)"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TESTS="$HERE/server"

[ -x "$BIN/llama-server" ] || { echo "FAIL: $BIN/llama-server not built"; exit 1; }
command -v node >/dev/null || { echo "FAIL: node is missing (scripts/setup.sh installs it)"; exit 1; }
for m in stories260K.gguf synth-qwen3-f16.gguf; do
    [ -f "$SHARED/models/$m" ] || { echo "FAIL: $SHARED/models/$m is missing"; exit 1; }
done

bash "$TESTS/setup.sh" || { echo "FAIL: npm ci in $TESTS failed"; exit 1; }

source "$(dirname "${BASH_SOURCE[0]}")/lib/server-pids.sh"   # $PIDFILE

cd "$TESTS" || exit 1
KILN_BIN="$BIN" KILN_SHARED="$SHARED" KILN_SERVER_PIDFILE="$PIDFILE" \
    timeout -k 10 540 node --test --test-concurrency=1 --test-timeout=240000 --test-reporter=spec \
    openai.test.js http.test.js embeddings.test.js anthropic.test.js responses.test.js env.test.js constrained.test.js tools.test.js samplers.test.js reasoning.test.js tool-families.test.js failures.test.js \
    context-shift.test.js slots.test.js speculative.test.js tls.test.js stream-extras.test.js
rc=$?
if [ $rc -eq 0 ]; then echo "PASS: llama-server tests"; else echo "FAIL: llama-server tests (exit $rc)"; fi
exit $rc
