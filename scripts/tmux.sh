#!/usr/bin/env bash
# tmux for the hammer's terminal tests (internal/tools/hammer/tui_tmux_test.go),
# which run `mosaic hammer` in a real terminal, type keys and read the
# screen. Under CI (CI=true) those tests fail without tmux, so CI runs this
# first; it does nothing when tmux is already there.
set -euo pipefail

if command -v tmux >/dev/null; then
	exit 0
fi
if [[ "${CI:-}" != "true" ]]; then
	echo "tmux is missing: install it (Debian: apt-get install tmux) to run the terminal tests; they are skipped without it" >&2
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "scripts/tmux.sh: tmux is missing and installing it needs root (apt-get install tmux)" >&2
	exit 1
fi
echo "installing tmux with apt-get..." >&2
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q tmux
