#!/bin/sh
# ensure-package.sh PACKAGE CHECK WHAT
# Installs the Debian package PACKAGE when the shell command CHECK fails, for WHAT (a few words
# naming the tests that need it). `npm test` runs it first (npm run test:deps) for every system
# package the tests use, so a fresh Debian CI machine running the README's `npm ci && npm test`
# gets them: faketime (libfaketime) for the chaos suite's clock nemesis, openssl for the TLS tests'
# certificates, prometheus for promtool (the alert rules check), kubernetes-client for kubectl
# (the Kubernetes manifests check). It never fails the caller: when it cannot install (not root
# and no sudo, no apt-get, no network), it says so, and the tests that need the package fail
# naming it.
PACKAGE="$1"
CHECK="$2"
WHAT="$3"
if sh -c "$CHECK" >/dev/null 2>&1; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-package: no apt-get here; install $PACKAGE by hand for $WHAT" >&2
  exit 0
fi
if [ "$(id -u)" = "0" ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  echo "ensure-package: $PACKAGE is missing and this user cannot install it (not root, no sudo): run 'apt-get install -y $PACKAGE' as root" >&2
  exit 0
fi
echo "ensure-package: installing $PACKAGE for $WHAT" >&2
export DEBIAN_FRONTEND=noninteractive
# A fresh image often has no package lists yet: update once if the first try fails.
$SUDO apt-get install -y -q --no-install-recommends "$PACKAGE" >/dev/null 2>&1 ||
  { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q --no-install-recommends "$PACKAGE" >/dev/null 2>&1; } ||
  echo "ensure-package: apt-get install $PACKAGE failed; $WHAT will fail" >&2
exit 0
