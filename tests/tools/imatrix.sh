#!/usr/bin/env bash
# llama-imatrix from the command line: both output formats, the running PPL, --output-frequency
# and --save-frequency files, --in-file merging (with and without a model), and errors that name
# their cause. Usage: imatrix.sh <build>/bin <shared dir>
set -u

BIN="${1:?usage: imatrix.sh <build>/bin <shared dir>}"
SHARED="${2:?usage: imatrix.sh <build>/bin <shared dir>}"
I="$BIN/llama-imatrix"
G="$BIN/llama-gguf"
[ -x "$I" ] || { echo "FAIL: $I not built"; exit 1; }

NAME=imatrix
source "$(dirname "$0")/lib/check.sh"

M="$SHARED/models/synth-qwen3-f16.gguf"
TXT="$SHARED/text/wikitext-2-test-300k.txt"

expect_ok "$I" -m "$M" -f "$TXT" -c 64 --chunks 3 -o "$TMP/a.dat" -t 2 --output-frequency 1 --save-frequency 2
grep -q "\[3\]" "$TMP/out" || fail "no running PPL for chunk 3: $(head -c 200 "$TMP/out")"
grep -q "Final estimate: PPL = " "$TMP/out" || fail "no final PPL"
[ -s "$TMP/a.dat" ] || fail "no .dat output"
[ -s "$TMP/a.dat.at_2" ] || fail "--save-frequency 2 wrote no a.dat.at_2"
# legacy layout: i32 entry count first (14 weight matmuls in 2 layers)
n=$(od -An -t d4 -N 4 "$TMP/a.dat" | tr -d ' ')
[ "$n" = "14" ] || fail "a.dat has $n entries, expected 14"

expect_ok "$I" -m "$M" -f "$TXT" -c 64 --chunks 2 --chunk 3 -o "$TMP/b.gguf" -t 2 --no-ppl
grep -q "Final estimate" "$TMP/out" && fail "--no-ppl still printed a PPL"
if [ -x "$G" ]; then
    "$G" info "$TMP/b.gguf" >"$TMP/info" 2>&1 || fail "llama-gguf cannot read the GGUF imatrix"
    grep -q "blk.0.attn_q.weight.in_sum2" "$TMP/info" || fail "no <name>.in_sum2 tensors"
    grep -q "blk.0.attn_q.weight.counts" "$TMP/info" || fail "no <name>.counts tensors"
    grep -q "imatrix.chunk_count" "$TMP/info" || fail "no imatrix.chunk_count"
fi
expect_ok "$I" -m "$M" -f "$TXT" -c 64 --chunks 1 -o "$TMP/c.dat" --output-format gguf -t 2
[ "$(head -c 4 "$TMP/c.dat")" = "GGUF" ] || fail "--output-format gguf did not write GGUF"

# merging: files only, and files plus new text
expect_ok "$I" --in-file "$TMP/a.dat" --in-file "$TMP/b.gguf" -o "$TMP/ab.gguf" -c 64
grep -q "merged" "$TMP/err" || fail "no merge message"
expect_ok "$I" -m "$M" -f "$TXT" -c 64 --chunks 1 --in-file "$TMP/ab.gguf" -o "$TMP/abc.dat" -t 2

# errors
expect_err "no model given" "$I" -f "$TXT"
expect_err "no calibration text" "$I" -m "$M" -o "$TMP/x.dat"
expect_err "not enough for one chunk" "$I" -m "$M" -f "$TXT" -c 64 --chunk 100000 -o "$TMP/x.dat"
expect_err "expected dat or gguf" "$I" -m "$M" -f "$TXT" --output-format xml
expect_err "--output-frequency" "$I" -m "$M" -f "$TXT" --output-frequency many
printf 'garbage' >"$TMP/bad.dat"
expect_err "bad.dat" "$I" --in-file "$TMP/bad.dat" -o "$TMP/x.dat"
expect_err "frobnicate" "$I" -m "$M" -f "$TXT" --frobnicate
[ -f "$TMP/x.dat" ] && fail "a failed run left an output"

finish
