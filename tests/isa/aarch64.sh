#!/usr/bin/env bash
# The arm64 build (cmake/aarch64-linux-gnu.cmake) under qemu-aarch64, on three emulated CPUs so that
# every dispatch level runs:
#  - max:        dotprod and i8mm (levels neon, dotprod, i8mm);
#  - cortex-a76: dotprod, no i8mm;
#  - cortex-a53: Armv8.0, plain Advanced SIMD only: the SDOT kernels must not even be registered.
# Checked: getauxval detection (system info and the level chosen); the SIMD-versus-scalar suites
# (each walks every level the CPU runs, so -cpu max compares neon, dotprod and i8mm with scalar);
# the per-ISA object rules (isa/symbols.sh on the NEON objects); stories260K's golden perplexity
# (-c 128, 8 chunks, within 0.05%) and its first chunk at every KILN_CPU_ISA cap; one chunk of
# KL-divergence for synth-qwen3 (f16 against the reference's base; Q4_K_M per level against scalar,
# and with -rtr at dotprod and i8mm).
# Emulated speed means nothing: nothing here is timed.
# Usage: aarch64.sh <cross build dir> <shared dir>
set -u
BUILD="${1:?usage: aarch64.sh <cross build dir> <shared dir>}"
SHARED="${2:?usage: aarch64.sh <cross build dir> <shared dir>}"
BIN="$BUILD/bin"
NAME=isa-aarch64
source "$(dirname "$0")/../tools/lib/check.sh"

# scripts/setup.sh installs qemu-user and the cross toolchain: their absence is a broken setup
QEMU=$(command -v qemu-aarch64) || { echo "FAIL: qemu-aarch64 not found (scripts/setup.sh installs qemu-user)"; exit 1; }
SYSROOT=/usr/aarch64-linux-gnu
[ -d "$SYSROOT/lib" ] || { echo "FAIL: $SYSROOT missing (scripts/setup.sh installs g++-aarch64-linux-gnu)"; exit 1; }
emu() { local cpu="$1"; shift; "$QEMU" -L "$SYSROOT" -cpu "$cpu" "$@"; }

# ---- detection
TEXT="$SHARED/text/wikitext-2-test-300k.txt"
MODEL="$SHARED/models/stories260K.gguf"
running() { grep -o '^\[1\][0-9.]*' "$1" | head -1 | cut -d']' -f2; }
final_ppl() { sed -n 's/^Final estimate: PPL.* = \([0-9.]*\) +\/-.*/\1/p' "$1" | tail -1; }
for spec in "max:NEON = 1 | DOTPROD = 1 | I8MM = 1" "cortex-a76:NEON = 1 | DOTPROD = 1 | I8MM = 0" \
            "cortex-a53:NEON = 1 | DOTPROD = 0 | I8MM = 0"; do
    cpu="${spec%%:*}" flags="${spec#*:}"
    if emu "$cpu" "$BIN/llama-perplexity" -m "$MODEL" -f "$TEXT" -c 128 -b 128 --chunks 1 -t 2 >"$TMP/$cpu.out" 2>"$TMP/$cpu.err"; then
        grep -q "$flags" "$TMP/$cpu.err" && pass || fail "$cpu: system info lacks '$flags': $(grep -m1 -i 'system' "$TMP/$cpu.err")"
    else
        fail "$cpu: llama-perplexity failed: $(tail -c 300 "$TMP/$cpu.err")"
    fi
done

# ---- SIMD versus scalar. Filters keep the emulated time to a few minutes: the benchmarks (their
# timings mean nothing here) and the x86 golden-file runs are left out, every comparison stays.
suite() {   # cpu binary [gtest filter]
    local cpu="$1" exe="$BIN/$2" filter="${3:-*}" cap="${KILN_CPU_ISA:+ KILN_CPU_ISA=$KILN_CPU_ISA}"
    [ -x "$exe" ] || { fail "$2 not built"; return; }
    local t0=$SECONDS
    if emu "$cpu" "$exe" --gtest_filter="$filter" --gtest_brief=1 >"$TMP/suite.out" 2>&1; then
        pass
    else
        fail "$2 on $cpu$cap:"; grep -E '^\[  FAILED|Failure|error' "$TMP/suite.out" | head -20 | sed 's/^/    /'
    fi
    local n; n=$(grep -o '^\[  PASSED  \] [0-9]*' "$TMP/suite.out" | grep -o '[0-9]*$')
    echo "  $2 on $cpu$cap: ${n:-0} tests passed ($((SECONDS - t0)) s)"
}
# the comparisons really reach each level's kernels: test-quants-simd lists what it compared
compared_has() {   # cpu pattern expected(1|0)
    local got=0
    grep '^\[ compared \]' "$TMP/simd-$1.out" | grep -q -- "$2" && got=1
    [ "$got" = "$3" ] && pass || fail "test-quants-simd on $1: '$2' compared=$got, expected $3"
}
suite max test-quants-simd
cp "$TMP/suite.out" "$TMP/simd-max.out"
for k in f32/neon f16/neon bf16/neon q8_0/neon q4_0/dotprod q8_0/dotprod q4_K/dotprod q5_K/dotprod q6_K/dotprod \
         iq4_xs/dotprod iq4_nl/dotprod q4_0/i8mm q8_0/i8mm iq4_nl/i8mm iq4_xs/i8mm q2_K/i8mm q4_K/i8mm q6_K/i8mm \
         iq2_k/neon iq2_k/dotprod iq3_k/dotprod iq4_k/neon iq4_k/dotprod iq5_k/dotprod iq6_k/neon iq6_k/dotprod \
         iq4_ks/neon iq4_ks/dotprod iq5_ks/dotprod iq2_ks/dotprod iq4_kss/dotprod iq2_k/i8mm iq4_ks/i8mm iq6_k/i8mm \
         iq1_kt/neon iq2_kt/dotprod iq3_kt/dotprod iq4_kt/dotprod iq2_kt/i8mm iq4_kt/i8mm q4_0_r8/dotprod q8_0_r8/dotprod \
         iq4_xs_r8/dotprod q4_k_r4/dotprod q5_k_r4/dotprod q6_k_r4/dotprod iq4_nl_r4/dotprod \
         q5_0_r4/dotprod q6_0_r4/dotprod iq4_k_r4/dotprod iq5_k_r4/dotprod q2_k_r4/dotprod q3_k_r4/dotprod \
         iq2_k_r4/dotprod iq3_k_r4/dotprod iq4_ks_r4/dotprod iq5_ks_r4/dotprod q8_KV_r8/neon \
         bf16_r16/neon bf16_r16/dotprod q4_0_r8/i8mm q8_0_r8/i8mm iq4_nl_r4/i8mm q5_0_r4/i8mm q6_0_r4/i8mm \
         iq4_xs_r8/i8mm q2_k_r4/i8mm q3_k_r4/i8mm q4_k_r4/i8mm q5_k_r4/i8mm q6_k_r4/i8mm iq2_k_r4/i8mm \
         iq3_k_r4/i8mm iq4_k_r4/i8mm iq5_k_r4/i8mm iq4_ks_r4/i8mm iq5_ks_r4/i8mm \
         iq2_xxs/dotprod iq2_xs/dotprod iq2_s/i8mm iq3_xxs/dotprod iq3_s/dotprod iq1_s/neon iq1_m/dotprod; do
    compared_has max "$k" 1
done
suite max test-ops
suite max test-ops-recurrent
suite max test-matmul
suite max test-quants-k '-*Bench*'
suite max test-quants-iq
suite max test-quants-ik
# the -rtr policy's Arm rows name only layouts with a kernel at that level
for isa in neon dotprod i8mm; do KILN_CPU_ISA=$isa suite max test-repack 'RunTimeRepackPolicy.*'; done
suite cortex-a53 test-quants-simd
cp "$TMP/suite.out" "$TMP/simd-cortex-a53.out"
compared_has cortex-a53 q4_K/neon 1
compared_has cortex-a53 iq4_k/neon 1
compared_has cortex-a53 bf16_r16/neon 1
compared_has cortex-a53 /dotprod 0   # not registered without HWCAP_ASIMDDP
compared_has cortex-a53 /i8mm 0
suite cortex-a53 test-matmul 'Float/*'

# ---- the per-ISA object rules hold for the NEON folder too
if [ -s "$BUILD/tests/isa-objects.txt" ]; then
    bash "$(dirname "$0")/symbols.sh" "$BUILD/tests/isa-objects.txt" >"$TMP/sym.out" 2>&1 && pass ||
        { fail "isa/symbols.sh on the NEON objects:"; tail -20 "$TMP/sym.out"; }
else
    fail "no $BUILD/tests/isa-objects.txt"
fi

# ---- golden perplexity: stories260K, -c 128, 8 chunks, within 0.05% of the reference
gold=$(final_ppl "$SHARED/golden/ppl/stories260K.txt")
if emu max "$BIN/llama-perplexity" -m "$MODEL" -f "$TEXT" -c 128 -b 128 --chunks 8 -t 2 >"$TMP/ppl.out" 2>"$TMP/ppl.err"; then
    ours=$(final_ppl "$TMP/ppl.out")
    awk -v a="$ours" -v b="$gold" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 5e-4 * b) }' && pass ||
        fail "stories260K under -cpu max: PPL '$ours', reference $gold"
else
    fail "stories260K 8 chunks: $(tail -c 300 "$TMP/ppl.err")"
fi
# first chunk at every cap equals the reference's first chunk within 0.1% (the f32 model goes
# through the float kernels and the ops' vector primitives of each level)
gold1=$(running "$SHARED/golden/ppl/stories260K.txt")
for isa in scalar neon dotprod i8mm; do
    if KILN_CPU_ISA=$isa emu max "$BIN/llama-perplexity" -m "$MODEL" -f "$TEXT" -c 128 -b 128 --chunks 1 -t 2 >"$TMP/cap.out" 2>"$TMP/cap.err"; then
        c=$(running "$TMP/cap.out")
        awk -v a="$c" -v b="$gold1" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-3 * b) }' && pass ||
            fail "stories260K first chunk with KILN_CPU_ISA=$isa: '$c', reference $gold1"
    else
        fail "KILN_CPU_ISA=$isa: $(tail -c 300 "$TMP/cap.err")"
    fi
done

# ---- KL-divergence against the reference's base logits, one chunk each (emulation is slow):
# synth-qwen3-f16 as tight as tools/perplexity.sh holds it; synth-qwen3-Q4_K_M (q4_K/q6_K weights,
# q8_K activations) at the plain NEON and best levels equal to the scalar level's KLD within 2%.
mean_kld() { sed -n 's/^Mean    KLD: *\([0-9.e+-]*\).*/\1/p' "$1" | head -1; }
same_top() { sed -n 's/^Same top p: *\([0-9.]*\).*/\1/p' "$1" | head -1; }
kld_run() {   # model cap [extra flags] -> $TMP/kld.out
    KILN_CPU_ISA="$2" emu max "$BIN/llama-perplexity" -m "$SHARED/models/$1.gguf" --kl-divergence-base "$SHARED/golden/ppl/synth-qwen3-f16.kld" \
        --kl-divergence --chunks 1 -t 2 "${@:3}" >"$TMP/kld.out" 2>"$TMP/kld.err" || { fail "$1 KILN_CPU_ISA=$2 ${*:3} --kl-divergence: $(tail -c 300 "$TMP/kld.err")"; return 1; }
}
if kld_run synth-qwen3-f16 i8mm; then
    k=$(mean_kld "$TMP/kld.out"); t=$(same_top "$TMP/kld.out")
    [ -n "$k" ] && awk -v k="$k" 'BEGIN { exit !(k <= 1e-3) }' && pass || fail "synth-qwen3-f16: mean KLD '$k' > 1e-3"
    [ -n "$t" ] && awk -v t="$t" 'BEGIN { exit !(t >= 98) }' && pass || fail "synth-qwen3-f16: same top '$t' < 98%"
fi
if kld_run synth-qwen3-Q4_K_M scalar; then
    ref=$(mean_kld "$TMP/kld.out")
    for isa in neon i8mm; do
        kld_run synth-qwen3-Q4_K_M $isa || continue
        k=$(mean_kld "$TMP/kld.out")
        [ -n "$k" ] && awk -v k="$k" -v r="$ref" 'BEGIN { d = k - r; if (d < 0) d = -d; exit !(r > 0 && d <= 0.02 * r) }' && pass ||
            fail "synth-qwen3-Q4_K_M KILN_CPU_ISA=$isa: mean KLD '$k', scalar level '$ref'"
    done
    # -rtr on Arm (ggml_cpu_repack_pays' Arm rows): q4_K / q6_K repacked into q4_k_r4 / q6_k_r4 at
    # dotprod and i8mm, read in place by their kernels, the same KLD within 2%
    for isa in dotprod i8mm; do
        kld_run synth-qwen3-Q4_K_M $isa -rtr || continue
        for m in "q4_K tensors -> q4_k_r4" "q6_K tensors -> q6_k_r4"; do
            grep -q -- "-rtr: [0-9]* $m" "$TMP/kld.err" && pass || fail "synth-qwen3-Q4_K_M -rtr KILN_CPU_ISA=$isa: no '$m' in the log"
        done
        k=$(mean_kld "$TMP/kld.out")
        [ -n "$k" ] && awk -v k="$k" -v r="$ref" 'BEGIN { d = k - r; if (d < 0) d = -d; exit !(r > 0 && d <= 0.02 * r) }' && pass ||
            fail "synth-qwen3-Q4_K_M -rtr KILN_CPU_ISA=$isa: mean KLD '$k', scalar level '$ref'"
    done
fi

finish
