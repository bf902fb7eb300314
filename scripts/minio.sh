#!/usr/bin/env bash
# MinIO for Mosaic's integration tests and for trying the S3 backends by hand.
#
# Mosaic's tests (internal/testkit/testenv) start their own MinIO server processes on
# 127.0.0.1 with throwaway data directories and credentials; all they need is
# the binary. This script builds it from source with the Go toolchain at a
# pinned version, because the only registry we rely on is the Go module proxy
# (no prebuilt downloads). The first build takes a few minutes; later runs are
# no-ops.
#
# Usage:
#   bash scripts/minio.sh install          build and install the pinned MinIO (idempotent)
#   bash scripts/minio.sh path             print the binary's path (exit 1 if missing)
#   bash scripts/minio.sh start DIR PORT   run MinIO in the foreground on 127.0.0.1:PORT,
#                                          data in DIR, credentials from
#                                          MINIO_ROOT_USER/MINIO_ROOT_PASSWORD
#                                          (default minioadmin/minioadmin)
#
# The binary goes to $MINIO_BIN if set, else to $(go env GOBIN) or
# $(go env GOPATH)/bin, which is where internal/testkit/testenv looks for it (then
# on PATH).
set -euo pipefail

TOOL=minio
TOOL_MODULE="github.com/minio/minio"
TOOL_PKG="$TOOL_MODULE"
TOOL_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
TOOL_BIN_VAR=MINIO_BIN
# shellcheck source=scripts/gotool.sh
source "$(dirname "$0")/gotool.sh"

cmd_start() {
	if [[ $# -ne 2 ]]; then
		echo "usage: $0 start DIR PORT" >&2
		exit 2
	fi
	local dir="$1" port="$2" bin
	bin="$(cmd_path)"
	mkdir -p "$dir"
	export MINIO_ROOT_USER="${MINIO_ROOT_USER:-minioadmin}"
	export MINIO_ROOT_PASSWORD="${MINIO_ROOT_PASSWORD:-minioadmin}"
	export MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CALLHOME_ENABLE=off
	echo "MinIO on http://127.0.0.1:$port (user $MINIO_ROOT_USER), data in $dir" >&2
	exec "$bin" server --quiet --address "127.0.0.1:$port" "$dir"
}

case "${1:-}" in
install) cmd_install ;;
path) cmd_path ;;
start)
	shift
	cmd_start "$@"
	;;
*)
	sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
