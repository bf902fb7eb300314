#!/usr/bin/env bash
# A/B of the leaf hash index backfill at N entries, old (its records carry
# the dedup keys again) against new (leaf hashes alone): one log filled
# without the index, its database copied; then each binary in turn serves
# a fresh copy of it with rfc6962_read_api on, from a cold page cache,
# until the index covers every entry and then until its merges are done
# (under 0.2 s of CPU in 10 s). Reports the backfill's and the merges'
# seconds, the server's CPU, the bytes that reached the disk (its
# sectors: /proc/PID/io's write_bytes overcounts on this kernel), the
# database file's size, and the heap and anonymous RSS once idle.
# Usage: BIN=DIR (with mosaic-old, mosaic-new, fill) ab.sh [fill|ab|all]
set -euo pipefail
N=${N:-10000000}
w=${WORK:-/work/abbf/work}
bin=${BIN:-/work/abbf/bin}
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
	dev=$(basename "$(df --output=source "$w" | tail -1)")
	sectors() { awk '{ print $7 }' "/sys/block/$dev/stat"; }
	metric() { curl -s "http://127.0.0.1:$port/metrics" 2>/dev/null | awk -v m="$1" '$1 == m { printf "%.0f\n", $2 }' || true; }
	cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
	for pair in ${PAIRS:-1 2}; do
		for v in ${VARIANTS:-old new}; do
			rm -f "$w/log/"mosaic.db*
			cp -a "$w/pristine/"mosaic.db* "$w/log/"
			sync; echo 3 >/proc/sys/vm/drop_caches
			s0=$(sectors)
			"$bin/mosaic-$v" serve -config "$w/log/config.yaml" >"$w/serve-$pair-$v.log" 2>&1 &
			pid=$!
			t0=$(date +%s.%N)
			while :; do
				idx=$(metric 'mosaic_hash_index_entries{log="dev"}')
				[[ ${idx:-0} -ge $N ]] && break
				kill -0 $pid 2>/dev/null || { echo "serve died"; exit 1; }
				sleep 1
			done
			tb=$(echo "$(date +%s.%N) - $t0" | bc)
			prev=$(cpu $pid)
			while sleep 10; do
				cur=$(cpu $pid)
				((cur - prev < 20)) && break
				prev=$cur
			done
			tm=$(echo "$(date +%s.%N) - $t0 - $tb - 10" | bc)
			heap=$(metric go_memstats_heap_inuse_bytes)
			anon=$(awk '/^RssAnon/ { print $2 }' "/proc/$pid/status")
			c=$(echo "$(cpu $pid) / 100" | bc -l)
			kill $pid; wait $pid || true
			sync
			wr=$(( ($(sectors) - s0) * 512 ))
			size=$(stat -c %s "$w/log/mosaic.db")
			printf 'pair %s %s: backfill %.1f s, merges after it %.1f s, cpu %.1f s, written %d MB (%d B/entry), mosaic.db %d MB, idle heap %d MiB, anonymous RSS %d MiB\n' \
				"$pair" "$v" "$tb" "$tm" "$c" $((wr / 1000000)) $((wr / N)) $((size / 1000000)) $((heap / 1048576)) $((anon / 1024))
		done
	done
fi
