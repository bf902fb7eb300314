#!/usr/bin/env bash
# End-to-end benchmark of Mosaic: builds mosaic, starts `mosaic serve -dev` on
# a fresh directory (loopback only), runs the hammer headless at a ladder of
# rates and at "as fast as possible", samples the server's CPU and RSS from
# /proc, and writes results.json, results.md and chart.svg.
#
# Usage: bench/run.sh [OUTDIR]
#
# Settings (environment variables, with defaults):
#   RATES=250,500,1000,2000,3000,0   ladder of hammer -rate values; 0 = as fast as possible
#   STEP=25s                         duration of each step
#   WORKERS=1000                     hammer -workers (concurrent submissions)
#   DUP=0.1  PRECERT=0.5             hammer -dup and -precert
#   READERS=0  READ_RATE=20          hammer -readers and -read-rate
#   KEEP=0                           1 keeps the dev log directory for inspection
#
# The default ladder takes about 3 minutes. Results go to OUTDIR (default
# bench/results/<UTC timestamp>). Linux only (/proc).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bench/results/$(date -u +%Y%m%dT%H%M%SZ)}
RATES=${RATES:-250,500,1000,2000,3000,0}
STEP=${STEP:-25s}
WORKERS=${WORKERS:-1000}
DUP=${DUP:-0.1}
PRECERT=${PRECERT:-0.5}
READERS=${READERS:-0}
READ_RATE=${READ_RATE:-20}
KEEP=${KEEP:-0}

work=$(mktemp -d "${TMPDIR:-/tmp}/mosaic-bench.XXXXXX")
server_pid=
cleanup() {
	if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill -TERM "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	if [[ $KEEP == 1 ]]; then
		echo "kept $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

echo "building mosaic and the benchmark driver" >&2
(cd "$root" && go build -o "$work/mosaic" ./cmd/mosaic && go build -o "$work/benchrun" ./bench/benchrun)

mkdir -p "$out"
"$work/mosaic" serve -dev -data "$work/devlog" -listen 127.0.0.1:0 >"$out/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do
	[[ -f $work/devlog/dev.json ]] && break
	kill -0 "$server_pid" 2>/dev/null || { echo "mosaic serve exited:" >&2; cat "$out/serve.log" >&2; exit 1; }
	sleep 0.1
done
[[ -f $work/devlog/dev.json ]] || { echo "mosaic serve -dev wrote no dev.json" >&2; exit 1; }
echo "dev log up (pid $server_pid); results in $out" >&2

commit=$(cd "$root" && git rev-parse --short HEAD 2>/dev/null || true)
if [[ -n $commit && -n $(cd "$root" && git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
	commit="$commit-dirty"
fi
BENCH_COMMIT=$commit "$work/benchrun" -mosaic "$work/mosaic" -dev "$work/devlog" -pid "$server_pid" \
	-clk-tck "$(getconf CLK_TCK)" -rates "$RATES" -step "$STEP" -workers "$WORKERS" \
	-dup "$DUP" -precert "$PRECERT" -readers "$READERS" -read-rate "$READ_RATE" -out "$out" \
	-command "RATES=$RATES STEP=$STEP WORKERS=$WORKERS DUP=$DUP PRECERT=$PRECERT READERS=$READERS READ_RATE=$READ_RATE bench/run.sh"

echo "checking the whole log with mosaic fsck" >&2
"$work/mosaic" fsck -dev "$work/devlog" | tee "$out/fsck.txt"
