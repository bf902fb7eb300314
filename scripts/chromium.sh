#!/usr/bin/env bash
# Chromium for the dashboard's browser test (test/e2e/dashboard_test.go),
# which drives a real headless browser through the DevTools protocol
# (chromedp). Under CI (CI=true) that test fails without a browser, so CI
# runs this first; it does nothing when one is already there. It installs
# Debian's own package (apt caches it), never a browser build downloaded
# from elsewhere.
set -euo pipefail

for b in chromium chromium-browser google-chrome; do
	if command -v "$b" >/dev/null; then
		exit 0
	fi
done
if [[ "${CI:-}" != "true" ]]; then
	echo "chromium is missing: install it (Debian: apt-get install chromium) to run the dashboard's browser test; it is skipped without it" >&2
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "scripts/chromium.sh: chromium is missing and installing it needs root (apt-get install chromium)" >&2
	exit 1
fi
echo "installing chromium with apt-get..." >&2
apt-get update -q
# fonts-dejavu-core: text in screenshots renders the same on every machine.
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
