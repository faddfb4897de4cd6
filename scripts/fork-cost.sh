#!/bin/bash
# fork-cost.sh: what making a process costs on this machine, the floor
# under every Postgres session (a backend is a fork of the postmaster),
# every instance and worker a test starts, and every container: an
# exec of /bin/true from bash, and a fork and exit of a Python process
# (a process with a few MB mapped, as a Postgres backend has). Each in
# wall milliseconds, averaged over its runs. docs/performance.md.
set -eu
n=${1:-300}
start=$(date +%s%N)
for _ in $(seq "$n"); do /bin/true; done
end=$(date +%s%N)
awk -v d="$((end - start))" -v n="$n" 'BEGIN { printf "exec of /bin/true: %.2f ms\n", d / n / 1e6 }'
python3 - "$n" <<'PY'
import os, sys, time
n = int(sys.argv[1])
t = time.perf_counter()
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
print("fork and exit of a Python process: %.2f ms" % ((time.perf_counter() - t) / n * 1e3))
PY
lscpu 2>/dev/null | grep -i '^hypervisor' || true
