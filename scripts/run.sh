#!/usr/bin/env bash
# Sets up, builds, and runs Kiln's main job. With no model given it serves (or, until the
# server exists, generates with) a small model synthesized on the spot: random weights, so
# the text is gibberish, but every part of the engine runs. Give a real model with
#   scripts/run.sh -m /path/to/model.gguf [more llama-server flags]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
build="${KILN_BUILD_DIR:-$root/build}"
KILN_BUILD_DIR="$build" "$root/scripts/build.sh"
bin="$build/bin"

if [ -x "$bin/llama-server" ]; then
    exec "$bin/llama-server" "$@"
elif [ -x "$bin/llama-cli" ]; then
    if [ $# -eq 0 ]; then
        exec "$bin/llama-cli" --demo -p "Once upon a time" -n 32
    fi
    exec "$bin/llama-cli" "$@"
else
    echo "run: no llama-server or llama-cli built yet; showing the tensor library's view of a model instead"
    model="${1:-$root/../shared/models/stories260K.gguf}"
    exec "$bin/llama-gguf" info "$model"
fi
