#!/usr/bin/env bash
# Rebuilds dist/index.html.gz, the web UI llama-server embeds, from src/ (see README.md).
# Needs node and npm (scripts/setup.sh installs them); the packages come from the lockfile.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --loglevel=error
npm run build
