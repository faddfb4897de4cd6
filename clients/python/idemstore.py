"""idemstore: serve an idempotency-key store to idemcheck (protocol 1).

idemcheck starts the store as a child process and speaks JSON lines over
its stdin and stdout (docs/protocol.md). This module does the talking; the
store is a class with these methods, each called in a thread of its own
(many requests are in flight at once, and their answers go back in any
order):

    open(config)                          config: lock_ttl_ms, retention_ms,
                                          variant, namespace, addr
    begin(call, key, fingerprint, now_ms, lease_ms) -> dict
        {"outcome": "claimed", "token": t} (and "takeover": True over a
        stale claim; "fence": n, from 1, if the hello declares fence, and
        optionally otherwise; "lease_until_ms" optionally), or
        {"outcome": "replay", "response": resp}, {"outcome": "in-flight"},
        {"outcome": "mismatch"}; "decided_at_ms" for a server clock
    complete(call, key, token, response)  raise Fenced when not the owner
    release(call, key, token)             raise Fenced when not the owner
    prune(call, now_ms) -> int            how many keys it removed
    extend(call, key, token, now_ms)      only if the hello says extend
    show(call, key) -> str                only if the hello says show
    close()

key is a Key: .tenant and .key as str (bytes that are not UTF-8 are kept
as surrogates, so every key is distinct), and .raw_tenant and .raw_key as
bytes. response is a dict as the wire carries it: save it whole (for
example as JSON text) and give it back as it was. Raise Fenced or
InvalidKey for those answers, and NotApplied for a call your database
refused as a whole (it certainly changed nothing); any other exception
is an error whose outcome is unknown. call.hit(point) stops at a failpoint until idemcheck
says go (or kills the process there); call.trace(step, result) reports a
statement when idemcheck asks for a trace.

Standard library only.
"""

import base64
import json
import sys
import threading
import traceback

PROTOCOL = 1


class Fenced(Exception):
    """The token no longer owns the key: the write changed nothing."""

    code = "fenced"


class InvalidKey(Exception):
    """The key is empty or longer than 255 bytes, or the tenant longer
    than 255 bytes (docs/protocol.md)."""

    code = "invalid-key"


class NotApplied(Exception):
    """The store knows the call changed nothing: its database refused it
    as a whole (a serialization failure or deadlock that rolled the
    transaction back). A definite no-op, not an unknown outcome."""

    code = "not-applied"


class Key:
    """A tenant's key: text (with surrogates for bytes that are not UTF-8)
    and the exact bytes."""

    __slots__ = ("tenant", "key", "raw_tenant", "raw_key")

    def __init__(self, obj):
        self.raw_tenant = _raw(obj, "tenant")
        self.raw_key = _raw(obj, "key")
        self.tenant = self.raw_tenant.decode("utf-8", "surrogateescape")
        self.key = self.raw_key.decode("utf-8", "surrogateescape")

    def __repr__(self):
        return "%s/%s" % (self.tenant, self.key)


def _raw(obj, name):
    if name + "_b64" in obj:
        return base64.b64decode(obj[name + "_b64"])
    return obj.get(name, "").encode("utf-8", "surrogatepass")


class Call:
    """One request in flight: its failpoints and its trace."""

    def __init__(self, server, rid, tracing):
        self._server, self.id, self.tracing = server, rid, tracing

    def hit(self, point):
        """Wait at the failpoint until idemcheck lets the request go on."""
        ev = threading.Event()
        with self._server.lock:
            self._server.gos[self.id] = ev
        self._server.send({"type": "hit", "id": self.id, "point": point})
        ev.wait()

    def trace(self, step, result=""):
        """Report a statement and what it returned (only when asked)."""
        if self.tracing:
            self._server.send({"type": "trace", "id": self.id, "step": step, "result": result})


class _Server:
    def __init__(self, store, out):
        self.store, self.out = store, out
        self.lock, self.wlock = threading.Lock(), threading.Lock()
        self.gos = {}

    def send(self, msg):
        line = json.dumps(msg, separators=(",", ":")) + "\n"
        with self.wlock:
            self.out.write(line)
            self.out.flush()

    def reply(self, rid, fn):
        try:
            fields = fn() or {}
            msg = {"type": "ok", "id": rid}
            msg.update(fields)
        except (Fenced, InvalidKey, NotApplied) as e:
            msg = {"type": "error", "id": rid, "code": e.code, "message": str(e) or e.code}
        except Exception as e:  # an unknown outcome
            traceback.print_exc(file=sys.stderr)
            msg = {"type": "error", "id": rid, "code": "other", "message": "%s: %s" % (type(e).__name__, e)}
        self.send(msg)

    def handle(self, m):
        s, rid, t = self.store, m["id"], m["type"]
        call = Call(self, rid, m.get("trace", False))
        if t == "open":
            self.reply(rid, lambda: s.open(m["config"]))
        elif t == "begin":
            r = m["request"]
            self.reply(rid, lambda: {"decision": s.begin(call, Key(r["key"]), r["fingerprint"], r["now_ms"], r.get("lease_ms", 0))})
        elif t == "complete":
            self.reply(rid, lambda: s.complete(call, Key(m["key"]), m["token"], m["response"]))
        elif t == "release":
            self.reply(rid, lambda: s.release(call, Key(m["key"]), m["token"]))
        elif t == "prune":
            self.reply(rid, lambda: {"removed": s.prune(call, m["now_ms"])})
        elif t == "extend":
            self.reply(rid, lambda: s.extend(call, Key(m["key"]), m["token"], m["now_ms"]))
        elif t == "show":
            self.reply(rid, lambda: {"row": s.show(call, Key(m["key"]))})
        else:
            self.reply(rid, lambda: _unknown(t))


def _unknown(t):
    raise ValueError("unknown request type %r" % t)


def serve(store, hello):
    """Say hello, then answer requests until close (or stdin ends).

    hello is a dict: name, clock ("caller" or "server"), and as needed
    lives, server, semantics, fence, extend, show, points,
    waits_announced, variants (docs/protocol.md)."""
    srv = _Server(store, sys.stdout)
    srv.send(dict(hello, type="hello", protocol=PROTOCOL))
    threads = []
    for line in sys.stdin:
        m = json.loads(line)
        if m["type"] == "go":
            with srv.lock:
                ev = srv.gos.pop(m["id"], None)
            if ev:
                ev.set()
        elif m["type"] == "open":
            srv.handle(m)
        elif m["type"] == "close":
            for th in threads:
                th.join()
            srv.reply(m["id"], lambda: store.close())
            return
        else:
            th = threading.Thread(target=srv.handle, args=(m,), daemon=True)
            th.start()
            threads = [x for x in threads if x.is_alive()] + [th]
