#!/usr/bin/env bash
# The filled 10⁸ log (merges settled) served inside a 512 MiB memory cgroup
# (v1, as this VM has) from a cold page cache, under the same load as ab.sh: what
# bench/scale.sh's MEMORY_LIMIT step measures, without the merge that ran
# during that step. Usage: capped.sh FILLED_LOG_DIR OUT BIN_DIR
set -euo pipefail
filled=$1 out=$2 bin=$3
mkdir -p "$out"
# A memory cgroup as bench/scale.sh makes one (this VM has cgroup v1).
rel=$(sed -n 's/^[0-9]*:memory:\(.*\)/\1/p' /proc/self/cgroup)
cg=/sys/fs/cgroup/memory$rel/mosaic-capped-$$
mkdir "$cg"
echo 512M >"$cg/memory.limit_in_bytes"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
tck=$(getconf CLK_TCK)
sync
echo 3 >/proc/sys/vm/drop_caches
(echo "$BASHPID" >"$cg/cgroup.procs" && exec "$bin/mosaic" serve -config "$filled/config.yaml") >>"$filled.capped.log" 2>&1 &
pid=$!
url=$(sed -n 's/^ *"submission_prefix": *"\([^"]*\)".*/\1/p' "$filled/dev.json")
"$bin/fill" -config "$filled/config.yaml" -submission-body "$bin/body.json" \
	-ca-cert "$(sed -n 's/^ *"test_ca_cert": *"\([^"]*\)".*/\1/p' "$filled/dev.json")" \
	-ca-key "$(sed -n 's/^ *"test_ca_key": *"\([^"]*\)".*/\1/p' "$filled/dev.json")"
t0=$(date +%s.%N)
for _ in $(seq 1 600); do
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H 'Content-Type: application/json' --data-binary @"$bin/body.json" "${url}ct/v1/add-chain" || true) == 200 ]] && break
	sleep 0.05
done
echo "first SCT after $(echo "$(date +%s.%N) - $t0" | bc) s" | tee "$out/capped.txt"
"$bin/benchrun" -mosaic "$bin/mosaic" -dev "$filled" -pid "$pid" -name capped -clk-tck "$tck" -rates 0,1000 -issuers production \
	-step 20s -workers 3000 -readers 0 -hammer-flag "-monitoring=file://$filled/data" -out "$out/capped" >"$out/capped.log" 2>&1 || echo "benchrun failed"
kill "$pid"; wait "$pid" || true
echo "killed by the limit: $(awk '$1 == "oom_kill" { print $2 }' "$cg/memory.oom_control") times; the cgroup's peak: $(($(cat "$cg/memory.max_usage_in_bytes") / 1048576)) MiB" | tee -a "$out/capped.txt"
grep '^| production' "$out/capped/results.md" | tee -a "$out/capped.txt"
