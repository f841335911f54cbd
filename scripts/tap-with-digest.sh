#!/usr/bin/env bash
# Runs tap with its TAP output as usual, then, when anything failed, repeats each failing
# assertion with its diagnostics at the very end: a CI log that keeps only its tail still shows
# which test failed and why, not just the counts.
set -uo pipefail
log="$(mktemp "${TMPDIR:-/tmp}/tickraft-tap.XXXXXX")"
trap 'rm -f "$log"' EXIT
npx tap "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo
  echo "# ---- failing assertions (repeated from above) ----"
  grep -n -A30 '^ *not ok ' "$log" | head -400
fi
exit "$rc"
