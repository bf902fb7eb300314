#!/usr/bin/env bash
# Alternating pairs at 10⁸ entries (as 2026-12-06-scale-1e8-ab/ab.sh, with a
# CPU profile of each 1,000/s step): the log bench/scale.sh filled (kept:
# KEEP=1, both indexes: the leaf hash index backfilled) against a fresh dev
# log with both indexes too (rfc6962_read_api on, the default), the
# same load (benchrun, production mix, as fast as possible then 1,000/s,
# 20 s steps, 3,000 workers). Each server's CPU over the 20 s it stands
# idle after its first SCT is recorded first (background work: dedup
# merges). Usage: ab.sh FILLED_LOG_DIR OUT PAIRS
set -euo pipefail
filled=$1 out=$2 pairs=${3:-2}
root=$(cd "$(dirname "$0")/../../.." && pwd)
bin=$(mktemp -d /tmp/ab1e8b.XXXX)
(cd "$root" && go build -o "$bin/mosaic" ./cmd/mosaic && go build -o "$bin/benchrun" ./bench/benchrun && go build -o "$bin/fill" ./bench/fill)
tck=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
run() { # run NAME DIR
	local name=$1 dir=$2 pid c0 port url
	"$bin/mosaic" serve -config "$dir/config.yaml" >>"$dir.ab.log" 2>&1 &
	pid=$!
	url=$(sed -n 's/^ *"submission_prefix": *"\([^"]*\)".*/\1/p' "$dir/dev.json")
	"$bin/fill" -config "$dir/config.yaml" -submission-body "$bin/body.json" \
		-ca-cert "$(sed -n 's/^ *"test_ca_cert": *"\([^"]*\)".*/\1/p' "$dir/dev.json")" \
		-ca-key "$(sed -n 's/^ *"test_ca_key": *"\([^"]*\)".*/\1/p' "$dir/dev.json")"
	for _ in $(seq 1 600); do
		[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H 'Content-Type: application/json' --data-binary @"$bin/body.json" "${url}ct/v1/add-chain" || true) == 200 ]] && break
		sleep 0.1
	done
	c0=$(cpu "$pid")
	sleep 20
	echo "$name: idle CPU over 20 s after the first SCT: $(echo "($(cpu "$pid") - $c0) / $tck" | bc -l | cut -c1-5) s" | tee -a "$out/idle.txt"
	# What holds the memory, 30 s into the load (as fast as possible):
	# RSS by kind, the Go runtime's own account, and a heap profile where
	# the config has a debug listener.
	(
		sleep 30
		cat "/proc/$pid/smaps_rollup" >"$out/$name.smaps_rollup" 2>/dev/null
		curl -s --max-time 10 "${url}metrics" | grep -E '^go_(memstats|gc)_' >"$out/$name.gometrics" || true
		dbg=$(sed -n 's/^ *listen: *\(127\.0\.0\.1:[0-9]*\)$/\1/p' "$dir/config.yaml" | tail -n 1)
		[[ -n $dbg ]] && curl -s --max-time 30 -o "$out/$name.heap.pb.gz" "http://$dbg/debug/pprof/heap"
	) &
	# A CPU profile of the 1,000/s step (it starts 20 s into the load).
	(
		sleep 24
		dbg=$(sed -n 's/^ *listen: *\(127\.0\.0\.1:[0-9]*\)$/\1/p' "$dir/config.yaml" | tail -n 1)
		[[ -n $dbg ]] && curl -s --max-time 40 -o "$out/$name.cpu1000.pb.gz" "http://$dbg/debug/pprof/profile?seconds=14"
	) &
	"$bin/benchrun" -mosaic "$bin/mosaic" -dev "$dir" -pid "$pid" -name "$name" -clk-tck "$tck" -rates 0,1000 -issuers production \
		-step 20s -workers 3000 -readers 0 -hammer-flag "-monitoring=file://$dir/data" -out "$out/$name" >"$out/$name.log" 2>&1 || echo "benchrun $name failed"
	kill "$pid"; wait "$pid" || true
}
mkdir -p "$out"
# A debug listener on each log, for the heap profiles above.
grep -q '^debug:' "$filled/config.yaml" || printf 'debug:\n    listen: 127.0.0.1:6061\n' >>"$filled/config.yaml"
for i in $(seq 1 "$pairs"); do
	fresh=$(mktemp -d /work/scaletmp/fresh.XXXX)/log
	mkdir -p "$fresh"
	"$bin/mosaic" serve -dev -data "$fresh" -listen 127.0.0.1:0 >"$fresh.dev.log" 2>&1 &
	p=$!
	for _ in $(seq 1 300); do [[ -f $fresh/dev.json ]] && break; sleep 0.1; done
	kill $p; wait $p || true
	printf 'debug:\n    listen: 127.0.0.1:6062\n' >>"$fresh/config.yaml"
	if ((i % 2 == 1)); then run "$i-filled" "$filled"; run "$i-fresh" "$fresh"; else run "$i-fresh" "$fresh"; run "$i-filled" "$filled"; fi
	rm -rf "$(dirname "$fresh")"
done
for f in "$out"/*/results.md; do echo "== $f"; grep '^| production' "$f"; done
