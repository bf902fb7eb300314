#!/usr/bin/env bash
# nginx for the test of docs/deploy/nginx.conf (test/e2e/nginx_test.go:
# `nginx -t`, then a real nginx in front of a real log). Under CI (CI=true)
# that test fails without nginx, so CI runs this first; it does nothing when
# nginx is already there. It installs Debian's nginx-light (the package the
# deployment example is written for); the test runs its own nginx on
# loopback with its own files, never the system's service.
set -euo pipefail

if command -v nginx >/dev/null; then
	exit 0
fi
if [[ "${CI:-}" != "true" ]]; then
	echo "nginx is missing: install it (Debian: apt-get install nginx-light) to run the nginx deployment test; it is skipped without it" >&2
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "scripts/nginx.sh: nginx is missing and installing it needs root (apt-get install nginx-light)" >&2
	exit 1
fi
echo "installing nginx-light with apt-get..." >&2
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nginx-light
