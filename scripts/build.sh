#!/usr/bin/env bash
# Configures and builds Kiln into build/ (Release, ccache when present). Extra arguments go to
# CMake's configure step, e.g. scripts/build.sh -DKILN_NATIVE=ON
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# ccache keys on paths relative to the checkout, so a fresh clone elsewhere reuses the cache
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
build="${KILN_BUILD_DIR:-$root/build}"
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
# The CUDA backend is built whenever the toolkit is there (a -DKILN_CUDA=... argument decides
# otherwise): for this machine's GPUs when it has one, else for one architecture (sm_90), which
# keeps CI's build short. The binaries run CPU-only where there is no GPU or driver.
cuda=()
if [[ " $* " != *" -DKILN_CUDA="* ]] && { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; }; then
    archs=90
    nvidia-smi -L >/dev/null 2>&1 && archs=native
    cuda=(-DKILN_CUDA=ON -DKILN_CUDA_ARCHS="$archs")
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" "$@"
elif [ $# -gt 0 ]; then
    cmake -S "$root" -B "$build" "$@"
fi
cmake --build "$build" -j "$(nproc)"
