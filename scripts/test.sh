#!/usr/bin/env bash
# Builds Kiln and runs the whole test suite with CTest, then the parser and op tests again
# under AddressSanitizer + UBSan. This is the command CI runs. Each stage prints its time.
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

# Sanitizer pass: the suites that parse untrusted input (GGUF, command lines, Jinja, crafted model
# files) or exercise indexing (kernels, KV cache bookkeeping), and the ISA symbol check on the
# sanitizer's objects (its instrumentation adds start-up code to them).
asan="$root/build-asan"
sanitized=(test-gguf test-ops test-matmul test-args test-jinja test-model-load test-kv-cache)
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
if [ ! -f "$asan/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$asan" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON >/dev/null
fi
targets=()
for t in "${sanitized[@]}"; do
    [ -f "$root/tests/$t.cpp" ] && targets+=("$t")
done
cmake --build "$asan" -j "$(nproc)" --target "${targets[@]}"
stage "build (ASan+UBSan)"
regex="^($(IFS='|'; echo "${targets[*]}")|isa-symbols)\$"
(cd "$asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest -j "$(nproc)" --output-on-failure --timeout 900 -L "$regex")
stage "ctest (ASan+UBSan)"

# Arm64: the kernel and op suites and llama-perplexity cross-built for aarch64 and run under
# qemu-aarch64 on emulated CPUs with and without dotprod/i8mm (tests/isa/aarch64.sh).
arm="${KILN_AARCH64_BUILD_DIR:-$root/build-aarch64}"
arm_targets=(test-ops test-matmul test-quants-simd test-quants-k test-quants-iq test-quants-ik llama-perplexity)
if [ ! -f "$arm/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$arm" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" >/dev/null
fi
cmake --build "$arm" -j "$(nproc)" --target "${arm_targets[@]}"
stage "build (aarch64)"
bash "$root/tests/isa/aarch64.sh" "$arm" "$root/../shared"
stage "qemu-aarch64"
