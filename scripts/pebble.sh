#!/usr/bin/env bash
# Pebble, Let's Encrypt's small ACME test server, for Mosaic's ACME tests.
#
# Mosaic's tests (internal/testkit/testenv) start their own Pebble processes on
# 127.0.0.1, each with a fresh config that points its TLS-ALPN-01 validation
# at the test's listener; all they need is the binary. This script builds it
# from source with the Go toolchain at a pinned version, because the only
# registry we rely on is the Go module proxy (no prebuilt downloads). The
# build takes seconds; later runs are no-ops.
#
# Usage:
#   bash scripts/pebble.sh install     build and install the pinned Pebble (idempotent)
#   bash scripts/pebble.sh path        print the binary's path (exit 1 if missing)
#
# The binary goes to $PEBBLE_BIN if set, else to $(go env GOBIN) or
# $(go env GOPATH)/bin, which is where internal/testkit/testenv looks for it (then
# on PATH).
set -euo pipefail

TOOL=pebble
TOOL_MODULE="github.com/letsencrypt/pebble/v2"
TOOL_PKG="$TOOL_MODULE/cmd/pebble"
TOOL_VERSION="v2.10.1"
TOOL_BIN_VAR=PEBBLE_BIN
# shellcheck source=scripts/gotool.sh
source "$(dirname "$0")/gotool.sh"

case "${1:-}" in
install) cmd_install ;;
path) cmd_path ;;
*)
	sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
