#!/usr/bin/env python3
"""A payment API in Python (standard library only): the worked example of
idemcheck's black-box mode for a service not written in Go.

POST /orders with a JSON body {"order": "...", "amount": N} and an
Idempotency-Key header charges the order once at the payment provider whose
URL is in IDEM_PROVIDER_URL. The idempotency middleware keeps its records
in SQLite (IDEM_DB, one file that every instance on this machine shares):

  - 400 for a missing key or one longer than 255 bytes;
  - the key is claimed atomically (BEGIN IMMEDIATE: one writer at a time);
    a claim older than LOCK_TTL is stale and may be taken over;
  - 409 while another request holds the key, 422 when the key was used
    with another body (a SHA-256 fingerprint of the body);
  - the answer is saved and replayed, errors included: a provider error
    may come after the charge went through, so it is never run again
    under the same key;
  - the save is fenced by the claim's token: an owner whose claim was
    taken over cannot overwrite the new owner's answer.

The key is read from the header named in IDEM_KEY_HEADER (default
Idempotency-Key; tell idemcheck with --key-header), or from the body's
top-level field named in IDEM_KEY_AT (tell idemcheck with --key-at).
With IDEM_FP_URL=1 the fingerprint covers the whole URL, Host included.

Run it under idemcheck (each instance gets PORT, IDEM_PROVIDER_URL and
IDEM_NAMESPACE):

  idemcheck http --cmd "IDEM_DB=/tmp/orders.db python3 examples/pysvc/service.py" --instances 2

The first argument chooses the middleware: correct (the default, above) or
one of the classic bugs, each of which idemcheck names (make check-http):

  - check-then-act: reads the key, then claims it in a second statement
    (INSERT OR REPLACE) with no transaction around the two: two requests
    both read nothing and both charge (at-most-once: concurrent);
  - errors-not-cached: deletes the claim when the provider fails, so that
    the client may retry; but the charge went through (at-most-once:
    after-error);
  - memory-dict: the records in a dict in this process: another instance,
    or this one restarted, does not know the key (at-most-once);
  - no-fingerprint: never compares bodies: a key reused with another body
    gets the old answer (status-codes: 422-old-answer).
"""
import hashlib
import json
import os
import sqlite3
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK_TTL = 5.0  # seconds; longer than CHARGE_TIMEOUT, so no honest charge outlives its claim
CHARGE_TIMEOUT = 2.0  # the provider call's deadline
MAX_KEY = 255
KEY_HEADER = os.environ.get("IDEM_KEY_HEADER", "Idempotency-Key")
KEY_AT = os.environ.get("IDEM_KEY_AT")  # a top-level field of the JSON body instead
PROVIDER = os.environ["IDEM_PROVIDER_URL"]
DB = os.environ.get("IDEM_DB", "/tmp/idem-pysvc.db")
NS = os.environ.get("IDEM_NAMESPACE", "")  # keeps runs apart in one file
VARIANTS = ("correct", "check-then-act", "errors-not-cached", "memory-dict", "no-fingerprint")
VARIANT = sys.argv[1] if len(sys.argv) > 1 else "correct"
if VARIANT not in VARIANTS:
    sys.exit("pysvc: unknown variant %s (known: %s)" % (VARIANT, ", ".join(VARIANTS)))
# Requests worked on at once, per instance; more are shed with 503 (which
# idemcheck's clients retry). A client that gives up does not stop its
# request here: unbounded, a retry storm piles them up until an owner
# waits longer than LOCK_TTL to save its charge's answer, its claim is
# taken over, and the order is charged twice.
WORKERS = threading.BoundedSemaphore(16)
MEMORY = {}  # memory-dict: key -> [fingerprint, token, state, claimed_at, status, body]
MEMORY_LOCK = threading.Lock()


def db():
    c = sqlite3.connect(DB, timeout=10, isolation_level=None)
    c.execute("PRAGMA busy_timeout=10000")
    return c


def init():
    c = db()
    # Instances started at once on a new file meet here: switching the
    # journal mode takes the file's lock without the busy timeout, so the
    # loser of the race tries again rather than exit.
    for attempt in range(100):
        try:
            c.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or attempt == 99:
                raise
            time.sleep(0.05)
    c.execute(
        """CREATE TABLE IF NOT EXISTS idem (
        key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, token TEXT NOT NULL,
        state TEXT NOT NULL, claimed_at REAL NOT NULL, status INTEGER, body TEXT)"""
    )
    c.close()


def begin(c, key, fp):
    """Claim the key, or say why not: ("claimed", token), ("replay",
    (status, body)), ("in-flight", None) or ("mismatch", None)."""
    token = os.urandom(16).hex()
    now = time.time()
    if VARIANT == "memory-dict":
        with MEMORY_LOCK:
            row = MEMORY.get(key)
            if row is None:
                MEMORY[key] = [fp, token, "in-flight", now, None, None]
                return "claimed", token
            return judge(row[0], row[2], row[3], row[4], row[5], fp, now, lambda: MEMORY[key].__setitem__(slice(1, 4), [token, "in-flight", now]), token)
    if VARIANT == "check-then-act":
        # The bug: the read and the claim are two statements, no lock
        # between them.
        row = c.execute("SELECT fingerprint, state, claimed_at, status, body FROM idem WHERE key=?", (key,)).fetchone()
        if row is None:
            time.sleep(0.005)  # the work between the read and the write that real code does
            c.execute("INSERT OR REPLACE INTO idem VALUES (?, ?, ?, 'in-flight', ?, NULL, NULL)", (key, fp, token, now))
            return "claimed", token
        return judge(*row, fp, now, lambda: c.execute("UPDATE idem SET token=?, claimed_at=? WHERE key=?", (token, now, key)), token)
    c.execute("BEGIN IMMEDIATE")
    try:
        row = c.execute(
            "SELECT fingerprint, state, claimed_at, status, body FROM idem WHERE key=?", (key,)
        ).fetchone()
        if row is None:
            c.execute("INSERT INTO idem VALUES (?, ?, ?, 'in-flight', ?, NULL, NULL)", (key, fp, token, now))
            return "claimed", token
        return judge(*row, fp, now, lambda: c.execute("UPDATE idem SET token=?, claimed_at=? WHERE key=?", (token, now, key)), token)
    finally:
        c.execute("COMMIT")


def judge(rfp, state, claimed_at, status, body, fp, now, take_over, token):
    """What a request finds under a key that has a record."""
    if rfp != fp and VARIANT != "no-fingerprint":
        return "mismatch", None
    if state == "done":
        return "replay", (status, body)
    if now - claimed_at < LOCK_TTL:
        return "in-flight", None
    take_over()
    return "claimed", token


def complete(c, key, token, status, body):
    """Save the answer, only while the claim is still ours (fencing)."""
    if VARIANT == "errors-not-cached" and status >= 500:
        # The bug: "let the client retry": but the charge went through.
        c.execute("DELETE FROM idem WHERE key=? AND token=?", (key, token))
        return True
    if VARIANT == "memory-dict":
        with MEMORY_LOCK:
            row = MEMORY.get(key)
            if row is None or row[1] != token or row[2] != "in-flight":
                return False
            row[2], row[4], row[5] = "done", status, body
            return True
    cur = c.execute(
        "UPDATE idem SET state='done', status=?, body=? WHERE key=? AND token=? AND state='in-flight'",
        (status, body, key, token),
    )
    return cur.rowcount == 1


def charge(order):
    """One call to the provider: one effect."""
    req = urllib.request.Request(
        PROVIDER,
        data=json.dumps({"order": order["order"], "amount": order["amount"]}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=CHARGE_TIMEOUT) as r:
            ch = json.load(r)["charge"]
        return 200, json.dumps({"order": order["order"], "amount": order["amount"], "charge": ch}, sort_keys=True)
    except Exception as e:  # the charge may have gone through: saved, never run again
        return 500, "error: provider: %s" % e


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, body):
        b = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self):
        self.reply(200, "pysvc: POST /orders\n")

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/orders":
            return self.reply(404, "not found")
        try:
            order = json.loads(raw)
            order["order"], order["amount"]
        except Exception:
            return self.reply(400, 'want a JSON body {"order": ..., "amount": N}')
        key = order.get(KEY_AT) if KEY_AT else self.headers.get(KEY_HEADER)
        if not isinstance(key, (str, type(None))):
            return self.reply(400, "invalid idempotency key: want a string")
        if not key or len(key.encode()) > MAX_KEY:
            return self.reply(400, "invalid idempotency key: must be 1-255 bytes")
        # The request as the service saw it, its whole URL with IDEM_FP_URL=1
        # (Host included, as a fingerprint over Starlette's request.url is):
        # correct behind one name, which idemcheck presents as a load
        # balancer would.
        url = "http://%s/orders" % self.headers.get("Host", "") if os.environ.get("IDEM_FP_URL") else "/orders"
        fp = hashlib.sha256(("POST %s\n" % url).encode() + raw).hexdigest()
        if not WORKERS.acquire(blocking=False):
            return self.reply(503, "503 busy: try again")
        c = db()
        try:
            outcome, v = begin(c, NS + ":" + key, fp)
            if outcome == "replay":
                return self.reply(v[0], v[1])
            if outcome == "in-flight":
                return self.reply(409, "409 conflict: key in flight")
            if outcome == "mismatch":
                return self.reply(422, "422 mismatch: key reused with different parameters")
            status, body = charge(order)
            if not complete(c, NS + ":" + key, v, status, body):
                return self.reply(409, "409 conflict: the claim was taken over")
            return self.reply(status, body)
        finally:
            c.close()
            WORKERS.release()

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client whose connection a fault proxy reset is not our error.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


if __name__ == "__main__":
    init()
    Server(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
