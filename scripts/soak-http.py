#!/usr/bin/env python3
"""A random-flag soak of `idemcheck http`: a property test of the
black-box mode, as `soak --random-flags` is of `check`.

    python3 scripts/soak-http.py BIN HTTPSVC [DRAWS] [DRAW_SEED]

Each draw runs one correct example service (examples/httpsvc over Redis,
examples/pysvc over SQLite, examples/nodesvc over its files) under flags
drawn from the ranges a user may pick: instances, clients, attempts,
duration, the faults' gap and window, the provider's latency and failure
rate, the clients' timeout, --settle, --max-key-len, --random, the key
format, --saves-errors (every example saves its errors) and, for the Go
example, its own lock TTL (declared as --inflight-ttl or not). A correct
service must never fail: exit 1 on any draw is a bug of idemcheck's or of
the example, and its command line is printed to run it again. Undecided
(exit 3) is allowed: a short --settle or an undeclared lock TTL leaves
keys unjudged, and a load the service sheds tests nothing.

Each run's results are in results/soak-http/<draw>; the last line counts
the draws by verdict. Exit 0 when no draw failed, 1 otherwise.
"""
import math
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time

if len(sys.argv) < 3:
    sys.exit(__doc__)
BIN, HTTPSVC = sys.argv[1], sys.argv[2]
DRAWS = int(sys.argv[3]) if len(sys.argv) > 3 else 20
SEED = int(sys.argv[4]) if len(sys.argv) > 4 else 1
OUT = "results/soak-http"
node_path = ":".join(p for p in ("/usr/share/nodejs", os.environ.get("NODE_PATH", "")) if p)


def draw(r, i, tmp):
    """One draw: its name and the command line."""

    def lu(lo, hi):  # log-uniform: every order of magnitude alike likely
        return math.exp(math.log(lo) + r.random() * (math.log(hi) - math.log(lo)))

    def ms(x):
        return "%dms" % int(x * 1000)

    svc = r.choice(["go", "go", "py", "node"])
    name = "d%d-%d-%s" % (SEED, i, svc)
    args = [BIN, "http", "--seed", str(r.randint(1, 10**6)), "--out", os.path.join(OUT, name)]
    keys = ["uuid", "ulid", "k-%s-%d", "%x"]
    if svc == "go":
        ttl = r.choice([2, 5, 5, 30])
        cmd = "%s -variant correct -lock-ttl %ds -charge-timeout %s" % (HTTPSVC, ttl, ms(min(2, ttl / 2)))
        extra = ["--server", "redis"]
        if ttl > 5 and r.random() < 0.7:
            extra += ["--inflight-ttl", "%ds" % ttl]
    elif svc == "py":
        cmd = "IDEM_DB=%s/%s.db python3 examples/pysvc/service.py correct" % (tmp, name)
        extra = []
    else:
        cmd = "IDEM_STORE_DIR=%s/%s NODE_PATH=%s node examples/nodesvc/server.js correct" % (tmp, name, node_path)
        extra = ["--path", "/v1/payments", "-H", "Authorization: Bearer test-token", "--body-type", "form",
                 "--body", "currency=EUR", "--order-at", "reference", "--amount-at", "amount_cents"]
        keys = ["uuid"]  # the Express example takes UUID v4 keys only
    latency = r.choice([0.001, lu(0.001, 0.8)])
    if r.random() < 0.1:
        latency = lu(0.8, 3)  # past the examples' charge deadline: saved errors
    window = lu(0.05, 1) if r.random() < 0.9 else lu(1, 5)
    args += ["--cmd", cmd, "--instances", str(r.randint(1, 6)), "--clients", str(int(lu(1, 256))),
             "--attempts", str(r.randint(1, 8)), "--duration", ms(lu(2, 8)), "--fault-gap", ms(lu(0.1, 2)),
             "--fault-window", ms(window), "--provider-latency", ms(latency),
             "--provider-fail", "%.2f" % r.choice([0, 0.05, r.random() * 0.4]), "--timeout", ms(lu(0.05, 5)),
             "--key-format", r.choice(keys)]
    for p, flag in ((0.3, ["--settle", ms(lu(0.5, 20))]), (0.3, ["--max-key-len", str(r.choice([0, 255, 300, 1000]))]),
                    (0.3, ["--saves-errors"]), (0.3, ["--random"]), (0.2, ["--net-faults=false"]),
                    (0.2, ["--process-faults=false"])):
        if r.random() < p:
            args += flag
    if svc != "go" and r.random() < 0.3:
        args += ["--inflight-ttl", "5s"]  # the Python and Node examples' LOCK_TTL
    return name, args + extra


def main():
    r = random.Random(SEED)
    os.makedirs(OUT, exist_ok=True)
    verdicts = {0: 0, 1: 0, 2: 0, 3: 0}
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(DRAWS):
            name, args = draw(r, i, tmp)
            t = time.time()
            try:
                p = subprocess.run(args, capture_output=True, text=True)
            except KeyboardInterrupt:
                print("interrupted during %s" % name)
                break
            code = p.returncode
            verdicts[code] = verdicts.get(code, 0) + 1
            last = [l for l in p.stdout.splitlines() if l.startswith(("PASS", "FAIL", "UNDECIDED", "NOTHING"))]
            print("[%d/%d] %s: exit %d, %.0fs: %s" % (i + 1, DRAWS, name, code, time.time() - t, last[-1][:160] if last else p.stderr.strip()[-160:]), flush=True)
            if code not in (0, 3):
                failed.append(name)
                print("   again: %s" % shlex.join(args), flush=True)
    print("soak-http: %d draws: %d passed, %d undecided, %d failed, %d bad usage%s" % (
        sum(verdicts.values()), verdicts[0], verdicts[3], verdicts[1], verdicts[2],
        "" if not failed else " (" + ", ".join(failed) + ")"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
