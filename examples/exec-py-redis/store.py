"""An idempotency-key store in Python over Redis, checked by idemcheck.

    idemcheck check --store exec --cmd "/usr/bin/python3 examples/exec-py-redis/store.py"

(Debian's python3, where python3-redis installs; a python3 of pyenv or a
virtualenv earlier in PATH may not see it.)

idemcheck starts a Redis server and gives its host:port in the open
request's addr (also in IDEM_STORE_ADDR); every store opened gets a
namespace of its own, and its keys start with it. Each key is a hash
(fingerprint, status, response, locked_at, token, created_at) plus an entry
in a sorted set by created_at for the prune. Time is the Redis server's
(TIME inside the scripts): the store declares a server clock.

The correct variant decides in one Lua script per call: the claim, the
replay, the 409 and the compare-and-set takeover are one atomic step, and
the save and the release are fenced by the owner's token. Variants re-create
the classic bugs (IDEM_VARIANT, or the open request's variant):

  select-then-insert  reads the key, then writes a claim in a second
                      command (the failpoint begin.after-select between)
  unfenced-complete   saves the response without checking the token
  unfenced-release    deletes the claim without checking the token
  no-fingerprint      replays a done key whatever the parameters
  lock-in-process     select-then-insert under a threading.Lock: the lock
                      holds the process's threads apart, not two processes

Needs python3-redis (Debian's package). The Python path gets
clients/python (idemstore) from this file's place in the repository.
"""

import json
import os
import secrets
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))

import idemstore  # noqa: E402
import redis  # noqa: E402

VARIANTS = ["select-then-insert", "unfenced-complete", "unfenced-release", "no-fingerprint", "lock-in-process"]

NOW = """local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
"""

# KEYS: the key's hash, the namespace's created_at set.
# ARGV: fingerprint, new token, lock_ttl_ms, "1" to compare fingerprints.
BEGIN = NOW + """
local row = redis.call('HMGET', KEYS[1], 'fp', 'status', 'resp', 'locked_at')
if not row[1] then
  redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'status', 'in_flight', 'locked_at', tostring(now), 'token', ARGV[2], 'created_at', tostring(now))
  redis.call('ZADD', KEYS[2], now, KEYS[1])
  return {'claimed', ARGV[2], tostring(now), '0'}
end
if ARGV[4] == '1' and row[1] ~= ARGV[1] then return {'mismatch', '', tostring(now), '0'} end
if row[2] == 'done' then return {'replay', row[3], tostring(now), '0'} end
if now - tonumber(row[4]) < tonumber(ARGV[3]) then return {'in-flight', '', tostring(now), '0'} end
redis.call('HSET', KEYS[1], 'locked_at', tostring(now), 'token', ARGV[2])
return {'claimed', ARGV[2], tostring(now), '1'}
"""

# ARGV: token, response JSON, "1" to check the token.
COMPLETE = """
local row = redis.call('HMGET', KEYS[1], 'status', 'token')
if not row[1] then return 0 end
if ARGV[3] == '1' and (row[1] ~= 'in_flight' or row[2] ~= ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'status', 'done', 'resp', ARGV[2])
return 1
"""

# ARGV: token, "1" to check the token.
RELEASE = """
local row = redis.call('HMGET', KEYS[1], 'status', 'token')
if not row[1] then return 0 end
if ARGV[2] == '1' and (row[1] ~= 'in_flight' or row[2] ~= ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
return 1
"""

# KEYS: the created_at set. ARGV: retention_ms.
PRUNE = NOW + """
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))
for _, k in ipairs(old) do redis.call('DEL', k) end
if #old > 0 then redis.call('ZREM', KEYS[1], unpack(old)) end
return #old
"""


class Store:
    def open(self, config):
        host, _, port = config["addr"].rpartition(":")
        self.r = redis.Redis(host=host or "127.0.0.1", port=int(port), socket_timeout=10)
        self.ns = config["namespace"].encode()
        self.ttl = config["lock_ttl_ms"]
        self.retention = config["retention_ms"]
        self.variant = config["variant"]
        self.lock = threading.Lock()
        self.begin_s = self.r.register_script(BEGIN)
        self.complete_s = self.r.register_script(COMPLETE)
        self.release_s = self.r.register_script(RELEASE)
        self.prune_s = self.r.register_script(PRUNE)

    def k(self, key):
        return b"%s:k:%d:%s%s" % (self.ns, len(key.raw_tenant), key.raw_tenant, key.raw_key)

    def created(self):
        return self.ns + b":created"

    def begin(self, call, key, fingerprint, now_ms, lease_ms):
        if not 1 <= len(key.raw_key) <= 255 or len(key.raw_tenant) > 255:
            raise idemstore.InvalidKey("key must be 1-255 bytes")
        if self.variant == "select-then-insert":
            return self.select_then_insert(call, key, fingerprint, "begin.after-select")
        if self.variant == "lock-in-process":
            with self.lock:  # BUG: another process does not see this lock
                return self.select_then_insert(call, key, fingerprint, "store.round-trip")
        return self.decide(call, key, fingerprint)

    def decide(self, call, key, fingerprint):
        call.hit("store.round-trip")
        check_fp = "0" if self.variant == "no-fingerprint" else "1"
        out, token, now, takeover = self.begin_s(keys=[self.k(key), self.created()],
                                                 args=[fingerprint, secrets.token_hex(16), self.ttl, check_fp])
        outcome = out.decode()
        call.trace("EVALSHA begin (claim, replay, 409, compare-and-set takeover)", outcome)
        d = {"outcome": outcome, "decided_at_ms": float(now)}
        if outcome == "claimed":
            d["token"], d["takeover"] = token.decode(), takeover == b"1"
        elif outcome == "replay":
            d["response"] = json.loads(token)
        return d

    def select_then_insert(self, call, key, fingerprint, point):
        call.hit("store.round-trip")
        exists = self.r.exists(self.k(key))
        call.trace("EXISTS key", "yes" if exists else "no row")
        if exists:
            return self.decide(call, key, fingerprint)
        call.hit(point)
        sec, usec = self.r.time()
        now = sec * 1000 + usec / 1000
        token = secrets.token_hex(16)
        call.hit("store.round-trip")
        pipe = self.r.pipeline(transaction=True)  # BUG: writes whatever is there now
        pipe.hset(self.k(key), mapping={"fp": fingerprint, "status": "in_flight", "locked_at": repr(now), "token": token, "created_at": repr(now)})
        pipe.zadd(self.created(), {self.k(key): now})
        pipe.execute()
        call.trace("HSET key status=in_flight (the read saw no row)", "claimed")
        return {"outcome": "claimed", "token": token, "decided_at_ms": now}

    def complete(self, call, key, token, response):
        call.hit("store.round-trip")
        check = "0" if self.variant == "unfenced-complete" else "1"
        ok = self.complete_s(keys=[self.k(key)], args=[token, json.dumps(response), check])
        call.trace("EVALSHA complete (fenced by the token)", "saved" if ok else "fenced")
        if not ok:
            raise idemstore.Fenced("not the owner")

    def release(self, call, key, token):
        call.hit("store.round-trip")
        check = "0" if self.variant == "unfenced-release" else "1"
        ok = self.release_s(keys=[self.k(key), self.created()], args=[token, check])
        call.trace("EVALSHA release (fenced by the token)", "deleted" if ok else "fenced")
        if not ok:
            raise idemstore.Fenced("not the owner")

    def prune(self, call, now_ms):
        call.hit("store.round-trip")
        return int(self.prune_s(keys=[self.created()], args=[self.retention]))

    def show(self, call, key):
        row = self.r.hgetall(self.k(key))
        if not row:
            return "no row"
        line = "status=%s token=%s fingerprint=%s" % (row[b"status"].decode(), row[b"token"].decode()[:8], json.dumps(row[b"fp"].decode()))
        if b"resp" in row:
            line += " response=%s" % row[b"resp"].decode()[:60]
        return line

    def close(self):
        self.r.close()


if __name__ == "__main__":
    idemstore.serve(Store(), {
        # No request waits for another without a hit first: a thread holds
        # no connection across a hit (redis-py takes one from its pool for
        # each command). All but lock-in-process, whose lock a parked request
        # holds: in a scheduled scenario that costs the scheduler time (it
        # waits for the blocked request), never a verdict.
        "name": "py-redis", "clock": "server", "lives": "server", "server": "redis", "show": True, "waits_announced": True,
        "points": ["begin.after-select", "store.round-trip"], "variants": VARIANTS,
    })
