#!/usr/bin/env bash
# kiln-quant-error on the golden models:
#  - synth-qwen3 against the reference's Q8_0 file: Kiln's q8_0 blocks are the reference's (same
#    errors), and every CPU level's q8_0 product (activations rounded per 32 with an fp16 scale)
#    strays from the float64 product no further than activations rounded per 32 with a bf16 scale
#    (the reference's rounding) would;
#  - synth-deepseek2's layer-2 expert tensors against the reference's Q4_K_M file: Kiln's
#    quantizer errs less than the reference's on the weights and on the real activations, every
#    level at batch and batch 1 gives the same product, and an imatrix made on other text lowers
#    the error on these activations;
#  - the lattice i-quants on the same experts: every level's product (batch and batch 1) is as
#    close to float64 as the scalar level's;
#  - bad arguments are errors that name the flag or file.
# Usage: quant-error.sh <build>/bin <shared dir>
set -u

BIN="${1:?usage: quant-error.sh <build>/bin <shared dir>}"
SHARED="${2:?usage: quant-error.sh <build>/bin <shared dir>}"
Q="$BIN/kiln-quant-error"
[ -x "$Q" ] || { echo "FAIL: $Q not built"; exit 1; }

NAME=quant-error
source "$(dirname "$0")/lib/check.sh"

M="$SHARED/models"
TXT="$SHARED/text/wikitext-2-test-300k.txt"

# total KEY: the value on the totals line "  KEY   value (gain g)"
total() { awk -v k="$1" 'index($0, "  " k " ") == 1 { print $(NF - 2) }' "$TMP/out" | tail -1; }
# le A B [F]: A <= F * B
le() { awk -v a="$1" -v b="$2" -v f="${3:-1}" 'BEGIN { exit !(a != "" && b != "" && a + 0 <= f * b) }'; }

# ---- Q8_0: same blocks, products no worse than per-32 bf16 activation rounding
expect_ok "$Q" -m "$M/synth-qwen3-f16.gguf" --ref "$M/synth-qwen3-Q8_0.gguf" -f "$TXT" --tokens 128 --tensors 'blk\.1\.'
k=$(total "kiln rel_rmse"); r=$(total "ref rel_rmse")
[ -n "$k" ] && [ "$k" = "$r" ] && pass || fail "q8_0: Kiln's rel_rmse '$k' differs from the reference file's '$r'"
y=$(total "ref matmul per-32 bf16")
n=0
for lvl in $(awk '/^  ref matmul / && !/per-32/ { print $3 "_" $4 }' "$TMP/out"); do
    v=$(total "ref matmul ${lvl/_/ }")
    le "$v" "$y" && pass || fail "q8_0 product on $lvl: $v against float64, per-32 bf16 rounding $y"
    n=$((n + 1))
done
[ "$n" -ge 2 ] && pass || fail "q8_0: $n matmul levels reported (expected at least scalar at batch and batch 1)"

# ---- deepseek2 experts: Kiln's quantizer vs the reference's, imatrix gain on held-out activations
expect_ok "$BIN/llama-imatrix" -m "$M/synth-deepseek2-f16.gguf" -f "$TXT" -c 128 --chunks 4 --chunk 8 -o "$TMP/ds2.gguf" \
    --output-format gguf -t 2 --no-ppl
expect_ok "$Q" -m "$M/synth-deepseek2-f16.gguf" --ref "$M/synth-deepseek2-Q4_K_M.gguf" --imatrix "$TMP/ds2.gguf" -f "$TXT" \
    --tokens 256 --tensors 'blk\.2\.ffn_.*_exps'
grep -q "x 16 experts" "$TMP/out" && pass || fail "expert tensors not reported per expert: $(head -c 300 "$TMP/out")"
le "$(total "kiln rel_rmse")" "$(total "ref rel_rmse")" && pass ||
    fail "experts: Kiln's rel_rmse $(total "kiln rel_rmse") above the reference file's $(total "ref rel_rmse")"
le "$(total "kiln on activations")" "$(total "ref on activations")" && pass ||
    fail "experts: Kiln's error on activations $(total "kiln on activations") above the reference file's $(total "ref on activations")"
le "$(total "kiln+im on activations")" "$(total "kiln on activations")" && pass ||
    fail "experts: the imatrix raised the error on held-out activations: $(total "kiln+im on activations") vs $(total "kiln on activations")"
le "$(total "kiln+im weighted")" "$(total "kiln weighted")" 0.995 && pass ||
    fail "experts: the imatrix lowered the weighted error by less than 0.5%: $(total "kiln+im weighted") vs $(total "kiln weighted")"
# every level computes the same product (bit-identical encoders, exact integer sums): q8_K at
# batch 1, per-32 q8_0 activations for batches (KILN_BATCH_ACT's default), which must be at least
# as close to float64 as the reference's per-32 bf16 rounding
for kind in b1 batch; do
    levels=$(awk -v k="$kind" '/^  kiln matmul / && !/per-32/ && $4 == k { print $(NF - 2) }' "$TMP/out" | sort -u | wc -l)
    [ "$levels" = 1 ] && pass || fail "k-quant products at $kind differ between levels: $(grep '^  kiln matmul' "$TMP/out")"
done
batch=$(awk '/^  kiln matmul / && !/per-32/ && $4 == "batch" { print $(NF - 2); exit }' "$TMP/out")
le "$batch" "$(total "kiln matmul per-32 bf16")" && pass ||
    fail "k-quant batch products ($batch) further from float64 than per-32 bf16 rounding: $(grep '^  kiln matmul' "$TMP/out")"

# ---- the lattice i-quants, per kind: token generation takes the block loops (bit for bit the
# scalar kernel's), batches the panel gemms at the SIMD levels (the same integer sums per
# sub-block, float sums in another order): every level's product strays from float64 as far as
# the scalar level's, within 0.1%
for t in iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m; do
    expect_ok "$Q" -m "$M/synth-deepseek2-f16.gguf" --type "$t" --imatrix "$TMP/ds2.gguf" -f "$TXT" --tokens 256 \
        --tensors 'blk\.2\.ffn_(up|down)_exps'
    for kind in b1 batch; do
        s=$(awk -v k="$kind" '/^  kiln\+im matmul scalar / && $4 == k { print $(NF - 2) }' "$TMP/out")
        n=0
        for v in $(awk -v k="$kind" '/^  kiln\+im matmul / && !/per-32/ && $3 != "scalar" && $4 == k { print $(NF - 2) }' "$TMP/out"); do
            le "$v" "$s" 1.001 && le "$s" "$v" 1.001 && pass || fail "$t $kind: a SIMD level's product error $v, the scalar level's $s"
            n=$((n + 1))
        done
        [ "$n" -ge 1 ] || [ "$(uname -m)" != x86_64 ] && pass || fail "$t $kind: no SIMD level reported: $(grep '^  kiln+im matmul' "$TMP/out")"
    done
done

# ---- errors
expect_err "-m (or --demo) is required" "$Q" --type q4_K
expect_ok "$Q" --demo --type q4_K
grep -q "rel_rmse" "$TMP/out" && pass || fail "--demo: no errors reported: $(head -c 300 "$TMP/out")"
expect_err "exactly one of --type and --ref" "$Q" -m "$M/synth-qwen3-f16.gguf"
expect_err "exactly one of --type and --ref" "$Q" -m "$M/synth-qwen3-f16.gguf" --type q4_K --ref "$M/synth-qwen3-Q8_0.gguf"
expect_err "unknown type q9_Z" "$Q" -m "$M/synth-qwen3-f16.gguf" --type q9_Z
expect_err "bad regex" "$Q" -m "$M/synth-qwen3-f16.gguf" --type q4_K --tensors '('
expect_err "no tensor matched" "$Q" -m "$M/synth-qwen3-f16.gguf" --type q4_K --tensors 'nothing-like-this'
expect_err "missing.gguf" "$Q" -m "$TMP/missing.gguf" --type q4_K
expect_err "--tokens" "$Q" -m "$M/synth-qwen3-f16.gguf" --type q4_K --tokens 0
expect_err "--expert-prior" "$Q" -m "$M/synth-qwen3-f16.gguf" --type q4_K --expert-prior -1
expect_err "frobnicate" "$Q" -m "$M/synth-qwen3-f16.gguf" --type q4_K --frobnicate
expect_err "nofile.txt" "$Q" -m "$M/synth-qwen3-f16.gguf" --type q4_K -f "$TMP/nofile.txt"

finish
