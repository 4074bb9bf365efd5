#!/usr/bin/env bash
# llama-sweep-bench and llama-bench on a tiny synthetic model: the output has llama.cpp's /
# ik_llama.cpp's layout (header line, column widths, row formats, json/jsonl/csv fields), the
# parameter lists expand into combinations, and scripts/sweep-plot turns results into a PNG.
# Usage: bench.sh <build>/bin <shared dir>
set -u

BIN="${1:?usage: bench.sh <build>/bin <shared dir>}"
SWEEP="$BIN/llama-sweep-bench"
BENCH="$BIN/llama-bench"
GGUF="$BIN/llama-gguf"
PLOT="$(cd "$(dirname "$0")/../.." && pwd)/scripts/sweep-plot"
for t in "$SWEEP" "$BENCH" "$GGUF"; do [ -x "$t" ] || { echo "FAIL: $t not built"; exit 1; }; done

TMP=$(mktemp -d /tmp/kiln-bench-sh-XXXXXX)
trap 'rm -rf "$TMP"' EXIT

fails=0
passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { passes=$((passes + 1)); }

MODEL="$TMP/tiny.gguf"
"$GGUF" synth tiny-qwen3 -o "$MODEL" >/dev/null 2>"$TMP/e" || { echo "FAIL: synth: $(cat "$TMP/e")"; exit 1; }

# ---- llama-sweep-bench table
if "$SWEEP" -m "$MODEL" -c 256 -ub 64 -t 2 >"$TMP/sweep.out" 2>"$TMP/sweep.err"; then pass; else fail "sweep-bench: $(tail -c 300 "$TMP/sweep.err")"; fi
grep -qE '^main: n_kv_max = 256, n_batch = [0-9]+, n_ubatch = 64, flash_attn = [01], n_gpu_layers = -?[0-9]+, n_threads = 2, n_threads_batch = 2$' "$TMP/sweep.out" &&
    pass || fail "sweep-bench: main: line: $(grep '^main' "$TMP/sweep.out")"
grep -qxF '|    PP |     TG |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |' "$TMP/sweep.out" && pass || fail "sweep-bench: header line"
grep -qxF '|-------|--------|--------|----------|----------|----------|----------|' "$TMP/sweep.out" && pass || fail "sweep-bench: separator line"
rows=$(grep -E '^\|[ 0-9]{6} \| [ 0-9]{6} \| [ 0-9]{6} \| [ 0-9.]{8} \| [ 0-9.]{8} \| [ 0-9.]{8} \| [ 0-9.]{8} \|$' "$TMP/sweep.out")
[ "$(echo "$rows" | awk -F'|' '{ gsub(/ /, "", $4); printf "%s,", $4 }')" = "0,64,128,192," ] && pass || fail "sweep-bench: N_KV column: $rows"
[ "$(echo "$rows" | awk -F'|' '{ gsub(/ /, "", $2); gsub(/ /, "", $3); printf "%s/%s,", $2, $3 }')" = "64/16,64/16,64/16,64/16," ] &&
    pass || fail "sweep-bench: PP/TG columns (TG defaults to ub/4): $rows"

# ---- jsonl, -n, -wb
if "$SWEEP" -m "$MODEL" -c 192 -ub 64 -n 8 -wb -t 2 --output-format jsonl >"$TMP/sweep.jsonl" 2>"$TMP/e"; then pass; else fail "sweep-bench jsonl: $(tail -c 300 "$TMP/e")"; fi
python3 - "$TMP/sweep.jsonl" <<'EOF' && pass || fail "sweep-bench jsonl rows"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
keys = ["n_kv_max", "n_batch", "n_ubatch", "flash_attn", "n_gpu_layers", "n_threads", "n_threads_batch",
        "pp", "tg", "n_kv", "t_pp", "speed_pp", "t_tg", "speed_tg"]
assert [list(r) for r in rows] == [keys] * 3, rows
assert [r["n_kv"] for r in rows] == [0, 64, 128], rows
assert all(r["pp"] == 64 and r["tg"] == 8 and r["n_kv_max"] == 192 and r["speed_pp"] > 0 and r["speed_tg"] > 0 for r in rows), rows
EOF
if "$SWEEP" -m "$MODEL" -c 128 -ub 64 -n 0 -t 2 --output-format jsonl >"$TMP/sweep0.jsonl" 2>"$TMP/e"; then
    python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; assert len(r)==2 and all(x["tg"]==0 and x["speed_pp"]>0 for x in r), r' \
        "$TMP/sweep0.jsonl" && pass || fail "sweep-bench -n 0: rows still generate tokens: $(cat "$TMP/sweep0.jsonl")"
else fail "sweep-bench -n 0: $(tail -c 300 "$TMP/e")"; fi
if "$SWEEP" -m "$MODEL" --output-format xml >/dev/null 2>"$TMP/e"; then fail "sweep-bench accepted --output-format xml"; else
    grep -q -- "--output-format" "$TMP/e" && pass || fail "sweep-bench: bad format message: $(cat "$TMP/e")"; fi
if "$SWEEP" -m "$MODEL" -c 32 -ub 64 >/dev/null 2>"$TMP/e"; then fail "sweep-bench accepted -c smaller than -ub"; else pass; fi

# ---- sweep-plot
if command -v gnuplot >/dev/null 2>&1; then
    if python3 "$PLOT" -o "$TMP/sweep.png" "$TMP/sweep.out" "$TMP/sweep.jsonl" >/dev/null 2>"$TMP/e"; then
        [ "$(head -c 8 "$TMP/sweep.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] && pass || fail "sweep-plot: not a PNG"
    else
        fail "sweep-plot: $(cat "$TMP/e")"
    fi
    echo "no table here" >"$TMP/empty.txt"
    if python3 "$PLOT" -o "$TMP/x.png" "$TMP/empty.txt" >/dev/null 2>"$TMP/e"; then fail "sweep-plot accepted a file without rows"; else
        grep -q "empty.txt" "$TMP/e" && pass || fail "sweep-plot: message does not name the file"; fi
else
    echo "SKIP: gnuplot not installed"
fi

# ---- llama-bench markdown: default columns, combinations of comma lists
if "$BENCH" -m "$MODEL" -p 32,16 -n 4 -t 1,2 -r 2 >"$TMP/md.out" 2>"$TMP/e"; then pass; else fail "llama-bench: $(tail -c 300 "$TMP/e")"; fi
grep -qxF '| model                          |       size |     params | backend    | threads |          test |              t/s |' "$TMP/md.out" &&
    pass || fail "llama-bench: header: $(head -1 "$TMP/md.out")"
grep -qxF '| ------------------------------ | ---------: | ---------: | ---------- | ------: | ------------: | ---------------: |' "$TMP/md.out" &&
    pass || fail "llama-bench: separator: $(sed -n 2p "$TMP/md.out")"
tests=$(grep -E '^\| .{30} \| +[0-9.]+ MiB \| +[0-9.]+ M \| CPU        \| +[12] \| +(pp32|pp16|tg4) \| +[0-9.]+ ± [0-9.]+ \|$' "$TMP/md.out" |
        awk -F'|' '{ gsub(/ /, "", $6); gsub(/ /, "", $7); printf "%s:%s,", $6, $7 }')
[ "$tests" = "1:pp32,1:pp16,1:tg4,2:pp32,2:pp16,2:tg4," ] && pass || fail "llama-bench: rows (threads:test): '$tests'"$'\n'"$(cat "$TMP/md.out")"

# a non-default parameter gets its column; several models
"$BENCH" -m "$MODEL" -m "$MODEL" -p 16 -n 0 -fa 0 -ub 16 -r 1 >"$TMP/md2.out" 2>"$TMP/e" || fail "llama-bench -fa 0: $(tail -c 300 "$TMP/e")"
grep -qF '| backend    | threads | n_ubatch | fa |          test |' "$TMP/md2.out" && pass || fail "llama-bench: n_ubatch/fa columns: $(head -1 "$TMP/md2.out")"
[ "$(grep -c '|          pp16 |' "$TMP/md2.out")" = 2 ] && pass || fail "llama-bench: two models, two rows"

# json / jsonl / csv
"$BENCH" -m "$MODEL" -p 16 -n 4 -r 2 -o json >"$TMP/b.json" 2>/dev/null
"$BENCH" -m "$MODEL" -p 16 -n 4 -r 2 -o jsonl >"$TMP/b.jsonl" 2>/dev/null
"$BENCH" -m "$MODEL" -p 16 -n 4 -r 1 -o csv >"$TMP/b.csv" 2>/dev/null
python3 - "$TMP/b.json" "$TMP/b.jsonl" "$TMP/b.csv" <<'EOF' && pass || fail "llama-bench json/jsonl/csv"
import csv, json, sys
a = json.load(open(sys.argv[1]))
b = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
c = list(csv.DictReader(open(sys.argv[3])))
for rows in (a, b):
    assert [r["test"] for r in rows] == ["pp16", "tg4"], rows
    for r in rows:
        assert len(r["samples_ns"]) == 2 and len(r["samples_ts"]) == 2
        assert r["avg_ts"] > 0 and r["model_n_params"] > 0 and r["n_threads"] >= 1
        assert (r["n_prompt"], r["n_gen"]) in ((16, 0), (0, 4))
        assert isinstance(r["flash_attn"], bool)
        assert r["n_gpu_layers"] == 0, r   # no GPU: what runs is what is reported
assert [r["test"] for r in c] == ["pp16", "tg4"] and float(c[0]["avg_ts"]) > 0, c
EOF
# -ngl without a GPU: one warning, the CPU runs it, 0 is reported
"$BENCH" -m "$MODEL" -p 16 -n 0 -r 1 -ngl 99 -o jsonl >"$TMP/ngl.jsonl" 2>"$TMP/e" || fail "llama-bench -ngl 99: $(tail -c 300 "$TMP/e")"
[ "$(grep -c 'no usable GPU found, -ngl ignored' "$TMP/e")" = 1 ] && pass || fail "llama-bench -ngl 99: no warning: $(cat "$TMP/e")"
grep -q '"n_gpu_layers": 0' "$TMP/ngl.jsonl" && pass || fail "llama-bench -ngl 99 reports: $(cat "$TMP/ngl.jsonl")"
if "$BENCH" -m "$MODEL" -p abc >/dev/null 2>"$TMP/e"; then fail "llama-bench accepted -p abc"; else grep -q -- "-p" "$TMP/e" && pass || fail "llama-bench: bad value message"; fi
if "$BENCH" -m "$MODEL" --frobnicate >/dev/null 2>"$TMP/e"; then fail "llama-bench accepted an unknown flag"; else
    grep -q -- "--frobnicate" "$TMP/e" && pass || fail "llama-bench: unknown flag message"; fi
if "$BENCH" -m "$TMP/none.gguf" -r 1 >/dev/null 2>"$TMP/e"; then fail "llama-bench: missing model accepted"; else
    grep -q "none.gguf" "$TMP/e" && pass || fail "llama-bench: missing model message"; fi

echo "bench.sh: $passes passed, $fails failed"
[ "$fails" = 0 ]
