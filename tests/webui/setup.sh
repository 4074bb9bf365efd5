#!/usr/bin/env bash
# Installs the web UI test's npm dependency (playwright-core, which drives Debian's chromium) from
# the committed lockfile. Does nothing when it is already installed at the locked version.
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v npm >/dev/null || { echo "setup: npm is missing (scripts/setup.sh installs nodejs and npm)" >&2; exit 1; }
marker="$DIR/node_modules/.package-lock.json"
# npm writes node_modules/.package-lock.json on install; newer than the lockfile: the tree is current
if [ -f "$marker" ] && [ -d "$DIR/node_modules/playwright-core" ] && [ "$marker" -nt "$DIR/package-lock.json" ]; then
    exit 0
fi
echo "setup: npm ci in $DIR"
npm ci --prefix "$DIR" --no-audit --no-fund --loglevel=error
