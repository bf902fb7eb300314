#!/usr/bin/env bash
# Sunlight v0.9.0, the peer of Mosaic's interoperability tests (test/e2e,
# interop_test.go).
#
# The tests start their own Sunlight processes on 127.0.0.1 (a log, and a
# witness next to it) with throwaway directories; all they need are the
# binaries. This script builds them from source with the Go toolchain,
# because the only registry we rely on is the Go module proxy (no prebuilt
# downloads): in a scratch module, as bench/compare.sh builds v0.8.1, with
# CGO_ENABLED=1 (Sunlight's SQLite driver needs gcc); the go command checks
# every module against the Go checksum database, as usual. Besides Sunlight's
# own commands it builds two small programs of Mosaic's in that module:
#   sunlight_mkdb   bench/_compare/sunlight_mkdb.go: the SQLite checkpoints
#                   database Sunlight needs before its first start;
#   sunlight_read   scripts/sunlight_read.go: reads a Static CT log with
#                   Sunlight's client package and verifies its checkpoint
#                   and SCTs with Sunlight's and torchwood's verifiers,
#                   and with -names reads its names tiles;
# and, in a second scratch module (so that Tessera's requirements do not
# move the versions Sunlight is built with), one more:
#   tessera_witness scripts/tessera_witness.go: a Tessera v1.0.4 log whose
#                   own witness client gets its checkpoints cosigned (the
#                   independent witness client Mosaic's witness is tested
#                   against), checked with Tessera's and, for ML-DSA-44,
#                   with torchwood's (Sunlight v0.9.0's version) verifier.
# The first build takes a few minutes (Sunlight pulls in the AWS SDK);
# later runs are no-ops.
#
# Usage:
#   bash scripts/sunlight.sh install   build the pinned Sunlight and the helpers (idempotent)
#   bash scripts/sunlight.sh path      print the directory holding the binaries (exit 1 if missing)
#
# The binaries go to $SUNLIGHT_DIR if set, else to
# ${XDG_CACHE_HOME:-~/.cache}/mosaic/sunlight-v0.9.0-<hash>/bin, <hash>
# naming the helpers' sources, so that editing them means a new build;
# internal/testkit/testenv asks this script's `path` for it.
set -euo pipefail

SUNLIGHT_MODULE="filippo.io/sunlight"
SUNLIGHT_VERSION="v0.9.0"
TESSERA_MODULE="github.com/transparency-dev/tessera"
TESSERA_VERSION="v1.0.4"
# torchwood as Sunlight v0.9.0 requires it (its ML-DSA-44 cosignatures).
TORCHWOOD_VERSION="v0.9.1-0.20260706112420-c22a68158d96"

root=$(cd "$(dirname "$0")/.." && pwd)
helpers=("$root/bench/_compare/sunlight_mkdb.go" "$root/scripts/sunlight_read.go" "$root/scripts/tessera_witness.go")
binaries=(sunlight sunlight-keygen sunlight_mkdb sunlight_read tessera_witness)

sunlight_dir() {
	if [[ -n "${SUNLIGHT_DIR:-}" ]]; then
		echo "$SUNLIGHT_DIR"
		return
	fi
	local hash
	hash=$(cat "${helpers[@]}" | sha256sum | cut -c1-12)
	echo "${XDG_CACHE_HOME:-$HOME/.cache}/mosaic/sunlight-$SUNLIGHT_VERSION-$hash/bin"
}

# modversion prints the version of module MOD binary BIN was built with.
modversion() {
	go version -m "$1" 2>/dev/null | awk '$1 == "dep" && $2 == "'"$2"'" { print $3 } $1 == "mod" && $2 == "'"$2"'" { print $3 }'
}

# installed reports whether every binary is in DIR, Sunlight and Tessera
# built from the pinned versions.
installed() {
	local dir=$1 b
	for b in "${binaries[@]}"; do
		[[ -x "$dir/$b" ]] || return 1
	done
	[[ "$(modversion "$dir/sunlight" "$SUNLIGHT_MODULE")" == "$SUNLIGHT_VERSION" ]] &&
		[[ "$(modversion "$dir/tessera_witness" "$TESSERA_MODULE")" == "$TESSERA_VERSION" ]]
}

cmd_install() {
	local dir tmp
	dir="$(sunlight_dir)"
	if installed "$dir"; then
		echo "sunlight $SUNLIGHT_VERSION already installed at $dir"
		return
	fi
	if ! command -v gcc >/dev/null; then
		echo "Sunlight needs cgo for its SQLite driver, and there is no gcc (apt-get install gcc)" >&2
		exit 1
	fi
	echo "building sunlight $SUNLIGHT_VERSION in a scratch module (first build takes a few minutes)..." >&2
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' RETURN
	if ! (
		cd "$tmp" &&
			go mod init mosaic-sunlight-interop &&
			go get "$SUNLIGHT_MODULE/cmd/sunlight@$SUNLIGHT_VERSION" "$SUNLIGHT_MODULE/cmd/sunlight-keygen@$SUNLIGHT_VERSION" &&
			CGO_ENABLED=1 go build -o bin/ "$SUNLIGHT_MODULE/cmd/sunlight" "$SUNLIGHT_MODULE/cmd/sunlight-keygen" &&
			cp "${helpers[@]}" . &&
			CGO_ENABLED=1 go build -o bin/sunlight_mkdb sunlight_mkdb.go &&
			go build -o bin/sunlight_read sunlight_read.go &&
			mkdir tessera && cd tessera &&
			go mod init mosaic-tessera-interop &&
			go get "$TESSERA_MODULE@$TESSERA_VERSION" "$TESSERA_MODULE/storage/posix@$TESSERA_VERSION" "filippo.io/torchwood@$TORCHWOOD_VERSION" &&
			cp "$root/scripts/tessera_witness.go" . &&
			go build -o ../bin/tessera_witness tessera_witness.go
	) >"$tmp/build.log" 2>&1; then
		cat "$tmp/build.log" >&2
		echo "sunlight $SUNLIGHT_VERSION did not build (log above)" >&2
		exit 1
	fi
	# Into place only once complete: an interrupted build leaves nothing
	# that looks installed.
	mkdir -p "$(dirname "$dir")"
	rm -rf "$dir"
	mv "$tmp/bin" "$dir"
	# Builds of older helper sources in the default place are stale now.
	if [[ -z "${SUNLIGHT_DIR:-}" ]]; then
		local old
		for old in "$(dirname "$(dirname "$dir")")"/sunlight-"$SUNLIGHT_VERSION"-*; do
			if [[ "$old" != "$(dirname "$dir")" && -d "$old" ]]; then
				rm -rf "$old"
			fi
		done
	fi
	echo "installed sunlight $SUNLIGHT_VERSION at $dir"
}

cmd_path() {
	local dir
	dir="$(sunlight_dir)"
	if installed "$dir"; then
		echo "$dir"
	else
		echo "sunlight $SUNLIGHT_VERSION not installed at $dir: run 'bash scripts/sunlight.sh install'" >&2
		exit 1
	fi
}

case "${1:-}" in
install) cmd_install ;;
path) cmd_path ;;
*)
	sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
