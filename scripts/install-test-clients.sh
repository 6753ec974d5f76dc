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
  # shellcheck source=scripts/lib/apt.sh
  . scripts/lib/apt.sh
  # With its recommended packages (fonts among them) as before.
  APT_RECOMMENDS=1 apt_install "posthog-js's capture test runs in it" chromium
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
