#!/usr/bin/env bash
# Builds Kiln and runs the whole test suite with CTest, then the parser and op tests again
# under AddressSanitizer + UBSan. This is the command CI runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"

build="${KILN_BUILD_DIR:-$root/build}"
KILN_BUILD_DIR="$build" "$root/scripts/build.sh"
(cd "$build" && ctest -j "$(nproc)" --output-on-failure --timeout 900)

# Sanitizer pass: only the suites that parse untrusted input or exercise the kernels' indexing.
asan="$root/build-asan"
sanitized=(test-gguf test-ops test-matmul)
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
regex="^($(IFS='|'; echo "${targets[*]}"))\$"
(cd "$asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest -j "$(nproc)" --output-on-failure --timeout 900 -L "$regex")
