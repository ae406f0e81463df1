#!/usr/bin/env bash
# One-step set-up for a clean machine: Node.js >= 22 (Node 24 from the npm registry when the system
# node is older), the locked npm dependencies, and the build. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE24_VERSION=24.21.0
node_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

npm ci --no-audit --no-fund

# npm scripts put node_modules/.bin first on PATH, so a node binary linked there runs every
# script (build, tests, the CLI under test) on Node 24 while npm itself may run on the system node.
if [ "$(node_major node)" -lt 22 ]; then
  tool_node=.tools/node/node_modules/node/bin/node
  if [ ! -x "$tool_node" ] || [ "$("$tool_node" --version)" != "v$NODE24_VERSION" ]; then
    echo "setup: system node $(node --version) is older than 22; installing Node $NODE24_VERSION from the npm registry" >&2
    rm -rf .tools/node
    mkdir -p .tools/node
    npm install --prefix .tools/node --no-save --no-package-lock --no-audit --no-fund "node@$NODE24_VERSION" >&2
  fi
  ln -sf "../../$tool_node" node_modules/.bin/node
fi
echo "setup: using node $(PATH="$PWD/node_modules/.bin:$PATH" node --version)" >&2

# The dashboard's end-to-end test runs the CLI in a pseudo-terminal from tmux
# (test/unit/cli/dashboard-e2e.test.ts); without tmux that test fails, it never skips.
if ! command -v tmux >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing tmux with apt-get (for the dashboard end-to-end test)" >&2
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tmux; } >/dev/null; then
      echo "setup: warning: installing tmux failed; the dashboard end-to-end test will fail until tmux is installed" >&2
    fi
  else
    echo "setup: warning: tmux is missing and cannot be installed here (needs root and apt-get); the dashboard end-to-end test will fail until tmux is installed" >&2
  fi
fi

npm run build
