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
if ! command -v apt-get >/dev/null 2>&1; then
  echo "promtool is missing and this is not a Debian-like system: install Prometheus's promtool (the tests of deploy/prometheus run it)." >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "promtool is missing; run as root: apt-get install -y prometheus" >&2
    exit 1
  fi
fi
echo "Installing Debian's prometheus package (for promtool)..." >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
echo "promtool installed." >&2
