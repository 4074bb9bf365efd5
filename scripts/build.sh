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
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
elif [ $# -gt 0 ]; then
    cmake -S "$root" -B "$build" "$@"
fi
cmake --build "$build" -j "$(nproc)"
