#!/bin/bash
# pg-commit-cpu.sh [volume]: the CPU that 6,000 single-row commits (pgbench,
# 4 clients, inside the container) cost a Postgres container of the image
# $IDEM_POSTGRES_IMAGE (default the local idemcheck/postgres:15): the
# container's cgroup (v1 cpuacct) and the storage driver's fuse-overlayfs
# process, if any. With "volume" the data directory is a fresh anonymous
# volume; without, it is wherever the image puts it: in the container's
# own layer for an image without a VOLUME (images built before db50c8a),
# which fuse-overlayfs writes from outside the container, in a volume for
# one with. docs/performance.md.
set -eu
vol=()
[ "${1:-}" = volume ] && vol=(-v /var/lib/postgresql/data)
cid=$(docker run -d "${vol[@]}" -e POSTGRES_PASSWORD=x "${IDEM_POSTGRES_IMAGE:-idemcheck/postgres:15}")
trap 'docker rm -f -v "$cid" >/dev/null' EXIT
until docker logs "$cid" 2>&1 | grep -q "listening on IPv4"; do sleep 0.1; done
sleep 0.5
docker exec "$cid" psql -U postgres -qc "create table t(k text primary key, v text)"
cg=$(ls -d /sys/fs/cgroup/cpuacct/docker/"$cid"* /sys/fs/cgroup/cpu,cpuacct/docker/"$cid"* 2>/dev/null | head -1)
merged=$(docker inspect -f '{{.GraphDriver.Data.MergedDir}}' "$cid")
fpid=$(pgrep -f "fuse-overlayfs.*$(dirname "$merged")" | head -1 || true)
fuse() { if [ -n "$fpid" ]; then awk '{print $14 + $15}' "/proc/$fpid/stat"; else echo 0; fi; }
f0=$(fuse) c0=$(cat "$cg/cpuacct.usage")
docker exec "$cid" bash -c 'printf "\\set k random(1, 100000000)\ninsert into t values (:k, repeat(:k::text, 10)) on conflict do nothing;\n" >/tmp/i.sql
	/usr/lib/postgresql/*/bin/pgbench -U postgres -n -c 4 -t 1500 -f /tmp/i.sql postgres 2>&1 | grep "^tps"'
c1=$(cat "$cg/cpuacct.usage") f1=$(fuse)
awk -v c="$((c1 - c0))" -v f="$((f1 - f0))" -v hz="$(getconf CLK_TCK)" -v m="${1:-layer}" \
	'BEGIN { printf "%s: container %.2f CPU-seconds, fuse-overlayfs %.2f\n", m, c / 1e9, f / hz }'
