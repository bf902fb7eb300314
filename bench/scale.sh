#!/usr/bin/env bash
# Mosaic at production size (issue 36): fills a log to N entries with
# bench/fill (the commit protocol of served rounds, without HTTP or a
# signature per entry), serves it, and measures what grows with the log:
#
#   - the fill's entries/s (its last step included: the embedded
#     database's merges of the dedup cache's runs, which its rounds may
#     outrun, finished as a log grown at production's pace has them);
#   - disk bytes per entry: data tiles, hash tiles, issuers, the lock and
#     dedup store (the embedded database, or PostgreSQL's tables);
#   - from `mosaic serve` to the first SCT; the leaf hash index backfill
#     (the log is filled without rfc6962_read_api, which serve then turns
#     on, so the backfill indexes all N entries);
#   - RSS and Go heap idle (after the backfill), and under load; the
#     embedded database's dedup runs and free pages (its /metrics) idle
#     and after the load;
#   - under load (bench/benchrun, the hammer's -issuers production by
#     default), server CPU per entry and add-chain p50/p99 at each rate,
#     dedup lookup and insert µs, the longest round (a commit stall: a
#     bbolt remap, a merge's commit), against a fresh log in the same hour;
#   - get-entries at random deep offsets; partial tiles left and collected;
#   - fsck of the whole log from its storage directory (time and MiB/s);
#     backup and restore of the embedded database;
#   - with MEMORY_LIMIT (e.g. 512M), the filled log served again from a
#     cold page cache inside a memory cgroup of that size (Linux, root:
#     cgroup v1 or v2 with the memory controller), and the same load: the
#     RSS the kernel holds it to (bbolt's map and the dedup filters are
#     file pages it reclaims), the CPU and latency that cost, and whether
#     the cgroup ever had to kill it;
#   - with KILL=1, a kill -9 of the fill midway and of the server under
#     load, after which nothing acknowledged may be missing (the fill's
#     committed rounds; every SCT the hammer got is verified included) and
#     fsck must be clean.
#
# Usage: N=100000000 bench/scale.sh [OUTDIR]
#
# Settings (environment variables, with defaults):
#   N=1000000            entries to fill the log with
#   BACKEND=local        local: embedded database (bbolt); postgres: PostgreSQL
#                        lock and dedup cache (PGHOST, PGPORT, database test)
#   RATES=0,1000         load steps: hammer -rate, 0 = as fast as possible
#   STEP=20s             duration of each load step
#   WORKERS=3000         hammer -workers
#   ISSUERS=production   hammer -issuers of the load
#   ROUND=65536          entries per fill round
#   GETS=200             get-entries requests at random offsets
#   KILL=0               1: the kill -9 checks above
#   FRESH=1              0: no fresh log to compare with
#   BACKUP=1             0: no backup and restore (local only)
#   KEEP=0               1: keep the work directory
#   RFC6962=1            0: rfc6962_read_api off on both logs (no leaf hash
#                        index, so no backfill and no get-entries)
#   RESUME=              (local only) the work directory of an interrupted run of this
#                        script (kept: kill it with SIGKILL, or KEEP=1)
#                        whose log is filled: go on from the fill, with the
#                        same OUTDIR (its fill results); never deleted
#   MEMORY_LIMIT=        e.g. 512M: the load again under that memory limit
#   SCALE_TMP=$TMPDIR    where the logs go: it needs about 450 bytes per
#                        entry on local disk, and 130 more for the backup
#                        (58 GB at 10⁸, see docs/BENCHMARKS.md "Scale"),
#                        and checks that they are free before it starts
#
# Results go to OUTDIR (default bench/results/<UTC timestamp>-scale-N):
# results.md (one table), results.json, the benchmark runs and logs. The
# last line printed is one JSON object with, at least: entries,
# first_sct_s, rss_mib_idle, rss_mib_load, cpu_us_per_entry,
# fresh_cpu_us_per_entry, p99_ms, fresh_p99_ms, max_stall_ms, fsck_mb_s,
# bytes_per_entry (fsck_mb_s is in MiB/s, 2²⁰ bytes, as the table's fsck
# row). A run that fails or is stopped after its fill writes
# the rows it measured ("—" for the others), headed by the stage it
# stopped at, and prints them to stderr. Linux only (/proc).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-1000000}
BACKEND=${BACKEND:-local}
RATES=${RATES:-0,1000}
STEP=${STEP:-20s}
WORKERS=${WORKERS:-3000}
ISSUERS=${ISSUERS:-production}
ROUND=${ROUND:-65536}
GETS=${GETS:-200}
KILL=${KILL:-0}
FRESH=${FRESH:-1}
BACKUP=${BACKUP:-1}
KEEP=${KEEP:-0}
RFC6962=${RFC6962:-1}
RESUME=${RESUME:-}
[[ -n $RESUME ]] && KEEP=1
MEMORY_LIMIT=${MEMORY_LIMIT:-}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
case $BACKEND in
local | postgres) ;;
*)
	echo "BACKEND must be local or postgres, not '$BACKEND'" >&2
	exit 2
	;;
esac
[[ $N =~ ^[0-9]+$ ]] && ((N >= 1000)) || { echo "N must be a whole number of at least 1000, not '$N'" >&2; exit 2; }
for tool in go curl bc; do
	command -v "$tool" >/dev/null || { echo "bench/scale.sh needs $tool" >&2; exit 1; }
done

out=${1:-$root/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-scale-$N}
mkdir -p "$out"
if [[ -n $RESUME ]]; then
	[[ $BACKEND == local ]] || { echo "scale: RESUME takes a log on local disk (BACKEND=local)" >&2; exit 2; }
	[[ -f $RESUME/log/config.yaml ]] || { echo "scale: RESUME=$RESUME holds no log (log/config.yaml)" >&2; exit 2; }
	[[ -f $out/fill.json ]] || { echo "scale: RESUME needs the interrupted run's OUTDIR, with its fill.json: $out has none" >&2; exit 2; }
	work=$(cd "$RESUME" && pwd)
else
	work=$(mktemp -d "${SCALE_TMP:-${TMPDIR:-/tmp}}/mosaic-scale.XXXXXX")
fi
# The disk it needs, checked now rather than found missing at the backup:
# about 450 bytes per entry for the log (tiles and database) and, for
# the backup and restore, the database file again (about 130 bytes per
# entry with both indexes).
if [[ -z $RESUME ]]; then
	need=$((N * 450))
	[[ $BACKUP == 1 && $BACKEND == local ]] && need=$((need + N * 130))
	avail=$(df --output=avail -B1 "$work" | tail -n 1)
	if ((avail < need)); then
		echo "scale: $N entries need about $((need / 1000000000 + 1)) GB on the disk of $work, which has $((avail / 1000000000)) GB free (SCALE_TMP chooses another; BACKUP=0 needs less)" >&2
		rm -rf "$work"
		exit 1
	fi
fi
bin=$work/bin
server_pid= bench_pid= fill_pid= hammer_pid=
dbs=() pg_role= cgroup=
# What the run measures, empty until measured: a run that stops early
# still writes the rows it has (report).
entries= added= fill_rate= merge_s= resumed_at= data_b= hash_b= issuer_b= other_b= db_b=
partials_before= partials_deleted= partials_after= first_sct_s= backfill_s= rss_idle= anon_idle= heap_idle=
runs_idle= free_idle= runs_load= free_load= get_errors= get_p50= get_p99= lookup_us= put_us= max_stall_ms=
kill_result= fsck_s= fsck_mb_s= final_entries= backup_s= restore_s= fresh_cpu= fresh_p99=
capped_first= capped_cpu= capped_p99= capped_rss= capped_anon= capped_ooms=
stage= reported=

# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"

cleanup() {
	local rc=$?
	# A run that stopped after its fill writes what it measured.
	if [[ -z $reported && -n $entries ]]; then
		set +eu
		report "stopped (exit status $rc) during: $stage" >&2
	fi
	for p in "$hammer_pid" "$bench_pid" "$fill_pid" "$server_pid"; do
		stop "$p"
	done
	[[ -n $cgroup ]] && rmdir "$cgroup" 2>/dev/null
	for d in "${dbs[@]}"; do
		psql_admin -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1 || true
	done
	if [[ $KEEP == 1 ]]; then
		echo "kept $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# f VALUE [DECIMALS]: VALUE rounded, or "—" if it was not measured.
f() { if [[ -n $1 ]]; then printf "%.${2:-1}f" "$1"; else echo "—"; fi; }
# per B: B / entries (bc), empty if B was not measured.
per() { div "$1" "$entries"; }
# div A B: A / B (bc), empty if either was not measured.
div() { if [[ -n $1 && -n $2 ]]; then echo "$1 / $2" | bc -l; fi; }
say() {
	stage=$*
	echo "scale: $*" >&2
}

say "building mosaic, bench/fill and bench/benchrun"
(cd "$root" && go build -o "$bin/mosaic" ./cmd/mosaic && go build -o "$bin/fill" ./bench/fill && go build -o "$bin/benchrun" ./bench/benchrun)

# new_log DIR: a dev log's config, keys and test CA in DIR, created and
# stopped, rfc6962_read_api off (fill first, then serve turns it on), on
# BACKEND. Sets port.
new_log() {
	local dir=$1 schema
	port=$(free_port)
	"$bin/mosaic" serve -dev -data "$dir" -listen "127.0.0.1:$port" >"$dir.dev.log" 2>&1 &
	local pid=$!
	for _ in $(seq 1 300); do
		[[ -f $dir/dev.json ]] && break
		alive "$pid" || { cat "$dir.dev.log" >&2; return 1; }
		sleep 0.1
	done
	stop "$pid"
	sed -i 's/^\( *\)read_path: true$/&\n\1rfc6962_read_api: false/' "$dir/config.yaml"
	grep -q 'rfc6962_read_api: false' "$dir/config.yaml" || { echo "scale: could not edit $dir/config.yaml" >&2; return 1; }
	if [[ $BACKEND == postgres ]]; then
		if [[ -z $pg_role ]]; then
			for role in postgres root; do
				if psql -h "$PGHOST" -p "$PGPORT" -U "$role" -d test -Atqc 'SELECT 1' >/dev/null 2>&1; then
					pg_role=$role
					break
				fi
			done
			[[ -n $pg_role ]] || { echo "scale: cannot connect to PostgreSQL at $PGHOST:$PGPORT database test as postgres or root" >&2; return 1; }
		fi
		db=mosaic_scale_$(rand_hex 6)
		psql_admin -c "CREATE DATABASE $db"
		dbs+=("$db")
		sed -i "s|^database: .*|&\npostgres: postgres://$pg_role@$PGHOST:$PGPORT/$db?sslmode=disable|" "$dir/config.yaml"
		# The dev log was created in the embedded database: create it
		# again in PostgreSQL over a fresh storage directory.
		rm -rf "$dir/data" "$dir/mosaic.db"
		"$bin/mosaic" create -config "$dir/config.yaml" >>"$dir.dev.log" 2>&1
	fi
}

dev_field() { sed -n 's/^ *"'"$2"'": *"\([^"]*\)".*/\1/p' "$1/dev.json"; }

# serve DIR [CGROUP]: start mosaic serve on DIR's config (in the memory
# cgroup CGROUP, joined before exec, so that all its memory is charged
# there); sets server_pid and t_serve.
serve() {
	if [[ -n ${2:-} ]]; then
		(echo "$BASHPID" >"$2/cgroup.procs" && exec "$bin/mosaic" serve -config "$1/config.yaml") >>"$1.serve.log" 2>&1 &
	else
		"$bin/mosaic" serve -config "$1/config.yaml" >>"$1.serve.log" 2>&1 &
	fi
	server_pid=$!
	t_serve=$(date +%s.%N)
}

# memory_cgroup LIMIT: creates a memory cgroup of LIMIT bytes (a number
# with K, M or G) below this shell's own, v1 or v2, and prints its path.
memory_cgroup() {
	local rel d
	rel=$(sed -n 's/^[0-9]*:memory:\(.*\)/\1/p' /proc/self/cgroup)
	if [[ -n $rel && -w /sys/fs/cgroup/memory$rel ]]; then
		d=/sys/fs/cgroup/memory$rel/mosaic-scale-$$
		mkdir "$d" && echo "$1" >"$d/memory.limit_in_bytes" && echo "$d"
		return
	fi
	rel=$(sed -n 's/^0::\(.*\)/\1/p' /proc/self/cgroup)
	if grep -qw memory "/sys/fs/cgroup$rel/cgroup.subtree_control" 2>/dev/null; then
		d=/sys/fs/cgroup$rel/mosaic-scale-$$
		mkdir "$d" && echo "$1" >"$d/memory.max" && echo "$d"
		return
	fi
	echo "scale: MEMORY_LIMIT needs a memory cgroup this user can create (cgroup v1's memory hierarchy, or v2 with the memory controller enabled)" >&2
	return 1
}

# cgroup_ooms CGROUP: how often the cgroup's limit killed a process in it.
cgroup_ooms() {
	if [[ -f $1/memory.oom_control ]]; then
		awk '$1 == "oom_kill" { print $2 }' "$1/memory.oom_control"
	else
		awk '$1 == "oom_kill" { print $2 }' "$1/memory.events"
	fi
}

# first_sct DIR: seconds from t_serve until an add-chain of a new
# certificate is answered 200.
first_sct() {
	local dir=$1 url code
	url=$(dev_field "$dir" submission_prefix)ct/v1/add-chain
	"$bin/fill" -config "$dir/config.yaml" -submission-body "$work/body.json" \
		-ca-cert "$(dev_field "$dir" test_ca_cert)" -ca-key "$(dev_field "$dir" test_ca_key)"
	for _ in $(seq 1 6000); do
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H 'Content-Type: application/json' --data-binary @"$work/body.json" "$url" || true)
		if [[ $code == 200 ]]; then
			echo "$(date +%s.%N) - $t_serve" | bc
			return 0
		fi
		alive "$server_pid" || { echo "scale: mosaic serve exited" >&2; return 1; }
		sleep 0.05
	done
	echo "scale: no SCT within 5 minutes" >&2
	return 1
}

metric() { # metric DIR NAME[{labels}]: the value from /metrics, or 0
	local body
	body=$(curl -s --max-time 10 "$(dev_field "$1" submission_prefix)metrics" || true)
	# Printed in plain decimal (Prometheus writes 2.99e+07, which bc cannot read).
	awk -v m="$2" '$1 == m && !found { printf "%.6f\n", $2; found = 1 } END { if (!found) print 0 }' <<<"$body"
}

status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

# load DIR NAME: the benchrun steps against DIR's running server.
load() {
	mkdir -p "$out/$2"
	BENCH_COMMIT=$(bench_commit "$root") "$bin/benchrun" -mosaic "$bin/mosaic" -dev "$1" -pid "$server_pid" -name "Mosaic ($2)" \
		-clk-tck "$(getconf CLK_TCK)" -rates "$RATES" -issuers "$ISSUERS" -step "$STEP" -workers "$WORKERS" -readers 0 \
		-hammer-flag "-monitoring=file://$1/data" -out "$out/$2" -command "N=$N BACKEND=$BACKEND bench/scale.sh" \
		>"$out/$2/benchrun.log" 2>&1 &
	bench_pid=$!
	wait "$bench_pid"
	bench_pid=
}

# step_field NAME RATE FIELD: a field of benchrun's step at RATE (max: the
# largest over the steps).
step_field() {
	# A rate the load did not run (RATES) has no value: "—" in the table.
	[[ $2 == max || ",$RATES," == *",$2,"* ]] || return 0
	"$bin/benchrun" -get "$3" -rates "$2" "$out/$1/results.json"
}

du_b() { du -sb "$@" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }

# report [NOTE]: writes the table (results.md, printed) and the JSON
# (results.json, its last line printed) from what was measured; a row not
# measured shows "—" (null in the JSON). NOTE, if given, heads the table:
# a run that stopped early (cleanup).
report() {
	reported=1
	local cpu= rate= p50= p99= p99max= rss_load= anon_load= total_b json
	if [[ -f $out/filled/results.json ]]; then
		cpu=$(step_field filled 0 server_cpu_us_per_entry)
		rate=$(step_field filled 0 accepted_per_s)
		p50=$(step_field filled 1000 add_chain_p50_ms)
		p99=$(step_field filled 1000 add_chain_p99_ms)
		p99max=$(step_field filled 0 add_chain_p99_ms)
		rss_load=$(step_field filled max rss_max_mb)
		anon_load=$(step_field filled max rss_anon_max_mb)
	fi
	[[ -n $db_b ]] && total_b=$((data_b + hash_b + issuer_b + other_b + db_b))
	{
		[[ -n ${1:-} ]] && printf '**Incomplete: %s.**\n\n' "$1"
		echo "Mosaic at $(printf "%'d" "$entries") entries ($BACKEND), $(date -u '+%Y-%m-%d %H:%M UTC'), $(bench_commit "$root"), $(nproc) cores; load: hammer -issuers $ISSUERS, rates $RATES, $STEP per step, $WORKERS workers."
		echo
		echo "| measure | value |"
		echo "|---|---:|"
		echo "| fill, entries/s (of its seconds, the last merges') | $(f "$fill_rate" 0) ($(f "$merge_s" 0)) |"
		echo "| disk bytes per entry: data tiles / hash tiles / issuers and other / lock and dedup store | $(f "$(per "$data_b")") / $(f "$(per "$hash_b")") / $(f "$(per "${issuer_b:+$((issuer_b + other_b))}")" 2) / $(f "$(per "$db_b")") |"
		echo "| disk bytes per entry, total | $(f "$(per "$total_b")") |"
		echo "| from serve to the first SCT, s | $(f "$first_sct_s" 2) |"
		echo "| leaf hash index backfill of every entry, s (from serve) | $(f "$backfill_s") |"
		echo "| RSS idle, MiB (of which anonymous) | $(f "$(div "$rss_idle" 1024)" 0) ($(f "$(div "$anon_idle" 1024)" 0)) |"
		echo "| Go heap in use idle, MiB | $(f "$(div "$heap_idle" 1048576)" 0) |"
		echo "| RSS under load, MiB (of which anonymous) | $(f "$rss_load" 0) ($(f "$anon_load" 0)) |"
		echo "| as fast as possible: entries/s, server CPU µs/entry, add-chain p99 ms | $(f "$rate" 0), $(f "$cpu" 0), $(f "$p99max" 0) |"
		echo "| fresh log, same hour: server CPU µs/entry as fast as possible | $(f "$fresh_cpu" 0) |"
		echo "| at 1,000/s: add-chain p50 / p99 ms (fresh log p99) | $(f "$p50" 0) / $(f "$p99" 0) ($(f "$fresh_p99" 0)) |"
		echo "| dedup store under load: lookup latency µs, write µs per entry | $(f "$lookup_us"), $(f "$put_us") |"
		if [[ $BACKEND == local ]]; then
			echo "| embedded database: dedup runs and free pages, idle (after the backfill); after the load | $(f "$runs_idle" 0) and $(f "$free_idle" 0); $(f "$runs_load" 0) and $(f "$free_load" 0) |"
		fi
		echo "| longest round (commit stall), ms | $(f "$max_stall_ms" 0) |"
		echo "| get-entries of 32 at random offsets: p50 / p99 ms (${get_errors:-—} errors) | $(f "$get_p50") / $(f "$get_p99") |"
		echo "| partial tiles: left by the fill, deleted under load, left after | ${partials_before:-—}, ${partials_deleted:-—}, ${partials_after:-—} |"
		echo "| fsck from the storage directory: s, MiB/s | $(f "$fsck_s" 1), $(f "$fsck_mb_s" 0) |"
		echo "| backup, restore of the embedded database, s | $(f "$backup_s" 2), $(f "$restore_s" 2) |"
		if [[ -n $MEMORY_LIMIT ]]; then
			echo "| under a $MEMORY_LIMIT memory limit, cold page cache: first SCT s; RSS MiB (anonymous); CPU µs/entry as fast as possible; p99 ms at 1,000/s; killed by the limit | $(f "$capped_first" 2); $(f "$capped_rss" 0) ($(f "$capped_anon" 0)); $(f "$capped_cpu" 0); $(f "$capped_p99" 0); ${capped_ooms:-—} times |"
		fi
		if [[ $KILL == 1 ]]; then
			echo "| kill -9 of the fill after $acked committed entries | resumed at $resumed_at: nothing lost |"
			echo "| kill -9 of the server under load | ${kill_result:-—} |"
		fi
		if [[ -f $out/fsck.txt ]]; then
			echo
			echo "fsck: $(grep '^checked:' "$out/fsck.txt")"
		fi
	} >"$out/results.md"
	cat "$out/results.md"
	json=$(printf '{"entries":%s,"backend":"%s","fill_entries_per_s":%s,"fill_merge_s":%s,"first_sct_s":%s,"backfill_s":%s,"rss_mib_idle":%s,"heap_mib_idle":%s,"rss_mib_load":%s,"cpu_us_per_entry":%s,"accepted_per_s":%s,"fresh_cpu_us_per_entry":%s,"p50_ms":%s,"p99_ms":%s,"fresh_p99_ms":%s,"max_p99_ms":%s,"max_stall_ms":%s,"dedup_lookup_us":%s,"dedup_insert_us":%s,"dedup_runs_idle":%s,"free_pages_idle":%s,"dedup_runs_load":%s,"free_pages_load":%s,"get_entries_p99_ms":%s,"fsck_s":%s,"fsck_mb_s":%s,"backup_s":%s,"restore_s":%s,"bytes_per_entry":%s,"data_tile_bytes_per_entry":%s,"hash_tile_bytes_per_entry":%s,"db_bytes_per_entry":%s,"fsck_entries":%s,"capped_rss_mib":%s,"capped_cpu_us_per_entry":%s,"capped_p99_ms":%s,"capped_first_sct_s":%s}' \
		"$entries" "$BACKEND" "$(f "$fill_rate" 0)" "$(f "$merge_s" 1)" "$(f "$first_sct_s" 3)" "$(f "$backfill_s" 1)" "$(f "$(div "$rss_idle" 1024)" 1)" \
		"$(f "$(div "$heap_idle" 1048576)" 1)" "$(f "$rss_load" 1)" "$(f "$cpu" 1)" "$(f "$rate" 0)" "$(f "$fresh_cpu" 1)" "$(f "$p50" 1)" "$(f "$p99" 1)" "$(f "$fresh_p99" 1)" \
		"$(f "$p99max" 1)" "$(f "$max_stall_ms" 1)" "$(f "$lookup_us" 2)" "$(f "$put_us" 2)" "$(f "$runs_idle" 0)" "$(f "$free_idle" 0)" "$(f "$runs_load" 0)" "$(f "$free_load" 0)" \
		"$(f "$get_p99" 1)" "$(f "$fsck_s" 2)" "$(f "$fsck_mb_s" 1)" \
		"$(f "$backup_s" 2)" "$(f "$restore_s" 2)" "$(f "$(per "$total_b")" 1)" "$(f "$(per "$data_b")" 1)" \
		"$(f "$(per "$hash_b")" 1)" "$(f "$(per "$db_b")" 1)" "$(f "$final_entries" 0)" "$(f "$capped_rss" 1)" "$(f "$capped_cpu" 1)" "$(f "$capped_p99" 1)" "$(f "$capped_first" 3)" | sed 's/—/null/g')
	echo "$json" >"$out/results.json"
	echo "$json"
}

if [[ -n $MEMORY_LIMIT ]]; then
	# Found out now, not after the fill.
	cg=$(memory_cgroup "$MEMORY_LIMIT") && rmdir "$cg" || exit 1
fi

log=$work/log
acked=0
if [[ -n $RESUME ]]; then
	say "resuming from the filled log in $work"
	fill_json=$(tail -n 1 "$out/fill.json")
	entries=$(sed -n 's/.*"entries":\([0-9]*\).*/\1/p' <<<"$fill_json")
	added=$(sed -n 's/.*"added":\([0-9]*\).*/\1/p' <<<"$fill_json")
	fill_rate=$(sed -n 's/.*"entries_per_s":\([0-9.]*\).*/\1/p' <<<"$fill_json")
	merge_s=$(sed -n 's/.*"merge_seconds":\([0-9.]*\).*/\1/p' <<<"$fill_json")
	resumed_at=$((entries - added))
	[[ -f $out/fill-killed.log ]] && acked=$(sed -n 's/^[0-9:]*: \([0-9]*\) entries.*/\1/p' "$out/fill-killed.log" | tail -n 1)
else
mkdir -p "$log"
say "creating the log ($BACKEND)"
new_log "$log"

# --- fill --------------------------------------------------------------
say "filling to $N entries"
fill_args=(-config "$log/config.yaml" -n "$N" -round "$ROUND" -progress 10s)
acked=0
if [[ $KILL == 1 ]]; then
	# kill -9 once the fill has committed half: what it reported must
	# still be there when the next fill resumes.
	"$bin/fill" "${fill_args[@]}" -progress 1s >"$out/fill-killed.json" 2>"$out/fill-killed.log" &
	fill_pid=$!
	while alive "$fill_pid"; do
		acked=$(sed -n 's/^[0-9:]*: \([0-9]*\) entries.*/\1/p' "$out/fill-killed.log" | tail -n 1)
		((${acked:-0} >= N / 2)) && break
		sleep 0.2
	done
	kill -9 "$fill_pid" 2>/dev/null || true
	wait "$fill_pid" 2>/dev/null || true
	fill_pid=
	say "killed the fill (kill -9) after it reported $acked entries committed"
fi
t0=$(date +%s.%N)
"$bin/fill" "${fill_args[@]}" >"$out/fill.json" 2>"$out/fill.log"
fill_s=$(echo "$(date +%s.%N) - $t0" | bc)
fill_json=$(tail -n 1 "$out/fill.json")
entries=$(sed -n 's/.*"entries":\([0-9]*\).*/\1/p' <<<"$fill_json")
added=$(sed -n 's/.*"added":\([0-9]*\).*/\1/p' <<<"$fill_json")
resumed_at=$((entries - added))
merge_s=$(sed -n 's/.*"merge_seconds":\([0-9.]*\).*/\1/p' <<<"$fill_json")
if [[ $KILL == 1 ]] && ((resumed_at < acked)); then
	echo "scale: LOST ENTRIES: the fill reported $acked committed before kill -9, the next one resumed at $resumed_at" >&2
	exit 1
fi
fill_rate=$(echo "$added / $fill_s" | bc -l)
say "filled: $entries entries ($added in ${fill_s}s, $(printf %.0f "$fill_rate")/s)"
fi

# --- disk --------------------------------------------------------------
data_b=$(du_b "$log/data/tile/data")
hash_b=$(du_b "$log"/data/tile/[0-9]*)
issuer_b=$(du_b "$log/data/issuer")
other_b=$(($(du_b "$log/data") - data_b - hash_b - issuer_b))
if [[ $BACKEND == postgres ]]; then
	db_b=$(psql -h "$PGHOST" -p "$PGPORT" -U "$pg_role" -d "${dbs[0]}" -Atqc "SELECT pg_database_size(current_database())")
else
	db_b=$(du_b "$log"/mosaic.db*)
fi
partials_before=$(find "$log/data/tile" -path '*.p/*' -type f | wc -l)

# --- serve, first SCT, backfill, idle ------------------------------------
# rfc6962_read_api as RFC6962 says (the fill left it off; RESUME may find
# it on).
set_rfc6962() {
	if [[ $RFC6962 == 1 ]]; then
		sed -i 's/rfc6962_read_api: false/rfc6962_read_api: true/' "$1/config.yaml"
	else
		sed -i 's/rfc6962_read_api: true/rfc6962_read_api: false/' "$1/config.yaml"
	fi
}
set_rfc6962 "$log"
say "serving the filled log"
serve "$log"
first_sct_s=$(first_sct "$log")
say "first SCT after ${first_sct_s}s"
backfill_s=
for _ in $(seq 1 86400); do
	[[ $RFC6962 == 1 ]] || break
	idx=$(metric "$log" 'mosaic_hash_index_entries{log="dev"}')
	if [[ ${idx%.*} -ge $entries ]]; then
		backfill_s=$(echo "$(date +%s.%N) - $t_serve" | bc)
		break
	fi
	alive "$server_pid" || { echo "scale: mosaic serve exited during the backfill" >&2; exit 1; }
	sleep 1
done
[[ $RFC6962 == 1 ]] && say "leaf hash index backfilled after ${backfill_s}s"
sleep 10
rss_idle=$(status_kb "$server_pid" VmRSS)
anon_idle=$(status_kb "$server_pid" RssAnon)
heap_idle=$(metric "$log" go_memstats_heap_inuse_bytes)
runs_idle=$(metric "$log" mosaic_dedup_runs)
free_idle=$(metric "$log" mosaic_database_free_pages)

# --- random get-entries at deep offsets ---------------------------------
[[ $RFC6962 == 1 ]] || GETS=0
say "get-entries at $GETS random offsets"
prefix=$(dev_field "$log" submission_prefix)
: >"$out/get-entries.txt"
for _ in $(seq 1 "$GETS"); do
	start=$(((RANDOM * 32768 + RANDOM) % (entries - 32)))
	curl -s -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 30 "${prefix}ct/v1/get-entries?start=$start&end=$((start + 31))" >>"$out/get-entries.txt"
done
get_errors=$(awk '$1 != 200' "$out/get-entries.txt" | wc -l)
read -r get_p50 get_p99 < <(awk '{ print $2 * 1000 }' "$out/get-entries.txt" | sort -n | awk '{ v[NR] = $1 } END { print v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1] }')

# --- load -----------------------------------------------------------------
say "load: RATES=$RATES STEP=$STEP ISSUERS=$ISSUERS"
m_before=("$(metric "$log" 'mosaic_dedup_duration_seconds_sum{log="dev",op="lookup"}')" "$(metric "$log" 'mosaic_dedup_duration_seconds_count{log="dev",op="lookup"}')"
	"$(metric "$log" 'mosaic_dedup_duration_seconds_sum{log="dev",op="put"}')" "$(metric "$log" 'mosaic_sequenced_entries_total{log="dev"}')"
	"$(metric "$log" 'mosaic_partial_tiles_deleted_total{log="dev"}')")
load "$log" filled
m_after=("$(metric "$log" 'mosaic_dedup_duration_seconds_sum{log="dev",op="lookup"}')" "$(metric "$log" 'mosaic_dedup_duration_seconds_count{log="dev",op="lookup"}')"
	"$(metric "$log" 'mosaic_dedup_duration_seconds_sum{log="dev",op="put"}')" "$(metric "$log" 'mosaic_sequenced_entries_total{log="dev"}')"
	"$(metric "$log" 'mosaic_partial_tiles_deleted_total{log="dev"}')")
max_stall_ms=$(echo "$(metric "$log" 'mosaic_sequencing_round_duration_max_seconds{log="dev"}') * 1000" | bc -l)
runs_load=$(metric "$log" mosaic_dedup_runs)
free_load=$(metric "$log" mosaic_database_free_pages)
lookup_us=$(echo "(${m_after[0]} - ${m_before[0]}) / (${m_after[1]} - ${m_before[1]} + 0.000001) * 1000000" | bc -l)
put_us=$(echo "(${m_after[2]} - ${m_before[2]}) / (${m_after[3]} - ${m_before[3]} + 0.000001) * 1000000" | bc -l)
partials_deleted=$(echo "${m_after[4]} - ${m_before[4]}" | bc)

# --- kill -9 under load ---------------------------------------------------
kill_result=
if [[ $KILL == 1 ]]; then
	say "kill -9 of the server under load"
	"$bin/mosaic" hammer -dev "$log" -monitoring "file://$log/data" -issuers "$ISSUERS" -rate 1000 -duration 30s \
		-workers 500 -premint 33000 -drain 120s -ui=false -report "$out/kill-hammer.json" >"$out/kill-hammer.log" 2>&1 &
	hammer_pid=$!
	# Once it submits (after preminting), 15 s in.
	for _ in $(seq 1 600); do
		grep -q ' offered ' "$out/kill-hammer.log" 2>/dev/null && break
		sleep 0.5
	done
	sleep 10
	kill -9 "$server_pid"
	wait "$server_pid" 2>/dev/null || true
	serve "$log"
	wait "$hammer_pid" || true
	hammer_pid=
	verified=$(sed -n 's/^ *"inclusions_verified": \([0-9]*\).*/\1/p' "$out/kill-hammer.json")
	accepted=$(sed -n 's/^ *"accepted": \([0-9]*\).*/\1/p' "$out/kill-hammer.json")
	failures=$(sed -n 's/^ *"verification_failures": \([0-9]*\).*/\1/p' "$out/kill-hammer.json")
	if [[ -z $accepted || $verified != "$accepted" || $failures != 0 ]]; then
		echo "scale: after kill -9 under load: $accepted SCTs, $verified verified included, $failures verification failures (see kill-hammer.log)" >&2
		exit 1
	fi
	kill_result="$accepted SCTs before and after kill -9, all $verified verified included"
	say "$kill_result"
fi
stop "$server_pid"
server_pid=
partials_after=$(find "$log/data/tile" -path '*.p/*' -type f | wc -l)

# --- fsck -------------------------------------------------------------------
say "fsck of the whole log"
t0=$(date +%s.%N)
"$bin/mosaic" fsck -monitoring "file://$log/data" -pubkey "$(dev_field "$log" public_key)" -origin "$(dev_field "$log" origin)" >"$out/fsck.txt" 2>&1 ||
	{ tail -n 5 "$out/fsck.txt" >&2; echo "scale: fsck FAILED" >&2; exit 1; }
fsck_s=$(echo "$(date +%s.%N) - $t0" | bc)
tiles_b=$(du_b "$log/data/tile" "$log/data/issuer")
fsck_mb_s=$(echo "$tiles_b / 1048576 / $fsck_s" | bc -l)
final_entries=$(sed -n 's/^checked: *\([0-9]*\) entries.*/\1/p' "$out/fsck.txt")

# --- backup and restore ----------------------------------------------------
backup_s= restore_s=
if [[ $BACKUP == 1 && $BACKEND == local ]]; then
	say "backup and restore of the embedded database"
	t0=$(date +%s.%N)
	"$bin/mosaic" backup -config "$log/config.yaml" -o "$work/backup.db" >"$out/backup.log" 2>&1
	backup_s=$(echo "$(date +%s.%N) - $t0" | bc)
	t0=$(date +%s.%N)
	"$bin/mosaic" restore -config "$log/config.yaml" -from "$work/backup.db" >"$out/restore.log" 2>&1
	restore_s=$(echo "$(date +%s.%N) - $t0" | bc)
fi

# --- under a memory limit, from a cold page cache ------------------------------
capped_first= capped_cpu= capped_p99= capped_rss= capped_anon= capped_ooms=
if [[ -n $MEMORY_LIMIT ]]; then
	say "the filled log under a memory limit of $MEMORY_LIMIT, from a cold page cache"
	cgroup=$(memory_cgroup "$MEMORY_LIMIT")
	sync
	echo 3 >/proc/sys/vm/drop_caches || say "could not drop the page cache: the capped run starts warm"
	serve "$log" "$cgroup"
	capped_first=$(first_sct "$log")
	load "$log" capped
	stop "$server_pid"
	server_pid=
	capped_cpu=$(step_field capped 0 server_cpu_us_per_entry)
	capped_p99=$(step_field capped 1000 add_chain_p99_ms)
	capped_rss=$(step_field capped max rss_max_mb)
	capped_anon=$(step_field capped max rss_anon_max_mb)
	capped_ooms=$(cgroup_ooms "$cgroup")
	rmdir "$cgroup" 2>/dev/null && cgroup=
	if [[ ${capped_ooms:-0} != 0 ]]; then
		echo "scale: the memory limit of $MEMORY_LIMIT killed mosaic serve $capped_ooms times" >&2
		exit 1
	fi
fi

# --- a fresh log, same load, same hour ----------------------------------------
fresh_cpu= fresh_p99=
if [[ $FRESH == 1 ]]; then
	say "the same load on a fresh log"
	fresh=$work/fresh
	mkdir -p "$fresh"
	new_log "$fresh"
	set_rfc6962 "$fresh"
	serve "$fresh"
	first_sct "$fresh" >/dev/null
	load "$fresh" fresh
	stop "$server_pid"
	server_pid=
	fresh_cpu=$(step_field fresh 0 server_cpu_us_per_entry)
	fresh_p99=$(step_field fresh 1000 add_chain_p99_ms)
fi

# --- the table --------------------------------------------------------------
report
