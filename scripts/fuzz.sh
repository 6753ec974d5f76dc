#!/usr/bin/env bash
# The repository's fuzz targets as `go test -list` finds them, so that
# `make fuzz` cannot miss one (test/docs checks this list against the
# sources and docs/reliability.md).
#   scripts/fuzz.sh list        one "./<package folder> <target>" line per target
#   scripts/fuzz.sh run [TIME]  fuzz each target for TIME (default 20s), one after another
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

list() {
	# Only the packages whose tests declare a Fuzz function are built.
	local pkgs module
	pkgs=$(grep -rl --include='*_test.go' --exclude-dir=node_modules --exclude-dir=testdata '^func Fuzz' . |
		xargs -r -n1 dirname | sort -u)
	[ -n "$pkgs" ] || return 0
	module=$($GO list -m)
	# go test -list prints a package's names, then "ok <import path> <time>".
	# shellcheck disable=SC2086
	$GO test -list '^Fuzz' $pkgs | awk -v module="$module" '
		/^Fuzz/ { names[++n] = $1; next }
		$1 == "ok" { dir = "." substr($2, length(module) + 1); for (i = 1; i <= n; i++) print dir, names[i]; n = 0; next }
		{ print > "/dev/stderr"; bad = 1 }
		END { exit bad }'
}

case "${1:-}" in
list)
	list
	;;
run)
	time=${2:-20s}
	targets=$(list)
	while read -r pkg name; do
		echo "$name ($pkg), $time"
		$GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$time" "$pkg"
	done <<<"$targets"
	;;
*)
	echo "usage: scripts/fuzz.sh list | run [TIME]" >&2
	exit 2
	;;
esac
