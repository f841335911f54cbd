#!/usr/bin/env bash
# Runs tap with its TAP output as usual, then, when anything failed, repeats each failing
# assertion with its diagnostics at the very end: a CI log that keeps only its tail still shows
# which test failed and why, not just the counts.
set -uo pipefail
log="$(mktemp "${TMPDIR:-/tmp}/tickraft-tap.XXXXXX")"
trap 'rm -f "$log"' EXIT
# tap compiles its plugin set (package.json "tap.plugin") into node_modules on first use, but the
# run that notices a stale set still starts every test process with the old set's loaders (the
# TypeScript plugin's ts-node beside tsx): about 3 s more per file on a fresh clone, minutes over
# the suite. Building it first gives every file of this run the configured set.
npx tap build >/dev/null || exit $?
npx tap "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo
  echo "# ---- failing assertions (repeated from above) ----"
  grep -n -A30 '^ *not ok ' "$log" | head -400
fi
exit "$rc"
