#!/usr/bin/env bash
# Pebble, Let's Encrypt's small ACME test server, for Mosaic's ACME tests.
#
# Mosaic's tests (internal/testenv) start their own Pebble processes on
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
# $(go env GOPATH)/bin, which is where internal/testenv looks for it (then
# on PATH).
set -euo pipefail

PEBBLE_MODULE="github.com/letsencrypt/pebble/v2"
PEBBLE_VERSION="v2.10.1"

pebble_bin() {
	if [[ -n "${PEBBLE_BIN:-}" ]]; then
		echo "$PEBBLE_BIN"
		return
	fi
	local gobin
	gobin="$(go env GOBIN)"
	if [[ -z "$gobin" ]]; then
		gobin="$(go env GOPATH)/bin"
	fi
	echo "$gobin/pebble"
}

# installed_version prints the module version the binary was built from.
installed_version() {
	go version -m "$1" 2>/dev/null | awk '$1 == "mod" && $2 == "'"$PEBBLE_MODULE"'" { print $3 }'
}

cmd_install() {
	local bin
	bin="$(pebble_bin)"
	if [[ -x "$bin" && "$(installed_version "$bin")" == "$PEBBLE_VERSION" ]]; then
		echo "pebble $PEBBLE_VERSION already installed at $bin"
		return
	fi
	echo "building pebble $PEBBLE_VERSION..." >&2
	if [[ -n "${PEBBLE_BIN:-}" ]]; then
		# go install cannot name its output; build into a temporary GOBIN and move.
		local tmp
		tmp="$(mktemp -d)"
		trap 'rm -rf "$tmp"' RETURN
		GOBIN="$tmp" go install "$PEBBLE_MODULE/cmd/pebble@$PEBBLE_VERSION"
		mkdir -p "$(dirname "$PEBBLE_BIN")"
		mv "$tmp/pebble" "$PEBBLE_BIN"
	else
		go install "$PEBBLE_MODULE/cmd/pebble@$PEBBLE_VERSION"
	fi
	echo "installed pebble $PEBBLE_VERSION at $bin"
}

cmd_path() {
	local bin
	bin="$(pebble_bin)"
	if [[ -x "$bin" ]]; then
		echo "$bin"
	elif command -v pebble >/dev/null; then
		command -v pebble
	else
		echo "pebble not installed: run 'bash scripts/pebble.sh install'" >&2
		exit 1
	fi
}

case "${1:-}" in
install) cmd_install ;;
path) cmd_path ;;
*)
	sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
