#!/usr/bin/env bash
# Installs the server tests' npm dependencies (the official openai and anthropic clients, ajv) from the committed
# lockfile. Idempotent: does nothing when they are already installed at the locked version.
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v npm >/dev/null || { echo "setup: npm is missing (scripts/setup.sh installs nodejs and npm)" >&2; exit 1; }
marker="$DIR/node_modules/.package-lock.json"
# npm writes node_modules/.package-lock.json on install; if it matches the lockfile's
# dependencies, the tree is current
if [ -f "$marker" ] && [ -d "$DIR/node_modules/openai" ] && [ -d "$DIR/node_modules/@anthropic-ai/sdk" ] && [ -d "$DIR/node_modules/ajv" ] && [ "$marker" -nt "$DIR/package-lock.json" ]; then
    exit 0
fi
echo "setup: npm ci in $DIR"
npm ci --prefix "$DIR" --no-audit --no-fund --loglevel=error
