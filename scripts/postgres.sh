#!/usr/bin/env bash
# PostgreSQL for Mosaic's integration tests, on a Debian machine.
#
# The PostgreSQL lock and dedup backend (internal/state/postgres) is tested
# against a real server: internal/testkit/testenv connects to
#
#     postgres://postgres@127.0.0.1:5432/test?sslmode=disable
#
# (override with MOSAIC_TEST_POSTGRES) and gives every test its own schema.
# This script makes that true and is safe to run any number of times (CI runs
# it before the tests):
#
#   1. apt-get install postgresql, if pg_ctlcluster is missing;
#   2. start the cluster (Debian's first one, e.g. 15/main) on port 5432;
#   3. trust authentication for TCP connections from 127.0.0.1 and ::1;
#   4. create the database "test" and a superuser role for the current user.
#
# Step 3 means any local user can connect as any role without a password:
# fine for a developer machine or a CI runner, NOT for a production database.
# Never run this script on a machine whose PostgreSQL holds real data.
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then
	echo "scripts/postgres.sh must run as root (it installs and configures PostgreSQL)" >&2
	exit 1
fi

if ! command -v pg_ctlcluster >/dev/null; then
	echo "installing postgresql with apt-get..." >&2
	apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql
fi

version="$(ls /etc/postgresql | sort -V | tail -n 1)"
if [[ -z "$version" ]]; then
	echo "no cluster under /etc/postgresql; create one with: pg_createcluster <version> main" >&2
	exit 1
fi
conf="/etc/postgresql/$version/main"
hba="$conf/pg_hba.conf"

# Trust loopback TCP connections. pg_hba.conf is read top-down and the first
# matching line wins, so the lines go first.
changed=0
for addr in 127.0.0.1/32 ::1/128; do
	line="host all all $addr trust"
	if ! grep -qxF "$line" "$hba"; then
		sed -i "1i $line" "$hba"
		changed=1
	fi
done

# Start the cluster if it is not running (pg_ctlcluster start fails when it is).
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" { print $4 }' | grep -q online; then
	pg_ctlcluster --skip-systemctl-redirect "$version" main start
elif [[ $changed -eq 1 ]]; then
	pg_ctlcluster --skip-systemctl-redirect "$version" main reload
fi

# Wait until it accepts connections (a fresh start takes a moment).
for _ in $(seq 1 50); do
	if pg_isready -q -h 127.0.0.1 -p 5432; then
		break
	fi
	sleep 0.2
done
if ! pg_isready -h 127.0.0.1 -p 5432; then
	echo "PostgreSQL $version/main is not accepting connections on 127.0.0.1:5432; see /var/log/postgresql/postgresql-$version-main.log" >&2
	exit 1
fi

psql_admin() {
	psql -h 127.0.0.1 -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA "$@"
}

if [[ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = 'test'")" != 1 ]]; then
	psql_admin -c "CREATE DATABASE test"
fi
me="$(id -un)"
if [[ "$me" != postgres && "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$me'")" != 1 ]]; then
	psql_admin -c "CREATE ROLE \"$me\" SUPERUSER LOGIN"
fi

echo "PostgreSQL $version ready: postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
