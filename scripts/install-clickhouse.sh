#!/usr/bin/env bash
# Makes sure a ClickHouse server binary is available, installing Debian's
# clickhouse-server package when it is missing and this machine allows it.
# Used by `make run`, `make test` and .ci/run.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

if [ -n "${CLICKHOUSE_ADDR:-}" ] || [ -n "${CLICKHOUSE_SERVER:-}" ] || have clickhouse-server || have clickhouse; then
  exit 0
fi

# The package's own service is not used: the project starts a private
# server. Without apt, install ClickHouse
# (https://clickhouse.com/docs/en/install) or set CLICKHOUSE_ADDR to a
# running server.
# shellcheck source=scripts/lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"
apt_install "the ClickHouse server the project starts; or set CLICKHOUSE_ADDR" clickhouse-server clickhouse-client
