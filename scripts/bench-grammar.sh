#!/usr/bin/env bash
# What a JSON-schema grammar costs token generation at batch 1: llama-cli generates the same
# number of tokens with and without --json-schema, runs interleaved (the machines here are shared,
# so a single pair scatters), and the medians of its perf lines are compared: time per token
# (decode + sampling) and the sampling time alone. Not a test: a measurement to read.
#
# Usage: scripts/bench-grammar.sh [-m MODEL] [-r RUNS] [-n TOKENS] [-t THREADS] [-j SCHEMA] [-b BIN_DIR]
# Defaults: the synthetic Qwen3 Q8_0 model, 9 runs of 256 tokens on 1 thread, a schema whose
# output does not end early (an object holding a list of strings), build/bin.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL="${KILN_SHARED:-$HERE/../shared}/models/synth-qwen3-Q8_0.gguf"
RUNS=9
N=256
THREADS=1
BIN="$HERE/build/bin"
SCHEMA='{"type":"object","properties":{"items":{"type":"array","items":{"type":"string"}}},"required":["items"]}'
while getopts "m:r:n:t:j:b:" opt; do
    case "$opt" in
        m) MODEL="$OPTARG" ;;
        r) RUNS="$OPTARG" ;;
        n) N="$OPTARG" ;;
        t) THREADS="$OPTARG" ;;
        j) SCHEMA="$OPTARG" ;;
        b) BIN="$OPTARG" ;;
        *) echo "usage: $0 [-m MODEL] [-r RUNS] [-n TOKENS] [-t THREADS] [-j SCHEMA] [-b BIN_DIR]" >&2; exit 2 ;;
    esac
done
[ -x "$BIN/llama-cli" ] || { echo "bench-grammar: $BIN/llama-cli is not built" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "bench-grammar: no model at $MODEL (-m)" >&2; exit 1; }

# one run: "<ms per token, decode + sampling> <sampling ms per token> <tokens sampled>"
run() {
    local out
    out=$("$BIN/llama-cli" -m "$MODEL" -p "Write a list." -n "$N" -t "$THREADS" -no-cnv --seed 1 "$@" 2>&1 >/dev/null) ||
        { echo "bench-grammar: llama-cli failed: $out" >&2; exit 1; }
    awk '
        function ms_and_n(line, a) { sub(/.*= */, "", line); split(line, a, " "); return a[1] " " a[4] }
        /llama_perf_context_print: +eval time/ { split(ms_and_n($0), e, " "); eval_ms = e[1] }
        /llama_perf_sampler_print: +sampling time/ { split(ms_and_n($0), s, " "); sample_ms = s[1]; n = s[2] }
        END { if (n > 0) printf "%.5f %.5f %d\n", (eval_ms + sample_ms) / n, sample_ms / n, n; else exit 1 }' <<<"$out"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

plain_tok=() plain_smp=() gram_tok=() gram_smp=()
for ((i = 0; i < RUNS; ++i)); do
    read -r t s n < <(run)
    plain_tok+=("$t") plain_smp+=("$s")
    read -r t s ng < <(run -j "$SCHEMA")
    gram_tok+=("$t") gram_smp+=("$s")
    [ "$ng" -eq "$n" ] || echo "bench-grammar: the grammar run sampled $ng tokens, the plain one $n" >&2
done

pt=$(printf '%s\n' "${plain_tok[@]}" | median)
ps=$(printf '%s\n' "${plain_smp[@]}" | median)
gt=$(printf '%s\n' "${gram_tok[@]}" | median)
gs=$(printf '%s\n' "${gram_smp[@]}" | median)
echo "model $MODEL, $N tokens, -t $THREADS, median of $RUNS interleaved runs each"
awk -v pt="$pt" -v ps="$ps" -v gt="$gt" -v gs="$gs" 'BEGIN {
    printf "%-12s %14s %14s %12s\n", "", "ms/token", "tokens/s", "sampling ms"
    printf "%-12s %14.4f %14.1f %12.4f\n", "no grammar", pt, 1000 / pt, ps
    printf "%-12s %14.4f %14.1f %12.4f\n", "json schema", gt, 1000 / gt, gs
    printf "grammar cost: %+.1f%% time per token (sampling alone %.4f -> %.4f ms)\n", (gt / pt - 1) * 100, ps, gs
}'
