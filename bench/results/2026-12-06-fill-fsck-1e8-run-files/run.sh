#!/usr/bin/env bash
# The run in this directory: a dev log filled by bench/fill to 10⁸ entries,
# with both indexes written by the fill itself (rfc6962_read_api on), the
# heap profile of the process that built it, then fsck of the whole log
# from its storage directory, from a cold page cache.
#
# Usage (root, for drop_caches): run.sh WORKDIR   (it needs about 45 GB)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=${1:?usage: run.sh WORKDIR}
mkdir -p "$work"
cd "$work"
go build -C "$root" -o "$work/mosaic" ./cmd/mosaic
go build -C "$root" -o "$work/fill" ./bench/fill

# A dev log, created and stopped.
./mosaic serve -dev -data log -listen 127.0.0.1:18088 >dev.log 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -f log/dev.json ]] && break; sleep 0.1; done
kill "$pid"; wait "$pid" || true

/usr/bin/time -f '%e s %U u %S s %M KB' -o fill.time \
	./fill -config log/config.yaml -n 100000000 -memprofile heap.prof >fill.json 2>fill.progress
go tool pprof -sample_index=inuse_space -top -nodecount=12 ./fill heap.prof >heap-after-fill.txt

field() { sed -n 's/^ *"'"$1"'": *"\([^"]*\)".*/\1/p' log/dev.json; }
sync; echo 3 >/proc/sys/vm/drop_caches
/usr/bin/time -f '%e s %U u %S s %M KB' -o fsck.time \
	./mosaic fsck -monitoring "file://$work/log/data" -pubkey "$(field public_key)" -origin "$(field origin)" >fsck.txt 2>&1
du -sb log/data/tile log/data/issuer log/mosaic.db
{
	echo "mosaic.db $(stat -c %s log/mosaic.db)"
	echo "run files $(cat log/mosaic.db.run.* | wc -c) in $(ls log | grep -c '^mosaic.db.run.')"
	echo "filter files $(cat log/mosaic.db.filter.* | wc -c) in $(ls log | grep -c '^mosaic.db.filter.')"
} >sizes.txt
