#!/usr/bin/env bash
# Alternating pairs of fsck over one dev log filled by bench/fill, read
# from the page cache (so that fsck's own CPU is what is compared). OLD
# and NEW are mosaic binaries; LOG is the log's directory (with its
# dev.json). Prints one line per run: name, wall s, user s, sys s, MB/s of
# tiles (decimal).
set -euo pipefail
OLD=${OLD:?old mosaic binary} NEW=${NEW:?new mosaic binary} LOG=${LOG:?log directory} PAIRS=${PAIRS:-4}
field() { sed -n 's/^ *"'"$1"'": *"\([^"]*\)".*/\1/p' "$LOG/dev.json"; }
bytes=$(du -sb "$LOG/data/tile" | cut -f1)
cat "$LOG"/data/tile/data/*/* >/dev/null 2>&1 || true
for i in $(seq "$PAIRS"); do
	for v in old new; do
		if [[ $v == old ]]; then bin=$OLD; else bin=$NEW; fi
		/usr/bin/time -f '%e %U %S' -o /tmp/fsck-ab.time \
			"$bin" fsck -monitoring "file://$LOG/data" -pubkey "$(field public_key)" -origin "$(field origin)" >/tmp/fsck-ab.out 2>&1
		grep -q '^result: *OK' /tmp/fsck-ab.out || { echo "fsck $v failed"; cat /tmp/fsck-ab.out; exit 1; }
		read -r wall user sys </tmp/fsck-ab.time
		echo "$v-$i $wall $user $sys $(awk -v b="$bytes" -v w="$wall" 'BEGIN{printf "%.1f", b/w/1e6}')"
	done
done
