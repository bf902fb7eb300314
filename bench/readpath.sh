#!/usr/bin/env bash
# Read path side by side: the same tile directory of a dev log served by
#
#   Mosaic     this checkout's `mosaic serve -config` on the dev log itself
#              (the built-in read path; the log idles, its rounds included);
#   nginx      Debian's nginx-light, 2 workers, sendfile, the stored gzip
#              bytes of data tiles sent as they are with Content-Encoding:
#              gzip, as the deployment example does (docs/deploy/nginx.conf
#              serves through Mosaic; this one reads the directory);
#   Skylight   Sunlight v0.8.1's read server, built once in a scratch module
#              from the Go module proxy and cached like Sunlight in
#              bench/compare.sh;
#   gofs       a reference, not a log server: Go's plain http.FileServer on
#              the directory (bench/_readpath/fileserver.go), what net/http
#              itself costs on these tiles.
#
# The client is wrk (Debian package), 1 thread and CONNS connections, with
# bench/_readpath/tiles.lua: random full tiles (data and hash) and the
# checkpoint (10% of requests), Accept-Encoding: gzip. Each server gets
# ROUNDS rounds of DURATION, alternating (Mosaic, nginx, Skylight, Mosaic,
# ...), after a 2 s warm-up each time. Server CPU per request is the
# server's utime+stime from /proc (nginx: master and workers) over the
# round, divided by the requests wrk completed. Every server must answer
# every request 200: a non-2xx count fails the run.
#
# The dev log is filled first with ENTRIES entries by `mosaic hammer` (about
# a minute on 2 cores), unless DEV names the directory of one filled before
# (KEEP=1 keeps it). With PROFILE=1, a 10 s CPU profile of Mosaic under wrk
# is written to OUTDIR/mosaic.pprof (from a separate wrk run).
#
# With BACKEND=s3, only Mosaic, on a log in S3 (MinIO, scripts/minio.sh)
# with PostgreSQL as lock backend (127.0.0.1:5432, trust auth, database
# test) and a 256 MiB cache of immutable objects (storage.s3.read_cache_mb),
# filled afresh: each round also reports the read path's S3 GETs per 1,000
# requests (mosaic_storage_requests_total{client="read_path"}).
#
# With BASE=<git ref>, one more server, "base": mosaic built from that
# commit (git archive), serving a copy of the dev log, measured in the same
# alternation for before/after pairs.
#
# Usage: bench/readpath.sh [OUTDIR]
#
# Settings (environment variables, with defaults):
#   ENTRIES=110000  DEV=  KEEP=0  ROUNDS=2  DURATION=12  CONNS=64  PROFILE=0
#   SERVERS=mosaic,nginx,skylight,gofs  BASE=  BACKEND=local
#   PGHOST=127.0.0.1  PGPORT=5432
#
# nginx and wrk are installed with apt-get if missing (needs root). Results:
# OUTDIR/results.md (default bench/results/<UTC timestamp>-readpath) and
# each round's wrk output. Linux only (/proc). Loopback only.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
ENTRIES=${ENTRIES:-110000}
DEV=${DEV:-}
KEEP=${KEEP:-0}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-12}
CONNS=${CONNS:-64}
PROFILE=${PROFILE:-0}
SERVERS=${SERVERS:-mosaic,nginx,skylight,gofs}
BASE=${BASE:-}
BACKEND=${BACKEND:-local}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
case $BACKEND in
local) ;;
s3)
	SERVERS=mosaic
	BASE=
	[[ -z $DEV ]] || { echo "BACKEND=s3 fills a log of its own: DEV cannot be used with it" >&2; exit 2; }
	;;
*)
	echo "BACKEND must be local or s3, not '$BACKEND'" >&2
	exit 2
	;;
esac
SKYLIGHT_VERSION=v0.8.1
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mosaic/compare
out=${1:-$root/bench/results/$(date -u +%Y%m%dT%H%M%SZ)-readpath}

for v in ENTRIES ROUNDS DURATION CONNS; do
	if ! [[ ${!v} =~ ^[0-9]+$ ]] || ((${!v} == 0)); then
		echo "$v must be a positive whole number, not '${!v}'" >&2
		exit 2
	fi
done
IFS=, read -r -a servers <<<"${BASE:+base,}$SERVERS"
for s in "${servers[@]}"; do
	case $s in
	mosaic | nginx | skylight | gofs | base) ;;
	*)
		echo "SERVERS: unknown server '$s' (want mosaic, nginx, skylight, gofs)" >&2
		exit 2
		;;
	esac
done

# The whole run is bounded (first builds, the fill, every round).
if [[ -z ${MOSAIC_READPATH_BOUNDED:-} ]]; then
	MAX_TIME=${MAX_TIME:-$((900 + ROUNDS * ${#servers[@]} * (DURATION + 10) + 60 * PROFILE))}
	MOSAIC_READPATH_BOUNDED=1 exec timeout --foreground -s TERM -k 30 "$MAX_TIME" "$BASH" "$0" "$@"
fi

# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"

need_apt() { # need_apt COMMAND PACKAGE
	command -v "$1" >/dev/null && return 0
	if [[ $(id -u) -ne 0 ]]; then
		echo "bench/readpath.sh needs $1: apt-get install $2 (as root)" >&2
		exit 1
	fi
	echo "installing $2 with apt-get" >&2
	apt-get update -q >&2
	# policy-rc.d or not, the script never uses the system's nginx service.
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$2" >&2
}
need_apt wrk wrk
[[ ,$SERVERS, == *,nginx,* ]] && need_apt nginx nginx-light
for tool in go curl; do
	command -v "$tool" >/dev/null || { echo "bench/readpath.sh needs $tool" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/mosaic-readpath.XXXXXX")
pids=()
minio_pid= pg_db= pg_role=
cleanup() {
	for p in "${pids[@]}"; do stop "$p"; done
	s3_cleanup "$KEEP" "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'echo "bench/readpath.sh: stopped by SIGTERM (time limit)" >&2; exit 143' TERM
mkdir -p "$out" "$cache"

echo "building mosaic" >&2
(cd "$root" && go build -o "$work/mosaic" ./cmd/mosaic)
if [[ ,$SERVERS, == *,gofs,* ]]; then
	(cd "$root" && go build -o "$work/fileserver" bench/_readpath/fileserver.go)
fi
if [[ -n $BASE ]]; then
	echo "building mosaic at $BASE" >&2
	mkdir -p "$work/base-src"
	git -C "$root" archive "$BASE" | tar -x -C "$work/base-src"
	(cd "$work/base-src" && go build -o "$work/mosaic-base" ./cmd/mosaic)
fi

build_skylight() {
	local dir=$cache/skylight-$SKYLIGHT_VERSION tmp=$work/build-skylight
	[[ -x $dir/bin/skylight ]] && return 0
	echo "building Skylight $SKYLIGHT_VERSION in a scratch module (once; cached in $dir)" >&2
	mkdir -p "$tmp"
	if ! (cd "$tmp" && go mod init x && go get "filippo.io/sunlight/cmd/skylight@$SKYLIGHT_VERSION" &&
		go build -o bin/skylight filippo.io/sunlight/cmd/skylight) >"$tmp/build.log" 2>&1; then
		tail -n 20 "$tmp/build.log" >&2
		return 1
	fi
	rm -rf "$dir"
	mv "$tmp" "$dir"
}
if [[ ,$SERVERS, == *,skylight,* ]]; then
	build_skylight || { echo "Skylight $SKYLIGHT_VERSION did not build" >&2; exit 1; }
fi

declare -A url pid
# The dev log: filled now, or the one DEV names. On S3, the dev log only
# makes the key, roots, test CA and dev.json; the S3 log then takes its
# address (so dev.json describes it, for the hammer) and is filled.
if [[ $BACKEND == s3 ]]; then
	s3_services "$out" "$work"
	DEV=$work/dev
	"$work/mosaic" serve -dev -data "$DEV" -listen "127.0.0.1:$(free_port)" >"$work/dev.log" 2>&1 &
	dev_pid=$!
	pids+=("$dev_pid")
	for _ in $(seq 1 300); do
		[[ -f $DEV/dev.json ]] && break
		sleep 0.1
	done
	stop "$dev_pid"
	addr=$(sed -n 's|^ *"submission_prefix": *"http://\([^/]*\)/".*|\1|p' "$DEV/dev.json")
	[[ -n $addr ]] || { echo "no dev.json with a submission prefix in $DEV" >&2; exit 1; }
	s3_config "$addr" "$DEV" "$work/s3.creds" "Mosaic read path benchmark log on S3" >"$work/s3.yaml"
	s3_dport=$(free_port)
	printf 'debug:\n  listen: 127.0.0.1:%s\n' "$s3_dport" >>"$work/s3.yaml"
	"$work/mosaic" create -config "$work/s3.yaml" >"$out/mosaic.log" 2>&1 || { cat "$out/mosaic.log" >&2; exit 1; }
	"$work/mosaic" serve -config "$work/s3.yaml" >>"$out/mosaic.log" 2>&1 &
	pid[mosaic]=$!
	pids+=("${pid[mosaic]}")
	url[mosaic]=http://$addr
	wait_http "${url[mosaic]}/checkpoint" "${pid[mosaic]}" "$out/mosaic.log"
	echo "filling the S3 log with $ENTRIES entries" >&2
	"$work/mosaic" hammer -dev "$DEV" -rate 0 -count "$ENTRIES" -duration 0 -workers 1000 -dup 0 \
		-premint "$ENTRIES" -progress 10s >"$out/fill.txt" 2>&1 || { tail "$out/fill.txt" >&2; exit 1; }
elif [[ -z $DEV ]]; then
	DEV=$work/dev
	port=$(free_port)
	"$work/mosaic" serve -dev -data "$DEV" -listen "127.0.0.1:$port" >"$work/fill.log" 2>&1 &
	fill_pid=$!
	pids+=("$fill_pid")
	wait_http "http://127.0.0.1:$port/checkpoint" "$fill_pid" "$work/fill.log"
	echo "filling the dev log with $ENTRIES entries" >&2
	"$work/mosaic" hammer -dev "$DEV" -rate 0 -count "$ENTRIES" -duration 0 -workers 1000 -dup 0 \
		-premint "$ENTRIES" -progress 10s >"$out/fill.txt" 2>&1 || { tail "$out/fill.txt" >&2; exit 1; }
	stop "$fill_pid"
fi
data=$DEV/data
if [[ $BACKEND == s3 ]]; then
	size=$(curl -fsS "${url[mosaic]}/checkpoint" | sed -n 2p)
	# Every full tile of the tree (tlog-tiles paths), data and levels 0-2.
	awk -v size="$size" '
		function enc(n,   s) {
			s = sprintf("%03d", n % 1000)
			for (n = int(n / 1000); n > 0; n = int(n / 1000)) s = sprintf("x%03d/", n % 1000) s
			return s
		}
		BEGIN {
			for (i = 0; i < int(size / 256); i++) print "tile/data/" enc(i)
			w = 256
			for (l = 0; l <= 2; l++) {
				for (i = 0; i < int(size / w); i++) print "tile/" l "/" enc(i)
				w *= 256
			}
		}' | sort >"$work/tiles.txt"
else
	[[ -f $data/checkpoint ]] || { echo "$data/checkpoint is missing: DEV must be a filled dev log's directory" >&2; exit 1; }
	size=$(sed -n 2p "$data/checkpoint")
	(cd "$data" && find tile -type f ! -path '*.p/*' ! -name '.*' | sort) >"$work/tiles.txt"
fi
ndata=$(grep -c '^tile/data/' "$work/tiles.txt" || true)
nhash=$(grep -vc '^tile/data/' "$work/tiles.txt" || true)
echo "log of $size entries: $ndata full data tiles, $nhash full hash tiles" >&2

# Mosaic: the dev log's own config, on a port of our choosing, with the
# debug listener for profiles.
mport=$(free_port)
dport=${s3_dport:-$(free_port)}
cp "$DEV/config.yaml" "$work/mosaic.yaml"
printf 'debug:\n  listen: 127.0.0.1:%s\n' "$dport" >>"$work/mosaic.yaml"
sed "s#^\(\s*\)\(key\|roots\|dir\|database\): \([^/].*\)#\1\2: $work/dev-base/\3#" "$work/mosaic.yaml" >"$work/base.yaml"
sed -i "s#^\(\s*\)\(key\|roots\|dir\|database\): \([^/].*\)#\1\2: $DEV/\3#" "$work/mosaic.yaml"
bport=$(free_port)
sed -i "s#^  listen: .*#  listen: 127.0.0.1:$(free_port)#" "$work/base.yaml"
# A second process cannot open the same log (its storage is locked for one
# writer): the base serves a copy.
[[ -n $BASE ]] && cp -a "$DEV" "$work/dev-base"

# nginx: the directory as it is.
nport=$(free_port)
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<NGINX
# bench/readpath.sh: nginx serving the dev log's storage directory.
worker_processes 2;
# The workers read the log's files as the user running this script (the
# storage directory is not world-readable).
user $(id -un) $(id -gn);
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    client_body_temp_path $work/nginx/tmp;
    proxy_temp_path $work/nginx/tmp;
    fastcgi_temp_path $work/nginx/tmp;
    uwsgi_temp_path $work/nginx/tmp;
    scgi_temp_path $work/nginx/tmp;
    default_type application/octet-stream;
    server {
        listen 127.0.0.1:$nport;
        root $data;
        location = /checkpoint {
            default_type "text/plain; charset=utf-8";
            add_header Cache-Control "no-cache, max-age=0";
        }
        location ~ ^/tile/data/.*\.p/ {
            add_header Content-Encoding gzip;
            add_header Cache-Control "public, max-age=60";
        }
        location ~ ^/tile/data/ {
            add_header Content-Encoding gzip;
            add_header Cache-Control "public, max-age=31536000, immutable";
        }
        location /tile/ {
            add_header Cache-Control "public, max-age=31536000, immutable";
        }
    }
}
NGINX
mkdir -p "$work/nginx/tmp"

# Skylight: its prefix must be https; it serves plain HTTP without acme,
# and routes by host (without the port).
sport=$(free_port)
cat >"$work/skylight.yaml" <<YAML
listen:
  - 127.0.0.1:$sport
logs:
  - shortname: bench
    monitoringprefix: https://127.0.0.1/
    localdirectory: $data
YAML

for s in "${servers[@]}"; do
	case $BACKEND/$s in
	s3/*) ;; # running since the fill
	*/base)
		"$work/mosaic-base" serve -config "$work/base.yaml" -listen "127.0.0.1:$bport" >"$out/base.log" 2>&1 &
		url[$s]=http://127.0.0.1:$bport
		;;
	*/mosaic)
		"$work/mosaic" serve -config "$work/mosaic.yaml" -listen "127.0.0.1:$mport" >"$out/mosaic.log" 2>&1 &
		url[$s]=http://127.0.0.1:$mport
		;;
	*/nginx)
		nginx -c "$work/nginx/nginx.conf" -g 'daemon off;' >"$out/nginx.log" 2>&1 &
		url[$s]=http://127.0.0.1:$nport
		;;
	*/gofs)
		gport=$(free_port)
		"$work/fileserver" "127.0.0.1:$gport" "$data" >"$out/gofs.log" 2>&1 &
		url[$s]=http://127.0.0.1:$gport
		;;
	*/skylight)
		(cd "$work" && exec "$cache/skylight-$SKYLIGHT_VERSION/bin/skylight" -c "$work/skylight.yaml") >"$out/skylight.log" 2>&1 &
		url[$s]=http://127.0.0.1:$sport
		;;
	esac
	if [[ $BACKEND == local ]]; then
		pid[$s]=$!
		pids+=("${pid[$s]}")
	fi
	wait_http "${url[$s]}/checkpoint" "${pid[$s]}" "$out/$s.log" || exit 1
	# The same bytes from every server.
	curl -fsS -H 'Accept-Encoding: gzip' -D "$out/$s.headers" -o "$work/$s.tile" "${url[$s]}/$(sed -n 1p "$work/tiles.txt")"
	if [[ $BACKEND == local ]] && ! cmp -s "$work/$s.tile" "$data/$(sed -n 1p "$work/tiles.txt")"; then
		echo "$s served other bytes than stored" >&2
		exit 1
	fi
done

# cpu_ticks SERVER: utime+stime of the server's processes, in clock ticks.
cpu_ticks() {
	local p t=0 ps=("${pid[$1]}")
	if [[ $1 == nginx ]]; then
		mapfile -t -O 1 ps < <(pgrep -P "${pid[$1]}")
	fi
	for p in "${ps[@]}"; do
		# Fields 14 and 15, counted after the command's closing parenthesis.
		t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
	done
	echo "$t"
}

# s3_gets: the read path's S3 GET requests so far (every attempt), from
# Mosaic's /metrics.
s3_gets() {
	curl -fsS "${url[mosaic]}/metrics" | awk '/^mosaic_storage_requests_total\{/ && /client="read_path"/ && /op="get"/ {n += $NF} END {print n + 0}'
}

hz=$(getconf CLK_TCK)
export READPATH_LIST=$work/tiles.txt
{
	echo "# Read path side by side ($(date -u +%FT%TZ), $(bench_commit "$root"))"
	echo
	echo "Log of $size entries ($ndata full data tiles, $nhash full hash tiles); wrk 1 thread, $CONNS connections, ${DURATION} s per round, 10% checkpoint, gzip accepted. Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "| round | server | requests/s | server CPU per request (µs) | server cores | socket errors | S3 GETs per 1,000 requests |"
	echo "|---|---|---:|---:|---:|---:|---:|"
} >"$out/results.md"
for r in $(seq 1 "$ROUNDS"); do
	for s in "${servers[@]}"; do
		host=()
		[[ $s == skylight ]] && host=(READPATH_HOST=127.0.0.1)
		env "${host[@]}" wrk -t1 -c"$CONNS" -d2s -s "$root/bench/_readpath/tiles.lua" "${url[$s]}" >/dev/null
		c0=$(cpu_ticks "$s")
		[[ $BACKEND == s3 ]] && g0=$(s3_gets)
		env "${host[@]}" wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$root/bench/_readpath/tiles.lua" "${url[$s]}" >"$out/wrk-$r-$s.txt"
		c1=$(cpu_ticks "$s")
		gets=—
		[[ $BACKEND == s3 ]] && gets=$(awk -v g=$(($(s3_gets) - g0)) -v n="$(awk '/requests in/ {print $1}' "$out/wrk-$r-$s.txt")" 'BEGIN {printf "%.1f", g * 1000 / n}')
		if grep -q 'Non-2xx' "$out/wrk-$r-$s.txt"; then
			cat "$out/wrk-$r-$s.txt" >&2
			echo "$s: errors in round $r" >&2
			exit 1
		fi
		reqs=$(awk '/requests in/ {print $1}' "$out/wrk-$r-$s.txt")
		rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$out/wrk-$r-$s.txt")
		us=$(awk -v c=$((c1 - c0)) -v hz="$hz" -v n="$reqs" 'BEGIN {printf "%.1f", c / hz * 1e6 / n}')
		cores=$(awk -v c=$((c1 - c0)) -v hz="$hz" -v d="$DURATION" 'BEGIN {printf "%.2f", c / hz / d}')
		# Timeouts (2 s, wrk's default) happen on a loaded machine; they
		# are counted, not failed.
		errs=$(awk '/Socket errors/ {gsub(",", ""); print $4 + $6 + $8 + $10}' "$out/wrk-$r-$s.txt")
		echo "| $r | $s | $rps | $us | $cores | ${errs:-0} | $gets |" | tee -a "$out/results.md" >&2
	done
done
echo >>"$out/results.md"
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)." >>"$out/results.md"

if [[ $PROFILE == 1 && -n ${url[mosaic]:-} ]]; then
	echo "profiling Mosaic under wrk for 10 s" >&2
	wrk -t1 -c"$CONNS" -d14s -s "$root/bench/_readpath/tiles.lua" "${url[mosaic]}" >/dev/null &
	wpid=$!
	sleep 2
	curl -fsS -o "$out/mosaic.pprof" "http://127.0.0.1:$dport/debug/pprof/profile?seconds=10"
	wait "$wpid"
fi
cat "$out/results.md"
