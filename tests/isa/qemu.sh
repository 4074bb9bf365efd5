#!/usr/bin/env bash
# Runs the Release binaries on an emulated CPU that lacks the newer instruction sets, so code from
# the wrong ISA fails here even on an AVX512 machine:
#  - Haswell: AVX2/FMA/F16C/BMI2 but no AVX512 (the AVX2 kernels run);
#  - qemu64:  baseline x86-64 (only the scalar path runs).
# Checked: the start-up of every test binary (--gtest_list_tests) and tool (--help), which runs
# every static initializer; then a short decode, whose numbers must equal the native run capped to
# the same level (KILN_CPU_ISA) and, for the f32 model, the reference's golden first chunk.
# (QEMU does not emulate AVX512 and does not work with the sanitizer's shadow memory: Release only.)
# Usage: qemu.sh <build>/bin <shared dir> <Haswell|qemu64>
set -u
BIN="${1:?usage: qemu.sh <build>/bin <shared dir> <cpu>}"
SHARED="${2:?usage: qemu.sh <build>/bin <shared dir> <cpu>}"
CPU="${3:?usage: qemu.sh <build>/bin <shared dir> <cpu>}"
NAME="isa-qemu-$CPU"
source "$(dirname "$0")/../tools/lib/check.sh"

case "$CPU" in
    Haswell) level=avx2;   flags="AVX2 = 1 | AVX512 = 0" ;;
    qemu64)  level=scalar; flags="AVX2 = 0 | AVX512 = 0" ;;
    *) echo "FAIL: unknown CPU model $CPU"; exit 1 ;;
esac
# scripts/setup.sh installs qemu-user: its absence is a broken setup, not a reason to skip
QEMU=$(command -v qemu-x86_64) || { echo "FAIL: qemu-x86_64 not found (scripts/setup.sh installs qemu-user)"; exit 1; }
emu() { "$QEMU" -cpu "$CPU" "$@"; }

# ---- start-up of every binary
n=0
for exe in "$BIN"/test-* "$BIN"/llama-* "$BIN"/kiln-*; do
    [ -x "$exe" ] || continue
    n=$((n + 1))
    name=$(basename "$exe")
    case "$name" in
        test-*) args=(--gtest_list_tests) ;;
        *)      args=(--help) ;;
    esac
    if emu "$exe" "${args[@]}" >"$TMP/out" 2>"$TMP/err"; then
        pass
    else
        rc=$?
        fail "$name ${args[*]} on $CPU exited $rc: $(grep -v 'TCG doesn.t support' "$TMP/err" | tail -c 300)"
    fi
done
[ "$n" -ge 10 ] && pass || fail "only $n binaries found in $BIN"

# ---- a short decode: emulated == native at the same cap; f32 model == golden first chunk
TEXT="$SHARED/text/wikitext-2-test-300k.txt"
running() { grep -o '^\[1\][0-9.]*' "$1" | head -1 | cut -d']' -f2; }
decode() {   # model ctx -> prints nothing; leaves $TMP/emu.out and $TMP/native.out
    local model="$1" c="$2"
    local args=(-m "$model" -f "$TEXT" -c "$c" -b "$c" --chunks 1 -t 2)
    emu "$BIN/llama-perplexity" "${args[@]}" >"$TMP/emu.out" 2>"$TMP/emu.err" ||
        { fail "$(basename "$model") under $CPU: llama-perplexity failed: $(tail -c 300 "$TMP/emu.err")"; return 1; }
    KILN_CPU_ISA=$level "$BIN/llama-perplexity" "${args[@]}" >"$TMP/native.out" 2>"$TMP/native.err" ||
        { fail "$(basename "$model") native: llama-perplexity failed: $(tail -c 300 "$TMP/native.err")"; return 1; }
    # the emulated CPU really lacks the sets (otherwise this test proves nothing)
    grep -q "$flags" "$TMP/emu.err" && pass || fail "$CPU: system info does not say '$flags': $(grep -m1 system_info "$TMP/emu.err")"
    local e n
    e=$(running "$TMP/emu.out"); n=$(running "$TMP/native.out")
    if [ -n "$e" ] && [ "$e" = "$n" ]; then pass; else fail "$(basename "$model"): emulated $CPU gives '$e', native KILN_CPU_ISA=$level '$n'"; fi
}

decode "$SHARED/models/stories260K.gguf" 128 && {
    ours=$(running "$TMP/emu.out")
    gold=$(running "$SHARED/golden/ppl/stories260K.txt")
    # one 128-token chunk of an f32 model: 0.1% (the 8-chunk estimate is held to 0.05% elsewhere)
    if awk -v a="$ours" -v b="$gold" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-3 * b) }'; then
        pass
    else
        fail "stories260K first chunk under $CPU: $ours, reference $gold"
    fi
}
# a K-quant model: the quantized dot products and activation encoders of this level
decode "$SHARED/models/synth-qwen3-Q4_K_M.gguf" 256

finish
