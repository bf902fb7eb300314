#!/usr/bin/env bash
# Runs every Go fuzz target in the module, one after another, for FUZZTIME
# each (default 2s, what CI runs; any -fuzztime value, e.g. 30s, 10m or 5000x), and prints
# how long each took. Targets are found automatically: every package with a
# fuzz_test.go, every func Fuzz* that `go test -list` reports there.
#
#   scripts/fuzz.sh                      # all targets, 2s each (what CI runs)
#   FUZZTIME=1m scripts/fuzz.sh          # all targets, a minute each
#   scripts/fuzz.sh ./internal/log/chain     # only this package's targets
#
# A failing target's input is written by Go to
# <package>/testdata/fuzz/<FuzzTarget>/<hash>; the script carries on with
# the other targets, lists the failures at the end and exits 1. Commit the
# input with the fix: it becomes a regression test that plain `go test`
# runs. To fuzz one target for hours, see docs/FUZZING.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

fuzztime="${FUZZTIME:-2s}"
if [ "$#" -gt 0 ]; then
  pkgs=$(go list "$@")
else
  # Only packages that have fuzz targets, so nothing else is compiled.
  pkgs=$(grep -rl --include=fuzz_test.go '^func Fuzz' cmd internal 2>/dev/null | xargs -r -n1 dirname | sort -u | sed 's|^|./|' | xargs -r go list)
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=()
count=0
total_start=$(date +%s.%N)
for pkg in $pkgs; do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
  for target in $targets; do
    count=$((count + 1))
    start=$(date +%s.%N)
    status=FAIL
    note=""
    for attempt in 1 2; do
      if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1; then
        status=ok
        break
      fi
      # Go 1.26's fuzz coordinator can fail a target with a bare "context
      # deadline exceeded" when a duration -fuzztime ends while a worker is
      # busy (go.dev/issue/75804, fixed in Go 1.27): no input failed, none
      # is written. Run such a target once more; a real failure always
      # names its input.
      if [ "$attempt" = 1 ] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
        note=" (retried after go.dev/issue/75804)"
        continue
      fi
      break
    done
    if [ "$status" = FAIL ]; then
      failed+=("$pkg $target")
    fi
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    printf '%-5s %-28s %-32s %6.1fs%s\n' "$status" "$target" "${pkg#github.com/mosaic-ct/mosaic/}" "$secs" "$note"
    if [ "$status" = FAIL ]; then
      grep -v '^fuzz: elapsed' "$log" | sed 's/^/      /'
      echo "      (failing inputs are kept in ${dir#"$PWD"/}/testdata/fuzz/${target}/)"
    fi
  done
done
total=$(echo "$(date +%s.%N) - $total_start" | bc)
printf '%d fuzz targets, %s each, %.0fs in all\n' "$count" "$fuzztime" "$total"
if [ "$count" -eq 0 ]; then
  echo "no fuzz targets found"; exit 1
fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "FAILED fuzz targets:"; printf '  %s\n' "${failed[@]}"; exit 1
fi
