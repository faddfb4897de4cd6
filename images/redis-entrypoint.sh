#!/bin/bash
# Entrypoint of idemcheck/redis:7, a local stand-in for the official redis
# image built from Debian's redis-server package (images/build.sh).
#
# Like the official image: CMD is `redis-server [config-file] [--option value
# ...]`; a first argument that starts with '-' or ends in .conf is taken as
# redis-server's arguments (testcontainers-go's redis module appends options
# this way); the server runs as the redis user in /data and logs to stdout
# ("* Ready to accept connections", which the module waits for).
# Debian's binary, unlike the official image's, defaults to protected-mode
# yes, so `--protected-mode no` and `--bind 0.0.0.0` are added unless given.
# Durability is whatever the arguments say: idemcheck passes
# `--appendonly yes --appendfsync always` (the AOF lives in /data).
set -Eeuo pipefail

if [ "${1:0:1}" = '-' ] || [ "${1%.conf}" != "$1" ]; then
	set -- redis-server "$@"
fi

if [ "$1" = 'redis-server' ] && [ "$(id -u)" = '0' ]; then
	mkdir -p /data
	find /data \! -user redis -exec chown redis:redis '{}' +
	exec setpriv --reuid=redis --regid=redis --init-groups "${BASH_SOURCE[0]}" "$@"
fi

if [ "$1" = 'redis-server' ]; then
	has() {
		local a
		for a in "$@"; do
			[ "$a" = "$want" ] && return 0
		done
		return 1
	}
	want=--protected-mode
	if ! has "$@"; then
		set -- "$@" --protected-mode no
	fi
	want=--bind
	if ! has "$@"; then
		set -- "$@" --bind 0.0.0.0
	fi
	umask 0077
fi

exec "$@"
