#!/bin/bash
# The replicated gate (make replicated, make replicated-5): on each
# replicated store and seed, the correct (synchronous) store must pass the
# failover and partition scenarios (idemcheck exits 0) and the asynchronous
# configuration must fail them (exits 1: acknowledged claims lost). Each
# idemcheck run starts its own primary and standby and removes them on exit
# and on Ctrl-C. Prints one line per run: exit code, wall time (container
# start included), the topology's start time, and the violations found.
#
#   scripts/replicated-gate.sh BIN "STORES" "SEEDS"
set -uo pipefail
bin="$1"
stores="$2"
seeds="$3"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
fail=0
for store in $stores; do
	async="${store%-replicated}-async-replication"
	for seed in $seeds; do
		for variant in correct "$async"; do
			want=0
			[ "$variant" = correct ] || want=1
			t0=$(date +%s.%N)
			"$bin" check --store "$store" --variant "$variant" --scenario failover,partition --seed "$seed" >"$out" 2>&1
			rc=$?
			wall=$(echo "$(date +%s.%N) - $t0" | bc)
			started=$(grep -o 'streaming in [0-9.]*s' "$out" | head -1 | cut -d' ' -f3)
			viol=$(grep -o '^violations ([0-9]*)' "$out" | grep -o '[0-9]*' || echo 0)
			verdicts=$(grep -E '^  (failover|partition) ' "$out" | awk '{printf "%s=%s ", $1, $2}')
			printf '%-20s %-27s seed %s: exit %d (want %d), wall %.1fs, containers %s, %s violations %s\n' \
				"$store" "$variant" "$seed" "$rc" "$want" "$wall" "${started:-?}" "$verdicts" "$viol"
			if [ "$rc" != "$want" ]; then
				cat "$out"
				fail=1
			fi
		done
	done
done
exit $fail
