#!/usr/bin/env bash
# Side-by-side write-path comparison of Mosaic, Sunlight and TesseraCT: the
# same hammer (`mosaic hammer`), the same rates, the same test root CA and
# NotAfter window, each log on loopback in a fresh temporary directory, one
# after the other (never two at once). The hammer's verification reads
# (checkpoints, tiles, issuers) go to each log's storage directory through
# file://, so only the write path is measured. bench/benchrun runs the
# steps and samples each server's CPU and RSS from /proc, as for
# bench/run.sh; it then combines the logs' results into one table.
#
#   Mosaic     this checkout, `mosaic serve -dev` (local disk, embedded
#              database, period 200 ms, pool 4,000).
#   Sunlight   v0.9.0, built once in a scratch module from the Go module proxy
#              (cgo: its SQLite driver needs gcc) and cached; local directory
#              storage, SQLite checkpoints lock (created first, as its README
#              says) and dedup cache, period 200 ms, pool 4,000.
#   TesseraCT  v0.1.1 (tessera v1.0.1), its POSIX binary, built the same way
#              if the proxy serves it; otherwise skipped with the reason.
#              The checksum database has no record of tesseract v0.1.1, so
#              the build exempts that one module from it and instead pins
#              its hash in the scratch module's go.sum (below); its
#              dependencies are verified as usual. Run with
#              -checkpoint_interval 200ms (default 1.5s) to match the others'
#              200 ms period, and -rate_limit_dedup=-1 (default 100/s), so
#              that resubmissions are answered rather than pushed back.
#
# Builds are cached under ${XDG_CACHE_HOME:-~/.cache}/mosaic/compare/ (a
# build happens in the temporary directory and enters the cache only once
# complete). After
# each log's steps its server is stopped and `mosaic fsck` checks the whole
# log from its storage directory. Sunlight, run as root, marks its files
# immutable: cleanup clears that (chattr -R -i) before deleting.
#
# Usage: bench/compare.sh [OUTDIR]
#
# Settings (environment variables, with defaults):
#   LOGS=mosaic,sunlight,tesseract   which logs to measure (always in this order)
#   RATES=1000,0                     hammer -rate per step; 0 = as fast as possible
#   STEP=30s                         duration of each step (whole seconds or minutes: 30s, 2m)
#   WORKERS=3000                     hammer -workers
#   ISSUERS='production;p256'        hammer -issuers mixes, semicolon-separated: every rate
#                                    runs for each (production: the mix of real entries,
#                                    89% P-384 and 11% RSA-2048 issuers; p256: one P-256
#                                    issuer, as every benchmark before 2026-11-28)
#   DUP=0.1  PRECERT=1               hammer -dup and -precert (empty: each mix's own share,
#                                    0.5 for KIND=WEIGHT mixes). 1: all precertificates, as
#                                    production's entries are, so that every mix submits the
#                                    same kind of entry: the hammer's final certificates carry
#                                    their SCT list, as in production, and Mosaic defers those
#                                    (low priority) while busy with Retry-After 10-30 s, which
#                                    the hammer honours for every worker
#   KEEP=0                           1 keeps the logs' directories for inspection
#   EXTRA_HAMMER_FLAGS=              more hammer flags for every log, space-separated
#                                    (for example -lean-http=false)
#   MAX_TIME=                        overall time limit in seconds (default: enough
#                                    for the builds and every step, see below)
#
# Results go to OUTDIR (default bench/results/<UTC timestamp>-compare):
# results.json and results.md (the comparison), and per log a subdirectory
# with its own results, hammer reports, server log, setup and fsck output.
# Linux only (/proc). Needs Go, curl, gcc (Sunlight) and openssl (the
# TesseraCT key).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
LOGS=${LOGS:-mosaic,sunlight,tesseract}
RATES=${RATES:-1000,0}
STEP=${STEP:-30s}
WORKERS=${WORKERS:-3000}
DUP=${DUP:-0.1}
PRECERT=${PRECERT-1}
ISSUERS=${ISSUERS:-production;p256}
KEEP=${KEEP:-0}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mosaic/compare

SUNLIGHT_VERSION=v0.9.0
TESSERACT_VERSION=v0.1.1
# The go.sum lines of tesseract v0.1.1 as the Go module proxy served them
# (first download, 2026-11-22). The checksum database has no record of this
# version, so the build skips it for this one module (GONOSUMDB); these
# lines make the go command refuse any other content.
TESSERACT_SUMS="github.com/transparency-dev/tesseract v0.1.1 h1:KMyqb5/43noPwaBIuFxaWOnhtx360JRb1nEPqUVn1KQ=
github.com/transparency-dev/tesseract v0.1.1/go.mod h1:TQQFzvsfI/mfJteVViiMbPVoYFk4J24g8kmd5w96FTI="

case $STEP in
*[0-9]s) step_s=${STEP%s} ;;
*[0-9]m) step_s=$((${STEP%m} * 60)) ;;
*) step_s=x ;;
esac
if ! [[ $step_s =~ ^[0-9]+$ ]] || ((step_s == 0)); then
	echo "STEP must be whole seconds or minutes (30s, 2m), not '$STEP'" >&2
	exit 2
fi
IFS=, read -r -a rates <<<"$RATES"
IFS=, read -r -a wanted <<<"$LOGS"
for l in "${wanted[@]}"; do
	case $l in
	mosaic | sunlight | tesseract) ;;
	*)
		echo "LOGS: unknown log '$l' (want mosaic, sunlight, tesseract)" >&2
		exit 2
		;;
	esac
done
# Always in this order: Mosaic's dev log, started first, provides the test
# CA for all.
logs=()
for l in mosaic sunlight tesseract; do
	[[ ,$LOGS, == *,$l,* ]] && logs+=("$l")
done

# The whole run is bounded: the script runs itself under timeout(1), which
# sends SIGTERM at MAX_TIME (the traps below then stop everything this
# script started) and SIGKILL a minute later. The default allows 20 minutes
# for first builds, and per log each step plus 2 minutes (preminting, the
# hammer's 30 s drain, a loaded machine) and 3 minutes to start and check.
if [[ -z ${MOSAIC_COMPARE_BOUNDED:-} ]]; then
	IFS=';' read -r -a mixes <<<"$ISSUERS"
	MAX_TIME=${MAX_TIME:-$((1200 + ${#logs[@]} * (${#mixes[@]} * ${#rates[@]} * (step_s + 120) + 180)))}
	if ! [[ $MAX_TIME =~ ^[0-9]+$ ]] || ((MAX_TIME == 0)); then
		echo "MAX_TIME must be a whole number of seconds, not '$MAX_TIME'" >&2
		exit 2
	fi
	MOSAIC_COMPARE_BOUNDED=$MAX_TIME exec timeout --foreground -s TERM -k 60 "$MAX_TIME" "$BASH" "$0" "$@"
fi
for tool in go curl; do
	command -v "$tool" >/dev/null || { echo "bench/compare.sh needs $tool" >&2; exit 1; }
done

out=${1:-$root/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-compare}
work=$(mktemp -d "${TMPDIR:-/tmp}/mosaic-compare.XXXXXX")
server_pid= bench_pid=

# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"

cleanup() {
	stop "$bench_pid"
	stop "$server_pid"
	if [[ $KEEP == 1 ]]; then
		echo "kept $work" >&2
		return
	fi
	# Sunlight sets the immutable attribute on the files it writes when it
	# runs as root; rm cannot delete them until it is cleared. (On a file
	# system without the attribute chattr fails, and nothing needs it.)
	if command -v chattr >/dev/null; then
		chattr -R -i "$work" 2>/dev/null || true
	fi
	rm -rf "$work" || echo "could not delete $work" >&2
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'echo "bench/compare.sh: stopped by SIGTERM (the time limit is MAX_TIME=$MOSAIC_COMPARE_BOUNDED s)" >&2; exit 143' TERM

mkdir -p "$out" "$cache"
commit=$(bench_commit "$root")
settings="LOGS=$LOGS RATES=$RATES ISSUERS='$ISSUERS' STEP=$STEP WORKERS=$WORKERS DUP=$DUP PRECERT=$PRECERT"
failed=0

echo "building mosaic and the benchmark driver" >&2
(cd "$root" && go build -o "$work/bin/mosaic" ./cmd/mosaic && go build -o "$work/bin/benchrun" ./bench/benchrun)

# build_sunlight: the Sunlight binaries and the checkpoints-database helper
# in $cache/sunlight-VERSION/bin, built in a scratch module the first time.
# On failure it prints why (one line) on stdout.
build_sunlight() {
	local dir=$cache/sunlight-$SUNLIGHT_VERSION tmp
	if [[ -x $dir/bin/sunlight && -x $dir/bin/sunlight-keygen && -x $dir/bin/sunlight_mkdb ]]; then
		return 0
	fi
	if ! command -v gcc >/dev/null; then
		echo "Sunlight needs cgo for its SQLite driver, and there is no gcc"
		return 1
	fi
	echo "building Sunlight $SUNLIGHT_VERSION in a scratch module (once; cached in $dir)" >&2
	tmp=$work/build-sunlight
	mkdir -p "$tmp"
	if ! (
		cd "$tmp" &&
			go mod init x &&
			go get "filippo.io/sunlight/cmd/sunlight@$SUNLIGHT_VERSION" "filippo.io/sunlight/cmd/sunlight-keygen@$SUNLIGHT_VERSION" &&
			CGO_ENABLED=1 go build -o bin/ filippo.io/sunlight/cmd/sunlight filippo.io/sunlight/cmd/sunlight-keygen &&
			cp "$root/bench/_compare/sunlight_mkdb.go" . &&
			CGO_ENABLED=1 go build -o bin/sunlight_mkdb sunlight_mkdb.go
	) >"$tmp/build.log" 2>&1; then
		cat "$tmp/build.log" >&2
		echo "Sunlight $SUNLIGHT_VERSION did not build: $(grep -v '^go: \(downloading\|added\|finding\|creating new go.mod\|to add module\)' "$tmp/build.log" | tr -s '\n\t ' ' ' | cut -c1-300)"
		return 1
	fi
	# Into the cache only once complete (the temporary directory goes
	# with $work if the build is interrupted).
	rm -rf "$dir"
	mv "$tmp" "$dir"
}

# build_tesseract: TesseraCT's POSIX binary in $cache/tesseract-VERSION/bin,
# likewise. On failure it prints why (one line) on stdout.
build_tesseract() {
	local dir=$cache/tesseract-$TESSERACT_VERSION tmp
	if [[ -x $dir/bin/tesseract-posix ]]; then
		return 0
	fi
	echo "building TesseraCT $TESSERACT_VERSION in a scratch module (once; cached in $dir)" >&2
	tmp=$work/build-tesseract
	mkdir -p "$tmp"
	if ! (
		cd "$tmp" &&
			go mod init x &&
			printf '%s\n' "$TESSERACT_SUMS" >go.sum &&
			GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}github.com/transparency-dev/tesseract \
				go get "github.com/transparency-dev/tesseract/cmd/tesseract/posix@$TESSERACT_VERSION" &&
			go build -o bin/tesseract-posix github.com/transparency-dev/tesseract/cmd/tesseract/posix
	) >"$tmp/build.log" 2>&1; then
		cat "$tmp/build.log" >&2
		echo "TesseraCT $TESSERACT_VERSION did not build from the Go module proxy: $(grep -v '^go: \(downloading\|added\|finding\|creating new go.mod\|to add module\)' "$tmp/build.log" | tr -s '\n\t ' ' ' | cut -c1-300)"
		return 1
	fi
	# Into the cache only once complete (the temporary directory goes
	# with $work if the build is interrupted).
	rm -rf "$dir"
	mv "$tmp" "$dir"
}

# skip NAME WHY: record that log NAME was not measured, and why.
skip() {
	mkdir -p "$out/$1"
	echo "$2" >"$out/$1/skipped.txt"
	echo "$1: skipped: $2" >&2
}

# fail NAME WHY: as skip, for a log that should have run, and remember to
# exit non-zero.
fail() {
	skip "$1" "failed: $2"
	failed=1
}

# start_server NAME LOG URL COMMAND...: start a server (its output to LOG)
# and wait for URL to answer; sets server_pid.
start_server() {
	local name=$1 log=$2 url=$3
	shift 3
	"$@" >"$log" 2>&1 &
	server_pid=$!
	if ! wait_http "$url" "$server_pid" "$log"; then
		stop "$server_pid"
		server_pid=
		return 1
	fi
	echo "$name up (pid $server_pid)" >&2
}

# measure NAME IMPLEMENTATION HAMMER_FLAG...: run the steps against the
# running server (server_pid), each hammer run given the flags, then stop
# the server. Records a failure if benchrun fails.
measure() {
	local name=$1 impl=$2 rc=0
	shift 2
	local flags=()
	for f in "$@" ${EXTRA_HAMMER_FLAGS:-}; do
		flags+=(-hammer-flag "$f")
	done
	echo "measuring $impl: RATES=$RATES STEP=$STEP WORKERS=$WORKERS" >&2
	# In the background, so that a signal reaches the traps at once.
	BENCH_COMMIT=$commit "$work/bin/benchrun" -mosaic "$work/bin/mosaic" -pid "$server_pid" -name "$impl" \
		-clk-tck "$(getconf CLK_TCK)" -rates "$RATES" -step "$STEP" -workers "$WORKERS" \
		-issuers "$ISSUERS" -dup "$DUP" -precert "${PRECERT:--1}" -readers 0 -out "$out/$name" \
		-command "$settings bench/compare.sh" "${flags[@]}" > >(tee "$out/$name/benchrun.log" >&2) 2>&1 &
	bench_pid=$!
	wait "$bench_pid" || rc=$?
	bench_pid=
	stop "$server_pid"
	server_pid=
	if ((rc != 0)); then
		rm -f "$out/$name/results.json"
		fail "$name" "benchrun exited with status $rc: $(tail -n 1 "$out/$name/benchrun.log")"
		return 1
	fi
}

# check NAME STORAGE_DIR PUBKEY ORIGIN: mosaic fsck on the stopped log's
# storage, its verdict added to the log's notes.
check() {
	local name=$1
	echo "checking the $name log with mosaic fsck" >&2
	if "$work/bin/mosaic" fsck -monitoring "file://$2" -pubkey "$3" -origin "$4" >"$out/$name/fsck.txt" 2>&1; then
		echo "Afterwards \`mosaic fsck\` found no problem in the whole log ($(sed -n 's/^checked: *//p' "$out/$name/fsck.txt" | head -n 1))." >>"$out/$name/notes.txt"
	else
		echo "Afterwards \`mosaic fsck\` FOUND PROBLEMS in the log, see fsck.txt." >>"$out/$name/notes.txt"
		failed=1
	fi
	tail -n 3 "$out/$name/fsck.txt" >&2
}

# The Mosaic dev log comes first: its test CA, roots file and NotAfter window
# serve every log, so the hammer mints the same kind of chains for all.
dev_log=$work/dev.log
if [[ ${logs[0]:-} == mosaic ]]; then
	mkdir -p "$out/mosaic"
	dev_log=$out/mosaic/server.log
fi
"$work/bin/mosaic" serve -dev -data "$work/mosaic" -listen 127.0.0.1:0 >"$dev_log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do
	[[ -f $work/mosaic/dev.json ]] && break
	alive "$server_pid" || { echo "mosaic serve exited:" >&2; cat "$dev_log" >&2; exit 1; }
	sleep 0.1
done
[[ -f $work/mosaic/dev.json ]] || { echo "mosaic serve -dev wrote no dev.json" >&2; exit 1; }
dev_field() { sed -n 's/^ *"'"$1"'": *"\([^"]*\)".*/\1/p' "$work/mosaic/dev.json"; }
ca_cert=$(dev_field test_ca_cert)
ca_key=$(dev_field test_ca_key)
roots=$(dev_field roots)
nas=$(dev_field not_after_start)
nal=$(dev_field not_after_limit)
common=(-ca-cert="$ca_cert" -ca-key="$ca_key" -not-after-start="$nas" -not-after-limit="$nal")

for name in "${logs[@]}"; do
	mkdir -p "$out/$name"
	rm -f "$out/$name/skipped.txt" "$out/$name/notes.txt"
	case $name in
	mosaic)
		echo "\`mosaic serve -dev\`: log on local disk with the embedded database (bbolt), period 200 ms, pool 4,000." >"$out/mosaic/notes.txt"
		cp "$work/mosaic/config.yaml" "$out/mosaic/config.yaml"
		if measure mosaic "Mosaic $commit" -dev="$work/mosaic" -monitoring="file://$work/mosaic/data"; then
			check mosaic "$work/mosaic/data" "$(dev_field public_key)" "$(dev_field origin)"
		fi
		;;

	sunlight)
		stop "$server_pid" # the dev log, if Mosaic was not measured
		server_pid=
		if ! why=$(build_sunlight); then
			fail sunlight "$why"
			continue
		fi
		bin=$cache/sunlight-$SUNLIGHT_VERSION/bin
		d=$work/sunlight
		mkdir -p "$d"
		"$bin/sunlight_mkdb" "$d/checkpoints.db" || { fail sunlight "could not create its checkpoints database"; continue; }
		"$bin/sunlight-keygen" -f "$d/seed.bin" >"$d/keygen.txt" 2>&1 || { fail sunlight "sunlight-keygen failed: $(tail -n 1 "$d/keygen.txt")"; continue; }
		# v0.8 prints the PEM block on the lines after "ECDSA public key:",
		# v0.9 starts it on that line.
		pubkey=$(awk '/^ECDSA public key:/ { e = 1 } e && /BEGIN PUBLIC KEY/ { p = 1; next } p && /END PUBLIC KEY/ { exit } p' "$d/keygen.txt" | tr -d '\n')
		[[ -n $pubkey ]] || { fail sunlight "no public key in sunlight-keygen's output"; continue; }
		# Sunlight routes a log by the host and path of its submission
		# prefix (which must be https; without an acme section it serves
		# plain HTTP) and Go's ServeMux matches the host without the
		# port: the prefix is https://127.0.0.1/bench and the hammer
		# submits to http://127.0.0.1:PORT/bench/, with origin
		# 127.0.0.1/bench. Sunlight creates the log only on its
		# inception date, so that is today (its local date).
		started=
		for _ in 1 2 3; do
			port=$(free_port)
			cat >"$d/sunlight.yaml" <<YAML
# bench/compare.sh: Sunlight $SUNLIGHT_VERSION on loopback, local directory storage.
listen:
  - 127.0.0.1:$port
checkpoints: $d/checkpoints.db
logs:
  - shortname: bench
    inception: $(date +%F)
    submissionprefix: https://127.0.0.1/bench
    monitoringprefix: file://$d/data
    secret: $d/seed.bin
    period: 200
    poolsize: 4000
    cache: $d/cache.db
    localdirectory: $d/data
    roots: $roots
    notafterstart: $nas
    notafterlimit: $nal
YAML
			if start_server "Sunlight" "$out/sunlight/server.log" "http://127.0.0.1:$port/bench/ct/v1/get-roots" \
				"$bin/sunlight" -c "$d/sunlight.yaml"; then
				started=1
				break
			fi
		done
		[[ -n $started ]] || { fail sunlight "Sunlight did not start, see server.log"; continue; }
		cp "$d/sunlight.yaml" "$out/sunlight/sunlight.yaml"
		echo "Sunlight $SUNLIGHT_VERSION, built with $(go env GOVERSION) (cgo SQLite): localdirectory storage, SQLite checkpoints lock and dedup cache, period 200 ms, poolsize 4,000 (sunlight.yaml)." >"$out/sunlight/notes.txt"
		if measure sunlight "Sunlight $SUNLIGHT_VERSION" -submission="http://127.0.0.1:$port/bench/" -origin=127.0.0.1/bench \
			-monitoring="file://$d/data" -pubkey="$pubkey" "${common[@]}"; then
			check sunlight "$d/data" "$pubkey" 127.0.0.1/bench
		fi
		;;

	tesseract)
		stop "$server_pid"
		server_pid=
		if ! command -v openssl >/dev/null; then
			skip tesseract "TesseraCT needs openssl to make its ECDSA key, and there is none"
			continue
		fi
		if ! why=$(build_tesseract); then
			skip tesseract "$why"
			continue
		fi
		bin=$cache/tesseract-$TESSERACT_VERSION/bin/tesseract-posix
		d=$work/tesseract
		mkdir -p "$d"
		if ! openssl ecparam -name prime256v1 -genkey -noout -out "$d/key.pem" 2>"$d/openssl.log" ||
			! pubkey=$(openssl ec -in "$d/key.pem" -pubout -outform DER 2>>"$d/openssl.log" | base64 -w0) || [[ -z $pubkey ]]; then
			fail tesseract "could not make its key with openssl: $(tail -n 1 "$d/openssl.log")"
			continue
		fi
		# TesseraCT's origin must parse as a URL without a scheme (no
		# host:port), so it serves under the path /bench like Sunlight.
		started=
		for _ in 1 2 3; do
			port=$(free_port)
			args=(-private_key "$d/key.pem" -origin 127.0.0.1/bench -path_prefix /bench -storage_dir "$d/data"
				-roots_pem_file "$roots" -http_endpoint "127.0.0.1:$port"
				-not_after_start "$nas" -not_after_limit "$nal"
				-checkpoint_interval 200ms -rate_limit_dedup=-1)
			if start_server "TesseraCT" "$out/tesseract/server.log" "http://127.0.0.1:$port/bench/ct/v1/get-roots" "$bin" "${args[@]}"; then
				started=1
				break
			fi
		done
		[[ -n $started ]] || { fail tesseract "TesseraCT did not start, see server.log"; continue; }
		printf '%q ' tesseract-posix "${args[@]}" | sed 's/ $/\n/' >"$out/tesseract/flags.txt"
		echo "TesseraCT $TESSERACT_VERSION (tessera v1.0.1) POSIX binary, built with $(go env GOVERSION): storage and antispam database in its storage directory, -checkpoint_interval 200ms (default 1.5s) to match the others' period, -rate_limit_dedup=-1 (default 100/s: resubmissions beyond it are pushed back), batching at its defaults (256 entries or 250 ms) (flags.txt). Built from the Go module proxy with tesseract's own hash pinned: the checksum database has no record of v0.1.1." >"$out/tesseract/notes.txt"
		if measure tesseract "TesseraCT $TESSERACT_VERSION" -submission="http://127.0.0.1:$port/bench/" -origin=127.0.0.1/bench \
			-monitoring="file://$d/data" -pubkey="$pubkey" "${common[@]}"; then
			check tesseract "$d/data" "$pubkey" 127.0.0.1/bench
		fi
		;;
	esac
done
stop "$server_pid"
server_pid=

args=()
for name in "${logs[@]}"; do
	args+=("$name=$name")
done
"$work/bin/benchrun" -compare -out "$out" -command "$settings bench/compare.sh" "${args[@]}"
echo "results in $out" >&2
exit "$failed"
