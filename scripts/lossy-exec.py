#!/usr/bin/env python3
"""Runs an exec store (docs/protocol.md) behind a link that loses answers.

    idemcheck check --store exec --cmd "python3 scripts/lossy-exec.py node examples/exec-js-sqlite/store.js"

Every line passes through unchanged, except that after the first answer
(the open's) each "ok" answer is, with probability LOSS (default 0.05,
drawn from LOSS_SEED, default 1), replaced by an error of code "lost":
the store acted, and idemcheck hears an unknown outcome, as when a reply
is lost on the way back (the code says the error is this link's, not the
store's: availability counts it as a fault). A correct store must pass
behind it, --strict-availability included; it tests
how the checkers judge calls whose outcome is unknown on a store with no
server between it and its data (where the lost-reply scenario cannot
run). harness/testdata/runs/lost-answer-at-lockttl was recorded this way.
"""
import json
import os
import random
import subprocess
import sys
import threading

rate = float(os.environ.get("LOSS", "0.05"))
rng = random.Random(int(os.environ.get("LOSS_SEED", "1")))
store = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)


def requests():
    for line in sys.stdin.buffer:
        store.stdin.write(line)
        store.stdin.flush()
    store.stdin.close()


threading.Thread(target=requests, daemon=True).start()
out = sys.stdout.buffer
opened = False
for line in store.stdout:
    ok = b'"type":"ok"' in line
    if ok and opened and rng.random() < rate:
        answer = json.loads(line)
        line = json.dumps({"type": "error", "id": answer["id"], "code": "lost",
                           "message": "lossy-exec: the answer was lost after the store acted"}).encode() + b"\n"
    opened = opened or ok
    out.write(line)
    out.flush()
sys.exit(store.wait())
