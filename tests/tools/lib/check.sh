# Shared by the tool tests (sourced, not run): a scratch dir, pass/fail counting and the checks
# the scripts use. Set NAME before sourcing; call finish at the end.
TMP=$(mktemp -d "/tmp/kiln-${NAME:-tool}-sh-XXXXXX")
trap 'rm -rf "$TMP"' EXIT

fails=0
passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { passes=$((passes + 1)); }

# expect_ok CMD...: exit 0 (stdout in $TMP/out, stderr in $TMP/err)
expect_ok() {
    if "$@" >"$TMP/out" 2>"$TMP/err"; then pass; else fail "$* exited non-zero: $(tail -c 400 "$TMP/err")"; fi
}

# expect_err PATTERN CMD...: non-zero exit with PATTERN in stderr
expect_err() {
    local pattern="$1"; shift
    if "$@" >"$TMP/out" 2>"$TMP/err"; then
        fail "$* exited 0, expected an error"
    elif ! grep -q -- "$pattern" "$TMP/err"; then
        fail "$*: stderr lacks '$pattern': $(tail -c 400 "$TMP/err")"
    else
        pass
    fi
}

# the closing line CTest's log shows; the exit status says whether everything passed
finish() {
    echo "${NAME:-tool}.sh: $passes passed, $fails failed"
    [ "$fails" -eq 0 ]
}
