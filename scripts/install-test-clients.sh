#!/usr/bin/env bash
# Makes sure the real client libraries that the capture tests drive are
# here: Debian's chromium (posthog-js runs in it) and the npm packages of
# test/node (posthog-node), test/browser (posthog-js) and test/openapi (the
# OpenAPI linter and client generator) at the versions of their lock
# files. Quick and silent when all is in place.
# Used by `make test` and .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

have() { command -v "$1" >/dev/null 2>&1; }

if ! have chromium && ! have chromium-browser; then
  if ! have apt-get; then
    echo "Chromium is missing and this is not a Debian-like system: install chromium (the capture browser test runs it)." >&2
    exit 1
  fi
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if have sudo; then SUDO="sudo"; else
      echo "Chromium is missing; run as root: apt-get install -y chromium" >&2
      exit 1
    fi
  fi
  echo "Installing Debian's chromium package..." >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  echo "chromium installed." >&2
fi

if ! have node || ! have npm; then
  echo "Node.js and npm are missing: the capture tests need Node.js 20.20 or newer with npm." >&2
  exit 1
fi

for dir in test/node test/browser test/openapi; do
  # npm ci when node_modules is missing or older than the lock file.
  stamp="$dir/node_modules/.package-lock.json"
  if [ ! -f "$stamp" ] || [ "$dir/package-lock.json" -nt "$stamp" ]; then
    echo "npm ci --prefix $dir" >&2
    npm ci --prefix "$dir" --ignore-scripts --no-audit --no-fund --loglevel=error
  fi
done
