#!/usr/bin/env bash
# llama-perplexity against the reference's golden numbers (../shared/golden/ppl):
#  - the final PPL of stories260K (-c 128, 8 chunks) and the synth models (-c 256, 4 chunks)
#    within 0.05%;
#  - --kl-divergence against every reference base file of a model Kiln loads: mean KLD <= 1e-3,
#    same top >= 98%;
#  - the reference's quantized synth models: mean KLD and same top of their .txt within 5%; with
#    exact products (KILN_EXACT_MATMUL=1) the file's own KLD, free of activation-rounding noise, at
#    most 2% above the reference's printed one (that includes the reference's noise, which on
#    average adds to it: qwen3 Q8_0 is 0.0013 exact against 0.0023 printed);
#  - a base file written here has the reference's header and tokens and compares to itself with
#    KLD ~ 0; bad inputs (short text, missing/truncated base) are clear errors.
# Usage: perplexity.sh <build>/bin <shared dir>
set -u

BIN="${1:?usage: perplexity.sh <build>/bin <shared dir>}"
SHARED="${2:?usage: perplexity.sh <build>/bin <shared dir>}"
PPL="$BIN/llama-perplexity"
[ -x "$PPL" ] || { echo "FAIL: $PPL not built"; exit 1; }
TEXT="$SHARED/text/wikitext-2-test-300k.txt"
GOLD="$SHARED/golden/ppl"
MODELS="$SHARED/models"
[ -f "$TEXT" ] || { echo "FAIL: no $TEXT"; exit 1; }

TMP=$(mktemp -d /tmp/kiln-ppl-sh-XXXXXX)
trap 'rm -rf "$TMP"' EXIT

fails=0
passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { passes=$((passes + 1)); }

# within A B REL: |A - B| <= REL * |B|
within() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(d <= r * m) }'; }
# the number after the last '=' of the Final estimate line, before "+/-"
final_ppl() { sed -n 's/^Final estimate: .* = \([0-9.]*\) +\/- .*/\1/p' "$1" | tail -1; }
# "Mean    KLD:   0.002315 ±   0.000120" -> 0.002315 ; "Same top p: 97.441 ± 0.701 %" -> 97.441
mean_kld() { sed -n 's/^Mean    KLD: *\([-0-9.]*\) .*/\1/p' "$1" | tail -1; }
same_top() { sed -n 's/^Same top p: *\([0-9.]*\) .*/\1/p' "$1" | tail -1; }

# ---- perplexity against the golden final estimates
check_ppl() {   # model ctx chunks (every model must run: a failure is a failure, never a skip)
    local m="$1" c="$2" n="$3"
    local model="$MODELS/$m.gguf" gold="$GOLD/$m.txt"
    [ -f "$model" ] && [ -f "$gold" ] || { fail "missing $model or $gold"; return; }
    if ! "$PPL" -m "$model" -f "$TEXT" -c "$c" -b "$c" --chunks "$n" -t 2 >"$TMP/$m.out" 2>"$TMP/$m.err"; then
        fail "$m: llama-perplexity failed: $(tail -c 300 "$TMP/$m.err")"
        return 1
    fi
    local ours ref
    ours=$(final_ppl "$TMP/$m.out")
    ref=$(final_ppl "$gold")
    if [ -z "$ours" ]; then fail "$m: no Final estimate line"; return 1; fi
    if within "$ours" "$ref" 0.0005; then pass; else fail "$m: PPL $ours, reference $ref (more than 0.05% apart)"; fi
    # the running line has one [i]value, entry per chunk
    local entries
    entries=$(grep -o '\[[0-9]*\][0-9.]*,' "$TMP/$m.out" | wc -l)
    [ "$entries" = "$n" ] && pass || fail "$m: $entries per-chunk entries, expected $n"
    grep -q "^Final estimate: PPL over $n chunks for n_ctx=$c = [0-9.]* +/- [0-9.]*$" "$TMP/$m.out" && pass ||
        fail "$m: Final estimate line not in llama.cpp's layout"
    return 0
}

check_ppl stories260K 128 8
check_ppl synth-qwen3-f16 256 4
check_ppl synth-qwen3moe-f16 256 4
check_ppl synth-deepseek2-f16 256 4

# the same chunks with several chunks per batch and with split batches
"$PPL" -m "$MODELS/stories260K.gguf" -f "$TEXT" -c 128 -b 512 --chunks 8 -t 2 >"$TMP/multi.out" 2>/dev/null
within "$(final_ppl "$TMP/multi.out")" "$(final_ppl "$GOLD/stories260K.txt")" 0.0005 && pass || fail "stories260K with -b 512 (4 chunks per batch): $(final_ppl "$TMP/multi.out")"
"$PPL" -m "$MODELS/stories260K.gguf" -f "$TEXT" -c 128 -b 32 --chunks 8 -t 2 >"$TMP/split.out" 2>/dev/null
within "$(final_ppl "$TMP/split.out")" "$(final_ppl "$GOLD/stories260K.txt")" 0.0005 && pass || fail "stories260K with -b 32: $(final_ppl "$TMP/split.out")"

# ---- KL-divergence against the reference's base files
check_kld_base() {   # model base
    local m="$1" base="$GOLD/$2.kld"
    if ! "$PPL" -m "$MODELS/$m.gguf" --kl-divergence-base "$base" --kl-divergence -t 2 >"$TMP/kld-$m.out" 2>"$TMP/kld-$m.err"; then
        fail "$m --kl-divergence: $(tail -c 300 "$TMP/kld-$m.err")"; return
    fi
    local k t
    k=$(mean_kld "$TMP/kld-$m.out"); t=$(same_top "$TMP/kld-$m.out")
    [ -n "$k" ] && awk -v k="$k" 'BEGIN { exit !(k <= 1e-3) }' && pass || fail "$m: mean KLD '$k' > 1e-3"
    [ -n "$t" ] && awk -v t="$t" 'BEGIN { exit !(t >= 98) }' && pass || fail "$m: same top '$t' < 98%"
    # the report has every section and line of llama.cpp's
    for line in "====== Perplexity statistics ======" "Mean PPL(Q)                   : " "Mean PPL(base)                : " \
                "Cor(ln(PPL(Q)), ln(PPL(base))): " "Mean ln(PPL(Q)/PPL(base))     : " "Mean PPL(Q)/PPL(base)         : " \
                "Mean PPL(Q)-PPL(base)         : " "====== KL divergence statistics ======" "Maximum KLD: " "99.9%   KLD: " \
                "Median  KLD: " " 0.1%   KLD: " "Minimum KLD: " "====== Token probability statistics ======" "Mean    Δp: " \
                "Maximum Δp: " "75.0%   Δp: " "Median  Δp: " "Minimum Δp: " "RMS Δp    : " "Same top p: "; do
        grep -qF -- "$line" "$TMP/kld-$m.out" || { fail "$m: KLD report lacks '$line'"; return; }
    done
    pass
    grep -q "^chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p$" "$TMP/kld-$m.out" && pass || fail "$m: chunk table header"
}
check_kld_base stories260K stories260K
check_kld_base synth-qwen3-f16 synth-qwen3-f16
check_kld_base synth-qwen3moe-f16 synth-qwen3moe-f16
check_kld_base synth-deepseek2-f16 synth-deepseek2-f16

# ---- the reference's quantized models reproduce its KLD / same-top numbers
check_quant() {   # quant-model base
    local m="$1" base="$GOLD/$2.kld"
    [ -f "$MODELS/$m.gguf" ] && [ -f "$GOLD/$m.txt" ] || return
    if ! "$PPL" -m "$MODELS/$m.gguf" --kl-divergence-base "$base" --kl-divergence -t 2 >"$TMP/q-$m.out" 2>"$TMP/q-$m.err"; then
        fail "$m: $(tail -c 300 "$TMP/q-$m.err")"
        return
    fi
    local k t rk rt
    k=$(mean_kld "$TMP/q-$m.out"); t=$(same_top "$TMP/q-$m.out")
    rk=$(mean_kld "$GOLD/$m.txt"); rt=$(same_top "$GOLD/$m.txt")
    within "$k" "$rk" 0.05 && pass || fail "$m: mean KLD $k, reference $rk (more than 5% apart)"
    within "$t" "$rt" 0.05 && pass || fail "$m: same top $t%, reference $rt% (more than 5% apart)"
    if ! KILN_EXACT_MATMUL=1 "$PPL" -m "$MODELS/$m.gguf" --kl-divergence-base "$base" --kl-divergence -t 2 >"$TMP/qx-$m.out" 2>"$TMP/qx-$m.err"; then
        fail "$m with exact products: $(tail -c 300 "$TMP/qx-$m.err")"
        return
    fi
    k=$(mean_kld "$TMP/qx-$m.out")
    [ -n "$k" ] && awk -v k="$k" -v r="$rk" 'BEGIN { exit !(k <= 1.02 * r) }' && pass ||
        fail "$m: mean KLD with exact products '$k', more than 2% above the reference's $rk"
}
check_quant synth-qwen3-Q8_0 synth-qwen3-f16
check_quant synth-qwen3-Q4_K_M synth-qwen3-f16
for f in "$MODELS"/synth-qwen3moe-*.gguf; do
    m=$(basename "$f" .gguf); [ "$m" = synth-qwen3moe-f16 ] && continue
    check_quant "$m" synth-qwen3moe-f16
done
for f in "$MODELS"/synth-deepseek2-*.gguf; do
    m=$(basename "$f" .gguf); [ "$m" = synth-deepseek2-f16 ] && continue
    check_quant "$m" synth-deepseek2-f16
done

# ---- a base file written here: the reference's layout, and KLD ~ 0 against itself
"$PPL" -m "$MODELS/stories260K.gguf" -f "$TEXT" -c 128 -b 128 --chunks 8 -t 2 --kl-divergence-base "$TMP/s.kld" >/dev/null 2>"$TMP/w.err" ||
    fail "writing a base file: $(tail -c 300 "$TMP/w.err")"
if [ -f "$TMP/s.kld" ]; then
    [ "$(stat -c %s "$TMP/s.kld")" = "$(stat -c %s "$GOLD/stories260K.kld")" ] && pass || fail "written base file size differs from the reference's"
    cmp -s -n $((20 + 4 * 128 * 8)) "$TMP/s.kld" "$GOLD/stories260K.kld" && pass || fail "written base header/tokens differ from the reference's"
    "$PPL" -m "$MODELS/stories260K.gguf" --kl-divergence-base "$TMP/s.kld" --kl-divergence -t 2 >"$TMP/self.out" 2>/dev/null
    k=$(mean_kld "$TMP/self.out")
    [ -n "$k" ] && awk -v k="$k" 'BEGIN { exit !(k < 1e-5 && k > -1e-5) }' && pass || fail "KLD against our own base is '$k', expected ~0"
    [ "$(same_top "$TMP/self.out")" = "100.000" ] && pass || fail "same top against our own base: $(same_top "$TMP/self.out")"
    # a truncated base file is refused up front, naming the file
    head -c 20000 "$TMP/s.kld" >"$TMP/trunc.kld"
    if "$PPL" -m "$MODELS/stories260K.gguf" --kl-divergence-base "$TMP/trunc.kld" --kl-divergence >/dev/null 2>"$TMP/e"; then
        fail "a truncated base file was accepted"
    else
        grep -q "trunc.kld" "$TMP/e" && pass || fail "truncated base: message does not name the file: $(head -c 200 "$TMP/e")"
    fi
fi
[ ! -e "$TMP/s.kld.tmp" ] && pass || fail "temporary base file left behind"

# ---- errors
printf 'Only a few words here.\n' >"$TMP/short.txt"
if "$PPL" -m "$MODELS/stories260K.gguf" -f "$TMP/short.txt" -c 128 >/dev/null 2>"$TMP/e"; then
    fail "a too-short text was accepted"
else
    grep -q "tokenizes to only" "$TMP/e" && grep -q "short.txt" "$TMP/e" && pass || fail "short text: unclear message: $(head -c 300 "$TMP/e")"
fi
if "$PPL" -m "$MODELS/stories260K.gguf" --kl-divergence-base "$TMP/none.kld" --kl-divergence >/dev/null 2>"$TMP/e"; then
    fail "a missing base file was accepted"
else
    grep -q "none.kld" "$TMP/e" && pass || fail "missing base: message does not name the file"
fi
# a base file of another vocabulary
if "$PPL" -m "$MODELS/synth-qwen3-f16.gguf" --kl-divergence-base "$GOLD/stories260K.kld" --kl-divergence >/dev/null 2>"$TMP/e"; then
    fail "a base file of another vocabulary was accepted"
else
    grep -q "vocabulary" "$TMP/e" && pass || fail "vocabulary mismatch: unclear message: $(head -c 300 "$TMP/e")"
fi
if "$PPL" -m "$MODELS/stories260K.gguf" >/dev/null 2>"$TMP/e"; then fail "no -f was accepted"; else pass; fi

echo "perplexity.sh: $passes passed, $fails failed"
[ "$fails" = 0 ]
