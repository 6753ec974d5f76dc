#!/usr/bin/env bash
# Makes sure current ClickHouse is at hand as a library for
# test/portability, which replays the product's statements on it: chDB's
# libchdb.so (the ClickHouse engine in process), from the npm registry's
# package @chdb/lib-linux-x64-gnu, checked against the pinned tarball's
# SHA-1 and kept in a cache folder. Prints the library's path. Used by
# `make test` (and so .ci/run).
set -euo pipefail

VERSION=26.7.3-stable.1   # ClickHouse 26.7.2.1
SHA1=d2905fafd0e0ac0e231cccadd1f0f6d010977297
dir="${PERSONHUB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/personhub}/chdb-$VERSION"
lib="$dir/libchdb.so"

if [ -f "$lib" ]; then
  echo "$lib"
  exit 0
fi
if [ "$(uname -sm)" != "Linux x86_64" ]; then
  echo "test/portability needs chDB's library for Linux x86_64; on $(uname -sm) set CHDB_LIB_PATH to a libchdb.so of ClickHouse 26.x" >&2
  exit 1
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is needed to fetch chDB's library (@chdb/lib-linux-x64-gnu@$VERSION) from the npm registry: install Node.js and npm" >&2
  exit 1
fi
echo "Fetching chDB $VERSION (current ClickHouse as a library, 178 MB) from the npm registry..." >&2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@chdb/lib-linux-x64-gnu@$VERSION" >/dev/null)
tgz="$(ls "$tmp"/*.tgz)"
echo "$SHA1  $tgz" | sha1sum -c --quiet -
tar -xzf "$tgz" -C "$tmp" package/libchdb.so
mkdir -p "$dir"
mv "$tmp/package/libchdb.so" "$lib.part"
mv "$lib.part" "$lib"
echo "chDB's library is at $lib" >&2
echo "$lib"
