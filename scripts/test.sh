#!/usr/bin/env bash
# Runs Mosaic's whole test suite: formatting, vet, unit tests, end-to-end
# tests against the real binary, the integration tests that need
# PostgreSQL and MinIO, and a short run of every fuzz target.
#
# With CI=true the services (and tmux, for the hammer's terminal tests,
# Chromium, for the dashboard's browser tests, Sunlight, for the
# interoperability tests, nginx, for the deployment example's test,
# promtool, for the alerting rules' and dashboard's, and HAProxy, for the
# PROXY protocol test) are installed/started first
# and the tests that need them fail instead of skipping. Without it they are
# used when present and skipped (loudly, saying how to get them) when not.
#
# The browser tests save screenshots of the dashboard in
# $MOSAIC_TEST_ARTIFACTS (default test/e2e/artifacts/).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

echo "== gofmt"
unformatted=$(gofmt -l cmd internal test bench scripts staticct 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== staticcheck"
bash scripts/staticcheck.sh

# The dedup engine comparison (docs/ARCHITECTURE.md, "The dedup engine"),
# a module of its own: vetted, and run small, which runs its crash test
# (SIGKILL mid-fill, then every acknowledged record checked) on each engine.
echo "== bench/dedupengine (vet, and a small comparison with its crash test)"
# It takes in the main module by a replace, so a new dependency of the
# packages it uses needs `go mod tidy` there too ("missing go.sum entry").
(cd bench/dedupengine && go vet ./... && go run . -n 60000 -kill-at 20000 | tail -5)

# The P-384 verifiers compared in-process (docs/BENCHMARKS.md, "P-384
# issuer tables"), a module of its own too (circl): vetted, and its check
# that the three verdicts agree.
echo "== bench/p384verify (vet, and its verifiers' agreement)"
(cd bench/p384verify && go vet ./... && go test -count=1 -run TestAgree .)

if [ "${CI:-}" = "true" ]; then
  echo "== services (CI=true: PostgreSQL, MinIO, Pebble, tmux, Chromium, Sunlight, nginx, promtool and HAProxy are required)"
  bash scripts/postgres.sh
  bash scripts/minio.sh install
  bash scripts/pebble.sh install
  bash scripts/tmux.sh
  bash scripts/chromium.sh
  bash scripts/sunlight.sh install
  bash scripts/nginx.sh
  bash scripts/promtool.sh
  bash scripts/haproxy.sh
fi

echo "== go test"
# -json through testsummary: the usual per-package lines, the output of
# failed tests, and at the end every skipped test with its reason.
go build -o /tmp/mosaic-testsummary ./scripts/testsummary
set +e
go test -json -count=1 -timeout 30m ./... | /tmp/mosaic-testsummary
status=${PIPESTATUS[0]}${PIPESTATUS[1]}
set -e
if [ "$status" != "00" ]; then
  echo "go test failed"; exit 1
fi
# Code that builds only elsewhere than on amd64: vetted for arm64, and
# internal/base/fastecdsa tested here with -tags purego, which makes nistec (its
# arithmetic) use its portable code instead of its amd64 assembly.
echo "== other architectures (GOARCH=arm64 vet, -tags purego)"
GOARCH=arm64 go vet ./...
go test -count=1 -tags purego ./internal/base/fastecdsa
shots=$(ls "${MOSAIC_TEST_ARTIFACTS:-test/e2e/artifacts}"/*.png 2>/dev/null || true)
if [ -n "$shots" ]; then
  echo "dashboard screenshots:"; echo "$shots"
fi

# The scale benchmark, small (docs/BENCHMARKS.md, "Scale"): a log of 10⁶
# entries made by bench/fill, served, loaded, checked by fsck, backed up
# and restored, with kill -9 of the fill and of the loaded server (it
# fails if anything acknowledged is lost). About four minutes.
echo "== bench/scale.sh at 10⁶ entries"
scale_out=$(mktemp -d)
N=1000000 STEP=5s WORKERS=500 KILL=1 GETS=100 bash bench/scale.sh "$scale_out" | tail -n 30
rm -rf "$scale_out"

# Every fuzz target briefly (FUZZTIME each, 2s by default in fuzz.sh: about a minute
# for all of them on 2 cores once built). `go test` above already ran each
# target's committed corpus; this explores beyond it. docs/FUZZING.md says
# how to fuzz one target for hours.
echo "== fuzz (FUZZTIME=${FUZZTIME:-2s} per target)"
bash scripts/fuzz.sh
