# Shared by the node test runners that start llama-server (sourced, not run): every server the
# tests start is listed in $PIDFILE (tests/server/lib.js appends to KILN_SERVER_PIDFILE), so none
# outlives the run. The tests stop them themselves; this catches a test runner that was killed.
PIDFILE=$(mktemp /tmp/kiln-server-pids-XXXXXX)
cleanup_servers() {
    while read -r pid; do
        [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    done < "$PIDFILE"
    rm -f "$PIDFILE"
}
trap cleanup_servers EXIT
