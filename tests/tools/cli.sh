#!/usr/bin/env bash
# llama-cli end to end on stories260K: greedy output is deterministic and the same across thread
# counts and batch sizes, a seed reproduces a sampled run, -n bounds the output, and bad command
# lines exit non-zero with a message naming the flag. Usage: cli.sh <build>/bin <shared dir>
set -u

BIN="${1:?usage: cli.sh <build>/bin <shared dir>}"
SHARED="${2:?usage: cli.sh <build>/bin <shared dir>}"
TOOL="$BIN/llama-cli"
[ -x "$TOOL" ] || { echo "FAIL: $TOOL not built"; exit 1; }
MODEL="$SHARED/models/stories260K.gguf"

TMP=$(mktemp -d /tmp/kiln-cli-sh-XXXXXX)
trap 'rm -rf "$TMP"' EXIT

fails=0
passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { passes=$((passes + 1)); }

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

# run NAME ARGS...: run the tool, stdout to $TMP/NAME.out; a failure is reported
run() {
    local name="$1"; shift
    if "$TOOL" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
        pass
    else
        fail "llama-cli $* exited non-zero: $(tail -c 300 "$TMP/$name.err")"
    fi
}

same() {
    if cmp -s "$TMP/$1.out" "$TMP/$2.out"; then pass; else
        fail "outputs differ ($1 vs $2): '$(head -c 200 "$TMP/$1.out")' vs '$(head -c 200 "$TMP/$2.out")'"
    fi
}

if [ -f "$MODEL" ]; then
    P="Once upon a time"
    # one thread unless the thread count is what is tested: the machine may be busy
    T="-t 1"
    run greedy   -m "$MODEL" -p "$P" -n 32 --temp 0 $T
    run greedy2  -m "$MODEL" -p "$P" -n 32 --temp 0 $T
    run greedy_t1 -m "$MODEL" -p "$P" -n 32 --temp 0 -t 1
    run greedy_t2 -m "$MODEL" -p "$P" -n 32 --temp 0 -t 2
    run greedy_b1 -m "$MODEL" -p "$P" -n 32 --temp 0 -b 1 -ub 1 $T
    run greedy_b2 -m "$MODEL" -p "$P" -n 32 --temp 0 -b 2 $T
    same greedy greedy2
    same greedy greedy_t1
    same greedy greedy_t2
    same greedy greedy_b1
    same greedy greedy_b2
    run nowarm -m "$MODEL" -p "$P" -n 32 --temp 0 --no-warmup $T
    same greedy nowarm
    grep -q "^$P" "$TMP/greedy.out" || fail "the output does not start with the prompt"
    [ "$(wc -c <"$TMP/greedy.out")" -gt $(( ${#P} + 40 )) ] || fail "greedy output is too short: $(cat "$TMP/greedy.out")"
    grep -q "prompt eval time = .* tokens per second" "$TMP/greedy.err" || fail "no prompt timing line"
    grep -q "eval time = .* runs .* tokens per second" "$TMP/greedy.err" || fail "no eval timing line"

    # flags that used to be accepted and ignored (common/arg-promises.cpp)
    run noperf -m "$MODEL" -p "$P" -n 32 --temp 0 --no-perf $T
    same greedy noperf
    if grep -q "eval time" "$TMP/noperf.err"; then fail "--no-perf printed timings"; else pass; fi
    run ngl -m "$MODEL" -p "$P" -n 32 --temp 0 -ngl 99 -sm layer $T
    same greedy ngl
    [ "$(grep -c "^warning: no usable GPU found, -ngl ignored" "$TMP/ngl.err")" = 1 ] && pass || fail "-ngl 99: no single warning line: $(head -c 300 "$TMP/ngl.err")"
    grep -q "^warning: no usable GPU found, -sm ignored" "$TMP/ngl.err" && pass || fail "-sm layer: no warning"
    run checked -m "$MODEL" -p "$P" -n 32 --temp 0 --mlock --check-tensors $T
    same greedy checked
    grep -q "every weight is finite" "$TMP/checked.err" && pass || fail "--check-tensors did not check"
    grep -q "of weights locked in RAM" "$TMP/checked.err" && pass || fail "--mlock did not lock"
    # -rtr repacks weights that have an interleaved twin at load (none in this f32 model): it is
    # announced and the text is unchanged
    run rtr -m "$MODEL" -p "$P" -n 32 --temp 0 -rtr $T
    same greedy rtr
    grep -q -- "-rtr: " "$TMP/rtr.err" && pass || fail "-rtr: no load line"

    # context shift: with -c 32 the generation goes past the context (the oldest half after
    # --keep is dropped); with --no-context-shift it stops at the context with a warning, and
    # what it printed is where the shifted run started
    run shift -m "$MODEL" -p "$P" -c 32 -n 64 --temp 0 --ignore-eos --keep 2 $T
    run noshift -m "$MODEL" -p "$P" -c 32 -n 64 --temp 0 --ignore-eos --keep 2 --no-context-shift $T
    grep -q "eval time = .* /    63 runs" "$TMP/shift.err" && pass || fail "context shift: not 63 evaluations for -n 64 in -c 32: $(grep 'eval time' "$TMP/shift.err")"
    grep -q "the context is full (32 tokens) and cannot shift (--no-context-shift)" "$TMP/noshift.err" && pass || fail "--no-context-shift: no warning"
    [ "$(wc -c <"$TMP/noshift.out")" -lt "$(wc -c <"$TMP/shift.out")" ] || fail "--no-context-shift printed as much as the shifted run"
    cmp -s -n "$(( $(wc -c <"$TMP/noshift.out") - 1 ))" "$TMP/noshift.out" "$TMP/shift.out" && pass ||
        fail "the unshifted output is not a prefix of the shifted one"

    run seed_a -m "$MODEL" -p "$P" -n 32 --temp 0.9 -s 1234 $T
    run seed_b -m "$MODEL" -p "$P" -n 32 --temp 0.9 -s 1234 -t 1
    same seed_a seed_b

    # -n bounds the generation: 4 tokens give less text than 32
    run short -m "$MODEL" -p "$P" -n 4 --temp 0 $T
    [ "$(wc -c <"$TMP/short.out")" -lt "$(wc -c <"$TMP/greedy.out")" ] || fail "-n 4 printed as much as -n 32"
    head -c "$(( $(wc -c <"$TMP/short.out") - 1 ))" "$TMP/short.out" >"$TMP/short.prefix"
    grep -qF "$(cat "$TMP/short.prefix")" "$TMP/greedy.out" || fail "-n 4 output is not a prefix of the -n 32 output"

    # -r stops after the token that completes the reverse prompt; --no-display-prompt leaves the prompt out
    gen="$(cat "$TMP/greedy.out")"
    gen="${gen#"$P"}"
    rp="${gen:10:6}"
    run rev -m "$MODEL" -p "$P" -n 32 --temp 0 -r "$rp" --no-display-prompt $T
    out="$(cat "$TMP/rev.out")"
    if [[ "$out" == *"$rp"* && "$gen" == "$out"* && ${#out} -lt ${#gen} ]]; then pass; else
        fail "-r '$rp': output '$out' is not the generation cut after the reverse prompt ('$gen')"
    fi

    printf '%s' "$P" >"$TMP/prompt.txt"
    run file -m "$MODEL" -f "$TMP/prompt.txt" -n 32 --temp 0 $T
    same greedy file

    expect_err "no chat template" "$TOOL" -m "$MODEL" -p "$P" -cnv -n 4 $T
    tmpl="$TMP/chat.jinja"
    printf '%s' '{% for m in messages %}[{{ m.role }}] {{ m.content }}
{% endfor %}[assistant]' >"$tmpl"
    # speculative decoding: the output is the one without drafts (greedy, sampled with a seed,
    # across a context shift); a draft model equal to the main model has every draft accepted
    Q="$SHARED/models/synth-qwen3-f16.gguf"
    QP="The quick brown fox jumps over the lazy dog. The quick brown"
    run spec_ref -m "$Q" -p "$QP" -n 40 --temp 0 --ignore-eos $T
    run spec_ngram -m "$Q" -p "$QP" -n 40 --temp 0 --ignore-eos --spec-type ngram-simple $T
    run spec_same -m "$Q" -p "$QP" -n 40 --temp 0 --ignore-eos -md "$Q" --draft-p-min 0 --draft-max 6 $T
    same spec_ref spec_ngram
    same spec_ref spec_same
    grep -q "speculative decoding: \([1-9][0-9]*\) of \1 drafted tokens accepted" "$TMP/spec_same.err" && pass ||
        fail "a draft equal to the model: not every draft accepted: $(grep speculative "$TMP/spec_same.err")"
    run spec_sref -m "$Q" -p "$QP" -n 40 --temp 0.9 -s 7 --ignore-eos $T
    run spec_sq4 -m "$Q" -p "$QP" -n 40 --temp 0.9 -s 7 --ignore-eos -md "$SHARED/models/synth-qwen3-Q4_K_M.gguf" $T
    same spec_sref spec_sq4
    run spec_cref -m "$Q" -p "$QP" -c 40 -n 60 --temp 0 --ignore-eos $T
    run spec_cshift -m "$Q" -p "$QP" -c 40 -n 60 --temp 0 --ignore-eos --spec-type ngram-simple $T
    same spec_cref spec_cshift
    expect_err "cannot draft for" "$TOOL" -m "$Q" -p "$QP" -n 4 -md "$MODEL" $T

    # -cnv: a chat read from stdin; -p is the system message; each turn decodes only what the
    # template adds (the previous reply as the template writes it, and the new user turn);
    # /exit ends it, and what follows is never read
    printf 'Hello there\nHow are you\n/exit\nNever read\n' >"$TMP/chat.in"
    if "$TOOL" -m "$MODEL" -p "You are nice" -cnv --chat-template-file "$tmpl" -n 8 --temp 0 --verbose-prompt $T \
        <"$TMP/chat.in" >"$TMP/chat.out" 2>"$TMP/chat.err"; then pass; else fail "-cnv exited non-zero: $(tail -c 300 "$TMP/chat.err")"; fi
    [ "$(grep -c "^new prompt text" "$TMP/chat.err")" = 2 ] && pass || fail "-cnv: not two turns: $(head -c 400 "$TMP/chat.err")"
    grep -q "^\[system\] You are nice" "$TMP/chat.err" && pass || fail "-cnv: -p is not the system message"
    reply1="$(sed -n 's/^> //p' "$TMP/chat.out" | head -1)"
    [ -n "$reply1" ] && pass || fail "-cnv: no first reply: $(cat "$TMP/chat.out")"
    # the second turn's new text starts with the first reply, then the user's second line
    awk '/^new prompt text/{n++} n==2' "$TMP/chat.err" | grep -qF -- "$reply1" && pass || fail "-cnv: the second turn does not carry the first reply"
    awk '/^new prompt text/{n++} n==2' "$TMP/chat.err" | grep -q "^\[user\] How are you" && pass || fail "-cnv: the second user turn is missing"
    if grep -q "Never read" "$TMP/chat.err"; then fail "-cnv read past /exit"; else pass; fi
    # what the chat loop does not implement is refused, not ignored
    expect_err "--grammar / --grammar-file / --json-schema not supported with -cnv" "$TOOL" -m "$MODEL" -cnv --grammar 'root ::= "a"' -n 4 $T
    expect_err "-r not supported with -cnv" "$TOOL" -m "$MODEL" -cnv -r "User:" -n 4 $T
    expect_err "-md / --spec-type not supported with -cnv" "$TOOL" -m "$MODEL" -cnv --spec-type ngram-simple -n 4 $T
    # end of input ends the chat too
    if "$TOOL" -m "$MODEL" -cnv --chat-template-file "$tmpl" -n 4 $T </dev/null >/dev/null 2>&1; then pass; else fail "-cnv at end of input exited non-zero"; fi
    expect_err "prompt is too long" "$TOOL" -m "$MODEL" -p "$P $P $P $P" -c 8 -n 1 $T

    # --grammar / --grammar-file constrain the sampled text; bad grammars name line and column
    printf 'root ::= "tel " digits "-" digits\ndigits ::= [0-9]{3}\n' >"$TMP/tel.gbnf"
    run gfile -m "$MODEL" -p "$P" -n 64 --temp 1.5 -s 7 --no-display-prompt --grammar-file "$TMP/tel.gbnf" $T
    grep -qxE 'tel [0-9]{3}-[0-9]{3}' "$TMP/gfile.out" || fail "--grammar-file output: '$(cat "$TMP/gfile.out")'"
    run gflag -m "$MODEL" -p "$P" -n 64 --temp 1.5 -s 8 --no-display-prompt --grammar 'root ::= ("yes" | "no") "!"' $T
    grep -qxE '(yes|no)!' "$TMP/gflag.out" || fail "--grammar output: '$(cat "$TMP/gflag.out")'"
    run jschema -m "$MODEL" -p "$P" -n 64 --temp 1.5 -s 9 --no-display-prompt -j '{"enum": ["cat", "dog", 17]}' $T
    grep -qxE '("cat"|"dog"|17) ?' "$TMP/jschema.out" || fail "--json-schema output: '$(cat "$TMP/jschema.out")'"
    expect_err "--json-schema: schema at #: unknown type 'word'" "$TOOL" -m "$MODEL" -p "$P" -j '{"type": "word"}'
    expect_err "--json-schema: not valid JSON" "$TOOL" -m "$MODEL" -p "$P" -j '{"type":'
    # sampler flags: -l decides the greedy token; mirostat / XTC / top-n-sigma run
    i=0
    for f in "--mirostat 2 --mirostat-ent 3 --mirostat-lr 0.2" "--mirostat 1" "--xtc-probability 1 --xtc-threshold 0.01" "--top-nsigma 1.5" "--dry-multiplier 0.8 --dry-sequence-breaker none" "--samplers min_p;temp"; do
        i=$((i + 1))
        run "smp$i" -m "$MODEL" -p "$P" -n 4 --temp 1 -s 1 $f $T
    done
    expect_err "expected 0, 1 or 2" "$TOOL" -m "$MODEL" -p "$P" --mirostat 3
    expect_err "unknown sampler 'magic'" "$TOOL" -m "$MODEL" -p "$P" --samplers "top_k;magic"
    expect_err "TOKEN_ID+BIAS" "$TOOL" -m "$MODEL" -p "$P" -l 12
    run lb_forced -m "$MODEL" -p "$P" -n 1 --temp 0 --no-display-prompt -l 300+100 $T
    run lb_other -m "$MODEL" -p "$P" -n 1 --temp 0 --no-display-prompt -l 301+100 $T
    if cmp -s "$TMP/lb_forced.out" "$TMP/lb_other.out"; then fail "-l 300+100 and -l 301+100 gave the same token"; else pass; fi
    expect_err "line 1, column 10: undefined rule 'x'" "$TOOL" -m "$MODEL" -p "$P" --grammar 'root ::= x'
    expect_err "$TMP/none.gbnf" "$TOOL" -m "$MODEL" -p "$P" --grammar-file "$TMP/none.gbnf"
    printf 'root ::= "a"\nb ::= "\n' >"$TMP/bad.gbnf"
    expect_err "bad.gbnf': grammar parse error at line 2, column 7" "$TOOL" -m "$MODEL" -p "$P" --grammar-file "$TMP/bad.gbnf"
fi

expect_err "no model given (-m FILE, or --demo" "$TOOL" -p "hello"
expect_err "unknown argument: --frobnicate" "$TOOL" --frobnicate
expect_err "'abc' for -c" "$TOOL" -m "$MODEL" -c abc
expect_err "needs a value" "$TOOL" -m "$MODEL" -c
expect_err "-ctk" "$TOOL" -m "$MODEL" -ctk q9_9
expect_err "-fa" "$TOOL" -m "$MODEL" -fa sometimes
expect_err "not supported by llama-cli" "$TOOL" -m "$MODEL" --port 8080
expect_err "$TMP/missing.txt" "$TOOL" -m "$MODEL" -f "$TMP/missing.txt"
expect_err "$TMP/missing.gguf" "$TOOL" -m "$TMP/missing.gguf"
# --demo: a synthesized model (random weights, said so), generation runs, the temp file is removed
if run demo --demo -p "Once upon a time" -n 8 -t 1 --temp 0; then
    grep -q "RANDOM WEIGHTS" "$TMP/demo.err" && pass || fail "--demo did not say the weights are random"
fi
if "$TOOL" --help >"$TMP/help.out" 2>&1 && grep -q -- "--ctx-size" "$TMP/help.out"; then pass; else fail "--help"; fi

echo "cli.sh: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
