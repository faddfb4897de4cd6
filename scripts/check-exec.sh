#!/bin/bash
# make check-exec: the stores in other languages (examples/exec-*), through
# the store protocol (docs/protocol.md). Each correct store must pass every
# scenario that applies to it; each bug variant must fail the scenario named
# beside it, and the line says which checkers caught it.
#
#   scripts/check-exec.sh BIN [SEED]
#
# Needs node with Debian's node-sqlite3 (scripts/node-sqlite3.sh) and
# Debian's python3 with python3-redis; the Redis server is the harness's
# (a local container, or IDEM_REDIS_ADDR).
set -uo pipefail
bin=${1:?usage: check-exec.sh BIN [SEED]}
seed=${2:-1}
py=${PYTHON:-/usr/bin/python3}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
node_path=$(bash "$here/scripts/node-sqlite3.sh") || { echo "check-exec: node-sqlite3 is not loadable (scripts/node-sqlite3.sh)"; exit 2; }
export NODE_PATH=$node_path${NODE_PATH:+:$NODE_PATH}
"$py" -c 'import redis' || { echo "check-exec: $py has no redis module (apt-get install python3-redis)"; exit 2; }

js="node $here/examples/exec-js-sqlite/store.js"
pyc="$py $here/examples/exec-py-redis/store.py"
out=results/check-exec
mkdir -p "$out"
fail=0

# checkers FILE: the checkers with violations in a --json summary.
checkers() {
	"$py" -c 'import json,sys; s=json.load(open(sys.argv[1])); print(",".join(sorted({v["checker"] for v in s.get("violations") or []})) or "none")' "$1" 2>/dev/null || echo "?"
}

# run NAME CMD VARIANT SCENARIOS WANT: WANT is pass (exit 0) or fail (exit 1).
run() {
	local name=$1 cmd=$2 variant=$3 scenarios=$4 want=$5
	local json="$out/$name-$variant.json"
	# Two scenarios at a time: every store and worker is an interpreter
	# here, and on a loaded machine the workers scenario's restarts
	# outlasted its wait for answers with four.
	"$bin" check --store exec --cmd "$cmd" --variant "$variant" --scenario "$scenarios" --seed "$seed" \
		--parallel "${PARALLEL:-2}" --json --out "$out/runs" >"$json" 2>"$out/$name-$variant.err"
	local rc=$?
	local caught
	caught=$(checkers "$json")
	case "$want:$rc" in
	pass:0) echo "ok    $name $variant: passed $scenarios" ;;
	fail:1) echo "ok    $name $variant: failed $scenarios, caught by $caught" ;;
	*)
		echo "WRONG $name $variant on $scenarios: exit $rc, want $want (checkers: $caught; see $out/$name-$variant.err)"
		tail -3 "$out/$name-$variant.err"
		fail=1
		;;
	esac
}

for ex in "js:$js" "py:$pyc"; do
	name=${ex%%:*} cmd=${ex#*:}
	run "$name" "$cmd" correct all pass
	run "$name" "$cmd" select-then-insert sched-race fail
	run "$name" "$cmd" unfenced-complete sched-takeover fail
	run "$name" "$cmd" unfenced-release sched-takeover fail
	run "$name" "$cmd" no-fingerprint sched-mismatch fail
	run "$name" "$cmd" lock-in-process workers fail
done
run js "$js" token-reuse sched-takeover fail

echo "== demo select-then-insert on each (the race step by step)"
for ex in "js:$js" "py:$pyc"; do
	name=${ex%%:*} cmd=${ex#*:}
	if "$bin" demo select-then-insert --store exec --cmd "$cmd" >"$out/$name-demo.txt" 2>&1; then
		echo "ok    $name demo: $(tail -1 "$out/$name-demo.txt")"
	else
		echo "WRONG $name demo select-then-insert (see $out/$name-demo.txt)"
		fail=1
	fi
done
if [ $fail = 0 ]; then echo "check-exec: every correct store passed, every bug variant failed"; fi
exit $fail
