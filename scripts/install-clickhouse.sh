#!/usr/bin/env bash
# Makes sure a ClickHouse server binary is available, installing Debian's
# clickhouse-server package when it is missing and this machine allows it.
# Used by `make run`, `make test` and .ci/run.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

if [ -n "${CLICKHOUSE_ADDR:-}" ] || [ -n "${CLICKHOUSE_SERVER:-}" ] || have clickhouse-server || have clickhouse; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ClickHouse is not installed and this is not a Debian-like system." >&2
  echo "Install ClickHouse (https://clickhouse.com/docs/en/install), or set CLICKHOUSE_ADDR to a running server." >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "ClickHouse is missing; run as root: apt-get install clickhouse-server (or set CLICKHOUSE_ADDR)." >&2
    exit 1
  fi
fi
echo "Installing Debian's clickhouse-server package..." >&2
$SUDO apt-get update -qq
# The package's own service is not used: the project starts a private server.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clickhouse-server clickhouse-client >/dev/null
echo "clickhouse-server installed." >&2
