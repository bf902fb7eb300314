#!/usr/bin/env bash
# A/B at 2×10⁷ entries: (bf) the leaf hash index backfill's steady rate and
# bytes written (device sectors, and the bytes the server passed to write
# calls) over 40 s; (load) a filled log with both indexes, idle CPU over
# 20 s and server CPU per entry at 1,000/s for 30 s.
set -uo pipefail
w=/work/ab/work
bin=/work/ab/bin
port=18080
phase=$1
variants=${VARIANTS:-old head old head}
cpu() { awk '{print $14+$15}' /proc/$1/stat; }  # clock ticks
dev() { awk '{print $7}' /sys/block/vda/stat; }  # sectors written
wchar() { awk '/^wchar/ {print $2}' /proc/$1/io; }
metric() { curl -s localhost:$port/metrics | awk -v m="$1" '$1 == m {printf "%.0f", $2}'; }
size() { curl -s localhost:$port/checkpoint | sed -n 2p; }
start() {
	# load: the log goes on from the last run (its storage moved with it)
	if [[ $1 != live ]]; then
		rm -f "$w/log/"mosaic.db*
		cp -a "$w/$1/"mosaic.db* "$w/log/"
	fi
	sync; echo 3 >/proc/sys/vm/drop_caches
	"$bin/mosaic-$2" serve -config "$w/log/config.yaml" >"$w/ab2-$phase-$2.log" 2>&1 &
	pid=$!
}
for v in $variants; do
	if [[ $phase == bf ]]; then
		start pristine "$v"
		sleep 25
		c0=$(cpu $pid) d0=$(dev) w0=$(wchar $pid) i0=$(metric 'mosaic_hash_index_backfill_entries_total{log="dev"}')
		sleep 40
		c1=$(cpu $pid) d1=$(dev) w1=$(wchar $pid) i1=$(metric 'mosaic_hash_index_backfill_entries_total{log="dev"}')
		n=$((i1 - i0))
		echo "bf $v: $((n / 40)) entries/s, device $(( (d1-d0)*512 / n )) B/entry, write calls $(( (w1-w0) / n )) B/entry, cpu $(( (c1-c0)*10000000 / n / 1000 )) µs/entry"
	else
		start live "$v"
		sleep 15
		c0=$(cpu $pid) d0=$(dev)
		sleep 20
		c1=$(cpu $pid) d1=$(dev)
		idle_ms=$(( (c1-c0)*10 / 20 ))
		idle_dev=$(( (d1-d0)*512 / 20 / 1000 ))
		s0=$(size) c0=$(cpu $pid) d0=$(dev)
		"$bin/mosaic-head" hammer -dev "$w/log" -rate 1000 -duration 30s -dup 0 -drain 5s -workers 500 >"$w/ab2-hammer-$v.log" 2>&1
		hc=$?
		s1=$(size) c1=$(cpu $pid) d1=$(dev)
		n=$((s1 - s0))
		echo "load $v: idle ${idle_ms} ms CPU/s and ${idle_dev} KB/s written; at 1000/s: $n entries, cpu $(( (c1-c0)*10000000 / n / 1000 )) µs/entry, device $(( (d1-d0)*512 / n )) B/entry (hammer exit $hc)"
	fi
	kill $pid; wait $pid
done
