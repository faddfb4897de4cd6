#!/bin/bash
# Entrypoint of idemcheck/postgres:15, a local stand-in for the official
# postgres image built from Debian's postgresql-15 package (images/build.sh).
#
# It honours the official image's environment contract, so testcontainers-go's
# postgres module starts it unmodified:
#   POSTGRES_USER (default postgres), POSTGRES_PASSWORD, POSTGRES_DB (default
#   = user), PGDATA (default /var/lib/postgresql/data), POSTGRES_INITDB_ARGS,
#   POSTGRES_HOST_AUTH_METHOD, and scripts in /docker-entrypoint-initdb.d.
# CMD is `postgres [-c key=value ...]`; a first argument starting with '-' is
# taken as postgres options. Like the official image, a fresh data directory
# is initialised with a temporary server listening on the unix socket only, then
# "PostgreSQL init process complete" is printed and the real server starts;
# the cluster made at build time is set up in single-user mode instead (no
# temporary server), so "database system is ready to accept connections" is
# printed once or twice, the last time after that line, on the same stream
# (what harness/servers waits for; testcontainers' module waits for two
# occurrences). `docker stop`
# shuts the server down fast (SIGINT), as the official STOPSIGNAL does.
set -Eeuo pipefail

if [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi

: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
export POSTGRES_USER POSTGRES_DB

# file_env VAR: VAR may also be given as VAR_FILE (a path), as in the official image.
file_env() {
	local var="$1" fileVar="${1}_FILE" def="${2:-}"
	if [ "${!var:-}" ] && [ "${!fileVar:-}" ]; then
		echo >&2 "error: both $var and $fileVar are set (but are exclusive)"
		exit 1
	fi
	local val="$def"
	if [ "${!var:-}" ]; then
		val="${!var}"
	elif [ "${!fileVar:-}" ]; then
		val="$(<"${!fileVar}")"
	fi
	export "$var"="$val"
	unset "$fileVar"
}

if [ "$1" != 'postgres' ]; then
	exec "$@"
fi

if [ "$(id -u)" = '0' ]; then
	# Make the data and socket directories ours, then drop root for good.
	mkdir -p "$PGDATA" /var/run/postgresql
	chmod 00700 "$PGDATA" || :
	chmod 03775 /var/run/postgresql || :
	find "$PGDATA" \! -user postgres -exec chown postgres:postgres '{}' +
	chown postgres:postgres /var/run/postgresql
	exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
fi

file_env POSTGRES_PASSWORD
file_env POSTGRES_INITDB_ARGS

psql_init() {
	psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc "$@"
}

# The image carries a cluster that initdb made at build time for the
# default contract (superuser postgres, no initdb arguments, UTC), in
# $PGDATA itself (a VOLUME: the daemon gives each container its own copy),
# marked by $template_mark until it is first configured. Used where it
# is, it costs nothing more; initdb takes two seconds or more, and copying
# it here file by file through the storage driver about one. Its superuser
# has no password yet; the temporary server below sets it. Anything else
# empties the directory and gets a real initdb.
template_mark="$PGDATA/idemcheck-template"
if [ -e "$template_mark" ] && { [ "$POSTGRES_USER" != postgres ] || [ -n "${POSTGRES_INITDB_ARGS:-}" ] || [ -n "${TZ:-}" ]; }; then
	find "$PGDATA" -mindepth 1 -delete
fi

if [ ! -s "$PGDATA/PG_VERSION" ] || [ -e "$template_mark" ]; then
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "${POSTGRES_HOST_AUTH_METHOD:-}" != 'trust' ]; then
		cat >&2 <<-'EOM'
			Error: Database is uninitialized and superuser password is not specified.
			       You must specify POSTGRES_PASSWORD to a non-empty value for the
			       superuser. For example, "-e POSTGRES_PASSWORD=password" on "docker run".
			       Or set POSTGRES_HOST_AUTH_METHOD=trust to allow all connections
			       without a password (not recommended).
		EOM
		exit 1
	fi

	set_password=0
	if [ -e "$template_mark" ]; then
		echo "using the cluster initialised at build time in $PGDATA"
		set_password=1
	else
		# initdb reads the password from a file so it never shows in `ps`.
		pwfile="$(mktemp)"
		printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
		# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is split on purpose, as upstream does.
		initdb --username="$POSTGRES_USER" --pwfile="$pwfile" ${POSTGRES_INITDB_ARGS:-}
		rm -f "$pwfile"
	fi

	# Listen everywhere (the container's port is what is published) and let any
	# address in with a password, as the official image does.
	printf "\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
	# Room for a run's pools side by side: each scenario's store keeps up to
	# 16 connections (stores/postgres), and a drawn run of 11 scenarios at
	# once met the default 100 ("too many clients already") and ended
	# undecided. A standby copies this file (pg_basebackup), so it keeps the
	# primary's value, as a hot standby must.
	printf "max_connections = 400\n" >>"$PGDATA/postgresql.conf"
	auth="${POSTGRES_HOST_AUTH_METHOD:-}"
	if [ -z "$auth" ]; then
		auth="$(postgres -C password_encryption "${@:2}" 2>/dev/null || echo scram-sha-256)"
	fi
	printf '\nhost all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"

	# The cluster made at build time with no init scripts to run: its
	# password and database are set in single-user mode, with no temporary
	# server to start, wait for and stop (0.2 s against 0.7 s here, on
	# every container a run starts). The password and the database name
	# go in as SQL literals and identifiers, quotes doubled; a password
	# with a newline (the end of a command in this mode) takes the
	# temporary server below. "ready to accept connections" is then
	# printed once, after "init process complete" (harness/servers waits
	# for the line that follows it).
	init_scripts=(/docker-entrypoint-initdb.d/*)
	if [ "$set_password" = 1 ] && [ ! -e "${init_scripts[0]}" ] && [[ "${POSTGRES_PASSWORD:-}" != *$'\n'* ]] &&
		[ "$POSTGRES_DB" != template0 ] && [ "$POSTGRES_DB" != template1 ]; then
		sql=""
		if [ -n "${POSTGRES_PASSWORD:-}" ]; then
			pw="${POSTGRES_PASSWORD//\'/\'\'}"
			sql+="ALTER ROLE postgres PASSWORD '$pw'"$'\n'
		fi
		if [ "$POSTGRES_DB" != postgres ]; then
			sql+="CREATE DATABASE \"${POSTGRES_DB//\"/\"\"}\""$'\n'
		fi
		# Single-user mode answers an error without failing: its output
		# says. Shown without the lines that would show the password.
		if [ -n "$sql" ] && { ! out="$(printf '%s' "$sql" | postgres --single -D "$PGDATA" "${@:2}" postgres 2>&1)" ||
			grep -qE '(ERROR|FATAL|PANIC):' <<<"$out"; }; then
			grep -v 'PASSWORD' <<<"$out" >&2 || :
			exit 1
		fi
	else
		# Temporary server on the unix socket only (with the same -c options), for
		# creating the database and running init scripts.
		PGUSER="$POSTGRES_USER" pg_ctl -D "$PGDATA" \
			-o "$(printf '%q ' "${@:2}" -c listen_addresses='' -p "${PGPORT:-5432}")" \
			-w start

		if [ "$set_password" = 1 ] && [ -n "${POSTGRES_PASSWORD:-}" ]; then
			# On stdin, as initdb's file above: never on a command line.
			psql_init --dbname postgres --set pw="$POSTGRES_PASSWORD" >/dev/null <<-'EOSQL'
				ALTER ROLE postgres PASSWORD :'pw';
			EOSQL
		fi

		if [ "$POSTGRES_DB" != 'postgres' ]; then
			psql_init --dbname postgres --set db="$POSTGRES_DB" <<-'EOSQL'
				SELECT 'CREATE DATABASE ' || quote_ident(:'db')
				WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
			EOSQL
		fi

		shopt -s nullglob
		for f in /docker-entrypoint-initdb.d/*; do
			case "$f" in
			*.sh)
				if [ -x "$f" ]; then
					echo "$0: running $f"
					"$f"
				else
					echo "$0: sourcing $f"
					# shellcheck disable=SC1090
					. "$f"
				fi
				;;
			*.sql)
				echo "$0: running $f"
				psql_init --dbname "$POSTGRES_DB" -f "$f"
				;;
			*.sql.gz)
				echo "$0: running $f"
				gunzip -c "$f" | psql_init --dbname "$POSTGRES_DB"
				;;
			*) echo "$0: ignoring $f" ;;
			esac
		done
		shopt -u nullglob

		PGUSER="$POSTGRES_USER" pg_ctl -D "$PGDATA" -m fast -w stop
	fi
	# Configured: a restart of this container starts the server as it is.
	rm -f "$template_mark"
	# On stderr, where the server logs, unlike the official image: Docker
	# logs each stream through a copier of its own, and under load a line
	# on stdout was logged after the server's ready line on stderr, so a
	# wait for the ready line after this one never ended.
	echo >&2
	echo 'PostgreSQL init process complete; ready for start up.' >&2
	echo >&2
else
	echo >&2
	echo 'PostgreSQL Database directory appears to contain a database; Skipping initialization' >&2
	echo >&2
fi

unset POSTGRES_PASSWORD
if [ "$$" != 1 ]; then
	exec "$@"
fi
# As PID 1, keep a shell in front of the server: `docker import` cannot set
# the official image's STOPSIGNAL SIGINT, so `docker stop`'s SIGTERM (a
# "smart" shutdown that waits for every client) is turned into SIGINT (a fast
# shutdown), as with the official image. SIGKILL still kills everything.
"$@" &
pid=$!
trap 'kill -INT "$pid" 2>/dev/null || :' TERM INT
trap 'kill -QUIT "$pid" 2>/dev/null || :' QUIT
trap 'kill -HUP "$pid" 2>/dev/null || :' HUP
while :; do
	rc=0
	wait "$pid" || rc=$?
	if ! kill -0 "$pid" 2>/dev/null; then
		exit "$rc"
	fi
done
