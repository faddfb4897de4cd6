#!/bin/bash
# Builds the local server images that stand in for the official postgres and
# redis images on machines without a container registry (`make images`).
#
#   idemcheck/postgres:15   Debian bookworm's postgresql-15 (override: IDEM_POSTGRES_IMAGE)
#   idemcheck/redis:7       Debian bookworm's redis-server 7.0 (override: IDEM_REDIS_IMAGE)
#
# The only network it uses is the Debian mirror named in this machine's apt
# configuration: it makes a minimal bookworm with both servers in a
# temporary folder (mmdebstrap; debootstrap where mmdebstrap cannot be had),
# adds the entrypoints beside this script, and `docker import`s that one
# root file system twice with different ENTRYPOINT, CMD and EXPOSE
# (identical layers, so stored once).
#
# Idempotent: an image already built from these same scripts (the label
# org.idemcheck.recipe holds their hash) is skipped unless FORCE=1.
# Other knobs: DEBIAN_MIRROR (default: read from apt), DEBIAN_SUITE (bookworm),
# BUILD_TMPDIR (where the root file system is assembled, default /var/tmp).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pg_image="${IDEM_POSTGRES_IMAGE:-idemcheck/postgres:15}"
redis_image="${IDEM_REDIS_IMAGE:-idemcheck/redis:7}"
suite="${DEBIAN_SUITE:-bookworm}"
force="${FORCE:-0}"
start=$SECONDS

log() { printf '[images %3ds] %s\n' "$((SECONDS - start))" "$*"; }
die() {
	printf 'images/build.sh: %s\n' "$*" >&2
	exit 1
}

command -v docker >/dev/null || die "docker is not installed: apt-get install docker.io"
docker info >/dev/null 2>&1 || die "docker is not running: start it (dockerd, or service docker start)"

# The recipe hash is stored as a label: an image built by another version of
# these scripts is rebuilt, an up-to-date one is skipped.
recipe="$(cat "$here/build.sh" "$here/postgres-entrypoint.sh" "$here/redis-entrypoint.sh" | sha256sum | cut -c1-16)"
up_to_date() {
	[ "$(docker image inspect -f '{{index .Config.Labels "org.idemcheck.recipe"}}' "$1" 2>/dev/null || :)" = "$recipe" ]
}
need_pg=1
need_redis=1
if [ "$force" != 1 ]; then
	if up_to_date "$pg_image"; then
		log "$pg_image is up to date, skipping (FORCE=1 rebuilds)"
		need_pg=0
	elif docker image inspect "$pg_image" >/dev/null 2>&1; then
		log "$pg_image was built by other scripts: rebuilding"
	fi
	if up_to_date "$redis_image"; then
		log "$redis_image is up to date, skipping (FORCE=1 rebuilds)"
		need_redis=0
	elif docker image inspect "$redis_image" >/dev/null 2>&1; then
		log "$redis_image was built by other scripts: rebuilding"
	fi
fi
if [ "$need_pg" = 0 ] && [ "$need_redis" = 0 ]; then
	log "nothing to do"
	exit 0
fi
[ "$(id -u)" = 0 ] || die "building a root file system needs root: run as root (or with sudo)"

# mirror SUITE prints the mirror URI that this machine's apt configuration
# uses for SUITE (e.g. bookworm, bookworm-security): deb822 .sources files
# first, then one-line sources.list files. Comments are ignored.
mirror() {
	local want="$1" f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		uri="$(awk -v suite="$want" '
			function flush() {
				if (isdeb && hassuite && uri != "" && found == "") found = uri
				isdeb = 0; hassuite = 0; uri = ""
			}
			/^[[:space:]]*$/ { flush(); next }
			/^[[:space:]]*#/ { next }
			tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") isdeb = 1 }
			tolower($1) == "uris:" { uri = $2 }
			tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) hassuite = 1 }
			END { flush(); print found }
		' "$f")"
		if [ -n "$uri" ]; then
			echo "${uri%/}"
			return
		fi
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		uri="$(awk -v suite="$want" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) == suite) { print $i; exit }
			}
		' "$f")"
		if [ -n "$uri" ]; then
			echo "${uri%/}"
			return
		fi
	done
}

mirror_url="${DEBIAN_MIRROR:-$(mirror "$suite")}"
[ -n "$mirror_url" ] || die "no Debian mirror for $suite in /etc/apt/sources.list{,.d/}: set DEBIAN_MIRROR"
mirror_url="${mirror_url%/}"
log "mirror $mirror_url ($suite)"

# install_tool NAME installs the Debian package NAME with apt-get where
# its command is missing, updating the package lists if it must.
install_tool() {
	command -v "$1" >/dev/null && return 0
	log "installing $1"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --no-install-recommends "$1" >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq --no-install-recommends "$1" >/dev/null 2>&1; }
}

work="$(mktemp -d "${BUILD_TMPDIR:-/var/tmp}/idemcheck-images.XXXXXX")"
root="$work/rootfs"
cleanup() {
	local rc=$?
	umount "$root/dev/shm" 2>/dev/null || :
	umount "$root/proc" 2>/dev/null || :
	umount "$root/dev/pts" 2>/dev/null || :
	rm -rf --one-file-system "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

keyring=()
if [ -f /usr/share/keyrings/debian-archive-keyring.gpg ]; then
	keyring=(--keyring=/usr/share/keyrings/debian-archive-keyring.gpg)
fi
# The same suite's updates and security fixes where the machine's apt has them.
updates_url="$(mirror "$suite-updates")"
security_url="$(mirror "$suite-security")"
sources=("deb $mirror_url $suite main")
if [ -n "$updates_url" ]; then sources+=("deb $updates_url $suite-updates main"); fi
if [ -n "$security_url" ]; then sources+=("deb $security_url $suite-security main"); fi

# What the chroot holds before a package is installed in it: no docs, no
# recommends, and no default cluster (the entrypoint uses the template
# cluster made below).
overlay="$work/overlay"
mkdir -p "$overlay/etc/dpkg/dpkg.cfg.d" "$overlay/etc/apt/apt.conf.d" "$overlay/etc/postgresql-common/createcluster.d"
printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' \
	'path-exclude=/usr/share/locale/*' 'path-exclude=/usr/share/lintian/*' >"$overlay/etc/dpkg/dpkg.cfg.d/01-idemcheck-nodoc"
printf '%s\n' 'APT::Install-Recommends "false";' 'APT::Install-Suggests "false";' 'Acquire::Languages "none";' \
	>"$overlay/etc/apt/apt.conf.d/01-idemcheck"
echo 'create_main_cluster = false' >"$overlay/etc/postgresql-common/createcluster.d/idemcheck.conf"

# with_mmdebstrap makes the root file system with both servers in one apt
# run that downloads in parallel: 25 s on a fresh 2-core machine, where
# debootstrap and then apt-get in its chroot took 101 s. It keeps the
# services from starting while it installs.
with_mmdebstrap() {
	log "mmdebstrap --variant=minbase $suite with postgresql-15 and redis-server"
	mmdebstrap --mode=root --variant=minbase --include=postgresql-15,redis-server \
		"${keyring[@]}" --setup-hook="sync-in $overlay /" \
		"$suite" "$root" "${sources[@]}" >"$work/apt.log" 2>&1
}

# with_debootstrap is the way where mmdebstrap cannot be had or fails: a
# minimal system first, then both servers installed in its chroot.
with_debootstrap() {
	install_tool debootstrap || die "cannot install debootstrap with apt-get"
	log "debootstrap --variant=minbase $suite (about a minute)"
	debootstrap --variant=minbase "${keyring[@]}" "$suite" "$root" "$mirror_url" >"$work/debootstrap.log" 2>&1 || {
		tail -n 20 "$work/debootstrap.log" >&2
		die "debootstrap failed (log above)"
	}
	log "configuring the chroot (no docs, no services, no default cluster)"
	cp -a "$overlay/." "$root/"
	# Never start services inside the chroot.
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"
	printf '%s\n' "${sources[@]}" >"$root/etc/apt/sources.list"
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || :
	mount -t proc proc "$root/proc"
	log "apt-get install postgresql-15 redis-server in the chroot"
	{
		chroot_apt update &&
			chroot_apt install postgresql-15 redis-server &&
			chroot_apt clean
	} >"$work/apt.log" 2>&1 || {
		tail -n 20 "$work/apt.log" >&2
		die "installing the servers in the chroot failed (log above)"
	}
	umount "$root/proc"
}
chroot_apt() { chroot "$root" env DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 apt-get -y -qq -o Dpkg::Use-Pty=0 "$@"; }

if ! { install_tool mmdebstrap && with_mmdebstrap; }; then
	if [ -f "$work/apt.log" ]; then
		tail -n 5 "$work/apt.log" >&2
		log "mmdebstrap failed (above): debootstrap instead"
	fi
	rm -rf --one-file-system "$root"
	with_debootstrap
fi
mount -t proc proc "$root/proc"

# The cluster the entrypoint uses in place instead of running initdb at
# every start (images/postgres-entrypoint.sh says when): initdb's defaults,
# as the entrypoint would run it for the default superuser, with the
# container's locale and time zone, in PGDATA itself and marked as not yet
# configured; /dev/shm for its shared-memory probe. WAL segments of 1 MB,
# not 16: Docker copies PGDATA (a VOLUME) into every container it starts,
# which cost its daemon about half a CPU-second for the 39 MB cluster
# (29 MB with the smaller segments), three times in a check run.
log "initdb of the template cluster"
mkdir -p "$root/dev/shm"
mount -t tmpfs tmpfs "$root/dev/shm"
pgbin_dir="$(cd "$root" && printf '/%s\n' usr/lib/postgresql/*/bin | sort -V | tail -n1)"
mkdir -p "$root/var/lib/postgresql/data"
chroot "$root" chown postgres:postgres /var/lib/postgresql /var/lib/postgresql/data
chroot --userspec=postgres:postgres "$root" env -i LANG=C.UTF-8 TZ=Etc/UTC PATH="$pgbin_dir:/usr/bin:/bin" \
	initdb -D /var/lib/postgresql/data --username=postgres --wal-segsize=1 >"$work/initdb.log" 2>&1 || {
	umount "$root/dev/shm" || :
	tail -n 20 "$work/initdb.log" >&2
	die "initdb of the template cluster failed (log above)"
}
chroot --userspec=postgres:postgres "$root" touch /var/lib/postgresql/data/idemcheck-template
umount "$root/dev/shm"
umount "$root/proc"

# LLVM (and z3) serve only PostgreSQL's optional JIT, a third of the size:
# without llvmjit.so PostgreSQL silently runs with JIT unavailable.
log "removing PostgreSQL's JIT (LLVM)"
rm -rf "$root"/usr/lib/postgresql/*/lib/llvmjit* "$root"/usr/lib/postgresql/*/lib/bitcode
# shellcheck disable=SC2016 # ${Package} is dpkg-query's, not ours.
for pkg in $(chroot "$root" dpkg-query -W -f '${Package}\n' 'libllvm*' 'libz3-*' 2>/dev/null); do
	chroot "$root" dpkg --purge --force-depends "$pkg" >>"$work/apt.log" 2>&1 || die "dpkg --purge $pkg failed"
done

log "adding entrypoints and trimming"
install -m 0755 "$here/postgres-entrypoint.sh" "$root/usr/local/bin/postgres-entrypoint.sh"
install -m 0755 "$here/redis-entrypoint.sh" "$root/usr/local/bin/redis-entrypoint.sh"
ln -sf postgres-entrypoint.sh "$root/usr/local/bin/docker-entrypoint.sh"
# In the chroot: /var/run is a link to /run, which outside it is this machine's.
chroot "$root" mkdir -p /docker-entrypoint-initdb.d /var/lib/postgresql/data /var/run/postgresql /data
chroot "$root" chown postgres:postgres /var/lib/postgresql /var/lib/postgresql/data /var/run/postgresql
chroot "$root" chown redis:redis /data
chmod 0700 "$root/var/lib/postgresql/data"
rm -f "$root/usr/sbin/policy-rc.d" "$root/etc/resolv.conf"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
	"$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/* "$root"/var/tmp/* \
	"$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
# Docker provides /dev at run time.
rm -rf "${root:?}"/dev/*
touch "$root/etc/resolv.conf"

pgbin="$(cd "$root" && printf '%s\n' usr/lib/postgresql/*/bin | sort -V | tail -n1)"
[ -x "$root/$pgbin/postgres" ] || die "postgres binary not found in the chroot"
log "root file system: $(du -sh --one-file-system "$root" | cut -f1)"

path="/$pgbin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
tar --numeric-owner -C "$root" -cf "$work/rootfs.tar" .

# old_id IMAGE prints the ID IMAGE has now (nothing if it does not exist), so a
# FORCE=1 rebuild can drop the image it replaces instead of leaving it dangling.
old_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null || :; }
drop_old() {
	if [ -n "$1" ] && [ "$1" != "$(old_id "$2")" ]; then
		docker image rm "$1" >/dev/null 2>&1 || :
	fi
}

# Each server's data directory is a VOLUME, as in the official images: a
# container gets a copy of the image's (the cluster made at build time),
# made by the daemon, on the host's own file system. Left in the container's
# layer it would be written through the storage driver, which on a machine
# with fuse-overlayfs took a third more CPU per commit in a process of its
# own and cannot empty a directory of the image's and fill it again (a new
# file where a deleted one was is refused as existing). Removing the
# container with its volumes (testcontainers' Terminate, the reaper,
# docker run --rm) removes the copy.
if [ "$need_pg" = 1 ]; then
	log "docker import $pg_image"
	old="$(old_id "$pg_image")"
	docker import \
		--change 'ENTRYPOINT ["docker-entrypoint.sh"]' \
		--change 'CMD ["postgres"]' \
		--change "ENV PATH=$path" \
		--change 'ENV LANG=C.UTF-8' \
		--change 'ENV PGDATA=/var/lib/postgresql/data' \
		--change 'VOLUME /var/lib/postgresql/data' \
		--change 'EXPOSE 5432' \
		--change 'LABEL org.idemcheck.image=postgres' \
		--change "LABEL org.idemcheck.recipe=$recipe" \
		"$work/rootfs.tar" "$pg_image" >/dev/null
	drop_old "$old" "$pg_image"
fi
if [ "$need_redis" = 1 ]; then
	log "docker import $redis_image"
	old="$(old_id "$redis_image")"
	docker import \
		--change 'ENTRYPOINT ["redis-entrypoint.sh"]' \
		--change 'CMD ["redis-server"]' \
		--change "ENV PATH=$path" \
		--change 'ENV LANG=C.UTF-8' \
		--change 'WORKDIR /data' \
		--change 'VOLUME /data' \
		--change 'EXPOSE 6379' \
		--change 'LABEL org.idemcheck.image=redis' \
		--change "LABEL org.idemcheck.recipe=$recipe" \
		"$work/rootfs.tar" "$redis_image" >/dev/null
	drop_old "$old" "$redis_image"
fi

log "smoke test"
docker run --rm --entrypoint postgres "$pg_image" --version
docker run --rm --entrypoint redis-server "$redis_image" --version
log "done: $(docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -F -e "$pg_image" -e "$redis_image" | tr '\n' ' ')"
