#!/bin/sh
# Installs the openssl command-line tool (Debian package `openssl`) when it is missing: the TLS
# tests (test/integration/tls.test.ts) make their CAs and certificates with it, as an operator
# would (docs/OPERATIONS.md, TLS). Called by test/helpers/certs.ts when `openssl version` fails.
# It never fails the caller: when it cannot install (not root and no sudo, no apt-get, no
# network), it says so, and the TLS tests then fail with a message naming the missing tool.
if command -v openssl >/dev/null 2>&1; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-openssl: no apt-get here; install openssl by hand for the TLS tests" >&2
  exit 0
fi
if [ "$(id -u)" = "0" ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  echo "ensure-openssl: openssl is missing and this user cannot install it (not root, no sudo): run 'apt-get install -y openssl' as root" >&2
  exit 0
fi
echo "ensure-openssl: installing openssl for the TLS tests" >&2
export DEBIAN_FRONTEND=noninteractive
# A fresh image often has no package lists yet: update once if the first try fails.
$SUDO apt-get install -y -q openssl >/dev/null 2>&1 ||
  { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q openssl >/dev/null 2>&1; } ||
  echo "ensure-openssl: apt-get install openssl failed; the TLS tests will fail" >&2
exit 0
