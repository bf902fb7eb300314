#!/usr/bin/env bash
# Before and after run files: a dev log (RFC 6962 API on, so both indexes)
# filled by bench/fill to N entries (default 2×10⁷) in one process, with
# the heap profile written after its last merges; then the sizes of the
# database file, its run files and filter files. OLD and NEW are
# checkouts of Mosaic; each run goes to WORK/<name>.
#
# Usage: OLD=... NEW=... run.sh WORK
set -euo pipefail
OLD=${OLD:?checkout before run files} NEW=${NEW:?checkout with run files} N=${N:-20000000}
work=${1:?usage: run.sh WORK}
for v in old new; do
	if [[ $v == old ]]; then r=$OLD; else r=$NEW; fi
	d=$work/$v
	rm -rf "$d"; mkdir -p "$d"; cd "$d"
	go build -C "$r" -o "$d/mosaic" ./cmd/mosaic
	go build -C "$r" -o "$d/fill" ./bench/fill
	./mosaic serve -dev -data log -listen 127.0.0.1:18089 >dev.log 2>&1 &
	pid=$!
	for _ in $(seq 100); do [[ -f log/dev.json ]] && break; sleep 0.1; done
	kill "$pid"; wait "$pid" || true
	/usr/bin/time -f '%e s %U u %S s %M KB' -o fill.time \
		./fill -config log/config.yaml -n "$N" -memprofile heap.prof >fill.json 2>fill.progress
	go tool pprof -sample_index=inuse_space -top -nodecount=15 ./fill heap.prof >heap.txt 2>/dev/null
	{
		echo "mosaic.db $(stat -c %s log/mosaic.db)"
		echo "run files $(cat log/mosaic.db.run.* 2>/dev/null | wc -c) in $(ls log | grep -c '^mosaic.db.run.' || true)"
		echo "filter files $(cat log/mosaic.db.filter.* | wc -c) in $(ls log | grep -c '^mosaic.db.filter.')"
	} >sizes.txt
	echo "== $v"; cat fill.json fill.time sizes.txt; head -12 heap.txt
done
