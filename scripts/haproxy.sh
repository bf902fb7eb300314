#!/usr/bin/env bash
# HAProxy for the test of Mosaic behind a load balancer speaking the PROXY
# protocol (test/e2e/proxy_test.go: TestProxiedClients). Under CI
# (CI=true) that test fails without it, so CI runs this first; it does
# nothing when haproxy is already there. It installs Debian's haproxy
# package; the test runs its own haproxy on loopback with its own config,
# never the system's service.
set -euo pipefail

if command -v haproxy >/dev/null; then
	exit 0
fi
if [[ "${CI:-}" != "true" ]]; then
	echo "haproxy is missing: install it (Debian: apt-get install haproxy) to run the PROXY protocol test; it is skipped without it" >&2
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "scripts/haproxy.sh: haproxy is missing and installing it needs root (apt-get install haproxy)" >&2
	exit 1
fi
echo "installing haproxy with apt-get..." >&2
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends haproxy
