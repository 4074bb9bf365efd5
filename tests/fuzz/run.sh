#!/usr/bin/env bash
# Runs each libFuzzer target of a KILN_FUZZ build for a bounded time, two at a time:
#   tests/fuzz/run.sh BUILD_DIR SHARED_DIR [SECONDS]
# Each target starts from its committed corpus (tests/fuzz/corpus/<target>, copied, so what the
# run discovers stays in BUILD_DIR/fuzz) plus seeds read from ../shared where they fit. A crash,
# sanitizer report, leak, timeout (10 s) or memory blow-up (2 GiB) fails the run; the input is
# kept as BUILD_DIR/fuzz/findings/<target>-* to turn into a regression test. Prints the
# executions of each target.
set -uo pipefail
build="$1"
shared="$2"
seconds="${3:-45}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$build/fuzz"
mkdir -p "$work/findings"

extra_seeds() {   # read-only seed folders from ../shared per target
    case "$1" in
        fuzz-jinja) echo "$shared/templates" ;;
    esac
}

run_one() {
    local t="$1" corpus="$work/corpus/$1" log="$work/$1.log"
    # Reproducible in CI: every run starts from the committed corpus with a fixed seed and a fixed
    # number of executions (KILN_FUZZ_RUNS), so a machine replays exactly the inputs another one
    # tried; the time limit is only a backstop. Longer exploration: KILN_FUZZ_RUNS=-1 (time only),
    # KILN_FUZZ_SEED=0 (random seed).
    rm -rf "$corpus"
    mkdir -p "$corpus"
    cp -n "$here/corpus/$t/"* "$corpus/" 2>/dev/null
    local dict=()
    [ -f "$here/dict/$t.dict" ] && dict=(-dict="$here/dict/$t.dict")
    # shellcheck disable=SC2046
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/bin/$t" -seed="${KILN_FUZZ_SEED:-1}" -runs="${KILN_FUZZ_RUNS:-30000}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
        -print_final_stats=1 -artifact_prefix="$work/findings/$t-" "${dict[@]}" \
        "$corpus" $(extra_seeds "$t") >"$log" 2>&1
    local rc=$?
    local execs
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ $rc -eq 0 ]; then
        echo "fuzz $t: ${execs:-?} executions (seed ${KILN_FUZZ_SEED:-1}, at most ${seconds} s), corpus $(ls "$corpus" | wc -l) inputs, no findings"
    else
        echo "fuzz $t: FAILED after ${execs:-?} executions (exit $rc); the input is in $work/findings/"
        grep -m1 -E "FUZZ FINDING|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error" "$log"
        tail -n 40 "$log"
    fi
    return $rc
}

targets=()
for src in "$here"/fuzz-*.cpp; do
    t="$(basename "$src" .cpp)"
    if [ ! -x "$build/bin/$t" ]; then echo "fuzz: $build/bin/$t is not built"; exit 1; fi
    targets+=("$t")
done

# two at a time: the CI machine has two cores
status=0
pids=()
for t in "${targets[@]}"; do
    run_one "$t" &
    pids+=($!)
    if [ ${#pids[@]} -eq 2 ]; then
        wait "${pids[0]}" || status=1
        pids=("${pids[1]}")
    fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
