#!/usr/bin/env bash
# llama-quantize from the command line: the reference's command forms, --dry-run sizes equal the
# written file's, the quantization and imatrix keys in the output, and bad recipes fail with a
# message naming the cause. Usage: quantize.sh <build>/bin <shared dir>
set -u

BIN="${1:?usage: quantize.sh <build>/bin <shared dir>}"
SHARED="${2:?usage: quantize.sh <build>/bin <shared dir>}"
Q="$BIN/llama-quantize"
G="$BIN/llama-gguf"
[ -x "$Q" ] || { echo "FAIL: $Q not built"; exit 1; }

NAME=quantize
source "$(dirname "$0")/lib/check.sh"

M="$SHARED/models/synth-qwen3-f16.gguf"
MOE="$SHARED/models/synth-qwen3moe-f16.gguf"

# --help lists the file types with id and description
expect_ok "$Q" --help
grep -q "Q4_K_M" "$TMP/out" && grep -q " 15 " "$TMP/out" || fail "--help does not list Q4_K_M with its id"

# dry run: the sizes it announces are the sizes written (type by name in any case, and by number)
expect_ok "$Q" --dry-run "$M" q4_k_m 2
grep -q "converting to q6_K" "$TMP/out" || fail "dry run: no q6_K tensor for Q4_K_M"
dry=$(grep "quant size" "$TMP/out")
[ -f "$TMP/ggml-model-Q4_K_M.gguf" ] && fail "dry run wrote a file"
expect_ok "$Q" "$M" "$TMP/q4km.gguf" 15 2
real=$(grep "quant size" "$TMP/out")
[ "$dry" = "$real" ] || fail "dry-run size '$dry' differs from the written '$real'"
[ -f "$TMP/q4km.gguf" ] || fail "no output file"
[ -f "$TMP/q4km.gguf.tmp" ] && fail "temporary file left behind"
# the file's tensor data adds up to the announced size
sum=$(grep "^\[" "$TMP/out" | sed -E 's/.*-> +([0-9.]+) MiB.*/\1/' | awk '{s+=$1} END {printf "%.2f", s}')
grep -q "$sum MiB" <<<"$real" || fail "per-tensor sizes ($sum) do not add up to '$real'"
if [ -x "$G" ]; then
    "$G" info "$TMP/q4km.gguf" >"$TMP/info" 2>&1 || fail "llama-gguf cannot read the output"
    grep -q "general.file_type.*15" "$TMP/info" || fail "general.file_type is not 15: $(grep file_type "$TMP/info")"
    grep -q "general.quantization_version.*2" "$TMP/info" || fail "no general.quantization_version"
fi

# default output name next to the input
cp "$M" "$TMP/in.gguf"
expect_ok "$Q" "$TMP/in.gguf" Q8_0
[ -f "$TMP/ggml-model-Q8_0.gguf" ] || fail "no default output ggml-model-Q8_0.gguf"

# recipes: --pure, --custom-q (string, repeated, file), tensor type flags
expect_ok "$Q" --dry-run --pure "$MOE" Q4_K_M
grep -q "attn_v.weight.*converting to q8_0" "$TMP/out" && fail "--pure kept the MoE attn_v bump"
expect_ok "$Q" --dry-run --custom-q "attn_v=q8_0,ffn_down_exps=IQ4_XS" --custom-q "blk\.1\.ffn_up=q6_k" "$MOE" Q4_K_M
grep -q "blk.0.ffn_down_exps.weight.*converting to iq4_xs" "$TMP/out" || fail "--custom-q rule not applied"
grep -q "blk.1.ffn_up_exps.weight.*converting to q6_K" "$TMP/out" || fail "repeated --custom-q not applied"
printf '# experts low\nffn_.*_exps=q4_0\n\nattn_output=q8_0  # high\n' >"$TMP/rules.txt"
expect_ok "$Q" --dry-run --custom-q "$TMP/rules.txt" "$MOE" Q4_K_M
grep -q "blk.1.ffn_gate_exps.weight.*converting to q4_0" "$TMP/out" || fail "--custom-q file not applied"
expect_ok "$Q" --dry-run --output-tensor-type q8_0 --token-embedding-type q4_k "$MOE" Q4_K_M
grep -q "output.weight.*converting to q8_0" "$TMP/out" || fail "--output-tensor-type not applied"
grep -q "token_embd.weight.*converting to q4_K" "$TMP/out" || fail "--token-embedding-type not applied"
expect_ok "$Q" --dry-run --leave-output-tensor "$MOE" Q4_K_M
grep -q "output.weight.*keeping as is" "$TMP/out" || fail "--leave-output-tensor quantized the output"
expect_ok "$Q" --override-kv general.name=str:renamed --override-kv foo.bar=int:7 "$M" "$TMP/ov.gguf" Q8_0
if [ -x "$G" ]; then
    "$G" info "$TMP/ov.gguf" >"$TMP/info" 2>&1
    grep -q "renamed" "$TMP/info" || fail "--override-kv str not written"
    grep -q "foo.bar" "$TMP/info" || fail "--override-kv int not written"
fi

# --repack: the quantized weights with an interleaved twin are repacked, --repack-pattern limits
# them, and it needs --repack. It takes no type; the reference's form with one (which the
# reference requires and does not use) still runs, and the log says the type selects nothing.
expect_ok "$Q" --repack "$TMP/q4km.gguf" "$TMP/rp.gguf"
grep -q "blk.0.attn_q.weight.*repacking to q4_k_r4" "$TMP/out" || fail "--repack: attn_q not repacked to q4_k_r4"
grep -q "token_embd.weight.*keeping as is" "$TMP/out" || fail "--repack touched token_embd"
grep -q "selects nothing" "$TMP/err" && fail "--repack without a type talks about one"
expect_ok "$Q" --repack "$TMP/q4km.gguf" "$TMP/rp1.gguf" Q8_0 2
grep -q "type Q8_0 selects nothing" "$TMP/err" || fail "--repack with a type: no log line saying the type is not used"
grep -q "blk.0.attn_q.weight.*repacking to q4_k_r4" "$TMP/out" || fail "--repack Q8_0 did not repack attn_q to q4_k_r4"
cmp -s "$TMP/rp.gguf" "$TMP/rp1.gguf" || fail "--repack with and without a type wrote different files"
expect_err "unknown file type 'Q9_X'" "$Q" --repack "$TMP/q4km.gguf" "$TMP/x.gguf" Q9_X
expect_err "expected an input model and an output file" "$Q" --repack "$TMP/q4km.gguf"
expect_ok "$Q" --repack --repack-pattern "ffn_down" "$TMP/q4km.gguf" "$TMP/rp2.gguf" Q8_0
grep -q "attn_q.weight.*repacking" "$TMP/out" && fail "--repack-pattern ffn_down repacked attn_q"
grep -q "ffn_down.weight.*repacking to q6_k_r4" "$TMP/out" || fail "--repack-pattern: ffn_down not repacked"
expect_err "needs --repack" "$Q" --repack-pattern "ffn" "$TMP/q4km.gguf" "$TMP/x.gguf" Q8_0
expect_err "invalid regular expression" "$Q" --repack --repack-pattern "ffn_(" "$TMP/q4km.gguf" "$TMP/x.gguf" Q8_0

# requantizing needs --allow-requantize
expect_err "allow-requantize" "$Q" "$TMP/q4km.gguf" "$TMP/rq.gguf" Q4_0
expect_ok "$Q" --allow-requantize "$TMP/q4km.gguf" "$TMP/rq.gguf" Q4_0

# errors name the cause
expect_err "unknown file type 'Q4_K_X'" "$Q" "$M" "$TMP/x.gguf" Q4_K_X
expect_err "bad regex 'ffn_(down'" "$Q" --custom-q "ffn_(down=q4_k" "$M" "$TMP/x.gguf" Q4_K_M
expect_err "unknown type 'q9_k'" "$Q" --custom-q "attn_v=q9_k" "$M" "$TMP/x.gguf" Q4_K_M
expect_err "unknown type 'bogus'" "$Q" --output-tensor-type bogus "$M" "$TMP/x.gguf" Q4_K_M
expect_err "same file" "$Q" "$TMP/in.gguf" "$TMP/in.gguf" Q8_0
expect_err "missing importance matrix for tensor blk.0" "$Q" "$M" "$TMP/x.gguf" IQ2_XXS
expect_err "no such file" "$Q" "$TMP/none.gguf" Q8_0
expect_err "unknown flag --frobnicate" "$Q" --frobnicate "$M" Q8_0
expect_err "KEY=TYPE:VALUE" "$Q" --override-kv nonsense "$M" "$TMP/x.gguf" Q8_0
[ -f "$TMP/x.gguf" ] && fail "a failed run left an output file"

# with an importance matrix: provenance keys, and a matrix lacking a tensor is named
if [ -x "$BIN/llama-imatrix" ]; then
    "$BIN/llama-imatrix" -m "$M" -f "$SHARED/text/wikitext-2-test-300k.txt" -c 64 --chunks 2 -o "$TMP/im.dat" -t 2 \
        >/dev/null 2>"$TMP/err" || fail "llama-imatrix failed: $(tail -c 300 "$TMP/err")"
    expect_ok "$Q" --imatrix "$TMP/im.dat" "$M" "$TMP/iq.gguf" IQ4_XS 2
    if [ -x "$G" ]; then
        "$G" info "$TMP/iq.gguf" >"$TMP/info" 2>&1
        grep -q "quantize.imatrix.file" "$TMP/info" || fail "no quantize.imatrix.file key"
        grep -q "quantize.imatrix.entries_count" "$TMP/info" || fail "no quantize.imatrix.entries_count key"
        grep -q "quantize.imatrix.chunks_count" "$TMP/info" || fail "no quantize.imatrix.chunks_count key"
    fi
    expect_err "missing importance matrix for tensor blk.0.ffn_down.weight" \
        "$Q" --imatrix "$TMP/im.dat" --exclude-weights ffn_down "$M" "$TMP/x.gguf" IQ2_XS
    expect_err "only one of" "$Q" --imatrix "$TMP/im.dat" --exclude-weights a --include-weights b "$M" "$TMP/x.gguf" Q4_K_M
fi

finish
