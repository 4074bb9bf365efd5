#!/usr/bin/env bash
# Builds Kiln and runs the whole test suite with CTest, then the parser and op tests again
# under AddressSanitizer + UBSan (clang), the libFuzzer targets for a bounded time, and the arm64
# build under qemu-aarch64. This is the command CI runs. Each stage prints its time.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# ccache keys on paths relative to the checkout, so a fresh clone elsewhere reuses the cache
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
# -g builds (the sanitizer pass) embed the build directory; without this a new clone misses the cache
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

stage_start=$SECONDS
stage() {   # prints the time of the stage that just ended
    echo "== stage: $1: $((SECONDS - stage_start)) s"
    stage_start=$SECONDS
}

"$root/scripts/setup.sh"
stage setup

build="${KILN_BUILD_DIR:-$root/build}"
KILN_BUILD_DIR="$build" "$root/scripts/build.sh"
stage build
# The Release suite includes the ISA checks (tests/isa): symbols of the per-ISA objects, and the
# binaries started and run under qemu-x86_64 on CPUs without AVX512 and without AVX2.
(cd "$build" && ctest -j "$(nproc)" --output-on-failure --timeout 900)
stage "ctest (Release)"

# Sanitizer pass: every suite that parses input (GGUF, vocabularies and tokenizers, command lines
# and LLAMA_ARG_* variables, Jinja and chat templates, tool calls, GBNF and JSON schemas, the
# server's text handling, crafted model files, sequence state files, imatrix files) or exercises
# indexing (kernels, KV cache bookkeeping, batch validation, recurrent state), and the ISA symbol
# check on the sanitizer's objects (its instrumentation adds start-up code to them). The build is clang's with libFuzzer's
# coverage hooks as well (KILN_FUZZ), so the same objects serve the fuzz targets below.
asan="$root/build-asan"
sanitized=(test-gguf test-ops test-ops-recurrent test-matmul test-args test-args-env test-arg-promises test-jinja test-chat-templates
           test-chat-tools test-chat-tools-partial test-tokenizer test-grammar test-json-schema test-server-stream test-model-load
           test-kv-cache test-decode test-recurrent-state test-state-file test-imatrix)
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
# a sanitizer build configured before it became clang's (or without the fuzzers) starts over
if [ -f "$asan/CMakeCache.txt" ] && ! grep -q '^KILN_FUZZ:BOOL=ON' "$asan/CMakeCache.txt"; then
    rm -rf "$asan"
fi
if [ ! -f "$asan/CMakeCache.txt" ]; then
    CC=clang CXX=clang++ cmake -S "$root" -B "$asan" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DKILN_SANITIZE=ON -DKILN_FUZZ=ON >/dev/null
fi
targets=()
for t in "${sanitized[@]}"; do
    [ -f "$root/tests/$t.cpp" ] && targets+=("$t")
done
fuzzers=()
for f in "$root"/tests/fuzz/fuzz-*.cpp; do
    fuzzers+=("$(basename "$f" .cpp)")
done
cmake --build "$asan" -j "$(nproc)" --target "${targets[@]}" "${fuzzers[@]}"
stage "build (ASan+UBSan, clang, with the fuzz targets)"
regex="^($(IFS='|'; echo "${targets[*]}")|isa-symbols)\$"
(cd "$asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest -j "$(nproc)" --output-on-failure --timeout 900 -L "$regex")
stage "ctest (ASan+UBSan)"

# Fuzzing: each libFuzzer target (tests/fuzz) runs for a bounded time from its committed corpus;
# a crash, sanitizer report, timeout or memory blow-up fails the run and keeps the input.
bash "$root/tests/fuzz/run.sh" "$asan" "$root/../shared" "${KILN_FUZZ_SECONDS:-50}"
stage "fuzz"

# Arm64: the kernel and op suites and llama-perplexity cross-built for aarch64 and run under
# qemu-aarch64 on emulated CPUs with and without dotprod/i8mm (tests/isa/aarch64.sh).
arm="${KILN_AARCH64_BUILD_DIR:-$root/build-aarch64}"
arm_targets=(test-ops test-ops-recurrent test-matmul test-quants-simd test-quants-k test-quants-iq test-quants-ik test-repack llama-perplexity)
if [ ! -f "$arm/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$arm" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" >/dev/null
fi
cmake --build "$arm" -j "$(nproc)" --target "${arm_targets[@]}"
stage "build (aarch64)"
bash "$root/tests/isa/aarch64.sh" "$arm" "$root/../shared"
stage "qemu-aarch64"
