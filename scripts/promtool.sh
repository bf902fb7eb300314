#!/usr/bin/env bash
# promtool for the tests of docs/deploy's Prometheus alerting rules and
# Grafana dashboard (test/e2e/monitoring_test.go: `promtool check rules`,
# `promtool test rules`, `promtool check metrics` on the real binary's
# /metrics). Under CI (CI=true) those tests fail without promtool, so CI
# runs this first; it does nothing when promtool is already there. It
# installs Debian's prometheus package, which ships promtool; the package's
# service is not started (apt's policy-rc.d in containers, and the tests
# never need a Prometheus server).
set -euo pipefail

if command -v promtool >/dev/null; then
	exit 0
fi
if [[ "${CI:-}" != "true" ]]; then
	echo "promtool is missing: install it (Debian: apt-get install prometheus) to run the monitoring tests; they are skipped without it" >&2
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "scripts/promtool.sh: promtool is missing and installing it needs root (apt-get install prometheus)" >&2
	exit 1
fi
echo "installing prometheus (for promtool) with apt-get..." >&2
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus
command -v promtool >/dev/null
