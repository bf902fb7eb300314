# Shell helpers shared by bench/run.sh and bench/compare.sh (sourced, not
# run): process control, free loopback ports, waiting for a server.

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
