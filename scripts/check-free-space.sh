#!/usr/bin/env bash
# Fails early, with the numbers, when the folder the tests write to has
# less free space than they need. Without it a full disk shows up as
# dozens of unrelated failures: ClickHouse servers that stop answering
# mid-test, JetStream's "insufficient storage resources", builds that
# cannot write. Usage: check-free-space.sh DIR GIB WHAT
set -euo pipefail
dir="$1" need_gib="$2" what="$3"
free_kib="$(df -Pk "$dir" | awk 'NR == 2 { print $4 }')"
if [ -z "$free_kib" ]; then
  echo "check-free-space: cannot read the free space of $dir" >&2
  exit 1
fi
if [ "$free_kib" -lt $((need_gib * 1024 * 1024)) ]; then
  printf '%s needs about %d GiB free in %s; it has %.1f GiB. Free some space (or point TMPDIR elsewhere) and run it again.\n' \
    "$what" "$need_gib" "$dir" "$(awk -v k="$free_kib" 'BEGIN { print k / 1048576 }')" >&2
  exit 1
fi
