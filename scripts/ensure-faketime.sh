#!/bin/sh
# Installs libfaketime (Debian package `faketime`, which pulls `libfaketime`) when it is missing,
# for the chaos suite's clock nemesis (docs/chaos.md). Runs before `npm test`, so a fresh Debian
# CI machine running the README's `npm ci && npm test` gets it. It never fails the caller: when it
# cannot install (not root and no sudo, no apt-get, no network), it says so, and the clock
# nemesis test then fails with a message naming the missing library.
if dpkg -s libfaketime >/dev/null 2>&1; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-faketime: no apt-get here; install libfaketime by hand for the clock nemesis" >&2
  exit 0
fi
if [ "$(id -u)" = "0" ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  echo "ensure-faketime: libfaketime is missing and this user cannot install it (not root, no sudo): run 'apt-get install -y faketime' as root" >&2
  exit 0
fi
echo "ensure-faketime: installing faketime (libfaketime) for the clock nemesis" >&2
export DEBIAN_FRONTEND=noninteractive
# A fresh image often has no package lists yet: update once if the first try fails.
$SUDO apt-get install -y -q faketime >/dev/null 2>&1 ||
  { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q faketime >/dev/null 2>&1; } ||
  echo "ensure-faketime: apt-get install faketime failed; the clock nemesis test will fail" >&2
exit 0
