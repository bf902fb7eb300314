#!/usr/bin/env bash
# A/B of the leaf hash index backfill at N entries: one log filled without
# the index, its database copied; then old and new binaries alternately
# serve a fresh copy of it with rfc6962_read_api on until the index covers
# every entry. Reports seconds and bytes the server wrote.
set -euo pipefail
N=${N:-20000000}
w=/work/ab/work
bin=/work/ab/bin
phase=${1:-all}
if [[ $phase == all || $phase == fill ]]; then
rm -rf "$w"; mkdir -p "$w"
"$bin/mosaic-new" serve -dev -data "$w/log" -listen 127.0.0.1:18080 >"$w/dev.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do [[ -f $w/log/dev.json ]] && break; sleep 0.1; done
kill $pid; wait $pid || true
sed -i 's/^\( *\)read_path: true$/&\n\1rfc6962_read_api: false/' "$w/log/config.yaml"
"$bin/fill" -config "$w/log/config.yaml" -n "$N" >"$w/fill.json" 2>"$w/fill.log"
tail -n 1 "$w/fill.json"
mkdir -p "$w/pristine"
cp -a "$w/log/"mosaic.db* "$w/pristine/"
fi
if [[ $phase == all || $phase == ab ]]; then
sed -i 's/rfc6962_read_api: false/rfc6962_read_api: true/' "$w/log/config.yaml"
port=$(sed -n "s/^ *- address: 127.0.0.1:\([0-9]*\).*/\1/p" "$w/log/config.yaml" | head -1)
for pair in ${PAIRS:-1 2}; do
	for v in ${VARIANTS:-old t1}; do
		rm -f "$w/log/"mosaic.db*
		cp -a "$w/pristine/"mosaic.db* "$w/log/"
		sync; echo 3 >/proc/sys/vm/drop_caches
		"$bin/mosaic-$v" serve -config "$w/log/config.yaml" >"$w/serve-$pair-$v.log" 2>&1 &
		pid=$!
		t0=$(date +%s.%N)
		while :; do
			idx=$(curl -s "http://127.0.0.1:$port/metrics" 2>/dev/null | awk '$1 == "mosaic_hash_index_entries{log=\"dev\"}" { printf "%.0f\n", $2 }') || true
			idx=${idx:-0}
			[[ ${idx%.*} -ge $N ]] && break
			kill -0 $pid 2>/dev/null || { echo "serve died"; exit 1; }
			sleep 1
		done
		t=$(echo "$(date +%s.%N) - $t0" | bc)
		wb=$(awk '/^write_bytes/ {print $2}' /proc/$pid/io)
		cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat)
		kill $pid; wait $pid || true
		echo "pair $pair $v: backfill ${t}s, written $((wb/1000000)) MB ($((wb/N)) B/entry), cpu ${cpu}s"
	done
done
fi
if [[ $phase == keep ]]; then
	rm -rf "$w/indexed"; mkdir -p "$w/indexed"; cp -a "$w/log/"mosaic.db* "$w/indexed/"
fi
