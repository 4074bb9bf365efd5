#!/usr/bin/env bash
# llama-gguf info / check on every shared GGUF file (exit 0), and on bad inputs (non-zero exit
# and a message naming the problem). Usage: gguf.sh <build>/bin <shared dir>
set -u

BIN="${1:?usage: gguf.sh <build>/bin <shared dir>}"
SHARED="${2:?usage: gguf.sh <build>/bin <shared dir>}"
TOOL="$BIN/llama-gguf"
[ -x "$TOOL" ] || { echo "FAIL: $TOOL not built"; exit 1; }

TMP=$(mktemp -d /tmp/kiln-gguf-sh-XXXXXX)
trap 'rm -rf "$TMP"' EXIT

fails=0
passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { passes=$((passes + 1)); }

# expect_ok CMD...: exit 0
expect_ok() {
    if "$@" >"$TMP/out" 2>"$TMP/err"; then pass; else fail "$* exited non-zero: $(head -c 300 "$TMP/err")"; fi
}

# expect_err PATTERN CMD...: non-zero exit, PATTERN in stderr
expect_err() {
    local pattern="$1"; shift
    if "$@" >"$TMP/out" 2>"$TMP/err"; then
        fail "$* exited 0, expected an error"
    elif ! grep -q -- "$pattern" "$TMP/err"; then
        fail "$*: stderr lacks '$pattern': $(head -c 300 "$TMP/err")"
    else
        pass
    fi
}

files=()
for f in "$SHARED"/models/*.gguf "$SHARED"/vocab/*.gguf "$SHARED"/golden/quants.gguf; do
    [ -f "$f" ] && files+=("$f")
done
[ "${#files[@]}" -ge 10 ] || fail "expected shared GGUF files under $SHARED, found ${#files[@]}"

for f in "${files[@]}"; do
    expect_ok "$TOOL" check "$f"
    grep -q ": OK (GGUF v3" "$TMP/out" || fail "check $f: no OK line"
    expect_ok "$TOOL" info "$f"
    grep -q "^version: *3" "$TMP/out" || fail "info $f: no version line"
    grep -q "^kv count:" "$TMP/out" || fail "info $f: no kv count"
    grep -q "^total:" "$TMP/out" || fail "info $f: no totals"
done

# info shows keys with types, abbreviated arrays and the tensor table
stories="$SHARED/models/stories260K.gguf"
if [ -f "$stories" ]; then
    "$TOOL" info "$stories" >"$TMP/info" 2>&1
    grep -q 'general.architecture .*str = "llama"' "$TMP/info" || fail "info: architecture line"
    grep -q 'tokenizer.ggml.tokens .*arr\[str,512\] = \[.*\.\.\.\]' "$TMP/info" || fail "info: abbreviated token array"
    grep -q 'token_embd.weight .* f32 .*\[64, 512\] .* 131072 ' "$TMP/info" || fail "info: token_embd row"
    grep -q '^tensors: *48$' "$TMP/info" || fail "info: tensor count"

    # a truncated copy: rejected by check and info, naming the problem
    head -c 100000 "$stories" >"$TMP/trunc.gguf"
    expect_err "runs past the end of the file" "$TOOL" check "$TMP/trunc.gguf"
    expect_err "trunc.gguf" "$TOOL" info "$TMP/trunc.gguf"
    head -c 200 "$stories" >"$TMP/short.gguf"
    expect_err "truncated or corrupt file" "$TOOL" check "$TMP/short.gguf"
    # a corrupted version field
    cp "$stories" "$TMP/v1.gguf"
    printf '\x01\x00\x00\x00' | dd of="$TMP/v1.gguf" bs=1 seek=4 conv=notrunc status=none
    expect_err "version 1 is not supported" "$TOOL" check "$TMP/v1.gguf"
    # check fails if any of several files is bad
    expect_err "INVALID" "$TOOL" check "$stories" "$TMP/v1.gguf"
fi

printf 'not a gguf file at all' >"$TMP/text.gguf"
expect_err "bad magic" "$TOOL" check "$TMP/text.gguf"
expect_err "cannot open" "$TOOL" check "$TMP/does-not-exist.gguf"
expect_err "cannot open" "$TOOL" info "$TMP/does-not-exist.gguf"
expect_err "unknown command 'frobnicate'" "$TOOL" frobnicate
expect_err "unknown option '--bogus'" "$TOOL" check --bogus "${files[0]}"
expect_err "unknown option '--verbose'" "$TOOL" --verbose
expect_err "no file given" "$TOOL" check
expect_err "usage" "$TOOL"
expect_ok "$TOOL" --help
grep -q "check" "$TMP/out" || fail "--help does not list check"
expect_ok "$TOOL" info --help

echo "gguf.sh: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
