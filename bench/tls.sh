#!/usr/bin/env bash
# TLS benchmarks of Mosaic on loopback: what TLS costs the server per entry on
# kept-alive connections, and how it holds up in a reconnect storm.
#
# Usage: bench/tls.sh keepalive|storm [OUTDIR]
#
#   keepalive  For each VARIANT, a fresh dev log (`mosaic serve -dev`, with
#              -tls for the TLS variants) and one hammer run at RATE/s with
#              WORKERS kept-alive workers; reports the server's CPU per
#              accepted entry (utime+stime from /proc/PID/stat over the run).
#              Variants: plain (HTTP/1.1), tls (HTTPS as configured by
#              default: HTTP/1.1), tls-h2 (HTTPS with listen[].http2: true,
#              which Go clients then negotiate).
#   storm      A fresh TLS dev log and one hammer run with -reconnect (a new
#              connection and full TLS handshake for every request) by
#              CLIENTS workers as fast as the log answers; reports the
#              server's handshakes/s (mosaic_tls_handshakes_total), accepted
#              entries/s and the failed submissions by kind, and the server's
#              and the hammer's CPU per entry; then the same clients kept
#              alive, the same figures, and the share of the kept-alive
#              throughput that both processes' CPU per entry allows when
#              they share the machine's cores (kept-alive CPU per entry
#              over reconnecting CPU per entry, server and hammer summed).
#
# Settings (environment variables, with defaults):
#   RATE=1000 WORKERS=200 DURATION=20s VARIANTS="plain tls tls-h2"   (keepalive)
#   CLIENTS=5000 DURATION=30s RESUME=0                                  (storm)
#                   RESUME=1: the clients resume TLS sessions (hammer -resume)
#   EXTRA_CONFIG=   YAML appended to the dev log's config before it starts
#                   (e.g. "debug: {listen: 127.0.0.1:6060}" to profile it)
#
# Everything runs on 127.0.0.1 and stops by itself; results (hammer reports,
# server logs, summary.txt) go to OUTDIR (default bench/results/tls-<UTC time>).
# Linux only (/proc).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
case $mode in
keepalive | storm) ;;
*)
	sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
out=${2:-$root/bench/results/tls-$mode-$(date -u +%Y%m%dT%H%M%SZ)}
RATE=${RATE:-1000}
WORKERS=${WORKERS:-200}
CLIENTS=${CLIENTS:-5000}
DURATION=${DURATION:-}
VARIANTS=${VARIANTS:-plain tls tls-h2}
EXTRA_CONFIG=${EXTRA_CONFIG:-}

work=$(mktemp -d "${TMPDIR:-/tmp}/mosaic-tlsbench.XXXXXX")
server_pid=
clk=$(getconf CLK_TCK)

stop_server() {
	[[ -n $server_pid ]] || return 0
	kill -TERM "$server_pid" 2>/dev/null || true
	for _ in $(seq 1 300); do
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$server_pid" 2>/dev/null || true
	wait "$server_pid" 2>/dev/null || true
	server_pid=
}
trap 'stop_server; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# cpu_ticks PID: the process's utime+stime in clock ticks.
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
# report_field FILE NAME: a top-level number from a hammer report.
report_field() { sed -n 's/^  "'"$2"'": \([0-9.e+-]*\),\{0,1\}$/\1/p' "$1" | head -1; }
# timed_hammer NAME ARGS...: runs the hammer with ARGS, its output in
# hammer-NAME.txt and its own CPU time (user + system seconds, from bash's
# time) in hammer-NAME.cpu; a failing run is reported by its summary.
timed_hammer() {
	local name=$1
	shift
	local TIMEFORMAT='%U %S'
	{ time "$work/mosaic" hammer "$@" >"$out/hammer-$name.txt" 2>&1; } 2>"$out/hammer-$name.cpu" || true
}
# cpu_seconds NAME: the hammer's CPU seconds from hammer-NAME.cpu.
cpu_seconds() { awk '{ print $1 + $2 }' "$out/hammer-$1.cpu"; }
# handshakes URL: full + resumed TLS handshakes so far.
handshakes() {
	curl -fsS --cacert "$work/dev/tls.crt" "$1/metrics" |
		awk '/^mosaic_tls_handshakes_total/ { n += $2 } END { print n + 0 }'
}

# start_dev ARGS...: a fresh dev log; sets server_pid and prefix.
start_dev() {
	rm -rf "$work/dev"
	"$work/mosaic" serve -dev -data "$work/dev" -listen 127.0.0.1:0 "$@" >"$work/first.log" 2>&1 &
	server_pid=$!
	for _ in $(seq 1 300); do
		[[ -f $work/dev/dev.json ]] && break
		sleep 0.1
	done
	[[ -f $work/dev/dev.json ]] || { cat "$work/first.log" >&2; exit 1; }
	stop_server
	[[ -z $EXTRA_CONFIG ]] || printf '%s\n' "$EXTRA_CONFIG" >>"$work/dev/config.yaml"
	[[ -z ${HTTP2:-} ]] || sed -i 's/^\( *\)tls_key: \(.*\)$/\1tls_key: \2\n\1http2: true/' "$work/dev/config.yaml"
	rm -f "$work/dev/dev.json"
	"$work/mosaic" serve -dev -data "$work/dev" "$@" >"$out/serve-$variant.log" 2>&1 &
	server_pid=$!
	for _ in $(seq 1 300); do
		[[ -f $work/dev/dev.json ]] && break
		sleep 0.1
	done
	[[ -f $work/dev/dev.json ]] || { cat "$out/serve-$variant.log" >&2; exit 1; }
	prefix=$(sed -n 's/^ *"submission_prefix": *"\([^"]*\)\/".*/\1/p' "$work/dev/dev.json")
}

mkdir -p "$out"
echo "building mosaic" >&2
(cd "$root" && go build -o "$work/mosaic" ./cmd/mosaic)
commit=$(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
summary=$out/summary.txt
echo "bench/tls.sh $mode at $commit, $(date -u +%FT%TZ), $(nproc) CPUs" >"$summary"

if [[ $mode == keepalive ]]; then
	DURATION=${DURATION:-20s}
	echo "RATE=$RATE WORKERS=$WORKERS DURATION=$DURATION" >>"$summary"
	printf '%-8s %10s %10s %14s\n' variant offered/s accepted/s 'server µs/entry' >>"$summary"
	for variant in $VARIANTS; do
		args=() h2=
		case $variant in
		plain) ;;
		tls) args=(-tls) ;;
		tls-h2) args=(-tls) h2=1 ;;
		*) echo "unknown variant $variant" >&2; exit 2 ;;
		esac
		HTTP2=$h2 start_dev "${args[@]}"
		t0=$(cpu_ticks "$server_pid")
		"$work/mosaic" hammer -dev "$work/dev" -ui=false -rate "$RATE" -workers "$WORKERS" \
			-duration "$DURATION" -drain 10s -report "$out/hammer-$variant.json" \
			>"$out/hammer-$variant.txt" 2>&1 || true
		t1=$(cpu_ticks "$server_pid")
		acc=$(report_field "$out/hammer-$variant.json" accepted)
		printf '%-8s %10.0f %10.0f %14.0f\n' "$variant" \
			"$(report_field "$out/hammer-$variant.json" rate_offered_per_s)" \
			"$(report_field "$out/hammer-$variant.json" rate_accepted_per_s)" \
			"$(echo "($t1 - $t0) / $clk * 1000000 / $acc" | bc -l)" >>"$summary"
		stop_server
	done
else
	DURATION=${DURATION:-30s}
	variant=storm
	echo "CLIENTS=$CLIENTS DURATION=$DURATION RESUME=${RESUME:-0} (hammer -reconnect -rate 0)" >>"$summary"
	start_dev -tls
	h0=$(handshakes "$prefix")
	t0=$(cpu_ticks "$server_pid")
	s0=$(date +%s.%N)
	timed_hammer storm -dev "$work/dev" -ui=false -rate 0 -reconnect $([[ ${RESUME:-0} == 1 ]] && echo -resume) -workers "$CLIENTS" \
		-duration "$DURATION" -drain 30s -dup 0 -report "$out/hammer-storm.json"
	s1=$(date +%s.%N)
	t1=$(cpu_ticks "$server_pid")
	h1=$(handshakes "$prefix")
	acc=$(report_field "$out/hammer-storm.json" accepted)
	dur=$(report_field "$out/hammer-storm.json" duration_s)
	{
		echo "handshakes: $((h1 - h0)) in $(echo "$s1 - $s0" | bc -l | xargs printf '%.1f')s of hammer run (incl. drain)"
		echo "handshakes/s during submission: see hammer-storm.txt progress; overall $(echo "($h1 - $h0) / ($s1 - $s0)" | bc -l | xargs printf '%.0f')/s"
		echo "accepted: $acc in ${dur}s = $(report_field "$out/hammer-storm.json" rate_accepted_per_s)/s"
		rs=$(echo "($t1 - $t0) / $clk * 1000000 / $acc" | bc -l)
		rh=$(echo "$(cpu_seconds storm) * 1000000 / $acc" | bc -l)
		echo "server CPU per accepted entry: $(printf '%.0f' "$rs") µs; the hammer's: $(printf '%.0f' "$rh") µs; both together $(echo "(($t1 - $t0) / $clk + $(cpu_seconds storm)) / ($s1 - $s0)" | bc -l | xargs printf '%.2f') cores over the run"
		grep -E '^  (failed submissions|    by HTTP status|add-chain latency)' "$out/hammer-storm.txt" || true
	} >>"$summary"
	stop_server
	# The same clients on kept-alive connections, for comparison.
	variant=storm-keepalive
	start_dev -tls
	t0=$(cpu_ticks "$server_pid")
	s0=$(date +%s.%N)
	timed_hammer keepalive -dev "$work/dev" -ui=false -rate 0 -workers "$CLIENTS" \
		-duration "$DURATION" -drain 30s -dup 0 -report "$out/hammer-keepalive.json"
	s1=$(date +%s.%N)
	t1=$(cpu_ticks "$server_pid")
	ka=$(report_field "$out/hammer-keepalive.json" rate_accepted_per_s)
	rc=$(report_field "$out/hammer-storm.json" rate_accepted_per_s)
	acc=$(report_field "$out/hammer-keepalive.json" accepted)
	ks=$(echo "($t1 - $t0) / $clk * 1000000 / $acc" | bc -l)
	kh=$(echo "$(cpu_seconds keepalive) * 1000000 / $acc" | bc -l)
	{
		echo "kept-alive, same clients: accepted $(printf '%.0f' "$ka")/s; reconnecting/kept-alive = $(echo "100 * $rc / $ka" | bc -l | xargs printf '%.0f')%"
		echo "server CPU per accepted entry: $(printf '%.0f' "$ks") µs; the hammer's: $(printf '%.0f' "$kh") µs; both together $(echo "(($t1 - $t0) / $clk + $(cpu_seconds keepalive)) / ($s1 - $s0)" | bc -l | xargs printf '%.2f') cores over the run"
		echo "with every core busy in both runs, CPU per entry allows reconnecting at most $(echo "100 * ($ks + $kh) / ($rs + $rh)" | bc -l | xargs printf '%.0f')% of kept-alive (server + hammer µs/entry: $(printf '%.0f' "$(echo "$ks + $kh" | bc -l)") kept alive, $(printf '%.0f' "$(echo "$rs + $rh" | bc -l)") reconnecting)"
		grep -E '^  (failed submissions|    by HTTP status|add-chain latency)' "$out/hammer-keepalive.txt" || true
	} >>"$summary"
	stop_server
fi
cat "$summary"
