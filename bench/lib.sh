# Shell helpers shared by bench/run.sh, bench/compare.sh and
# bench/readpath.sh (sourced, not run): process control, free loopback
# ports, waiting for a server, MinIO and PostgreSQL for a log on S3.

# alive PID: the process runs (a child that exited but was not yet waited
# for is a zombie, which kill -0 would still find).
alive() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $st != Z* ]]
}

# stop PID: SIGTERM, up to 30 s to exit (mosaic answers what is pending
# first), then SIGKILL.
stop() {
	local pid=$1
	[[ -n $pid ]] || return 0
	if alive "$pid"; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 300); do
			alive "$pid" || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on, below
# Linux's ephemeral range so that outgoing connections do not take it.
free_port() {
	local p
	for _ in $(seq 1 100); do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "no free port found" >&2
	return 1
}

# wait_http URL PID LOG: wait up to 60 s for URL to answer 200 while PID
# runs; on failure show LOG.
wait_http() {
	for _ in $(seq 1 600); do
		curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null && return 0
		alive "$2" || break
		sleep 0.1
	done
	echo "no answer from $1; log $3:" >&2
	tail -n 50 "$3" >&2
	return 1
}

# bench_commit DIR prints the short commit of the checkout in DIR, with
# "-dirty" if tracked files have changes (nothing outside a git checkout).
bench_commit() {
	local c
	c=$(cd "$1" && git rev-parse --short HEAD 2>/dev/null || true)
	if [[ -n $c && -n $(cd "$1" && git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
		c="$c-dirty"
	fi
	echo "$c"
}

# rand_hex N prints N random bytes in hex.
rand_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

# psql_admin ARGS...: psql on the test database as $pg_role.
psql_admin() {
	psql -h "$PGHOST" -p "$PGPORT" -U "$pg_role" -d test -v ON_ERROR_STOP=1 -Atq "$@"
}

# s3_services OUT WORK: MinIO (scripts/minio.sh) on a free loopback port
# with random credentials (in WORK/s3.creds) and the bucket mosaic-bench,
# its log in OUT/minio.log; and a fresh database on the PostgreSQL at
# PGHOST:PGPORT (trust auth, as role postgres or else root). Sets
# minio_port, minio_pid, bucket, pg_role and pg_db: the caller's cleanup
# stops $minio_pid and drops $pg_db (psql_admin).
s3_services() {
	local out=$1 work=$2 minio_user minio_secret try role
	bash "$root/scripts/minio.sh" install >&2
	minio_user=bench$(rand_hex 6)
	minio_secret=$(rand_hex 20)
	for try in 1 2 3; do
		minio_port=$(free_port)
		MINIO_ROOT_USER=$minio_user MINIO_ROOT_PASSWORD=$minio_secret \
			bash "$root/scripts/minio.sh" start "$work/minio" "$minio_port" >>"$out/minio.log" 2>&1 &
		minio_pid=$!
		wait_http "http://127.0.0.1:$minio_port/minio/health/live" "$minio_pid" "$out/minio.log" && break
		stop "$minio_pid"
		minio_pid=
		[[ $try == 3 ]] && { echo "MinIO did not start" >&2; exit 1; }
	done
	bucket=mosaic-bench
	curl -fsS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$minio_user:$minio_secret" \
		-X PUT "http://127.0.0.1:$minio_port/$bucket" >/dev/null
	(umask 077 && printf 'access_key_id = %s\nsecret_access_key = %s\n' "$minio_user" "$minio_secret" >"$work/s3.creds")
	echo "MinIO up on 127.0.0.1:$minio_port (pid $minio_pid), bucket $bucket" >&2

	for role in postgres root; do
		if psql -h "$PGHOST" -p "$PGPORT" -U "$role" -d test -Atqc 'SELECT 1' >/dev/null 2>&1; then
			pg_role=$role
			break
		fi
	done
	[[ -n $pg_role ]] || { echo "cannot connect to PostgreSQL at $PGHOST:$PGPORT database test as postgres or root" >&2; exit 1; }
	pg_db=mosaic_bench_$(rand_hex 6)
	psql_admin -c "CREATE DATABASE $pg_db"
	echo "PostgreSQL database $pg_db on $PGHOST:$PGPORT (role $pg_role)" >&2
}

# s3_cleanup KEEP WORK: stop $minio_pid, drop $pg_db, and delete WORK
# unless KEEP is 1: the end of a script that called s3_services.
s3_cleanup() {
	stop "$minio_pid"
	if [[ -n $pg_db ]]; then
		psql_admin -c "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)" ||
			echo "could not drop database $pg_db on $PGHOST:$PGPORT" >&2
	fi
	if [[ $1 == 1 ]]; then
		echo "kept $2" >&2
	else
		rm -rf "$2"
	fi
}

# s3_config ADDR DEVDIR CREDS DESCRIPTION prints the config of a log with
# the dev log in DEVDIR's key, roots, NotAfter window, period and pool size,
# listening on ADDR, on the S3 bucket and PostgreSQL database s3_services
# made (lock backend and dedup cache), with a 256 MiB read cache.
s3_config() {
	local addr=$1 dev=$2 creds=$3 desc=$4
	field() { sed -n 's/^ *"'"$1"'": *"\([^"]*\)".*/\1/p' "$dev/dev.json"; }
	cat <<YAML
# bench/lib.sh s3_config: the dev log's key, roots and address, its period
# and pool size, on S3 (MinIO) with PostgreSQL as lock backend and dedup cache.
listen:
  - address: $addr
postgres: postgres://$pg_role@$PGHOST:$PGPORT/$pg_db?sslmode=disable
logs:
  - name: bench
    submission_prefix: http://$addr/
    key: $dev/log.key
    roots: $(field roots)
    not_after_start: $(field not_after_start)
    not_after_limit: $(field not_after_limit)
    storage:
      s3:
        endpoint: http://127.0.0.1:$minio_port
        region: us-east-1
        bucket: $bucket
        prefix: bench
        path_style: true
        credentials_file: $creds
        read_cache_mb: 256
    lock: postgres
    period: 200ms
    pool_size: 4000
    description: $desc
YAML
}
