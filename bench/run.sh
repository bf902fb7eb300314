#!/usr/bin/env bash
# End-to-end benchmark of Mosaic: builds mosaic, starts `mosaic serve -dev` on
# a fresh directory (loopback only), runs the hammer headless at a ladder of
# rates and at "as fast as possible", samples the server's CPU and RSS from
# /proc, and writes results.json, results.md and chart.svg.
#
# With BACKEND=s3 the same ladder runs against a log stored in S3 with its
# lock and dedup cache in PostgreSQL: the script builds/starts MinIO
# (scripts/minio.sh) on a free 127.0.0.1 port with a temporary directory,
# random credentials and a bucket, creates a fresh database on the local
# PostgreSQL (127.0.0.1:5432, trust auth, as role postgres or else root),
# briefly runs `mosaic serve -dev` only to make the key, roots and test CA,
# then runs `mosaic create` and `mosaic serve` with an S3 + PostgreSQL config
# on the dev log's address (so its dev.json describes the S3 log as well, for
# the hammer and fsck). Each step then also reports the server's S3 requests
# per 1,000 accepted entries by operation (mosaic_storage_requests_total from
# /metrics, every attempt counted), split by its client label: the write path
# (client "sequencer", and "lock" with lock: s3) and the read path (client
# "read_path", serving the hammer's checkpoint and tile reads). MinIO, the
# server, the database and the temporary directories are removed on exit.
#
# Usage: bench/run.sh [OUTDIR]
#
# Settings (environment variables, with defaults):
#   BACKEND=local                    local: dev log on local disk + embedded database;
#                                    s3: log in S3 (MinIO) + PostgreSQL lock and dedup cache
#   RATES=250,500,1000,2000,3000,0   ladder of hammer -rate values; 0 = as fast as possible
#   STEP=25s                         duration of each step
#   WORKERS=1000                     hammer -workers (concurrent submissions)
#   ISSUERS='production;p256'        hammer -issuers mixes, semicolon-separated: the whole
#                                    ladder runs for each (production: the mix of real
#                                    entries, 89% P-384 and 11% RSA-2048 issuers; p256: one
#                                    P-256 issuer, as every benchmark before 2026-11-28)
#   DUP=0.1  PRECERT=1               hammer -dup and -precert (empty: each mix's own share,
#                                    0.5 for KIND=WEIGHT mixes). 1: all precertificates, as
#                                    production's entries are, so that every mix submits the
#                                    same kind of entry: the hammer's final certificates carry
#                                    their SCT list, as in production, and Mosaic defers those
#                                    (low priority) while busy with Retry-After 10-30 s, which
#                                    the hammer honours for every worker
#   READERS=0  READ_RATE=20          hammer -readers and -read-rate
#   KEEP=0                           1 keeps the dev log directory (and MinIO's data) for inspection
#   PGHOST=127.0.0.1 PGPORT=5432     PostgreSQL for BACKEND=s3 (database test must exist)
#
# The default ladder takes about 7 minutes (twice 3, and preminting). Results go to OUTDIR (default
# bench/results/<UTC timestamp>). Linux only (/proc).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bench/results/$(date -u +%Y%m%dT%H%M%SZ)}
BACKEND=${BACKEND:-local}
RATES=${RATES:-250,500,1000,2000,3000,0}
STEP=${STEP:-25s}
WORKERS=${WORKERS:-1000}
DUP=${DUP:-0.1}
PRECERT=${PRECERT-1}
ISSUERS=${ISSUERS:-production;p256}
READERS=${READERS:-0}
READ_RATE=${READ_RATE:-20}
MAX_PREMINT=${MAX_PREMINT:-250000}
KEEP=${KEEP:-0}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
case $BACKEND in
local | s3) ;;
*)
	echo "BACKEND must be local or s3, not '$BACKEND'" >&2
	exit 2
	;;
esac
if [[ $BACKEND == s3 ]]; then
	for tool in curl psql; do
		command -v "$tool" >/dev/null || { echo "BACKEND=s3 needs $tool" >&2; exit 1; }
	done
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/mosaic-bench.XXXXXX")
server_pid= minio_pid= bench_pid= pg_role= pg_db=

# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"

cleanup() {
	stop "$bench_pid"
	stop "$server_pid"
	s3_cleanup "$KEEP" "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "building mosaic and the benchmark driver" >&2
(cd "$root" && go build -o "$work/mosaic" ./cmd/mosaic && go build -o "$work/benchrun" ./bench/benchrun)
mkdir -p "$out"

if [[ $BACKEND == s3 ]]; then
	s3_services "$out" "$work"
fi

# The dev log. With BACKEND=s3 it runs only to make the key, roots, test CA
# and dev.json, and its log goes to serve-dev.log.
dev_log=$out/serve.log
[[ $BACKEND == s3 ]] && dev_log=$out/serve-dev.log
"$work/mosaic" serve -dev -data "$work/devlog" -listen 127.0.0.1:0 >"$dev_log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do
	[[ -f $work/devlog/dev.json ]] && break
	alive "$server_pid" || { echo "mosaic serve exited:" >&2; cat "$dev_log" >&2; exit 1; }
	sleep 0.1
done
[[ -f $work/devlog/dev.json ]] || { echo "mosaic serve -dev wrote no dev.json" >&2; exit 1; }

metrics=
if [[ $BACKEND == s3 ]]; then
	stop "$server_pid"
	server_pid=
	# The S3 log listens where the dev log did, with the same key: the
	# dev.json then describes it exactly (prefixes, origin, key, test CA,
	# NotAfter window), and the hammer and fsck keep reading it.
	json_field() { sed -n 's/^ *"'"$1"'": *"\([^"]*\)".*/\1/p' "$work/devlog/dev.json"; }
	addr=$(json_field submission_prefix | sed -n 's|^http://\([^/]*\)/$|\1|p')
	[[ -n $addr ]] || { echo "unexpected submission_prefix in $work/devlog/dev.json" >&2; exit 1; }
	s3_config "$addr" "$work/devlog" "$work/s3.creds" "Mosaic benchmark log on S3" >"$work/s3.yaml"
	cp "$work/s3.yaml" "$out/config.yaml"
	"$work/mosaic" create -config "$work/s3.yaml" >"$out/serve.log" 2>&1 ||
		{ echo "mosaic create failed:" >&2; cat "$out/serve.log" >&2; exit 1; }
	"$work/mosaic" serve -config "$work/s3.yaml" >>"$out/serve.log" 2>&1 &
	server_pid=$!
	wait_http "http://$addr/health" "$server_pid" "$out/serve.log"
	metrics=http://$addr/metrics
	echo "S3 log up on $addr (pid $server_pid); results in $out" >&2
else
	echo "dev log up (pid $server_pid); results in $out" >&2
fi

commit=$(bench_commit "$root")
settings="RATES=$RATES ISSUERS='$ISSUERS' STEP=$STEP WORKERS=$WORKERS DUP=$DUP PRECERT=$PRECERT READERS=$READERS READ_RATE=$READ_RATE MAX_PREMINT=$MAX_PREMINT"
[[ $BACKEND == local ]] || settings="BACKEND=$BACKEND $settings"
# In the background, so that a signal reaches the traps at once.
BENCH_COMMIT=$commit "$work/benchrun" -mosaic "$work/mosaic" -dev "$work/devlog" -pid "$server_pid" \
	-backend "$BACKEND" -metrics "$metrics" \
	-clk-tck "$(getconf CLK_TCK)" -rates "$RATES" -step "$STEP" -workers "$WORKERS" \
	-issuers "$ISSUERS" -dup "$DUP" -precert "${PRECERT:--1}" -readers "$READERS" -read-rate "$READ_RATE" -max-premint "$MAX_PREMINT" -out "$out" \
	-command "$settings bench/run.sh" &
bench_pid=$!
wait "$bench_pid"
bench_pid=

echo "checking the whole log with mosaic fsck" >&2
"$work/mosaic" fsck -dev "$work/devlog" | tee "$out/fsck.txt"
