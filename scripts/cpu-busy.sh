#!/bin/bash
# cpu-busy.sh CMD [ARGS...]: runs CMD and prints how many CPU-seconds the
# whole machine spent busy meanwhile (user, nice, system, irq, softirq,
# steal from /proc/stat), beside the total: on a machine doing nothing
# else, the cost of CMD with every process it set off (containers, the
# storage driver's daemon, the docker daemon). docs/performance.md uses it.
set -u
read -ra a </proc/stat
"$@"
rc=$?
read -ra b </proc/stat
hz=$(getconf CLK_TCK)
busy=0 total=0
for i in 1 2 3 4 5 6 7 8; do
	d=$((b[i] - a[i]))
	total=$((total + d))
	if [ "$i" -ne 4 ] && [ "$i" -ne 5 ]; then busy=$((busy + d)); fi
done
awk -v b="$busy" -v t="$total" -v hz="$hz" 'BEGIN { printf "cpu-busy: %.2f CPU-seconds busy of %.2f\n", b / hz, t / hz }' >&2
exit $rc
