#!/usr/bin/env bash
# Runs staticcheck on the module, building the pinned version from the Go
# module proxy the first time (cached in ~/.cache/mosaic/bin afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
version=v0.8.2
bin="${XDG_CACHE_HOME:-$HOME/.cache}/mosaic/bin"
exe="$bin/staticcheck-$version"
if [ ! -x "$exe" ]; then
  echo "building staticcheck $version (once)"
  mkdir -p "$bin"
  GOBIN="$bin" go install "honnef.co/go/tools/cmd/staticcheck@$version"
  mv "$bin/staticcheck" "$exe"
fi
"$exe" ./...
# bench/dedupengine is a module of its own (so that the main module does
# not depend on Pebble and Badger for a benchmark).
(cd bench/dedupengine && "$exe" ./...)
# bench/p384verify likewise (circl, for a benchmark).
(cd bench/p384verify && "$exe" ./...)
