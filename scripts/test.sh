#!/usr/bin/env bash
# Runs Mosaic's whole test suite: formatting, vet, unit tests, end-to-end
# tests against the real binary, and the integration tests that need
# PostgreSQL and MinIO.
#
# With CI=true the services (and tmux, for the hammer's terminal tests) are
# installed/started first and the tests that need them fail instead of
# skipping. Without it they are used when present
# and skipped (loudly, saying how to get them) when not.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

echo "== gofmt"
unformatted=$(gofmt -l cmd internal test bench 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

if [ "${CI:-}" = "true" ]; then
  echo "== services (CI=true: PostgreSQL, MinIO and tmux are required)"
  bash scripts/postgres.sh
  bash scripts/minio.sh install
  bash scripts/tmux.sh
fi

echo "== go test"
go test -count=1 -timeout 30m ./...
