#!/usr/bin/env bash
# Installs what Kiln needs to build and test, from Debian's packages. Safe to run again:
# packages already present are left alone.
set -euo pipefail

# qemu-user: the ISA tests run the binaries on emulated CPUs without AVX512 / AVX2 (tests/isa),
# and the arm64 build on emulated Arm CPUs; binutils: nm and objdump for the ISA symbol check;
# libssl-dev: llama-server's --ssl-cert-file / --ssl-key-file (openssl: the TLS test makes its certificate).
# g++-aarch64-linux-gnu: the arm64 cross build (cmake/aarch64-linux-gnu.cmake; its GoogleTest is
# compiled from libgtest-dev's sources); zlib1g-dev: llama-server inflates its embedded web UI for
# clients without gzip; chromium: the web UI test drives it headless (tests/webui); clang and
# libclang-rt-dev: the sanitizer build and the libFuzzer targets (tests/fuzz), which need clang's
# libFuzzer runtime.
packages=(g++ cmake ninja-build ccache pkg-config libgomp1 nlohmann-json3-dev libcpp-httplib-dev libgtest-dev libssl-dev openssl
          qemu-user binutils g++-aarch64-linux-gnu zlib1g-dev chromium clang libclang-rt-dev)

missing=()
for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# Node.js and npm (the server tests drive llama-server with the openai npm package) may come from
# outside Debian's packages: only install them when the commands are absent.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all packages present"
    exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
