#!/usr/bin/env bash
# Three alternating pairs: a PostgreSQL log filled to 10⁶ entries, loaded
# as fast as possible for 30 s. OLD and NEW are checkouts of Mosaic
# (old: ff8532f; new: a0fba1d, the batched dedup lookups of internal/state/postgres).
# Each run's last JSON line is <name>.json beside this file.
set -euo pipefail
OLD=${OLD:?checkout of the old commit} NEW=${NEW:?checkout of the new commit} OUT=${OUT:-/tmp/ab}
mkdir -p "$OUT"
for i in 1 2 3; do
	for v in old new; do
		if [[ $v == old ]]; then r=$OLD; else r=$NEW; fi
		(cd "$r" && N=1000000 BACKEND=postgres RATES=0 STEP=30s FRESH=0 BACKUP=0 KILL=0 RFC6962=0 GETS=0 \
			bash bench/scale.sh "$OUT/$v-$i" >"$OUT/$v-$i.log" 2>&1)
		tail -n 1 "$OUT/$v-$i.log" >"$(dirname "$0")/$v-$i.json"
	done
done
