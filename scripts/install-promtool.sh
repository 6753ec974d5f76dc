#!/usr/bin/env bash
# Makes sure promtool is here: the tests check deploy/prometheus (the
# configuration, the alert rules and their unit tests) with it. It comes
# with Debian's prometheus package; installing that also installs the
# prometheus server, which nothing here starts. Quick and silent when
# promtool is in place. Used by `make test` and .ci/run.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
  exit 0
fi
# shellcheck source=scripts/lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"
apt_install "promtool, for the tests of deploy/prometheus" prometheus
