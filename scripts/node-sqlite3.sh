#!/bin/bash
# Makes Debian's node-sqlite3 loadable by this machine's node, and prints
# the directory to put in NODE_PATH (empty when node finds it already).
#
# Debian's package (apt-get install node-sqlite3) installs only beside
# Debian's nodejs; a machine whose node comes from elsewhere cannot install
# it (its dependencies want Debian's nodejs), and trying could replace that
# node. The binding is N-API, which
# every node since 10 loads, so this takes the package's files instead
# (apt-get download, no dependencies), drops the binding's link to Debian's
# libnode (node itself provides the N-API functions) and loads the binding
# directly instead of through node-pre-gyp. Run as root (apt-get).
set -euo pipefail
dest=${IDEM_NODE_PATH:-/usr/local/lib/idemcheck/node}
if node -e 'require("sqlite3")' 2>/dev/null; then
	exit 0
fi
if NODE_PATH=$dest node -e 'require("sqlite3")' 2>/dev/null; then
	echo "$dest"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 777 "$tmp" # apt-get download fetches as the _apt user
(cd "$tmp" && apt-get download node-sqlite3 >/dev/null 2>&1) || {
	apt-get update -qq >/dev/null && (cd "$tmp" && apt-get download node-sqlite3 >/dev/null)
}
dpkg-deb -x "$tmp"/node-sqlite3_*.deb "$tmp/x"
mkdir -p "$dest"
rm -rf "$dest/sqlite3"
cp -r "$tmp/x/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)/nodejs/sqlite3" "$dest/sqlite3"
python3 - "$dest/sqlite3" <<'PY'
import glob, sys
for f in glob.glob(sys.argv[1] + "/lib/binding/*/node_sqlite3.node"):
    b = open(f, "rb").read()
    old = b"libnode.so.108\x00"  # DT_NEEDED of Debian's libnode: now libm's, already loaded
    if old in b:
        open(f, "wb").write(b.replace(old, b"libm.so.6\x00".ljust(len(old), b"\x00")))
PY
napi=$(ls -d "$dest"/sqlite3/lib/binding/napi-v6-* | head -1)
echo "module.exports = exports = require('./binding/$(basename "$napi")/node_sqlite3.node');" >"$dest/sqlite3/lib/sqlite3-binding.js"
NODE_PATH=$dest node -e 'require("sqlite3")'
echo "$dest"
