#!/usr/bin/env bash
# Builds and runs the CUDA suites on a machine with a GPU: the one a session is lent through the
# device tool (which has nvcc, CMake and ninja but no GoogleTest), or any other.
#
#   scripts/gpu-check.sh --prepare     here, before the call: copies Debian's GoogleTest sources
#                                      into .gpu/ (ignored by git) so that they can travel
#   scripts/gpu-check.sh               there: configure with KILN_CUDA=ON, build the suites with
#                                      every core, print the GPU, run them; logs go to $OUT
#                                      (the device tool's) or build-gpu/out
#
# With the device tool: run(command="bash scripts/gpu-check.sh", carry=[".gpu"]). Extra
# arguments are passed to test-cuda-ops (e.g. --gtest_filter=CudaOps.FlashAttention).
# KILN_GPU_SANITIZE=1 also runs the op suite under compute-sanitizer (memcheck).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

if [ "${1:-}" = "--prepare" ]; then
    [ -f /usr/src/googletest/CMakeLists.txt ] || { echo "gpu-check: /usr/src/googletest missing (libgtest-dev)"; exit 1; }
    mkdir -p "$root/.gpu"
    rm -rf "$root/.gpu/googletest"
    cp -r /usr/src/googletest "$root/.gpu/googletest"
    exclude="$(git -C "$root" rev-parse --git-path info/exclude)"
    case "$exclude" in /*) ;; *) exclude="$root/$exclude" ;; esac
    mkdir -p "$(dirname "$exclude")"
    grep -qxF '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
    echo "gpu-check: GoogleTest sources in .gpu/ ($(du -sh "$root/.gpu" | cut -f1)); carry .gpu"
    exit 0
fi

build="${KILN_GPU_BUILD_DIR:-$root/build-gpu}"
out="${OUT:-$build/out}"
mkdir -p "$out"
gtest_src="$root/.gpu/googletest"
[ -f "$gtest_src/CMakeLists.txt" ] || gtest_src=/usr/src/googletest
export PATH="$PATH:/usr/local/cuda/bin"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/gpu.txt" || true
start=$SECONDS
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON \
    -DKILN_CUDA_ARCHS="${KILN_CUDA_ARCHS:-90}" -DKILN_GTEST_SOURCE_DIR="$gtest_src" >"$out/configure.log" 2>&1 ||
    { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target test-cuda-devices test-cuda-virtual test-cuda-ops test-quants-blocks >"$out/build.log" 2>&1 ||
    { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
echo "gpu-check: built in $((SECONDS - start)) s"

status=0
run_suite() {   # name, binary arguments...: output to $out/name.log, summary printed
    local name="$1"
    shift
    if "$@" >"$out/$name.log" 2>&1; then echo "gpu-check: $name passed"; else echo "gpu-check: $name FAILED"; status=1; fi
    grep -E "^\[  (FAILED|SKIPPED) |Failure|squared error|^CUDA" "$out/$name.log" | head -60 || true
}
run_suite quants-blocks "$build/bin/test-quants-blocks"
run_suite cuda-devices "$build/bin/test-cuda-devices"
# KILN_VIRTUAL_CUDA_DEVICES=3 (the suite sets it): a split across three devices over this one GPU
run_suite cuda-virtual "$build/bin/test-cuda-virtual" --gtest_filter=-VirtualCuda.WithoutGpuNoDeviceIsListed
run_suite cuda-ops "$build/bin/test-cuda-ops" --gtest_output="xml:$out/cuda-ops.xml" "$@"
# here the point is to run them: a skipped GPU test means the GPU was not usable
if grep -q "^\[  SKIPPED \]" "$out/cuda-ops.log" "$out/cuda-devices.log" "$out/cuda-virtual.log"; then
    echo "gpu-check: GPU tests were skipped: no usable GPU here"
    status=1
fi
if [ "${KILN_GPU_SANITIZE:-0}" = "1" ] && command -v compute-sanitizer >/dev/null 2>&1; then
    run_suite memcheck compute-sanitizer --tool memcheck --error-exitcode 3 "$build/bin/test-cuda-ops" "$@"
fi
echo "gpu-check: $([ $status -eq 0 ] && echo passed || echo FAILED) in $((SECONDS - start)) s; logs in $out"
exit $status
