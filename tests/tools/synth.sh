#!/usr/bin/env bash
# llama-gguf synth: the same options give the same bytes, the presets have the shapes of the real
# models (checked with --dry-run, without writing gigabytes), the tiny presets load and run in
# libllama, and bad options are clear errors.
# Usage: synth.sh <build>/bin <shared dir>
set -u

BIN="${1:?usage: synth.sh <build>/bin <shared dir>}"
SHARED="${2:?usage: synth.sh <build>/bin <shared dir>}"
GGUF="$BIN/llama-gguf"
PPL="$BIN/llama-perplexity"
[ -x "$GGUF" ] || { echo "FAIL: $GGUF not built"; exit 1; }

TMP=$(mktemp -d /tmp/kiln-synth-sh-XXXXXX)
trap 'rm -rf "$TMP"' EXIT

fails=0
passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { passes=$((passes + 1)); }

# ---- determinism
"$GGUF" synth tiny-qwen3 -o "$TMP/a.gguf" >/dev/null 2>&1 || fail "synth tiny-qwen3"
"$GGUF" synth tiny-qwen3 -o "$TMP/b.gguf" >/dev/null 2>&1
"$GGUF" synth tiny-qwen3 --seed 7 -o "$TMP/c.gguf" >/dev/null 2>&1
cmp -s "$TMP/a.gguf" "$TMP/b.gguf" && pass || fail "two runs with the same seed differ"
cmp -s "$TMP/a.gguf" "$TMP/c.gguf" && fail "different seeds give the same file" || pass
[ ! -e "$TMP/a.gguf.tmp" ] && pass || fail "temporary file left behind"

# ---- the file: valid, the vocabulary and the metadata of the reference's synth-qwen3
"$GGUF" check "$TMP/a.gguf" >/dev/null 2>&1 && pass || fail "check tiny-qwen3"
"$GGUF" info "$TMP/a.gguf" >"$TMP/info" 2>&1
for pat in 'general.architecture .*str = "qwen3"' 'tokenizer.ggml.model .*str = "gpt2"' 'tokenizer.ggml.pre .*str = "qwen2"' \
           'tokenizer.ggml.tokens .*arr\[str,4104\]' 'tokenizer.ggml.eos_token_id .*u32 = 4098' 'tokenizer.chat_template .*im_start' \
           'token_embd.weight .* f16 .*\[256, 4104\]' 'blk.1.attn_k.weight .* f16 .*\[256, 128\]' 'blk.0.attn_q_norm.weight .* f32 .*\[64\]'; do
    grep -q "$pat" "$TMP/info" && pass || fail "tiny-qwen3 info lacks /$pat/"
done
grep -qE '^ +[0-9]+ +output\.weight' "$TMP/info" && fail "tiny-qwen3 should have a tied output" || pass
# same tensor table as the reference's synth models (names, types, shapes)
tensor_table() { sed -nE 's/^ +[0-9]+ +([a-z0-9_.]+) +(f16|f32|bf16) +(\[[0-9, ]*\]).*/\1 \2 \3/p' | tr -d ' ' ; }
if [ -f "$SHARED/models/synth-qwen3-f16.gguf" ]; then
    "$GGUF" info "$SHARED/models/synth-qwen3-f16.gguf" 2>&1 | tensor_table >"$TMP/ref.t"
    tensor_table <"$TMP/info" >"$TMP/our.t"
    [ -s "$TMP/ref.t" ] && cmp -s "$TMP/ref.t" "$TMP/our.t" && pass || fail "tensor table differs from synth-qwen3-f16: $(diff "$TMP/ref.t" "$TMP/our.t" | head -5)"
fi
for m in qwen3moe deepseek2 gemma3 glm4moe gpt-oss qwen35 qwen35moe; do
    [ -f "$SHARED/models/synth-$m-f16.gguf" ] || continue
    "$GGUF" synth "tiny-$m" -o "$TMP/t-$m.gguf" >/dev/null 2>&1 || { fail "synth tiny-$m"; continue; }
    "$GGUF" info "$SHARED/models/synth-$m-f16.gguf" 2>&1 | tensor_table >"$TMP/ref-$m"
    "$GGUF" info "$TMP/t-$m.gguf" 2>&1 | tensor_table >"$TMP/our-$m"
    [ -s "$TMP/ref-$m" ] && cmp -s "$TMP/ref-$m" "$TMP/our-$m" && pass || fail "tiny-$m tensors differ from synth-$m-f16: $(diff "$TMP/ref-$m" "$TMP/our-$m" | head -5)"
    rm -f "$TMP/t-$m.gguf"
done

# ---- preset shapes of the real models
"$GGUF" synth qwen3-0.6b --dry-run >"$TMP/q06" 2>&1
grep -q 'total: 596049920 parameters' "$TMP/q06" && pass || fail "qwen3-0.6b: $(tail -1 "$TMP/q06")"
grep -q '^blk.27.ffn_down.weight  *f16  *\[3072, 1024\]' "$TMP/q06" && pass || fail "qwen3-0.6b: 28 layers, n_ff 3072"
grep -q '^output.weight' "$TMP/q06" && fail "qwen3-0.6b: output must be tied" || pass
"$GGUF" synth qwen3-30b-a3b --dry-run >"$TMP/q30" 2>&1
grep -q '^blk.47.ffn_gate_exps.weight  *f16  *\[2048, 768, 128\]' "$TMP/q30" && pass || fail "qwen3-30b-a3b: expert tensors"
grep -q '^blk.0.attn_q.weight  *f16  *\[2048, 4096\]' "$TMP/q30" && grep -q '^blk.0.attn_k.weight  *f16  *\[2048, 512\]' "$TMP/q30" && pass ||
    fail "qwen3-30b-a3b: attention shapes"
"$GGUF" synth deepseek-v3 --dry-run >"$TMP/ds" 2>&1
grep -q 'total: 671026419200 parameters' "$TMP/ds" && pass || fail "deepseek-v3: $(tail -1 "$TMP/ds")"
grep -q '^blk.2.ffn_down.weight  *f16  *\[18432, 7168\]' "$TMP/ds" && grep -q '^blk.3.ffn_up_exps.weight  *f16  *\[7168, 2048, 256\]' "$TMP/ds" &&
    grep -q '^blk.60.attn_kv_b.weight  *f16  *\[512, 32768\]' "$TMP/ds" && grep -q '^blk.60.exp_probs_b.bias  *f32  *\[256\]' "$TMP/ds" && pass ||
    fail "deepseek-v3: dense/MoE/MLA shapes"
"$GGUF" synth gpt-oss-20b --dry-run >"$TMP/oss" 2>&1
grep -q '^blk.23.ffn_gate_exps.weight  *f16  *\[2880, 2880, 32\]' "$TMP/oss" && grep -q '^blk.0.attn_sinks.weight  *f32  *\[64\]' "$TMP/oss" &&
    grep -q '^blk.0.attn_q.weight  *f16  *\[2880, 4096\]' "$TMP/oss" && grep -q '^blk.23.ffn_down_exps.bias  *f32  *\[2880, 32\]' "$TMP/oss" &&
    ! grep -q '^blk.24\.' "$TMP/oss" && pass || fail "gpt-oss-20b: attention/expert shapes"
# the gated delta-net hybrids: Qwen3.5-35B-A3B (interleaved layers, no dense FFN length) and Qwen3-Next-80B-A3B
"$GGUF" synth qwen3.5-35b-a3b --dry-run >"$TMP/q35" 2>&1
grep -q 'total: 34660610688 parameters' "$TMP/q35" && pass || fail "qwen3.5-35b-a3b: $(tail -1 "$TMP/q35")"
grep -q '^blk.0.attn_qkv.weight  *f16  *\[2048, 8192\]' "$TMP/q35" && grep -q '^blk.0.ssm_conv1d.weight  *f32  *\[4, 8192\]' "$TMP/q35" &&
    grep -q '^blk.3.attn_q.weight  *f16  *\[2048, 8192\]' "$TMP/q35" && grep -q '^blk.39.ffn_down_exps.weight  *f16  *\[512, 2048, 256\]' "$TMP/q35" &&
    ! grep -q '^blk.3.attn_qkv' "$TMP/q35" && pass || fail "qwen3.5-35b-a3b: delta-net / attention / expert shapes"
"$GGUF" synth qwen3-next-80b-a3b --dry-run >"$TMP/q3n" 2>&1
grep -q 'total: 79674391296 parameters' "$TMP/q3n" && pass || fail "qwen3-next-80b-a3b: $(tail -1 "$TMP/q3n")"
grep -q '^blk.0.ssm_in.weight  *f16  *\[2048, 12288\]' "$TMP/q3n" && grep -q '^blk.0.ssm_ba.weight  *f16  *\[2048, 64\]' "$TMP/q3n" && pass ||
    fail "qwen3-next-80b-a3b: fused delta-net projections"
# shrinking
"$GGUF" synth deepseek-v3 --layers 4 --experts 16 --dry-run >"$TMP/ds4" 2>&1
grep -q '^blk.3.ffn_gate_exps.weight  *f16  *\[7168, 2048, 16\]' "$TMP/ds4" && ! grep -q '^blk.4\.' "$TMP/ds4" && pass || fail "deepseek-v3 --layers 4 --experts 16"
"$GGUF" synth tiny-qwen3moe --layers 3 --experts 8 --type bf16 -o "$TMP/m.gguf" >/dev/null 2>&1 || fail "synth tiny-qwen3moe --layers 3 --experts 8 --type bf16"
"$GGUF" info "$TMP/m.gguf" >"$TMP/minfo" 2>&1
grep -q 'qwen3moe.block_count .*u32 = 3' "$TMP/minfo" && grep -q 'qwen3moe.expert_count .*u32 = 8' "$TMP/minfo" &&
    grep -q 'general.file_type .*u32 = 32' "$TMP/minfo" && grep -q 'blk.2.ffn_up_exps.weight .* bf16 .*\[256, 256, 8\]' "$TMP/minfo" && pass ||
    fail "tiny-qwen3moe --layers 3 --experts 8 --type bf16 metadata"

# ---- the synthetic models load and run (perplexity over two chunks of real text)
if [ -x "$PPL" ]; then
    "$GGUF" synth tiny-deepseek2 -o "$TMP/d.gguf" >/dev/null 2>&1
    "$GGUF" synth tiny-qwen3 --type f32 -o "$TMP/f.gguf" >/dev/null 2>&1
    "$GGUF" synth tiny-gemma3 -o "$TMP/g.gguf" >/dev/null 2>&1
    "$GGUF" synth tiny-glm4moe -o "$TMP/l.gguf" >/dev/null 2>&1
    "$GGUF" synth tiny-gpt-oss -o "$TMP/o.gguf" >/dev/null 2>&1
    "$GGUF" synth tiny-qwen35moe -o "$TMP/h.gguf" >/dev/null 2>&1
    "$GGUF" synth tiny-qwen3next -o "$TMP/n.gguf" >/dev/null 2>&1
    for f in a m d f g l o h n; do
        if "$PPL" -m "$TMP/$f.gguf" -f "$SHARED/text/wikitext-2-test-300k.txt" -c 128 --chunks 2 -t 2 >"$TMP/p" 2>"$TMP/e"; then
            v=$(sed -n 's/^Final estimate: .* = \([0-9.]*\) +\/- .*/\1/p' "$TMP/p")
            # random weights with activations of unit scale: close to (not far beyond) a uniform guess over 4104 tokens
            [ -n "$v" ] && awk -v v="$v" 'BEGIN { exit !(v > 1000 && v < 40000) }' && pass || fail "$f.gguf: PPL '$v' out of the expected range"
        else
            fail "$f.gguf does not run: $(tail -c 300 "$TMP/e")"
        fi
    done
fi

# ---- errors
expect_err() {   # pattern args...
    local pat="$1"; shift
    if "$GGUF" synth "$@" >/dev/null 2>"$TMP/e"; then fail "synth $* succeeded"; else grep -q -- "$pat" "$TMP/e" && pass || fail "synth $*: message lacks '$pat': $(cat "$TMP/e")"; fi
}
expect_err "unknown preset 'llama-9b'" llama-9b -o "$TMP/x.gguf"
expect_err "not a mixture-of-experts" tiny-qwen3 --experts 4 -o "$TMP/x.gguf"
expect_err "--type" tiny-qwen3 --type q4_0 -o "$TMP/x.gguf"
expect_err "--layers" tiny-qwen3 --layers 0 -o "$TMP/x.gguf"
expect_err "no preset" -o "$TMP/x.gguf"
expect_err "cannot open" tiny-qwen3 -o "$TMP/no/such/dir/x.gguf"

echo "synth.sh: $passes passed, $fails failed"
[ "$fails" = 0 ]
